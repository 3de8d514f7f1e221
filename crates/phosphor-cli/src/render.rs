//! Agent events for people: the answer streamed as it arrives, tool calls and compactions on one line each.

use std::io::{self, Write};

use phosphor_agent::{AgentEvent, CompactionReason};
use phosphor_base::{ToolCall, ToolResult};
use serde_json::Value;

use crate::format::{preview, thousands};

/// Writes events: answer text to `out`, everything else (tool calls, compactions, warnings) to `info`.
/// When both go to the same terminal, lines never run into each other.
pub struct Renderer {
    out: Box<dyn Write + Send>,
    info: Box<dyn Write + Send>,
    /// Whether the last thing written to `out` ended a line (or nothing was written).
    at_line_start: bool,
}

impl Renderer {
    /// A renderer writing the answer to `out` and status lines to `info`.
    pub fn new(out: Box<dyn Write + Send>, info: Box<dyn Write + Send>) -> Renderer {
        Renderer { out, info, at_line_start: true }
    }

    /// Renders one event.
    pub fn event(&mut self, event: &AgentEvent) -> io::Result<()> {
        match event {
            AgentEvent::TextDelta { text } => {
                if !text.is_empty() {
                    self.out.write_all(text.as_bytes())?;
                    self.out.flush()?;
                    self.at_line_start = text.ends_with('\n');
                }
                Ok(())
            }
            AgentEvent::ToolCall(call) => self.line(&tool_call_line(call)),
            AgentEvent::ToolResult(result) => self.line(&tool_result_line(result)),
            AgentEvent::Queued { .. } => self.line("… waiting for the running turn of this session"),
            AgentEvent::CompactionStarted { reason, model, tokens_before } => self.line(&format!(
                "⟳ compacting {} tokens with {model} ({})…",
                thousands(*tokens_before),
                reason_text(*reason)
            )),
            AgentEvent::CompactionFinished {
                model,
                tokens_before,
                tokens_after,
                duration_ms,
                shed_level,
                prepared,
                ..
            } => {
                let mut line =
                    compacted_line(model, *tokens_before, *tokens_after, *duration_ms, *shed_level);
                if *prepared {
                    line.push_str(" (prepared in the background)");
                }
                self.line(&line)
            }
            AgentEvent::SummaryPreparing { model, tokens_before, .. } => self.line(&format!(
                "⟳ preparing the next summary with {model} in the background (at {} tokens)",
                thousands(*tokens_before)
            )),
            AgentEvent::PreparedSummaryDiscarded { reason } => {
                self.line(&format!("⟳ discarded the prepared summary: {reason}"))
            }
            AgentEvent::OutputsMasked { outputs, tokens_before, tokens_after, .. } => self.line(&format!(
                "⟳ masked {outputs} old tool output{}: {} → {} tokens",
                if *outputs == 1 { "" } else { "s" },
                thousands(*tokens_before),
                thousands(*tokens_after)
            )),
            AgentEvent::CompactionFailed { error } => self.line(&format!("⟳ compaction failed: {error}")),
            AgentEvent::Warning { message } => self.line(&format!("warning: {message}")),
            AgentEvent::TurnFinished { .. } => self.end_line(),
            // The error is reported once, by the caller; the rest is for --json.
            _ => Ok(()),
        }
    }

    /// Ends the answer's line if it is open.
    pub fn end_line(&mut self) -> io::Result<()> {
        if !self.at_line_start {
            self.out.write_all(b"\n")?;
            self.out.flush()?;
            self.at_line_start = true;
        }
        Ok(())
    }

    /// A status line, on a line of its own.
    pub fn line(&mut self, text: &str) -> io::Result<()> {
        self.end_line()?;
        writeln!(self.info, "{text}")?;
        self.info.flush()
    }
}

fn reason_text(reason: CompactionReason) -> &'static str {
    match reason {
        CompactionReason::Threshold => "threshold reached",
        CompactionReason::Overflow => "the next request would overflow the window",
        CompactionReason::OutputReserve => "no room left for the answer",
        CompactionReason::Rejected => "the model rejected the request as too long",
        CompactionReason::Manual => "asked for",
    }
}

