//! A converter of Claude Code's session logs (`~/.claude/projects/<project>/<session>.jsonl`) into
//! transcripts.
//!
//! Each line of a log is one JSON object; the conversion keeps what the model was shown:
//!
//! - `"type": "user"` lines: a string `message.content` is a user message; in an array, each
//!   `tool_result` block becomes a tool message (its text, the text blocks of an array joined by
//!   newlines, an image as [`IMAGE`]; `is_error` kept), and the `text` blocks one user message;
//! - `"type": "assistant"` lines: Claude Code writes one line per content block, so consecutive
//!   lines with the same `message.id` make one assistant message: `text` blocks its text,
//!   `thinking` blocks its reasoning, `tool_use` blocks its calls (the `input` object as the
//!   arguments' JSON text);
//! - lines of another type (`summary`, the title Claude Code gives a session; file history
//!   snapshots), a subagent's own conversation (`isSidechain`) and Claude Code's own notes
//!   (`isMeta`: caveats about local commands and the like, shown to the model but not written by
//!   the user, so not to be taken for requests) are skipped; an image a user sends is [`IMAGE`] in
//!   the text;
//! - a call the log never answers (the session was cut off mid-call) is dropped, as is a result
//!   that answers no call, and a message left empty by that.
//!
//! A log can hold several sessions (`sessionId`); each becomes its own transcript, in the order
//! their first lines appear.

use std::collections::HashSet;

use phosphor_base::{Message, Part, Role, ToolCall, ToolResult};
use serde_json::Value;

/// The text of an image block in a tool result (the image itself is not kept).
pub const IMAGE: &str = "[image]";

/// One session of a log.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// Claude Code's `sessionId`.
    pub id: String,
    /// The conversation, without a system prompt (the log does not record Claude Code's).
    pub messages: Vec<Message>,
}

/// Whether `text` looks like a Claude Code session log: its first line that is an object with a
/// `type` of `user` or `assistant` has a `message` and no `role` of its own (an OpenAI message per
/// line has a `role` and no such `type`). Lines before it, such as a `summary` or a file history
/// snapshot, do not decide.
pub fn is_session_log(text: &str) -> bool {
    text.lines()
        .filter_map(|line| match serde_json::from_str::<Value>(line.trim()) {
            Ok(Value::Object(line)) => Some(line),
            _ => None,
        })
        .find_map(|line| match line.get("type").and_then(Value::as_str) {
            Some("user" | "assistant") => Some(line.contains_key("message") && !line.contains_key("role")),
            _ => None,
        })
        .unwrap_or(false)
}

/// The sessions of a log, or an error naming the first line that is not a JSON object or whose
/// `message` does not have Claude Code's shape.
pub fn sessions(text: &str) -> Result<Vec<Session>, String> {
    let mut sessions: Vec<(Session, Option<String>)> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| {
            // serde_json's message ends with its own position, which would name line 1.
            let text = e.to_string();
            let reason = text.split(" at line ").next().unwrap_or(&text);
            format!("line {number}, column {}: not JSON ({reason})", e.column())
        })?;
        let Value::Object(entry) = value else {
            return Err(format!("line {number}: not a JSON object (a session log has one object per line)"));
        };
        let kind = entry.get("type").and_then(Value::as_str).unwrap_or_default();
        let flagged = |key: &str| entry.get(key).and_then(Value::as_bool).unwrap_or(false);
        if !matches!(kind, "user" | "assistant") || flagged("isSidechain") || flagged("isMeta") {
            continue;
        }
        let id = entry.get("sessionId").and_then(Value::as_str).unwrap_or_default();
        let position = match sessions.iter().position(|(s, _)| s.id == id) {
            Some(position) => position,
            None => {
                sessions.push((Session { id: id.to_owned(), messages: Vec::new() }, None));
                sessions.len() - 1
            }
        };
        let (session, open_assistant) = &mut sessions[position];
        let message =
            entry.get("message").ok_or_else(|| format!("line {number}: a {kind} line without a message"))?;
        let content =
            message.get("content").ok_or_else(|| format!("line {number}: a message without content"))?;
        if kind == "assistant" {
            let message_id = message.get("id").and_then(Value::as_str).map(str::to_owned);
            let parts = assistant_parts(content).map_err(|e| format!("line {number}: {e}"))?;
            let same_message = message_id.is_some() && *open_assistant == message_id;
            let last = session.messages.last_mut().filter(|m| same_message && m.role == Role::Assistant);
            if let Some(last) = last {
                last.parts.extend(parts);
            } else {
                let mut converted = Message::new(Role::Assistant, parts);
                converted.model = message.get("model").and_then(Value::as_str).map(str::to_owned);
                session.messages.push(converted);
            }
            *open_assistant = message_id;
        } else {
            session.messages.extend(user_messages(content).map_err(|e| format!("line {number}: {e}"))?);
            *open_assistant = None;
        }
    }
    Ok(sessions.into_iter().map(|(session, _)| paired(session)).filter(|s| !s.messages.is_empty()).collect())
}

