//! Tools the model may call, and how the agent runs them.

use std::sync::Arc;

use async_trait::async_trait;
use phosphor_base::{ToolCall, ToolResult, ToolSpec};

/// What a tool returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text given back to the model.
    pub content: String,
    /// Whether the call failed (the content says how).
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> ToolOutput {
        ToolOutput { content: content.into(), is_error: false }
    }

    /// A failed result.
    pub fn error(content: impl Into<String>) -> ToolOutput {
        ToolOutput { content: content.into(), is_error: true }
    }
}

/// A tool the caller registers with the agent.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Name, description and argument schema, as sent to the model.
    fn spec(&self) -> ToolSpec;

    /// Runs the tool with the model's arguments (already parsed as JSON).
    async fn call(&self, arguments: serde_json::Value) -> ToolOutput;
}

/// The registered tools, in registration order.
#[derive(Clone, Default)]
pub struct Tools {
    tools: Vec<(ToolSpec, Arc<dyn Tool>)>,
}

impl Tools {
    /// Adds a tool; a later tool with the same name replaces the earlier one.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let spec = tool.spec();
        self.tools.retain(|(s, _)| s.name != spec.name);
        self.tools.push((spec, tool));
    }

    /// The specs sent with every request.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|(spec, _)| spec.clone()).collect()
    }

    /// Runs one call. Never fails: unknown tools and malformed arguments become error results the
    /// model can read and correct.
    pub async fn run(&self, call: &ToolCall) -> ToolResult {
        let output = match self.tools.iter().find(|(spec, _)| spec.name == call.name) {
            None => {
                let known: Vec<&str> = self.tools.iter().map(|(s, _)| s.name.as_str()).collect();
                ToolOutput::error(format!(
                    "error: unknown tool {:?}; available tools: {}",
                    call.name,
                    if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                ))
            }
            Some((_, tool)) => {
                let raw = if call.arguments.trim().is_empty() { "{}" } else { call.arguments.as_str() };
                match serde_json::from_str(raw) {
                    Ok(arguments) => tool.call(arguments).await,
                    Err(err) => ToolOutput::error(format!(
                        "error: the arguments for {} are not valid JSON ({err}); send a JSON object matching its schema",
                        call.name
                    )),
                }
            }
        };
        ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: output.content,
            is_error: output.is_error,
        }
    }
}
