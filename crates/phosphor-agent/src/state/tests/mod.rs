//! The state trail's tests, one file for each thing it extracts; the helpers they share.

use super::*;
use phosphor_base::{ApproxCounter, ToolCall};

fn call(id: &str, name: &str, args: &str) -> Message {
    Message::new(
        Role::Assistant,
        vec![Part::ToolCall(ToolCall { id: id.into(), name: name.into(), arguments: args.into() })],
    )
}

fn result(id: &str, name: &str, content: &str, is_error: bool) -> Message {
    Message::tool_result(id, name, content, is_error)
}

fn files(state: &SessionState) -> Vec<(&str, FileOp)> {
    state.files.iter().map(|(p, op)| (p.as_str(), *op)).collect()
}

mod commands;
mod files;
mod plan;
mod trail;