/// `⟳ compacted 91,234 → 3,120 tokens with gpt-4.1-mini in 4.2s`.
pub fn compacted_line(model: &str, before: u64, after: u64, duration_ms: u64, shed_level: u32) -> String {
    let mut line = format!(
        "⟳ compacted {} → {} tokens with {model} in {:.1}s",
        thousands(before),
        thousands(after),
        duration_ms as f64 / 1000.0
    );
    if shed_level > 0 {
        line.push_str(&format!(" (summarizer input cut to level {shed_level} to fit)"));
    }
    line
}

/// `→ read_file src/lib.rs`: the tool and its main argument.
pub fn tool_call_line(call: &ToolCall) -> String {
    let arguments: Option<Value> = serde_json::from_str(&call.arguments).ok();
    let field =
        |name: &str| arguments.as_ref().and_then(|a| a.get(name)).and_then(Value::as_str).map(str::to_owned);
    let shown = match (call.name.as_str(), field("pattern"), field("path")) {
        ("search_text", Some(pattern), Some(path)) => format!("{pattern:?} in {path}"),
        ("search_text", Some(pattern), None) => format!("{pattern:?}"),
        (_, _, Some(path)) => path,
        _ if call.arguments.trim().is_empty() || call.arguments.trim() == "{}" => String::new(),
        _ => preview(&call.arguments, 80),
    };
    if shown.is_empty() { format!("→ {}", call.name) } else { format!("→ {} {shown}", call.name) }
}

/// `← 120 lines`, or `← error: ...`.
pub fn tool_result_line(result: &ToolResult) -> String {
    if result.is_error {
        let message = result.content.strip_prefix("error: ").unwrap_or(&result.content);
        return format!("← error: {}", preview(message, 120));
    }
    match result.content.lines().count() {
        1 => "← 1 line".to_owned(),
        n => format!("← {} lines", thousands(n as u64)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall { id: "c".into(), name: name.into(), arguments: arguments.into() }
    }

    #[test]
    fn a_turn_reads_as_a_conversation() {
        let screen = Shared::default();
        let mut renderer = Renderer::new(Box::new(screen.clone()), Box::new(screen.clone()));
        let events = [
            AgentEvent::TextDelta { text: "Let me ".into() },
            AgentEvent::TextDelta { text: "look.".into() },
            AgentEvent::ToolCall(call("read_file", r#"{"path":"src/lib.rs"}"#)),
            AgentEvent::ToolResult(ToolResult {
                call_id: "c".into(),
                name: "read_file".into(),
                content: "a\nb\nc".into(),
                is_error: false,
            }),
            AgentEvent::OutputsMasked {
                masked_until: "m9".into(),
                outputs: 12,
                tokens_before: 95_000,
                tokens_after: 91_234,
            },
            AgentEvent::CompactionStarted {
                reason: CompactionReason::Threshold,
                model: "mini".into(),
                tokens_before: 91_234,
            },
            AgentEvent::CompactionFinished {
                summary_message_id: "s".into(),
                model: "gpt-4.1-mini".into(),
                tokens_before: 91_234,
                tokens_after: 3_120,
                duration_ms: 4_200,
                shed_level: 0,
                prepared: false,
            },
            AgentEvent::TextDelta { text: "Done.".into() },
            AgentEvent::TurnFinished { message_id: "m".into(), model_calls: 2 },
        ];
        for event in &events {
            renderer.event(event).unwrap();
        }
        assert_eq!(
            String::from_utf8(screen.0.lock().unwrap().clone()).unwrap(),
            "Let me look.\n→ read_file src/lib.rs\n← 3 lines\n⟳ masked 12 old tool outputs: 95,000 → 91,234 tokens\n⟳ compacting 91,234 tokens with mini (threshold reached)…\n\
             ⟳ compacted 91,234 → 3,120 tokens with gpt-4.1-mini in 4.2s\nDone.\n"
        );
    }

    #[test]
    fn tool_lines_show_the_main_argument() {
        assert_eq!(
            tool_call_line(&call("search_text", r#"{"pattern":"fn main","path":"src"}"#)),
            "→ search_text \"fn main\" in src"
        );
        assert_eq!(tool_call_line(&call("list_dir", "{}")), "→ list_dir");
        assert_eq!(tool_call_line(&call("bash", r#"{"cmd":"make"}"#)), r#"→ bash {"cmd":"make"}"#);
        let error = ToolResult {
            call_id: "c".into(),
            name: "x".into(),
            content: "error: ../x leaves the workspace".into(),
            is_error: true,
        };
        assert_eq!(tool_result_line(&error), "← error: ../x leaves the workspace");
    }
}