fn assistant_parts(content: &Value) -> Result<Vec<Part>, String> {
    if let Some(text) = content.as_str() {
        return Ok(vec![Part::Text { text: text.to_owned() }]);
    }
    let blocks = content.as_array().ok_or("an assistant message's content is neither text nor an array")?;
    let mut parts = Vec::new();
    for block in blocks {
        let field = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        match block.get("type").and_then(Value::as_str) {
            Some("text") => parts.push(Part::Text { text: field("text") }),
            Some("thinking") => parts.push(Part::reasoning(field("thinking"))),
            Some("tool_use") => parts.push(Part::ToolCall(ToolCall {
                id: field("id"),
                name: field("name"),
                arguments: block.get("input").map_or_else(|| "{}".to_owned(), Value::to_string),
            })),
            _ => {}
        }
    }
    Ok(parts)
}

fn user_messages(content: &Value) -> Result<Vec<Message>, String> {
    if let Some(text) = content.as_str() {
        return Ok(vec![Message::user(text)]);
    }
    let blocks = content.as_array().ok_or("a user message's content is neither text nor an array")?;
    let mut messages = Vec::new();
    let mut texts = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("tool_result") => {
                let call_id = block.get("tool_use_id").and_then(Value::as_str).unwrap_or_default();
                let is_error = block.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                messages.push(Message::tool_result(call_id, "", block_text(block.get("content")), is_error));
            }
            Some("text") => texts.push(block.get("text").and_then(Value::as_str).unwrap_or_default()),
            Some("image") => texts.push(IMAGE),
            _ => {}
        }
    }
    if !texts.is_empty() {
        messages.push(Message::user(texts.join("\n")));
    }
    Ok(messages)
}

