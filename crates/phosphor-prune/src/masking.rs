//! Observation masking: the oldest tool outputs of a request replaced by a one-line placeholder
//! that names the call, and the long values in those calls' arguments (whole files written,
//! the text of edits) cut short, a cheaper step than a summary (JetBrains' study of agent context
//! management, arXiv 2508.21433, found masking outputs matches LLM summaries at half the cost;
//! Anthropic's API clears old tool inputs the same way). Only the request changes; what is stored
//! stays whole.

use std::borrow::Cow;
use std::collections::HashMap;

use phosphor_base::message::{Message, Part, ToolCall, ToolResult};
use serde_json::Value;

use crate::{clone_result_meta, is_identifying_key, prune_arguments, with_parts};

/// How a masked output starts; a result that starts with it is not masked twice.
pub const MASKED_PREFIX: &str = "[tool output cleared to save context: ";

/// Characters a masked call keeps of each long value in its arguments; identifying values (paths,
/// commands, ids) keep up to [`IDENTIFYING_MAX_CHARS`](crate::IDENTIFYING_MAX_CHARS), as in every
/// argument cut ([`prune_arguments`]).
pub const MASKED_ARGUMENT_CHARS: usize = 100;

/// Identifying arguments shown in a placeholder, at most.
const MAX_SHOWN_ARGUMENTS: usize = 3;
/// Characters of one identifying value shown in a placeholder, at most.
const MAX_SHOWN_VALUE_CHARS: usize = 120;

/// The placeholder of a masked output of `tool`, called with `arguments` (its JSON text, when the
/// call is known), that was `chars` characters long: `[tool output cleared to save context:
/// read_file(path=src/a.rs), 12345 characters; call the tool again if it is needed]`.
pub fn masked_output(tool: &str, arguments: Option<&str>, chars: usize) -> String {
    let shown = arguments.map(identifying_arguments).unwrap_or_default();
    format!("{MASKED_PREFIX}{tool}({shown}), {chars} characters; call the tool again if it is needed]")
}

/// `key=value` pairs of the short identifying string values of a call's arguments.
fn identifying_arguments(arguments: &str) -> String {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(arguments) else { return String::new() };
    map.iter()
        .filter(|(key, _)| is_identifying_key(key))
        .filter_map(|(key, value)| {
            let text = match value {
                Value::String(s) => s.replace('\n', " "),
                Value::Array(items) if items.iter().all(Value::is_string) => {
                    items.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" ")
                }
                _ => return None,
            };
            let clipped: String = text.chars().take(MAX_SHOWN_VALUE_CHARS).collect();
            let ellipsis = if clipped.len() < text.len() { "…" } else { "" };
            Some(format!("{key}={clipped}{ellipsis}"))
        })
        .take(MAX_SHOWN_ARGUMENTS)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Masks the tool traffic of `messages[..before]` and returns how many outputs it replaced: every
