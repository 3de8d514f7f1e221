//! A one-line notation for histories in unit tests, so that a case reads like the transcript.
//!
//! Tokens separated by spaces: `S` system, `U` user, `A` assistant, `SUM` summary (an assistant
//! message with `is_summary`), `T` tool message. Ids in parentheses: `A(c1,c2)` calls `c1` and
//! `c2` (tool `tool_c1`, ...), `T(c1)` answers `c1`, `U(c1)` is a user message that also holds a
//! result for `c1`, `E(c1)` is a tool message holding [`INTERRUPTED_RESULT`] for `c1`.

use std::borrow::Borrow;

use phosphor_base::message::{Message, Part, Role, ToolCall, ToolResult};

use crate::pairing::INTERRUPTED_RESULT;

fn result(id: &str, content: &str, is_error: bool) -> Part {
    Part::ToolResult(ToolResult {
        call_id: id.into(),
        name: format!("tool_{id}"),
        content: content.into(),
        is_error,
    })
}

/// The history `spec` describes; message `i` has id `m{i}`.
pub(crate) fn parse(spec: &str) -> Vec<Message> {
    spec.split_whitespace()
        .enumerate()
        .map(|(i, token)| {
            let (head, ids) = match token.split_once('(') {
                Some((head, ids)) => (head, ids.trim_end_matches(')').split(',').collect()),
                None => (token, Vec::new()),
            };
            let mut message = match head {
                "S" => Message::system("system prompt"),
                "U" => Message::user(format!("prompt {i}")),
                "A" => Message::assistant(format!("answer {i}")),
                "SUM" => Message { is_summary: true, ..Message::assistant("summary of earlier turns") },
                "T" | "E" => Message::new(Role::Tool, Vec::new()),
                other => panic!("unknown token {other:?} in {spec:?}"),
            };
            for id in ids {
                message.parts.push(match head {
                    "A" => Part::ToolCall(ToolCall {
                        id: id.into(),
                        name: format!("tool_{id}"),
                        arguments: "{}".into(),
                    }),
                    "E" => result(id, INTERRUPTED_RESULT, true),
                    _ => result(id, &format!("output of {id}"), false),
                });
            }
            message.with_id(format!("m{i}"))
        })
        .collect()
}

/// The notation for `messages` (inverse of [`parse`] up to text content).
pub(crate) fn render<M: Borrow<Message>>(messages: &[M]) -> String {
    let tokens: Vec<String> = messages
        .iter()
        .map(|message| {
            let message = message.borrow();
            let interrupted = message.role == Role::Tool
                && message.tool_results().next().is_some()
                && message.tool_results().all(|r| r.is_error && r.content == INTERRUPTED_RESULT);
            let head = match message.role {
                Role::System => "S",
                Role::User => "U",
                Role::Assistant if message.is_summary => "SUM",
                Role::Assistant => "A",
                Role::Tool if interrupted => "E",
                Role::Tool => "T",
            };
            let ids: Vec<&str> = message
                .parts
                .iter()
                .filter_map(|part| match part {
                    Part::ToolCall(call) => Some(call.id.as_str()),
                    Part::ToolResult(result) => Some(result.call_id.as_str()),
                    _ => None,
                })
                .collect();
            if ids.is_empty() { head.to_owned() } else { format!("{head}({})", ids.join(",")) }
        })
        .collect();
    tokens.join(" ")
}