/// The text of a tool result's `content`: a string, or an array of text and image blocks.
fn block_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| match b.get("type").and_then(Value::as_str) {
                Some("image") => Some(IMAGE),
                Some("text") => b.get("text").and_then(Value::as_str),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// `session` with every unanswered call and every result without a call dropped, the results
/// named after their calls, and no empty message.
fn paired(mut session: Session) -> Session {
    let answered: HashSet<String> =
        session.messages.iter().flat_map(Message::tool_results).map(|r| r.call_id.clone()).collect();
    let calls: Vec<(String, String)> = session
        .messages
        .iter()
        .flat_map(Message::tool_calls)
        .filter(|c| answered.contains(&c.id))
        .map(|c| (c.id.clone(), c.name.clone()))
        .collect();
    for message in &mut session.messages {
        message.parts.retain_mut(|part| match part {
            Part::ToolCall(call) => answered.contains(&call.id),
            Part::ToolResult(ToolResult { call_id, name, .. }) => {
                match calls.iter().find(|(id, _)| id == call_id) {
                    Some((_, called)) => {
                        name.clone_from(called);
                        true
                    }
                    None => false,
                }
            }
            _ => true,
        });
    }
    session.messages.retain(|m| !m.parts.is_empty());
    session
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const LOG: &str = r#"{"type":"file-history-snapshot","messageId":"m0","snapshot":{}}
{"type":"summary","summary":"Retry","leafUuid":"x"}
{"type":"user","sessionId":"s1","message":{"role":"user","content":"Add a retry to src/client.rs"}}
{"type":"assistant","sessionId":"s1","message":{"id":"msg_1","role":"assistant","model":"claude-sonnet-4","content":[{"type":"text","text":"Reading it first."}]}}
{"type":"assistant","sessionId":"s1","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"src/client.rs"}}]}}
{"type":"assistant","sessionId":"s1","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"cargo test"}}]}}
{"type":"user","sessionId":"s1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"fn get() {}"}]}}
{"type":"user","sessionId":"s1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"error: 1 failed"},{"type":"image","source":{}},{"type":"document"}]}]}}
{"type":"user","sessionId":"s1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"answers no call"}]}}
{"type":"user","sessionId":"s1","isSidechain":true,"message":{"role":"user","content":"a subagent's prompt"}}
{"type":"user","sessionId":"s1","isMeta":true,"message":{"role":"user","content":"Caveat: local commands"}}
{"type":"assistant","sessionId":"s1","message":{"id":"msg_2","role":"assistant","content":[{"type":"thinking","thinking":"Fix it."},{"type":"text","text":"Done."}]}}
{"type":"user","sessionId":"s2","message":{"role":"user","content":[{"type":"text","text":"Run it"}]}}
{"type":"assistant","sessionId":"s2","message":{"id":"msg_3","role":"assistant","content":[{"type":"tool_use","id":"toolu_3","name":"Bash","input":{"command":"make"}}]}}
"#;

    #[test]
    fn a_log_becomes_one_transcript_per_session_with_calls_paired() {
        assert!(is_session_log(LOG));
        assert!(!is_session_log(r#"{"role":"user","content":"hi"}"#));
        assert!(!is_session_log("[]"));
        assert!(!is_session_log(r#"{"type":"user","role":"user","message":{}}"#));
        let sessions = sessions(LOG).unwrap();
        assert_eq!(sessions.len(), 2);
        let s1 = &sessions[0].messages;
        assert_eq!(sessions[0].id, "s1");
        let roles: Vec<Role> = s1.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::Tool, Role::Assistant]);
        assert_eq!(s1[0].text_content(), "Add a retry to src/client.rs");
        assert_eq!(s1[1].text_content(), "Reading it first.");
        assert_eq!(s1[1].model.as_deref(), Some("claude-sonnet-4"));
        let calls: Vec<(&str, &str)> =
            s1[1].tool_calls().map(|c| (c.name.as_str(), c.arguments.as_str())).collect();
        assert_eq!(
            calls,
            [("Read", r#"{"file_path":"src/client.rs"}"#), ("Bash", r#"{"command":"cargo test"}"#)]
        );
        let failed = s1[3].tool_results().next().unwrap();
        assert_eq!((failed.name.as_str(), failed.is_error), ("Bash", true));
        assert_eq!(failed.content, format!("error: 1 failed\n{IMAGE}"));
        assert_eq!(s1[4].parts[0], Part::reasoning("Fix it."));
        phosphor_prune::check_tool_pairing(s1).unwrap();
        // The second session was cut off before its call was answered: the call is gone, and with
        // it the message that held nothing else.
        assert_eq!(sessions[1].messages.len(), 1);
        assert_eq!(sessions[1].messages[0].text_content(), "Run it");
    }

    #[test]
    fn a_line_that_is_not_an_object_is_named() {
        let err = sessions("{\"type\":\"summary\"}\nnot json\n").unwrap_err();
        assert_eq!(err, "line 2, column 2: not JSON (expected ident)");
        let err = sessions("[1]\n").unwrap_err();
        assert!(err.starts_with("line 1: not a JSON object"), "{err}");
        let err = sessions(r#"{"type":"assistant","sessionId":"s","message":{"content":7}}"#).unwrap_err();
        assert_eq!(err, "line 1: an assistant message's content is neither text nor an array");
    }
}