/// tool output becomes its [`masked_output`] placeholder, and every call's arguments keep
/// [`MASKED_ARGUMENT_CHARS`] of each long value ([`prune_arguments`]). Ids, names and `is_error`
/// stay, so the pairing is kept; outputs already masked, outputs no longer than their placeholder
/// and short arguments stay as they are, so masking twice equals masking once.
pub fn mask_tool_traffic(messages: &mut [Cow<'_, Message>], before: usize) -> usize {
    let before = before.min(messages.len());
    let mut calls: HashMap<String, String> = HashMap::new();
    let mut masked = 0;
    for message in &mut messages[..before] {
        for call in message.tool_calls() {
            calls.insert(call.id.clone(), call.arguments.clone());
        }
        let placeholder = |result: &ToolResult| {
            if result.content.starts_with(MASKED_PREFIX) {
                return None;
            }
            let chars = result.content.chars().count();
            let text = masked_output(&result.name, calls.get(&result.call_id).map(String::as_str), chars);
            (text.len() < result.content.len()).then_some(text)
        };
        let outputs: Vec<Option<String>> = message.tool_results().map(placeholder).collect();
        let arguments: Vec<Option<String>> = message
            .tool_calls()
            .map(|call| prune_arguments(&call.arguments, MASKED_ARGUMENT_CHARS).map(|(cut, _)| cut))
            .collect();
        if outputs.iter().chain(&arguments).all(Option::is_none) {
            continue;
        }
        let (mut outputs, mut arguments) = (outputs.into_iter(), arguments.into_iter());
        let parts = message
            .parts
            .iter()
            .map(|part| match part {
                Part::ToolResult(result) => match outputs.next().flatten() {
                    Some(content) => {
                        masked += 1;
                        Part::ToolResult(ToolResult { content, ..clone_result_meta(result) })
                    }
                    None => part.clone(),
                },
                Part::ToolCall(call) => match arguments.next().flatten() {
                    Some(arguments) => {
                        Part::ToolCall(ToolCall { id: call.id.clone(), name: call.name.clone(), arguments })
                    }
                    None => part.clone(),
                },
                other => other.clone(),
            })
            .collect();
        *message = Cow::Owned(with_parts(message, parts));
    }
    masked
}

/// The share of `message`'s text (its text parts, tool outputs and call arguments, in bytes) that
/// masking clears from its calls' arguments: 0 for a message without long arguments. For sizing a
/// masking step from token counts without counting again.
pub fn masked_argument_share(message: &Message) -> f64 {
    let cleared: usize = message
        .tool_calls()
        .filter_map(|call| {
            prune_arguments(&call.arguments, MASKED_ARGUMENT_CHARS)
                .map(|(cut, _)| call.arguments.len().saturating_sub(cut.len()))
        })
        .sum();
    if cleared == 0 {
        return 0.0;
    }
    let total: usize = message
        .parts
        .iter()
        .map(|part| match part {
            Part::Text { text } | Part::Reasoning { text, .. } => text.len(),
            Part::ToolCall(call) => call.name.len() + call.arguments.len(),
            Part::ToolResult(result) => result.content.len(),
            _ => 0,
        })
        .sum();
    cleared as f64 / total.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check_tool_pairing;
    use phosphor_base::message::{Role, ToolCall};

    fn history() -> Vec<Message> {
        let call = |id: &str, args: &str| ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: args.into(),
        };
        vec![
            Message::user("read them"),
            Message::new(
                Role::Assistant,
                vec![
                    Part::ToolCall(call("a", r#"{"path": "src/a.rs", "limit": 50}"#)),
                    Part::ToolCall(call("b", "not json")),
                ],
            ),
            Message::tool_result("a", "read_file", "x".repeat(5_000), false),
            Message::tool_result("b", "read_file", "short", true),
            Message::new(Role::Assistant, vec![Part::ToolCall(call("c", r#"{"path": "src/c.rs"}"#))]),
            Message::tool_result("c", "read_file", "y".repeat(5_000), false),
        ]
    }

    #[test]
    fn masks_only_before_the_boundary_names_the_call_and_keeps_pairing() {
        let history = history();
        let mut shown: Vec<Cow<'_, Message>> = history.iter().map(Cow::Borrowed).collect();
        assert_eq!(mask_tool_traffic(&mut shown, 4), 1);
        let content = |m: &Cow<'_, Message>| m.tool_results().next().unwrap().content.clone();
        assert_eq!(
            content(&shown[2]),
            "[tool output cleared to save context: read_file(path=src/a.rs), 5000 characters; \
             call the tool again if it is needed]"
        );
        assert_eq!(content(&shown[3]), "short", "shorter than a placeholder: kept");
        assert_eq!(content(&shown[5]), "y".repeat(5_000), "after the boundary: kept");
        assert!(matches!(shown[5], Cow::Borrowed(_)));
        assert_eq!(check_tool_pairing(&shown), Ok(()));
        // Masking again masks nothing more.
        assert_eq!(mask_tool_traffic(&mut shown, 4), 0);
        // A call whose arguments hold a whole file keeps the path and the file's first characters.
        let content = "z".repeat(5_000);
        let write = ToolCall {
            id: "w".into(),
            name: "Write".into(),
            arguments: serde_json::json!({"file_path": "src/new.rs", "content": content}).to_string(),
        };
        let history = [
            Message::new(
                Role::Assistant,
                vec![Part::Text { text: "Writing.".into() }, Part::ToolCall(write)],
            ),
            Message::tool_result("w", "Write", "File created", false),
            Message::user("next"),
        ];
        assert!(masked_argument_share(&history[0]) > 0.9);
        assert_eq!(masked_argument_share(&history[1]), 0.0);
        let mut shown: Vec<Cow<'_, Message>> = history.iter().map(Cow::Borrowed).collect();
        assert_eq!(mask_tool_traffic(&mut shown, 2), 0, "the output is shorter than a placeholder");
        let call = shown[0].tool_calls().next().unwrap().clone();
        let arguments: Value = serde_json::from_str(&call.arguments).unwrap();
        assert_eq!(arguments["file_path"], "src/new.rs");
        assert_eq!(
            arguments["content"].as_str().unwrap(),
            format!("{}{}", "z".repeat(MASKED_ARGUMENT_CHARS), crate::TRUNCATION_MARKER)
        );
        assert_eq!(shown[0].text_content(), "Writing.");
        assert_eq!(masked_argument_share(&shown[0]), 0.0, "masking again cuts nothing");
        assert_eq!(check_tool_pairing(&shown), Ok(()));
        assert_eq!(
            masked_output("bash", Some("not json"), 3),
            format!("{MASKED_PREFIX}bash(), 3 characters; call the tool again if it is needed]")
        );
    }
}
