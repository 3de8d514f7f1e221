//! What the agent's test files share: a read-only `read_file` tool with a bulky, fixed output.

use async_trait::async_trait;
use phosphor_agent::{Tool, ToolOutput};
use phosphor_base::ToolSpec;

/// A `read_file` tool whose output is `line` repeated `times` times after a header naming the
/// path, so that pruning has something to cut.
pub struct ReadFile {
    /// The line the output repeats.
    pub line: &'static str,
    /// How many times.
    pub times: usize,
}

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }
    }

    async fn call(&self, arguments: serde_json::Value) -> ToolOutput {
        let path = arguments["path"].as_str().unwrap_or("?");
        ToolOutput::ok(format!("contents of {path}\n{}", self.line.repeat(self.times)))
    }
}
