//! Anthropic Messages (`POST /v1/messages`), as Claude Code speaks it: [`read_request`] reads a
//! request into an [`Inbound`], [`whole`] writes an answer as a `message` object, [`Stream`] as the
//! `message_start` ... `message_stop` events, [`error_body`] an error in Anthropic's shape.
//!
//! # Mapping
//!
//! | Anthropic                                           | Phosphor                                          |
//! |-----------------------------------------------------|---------------------------------------------------|
//! | `system` (a string, or text blocks)                 | [`Inbound::system_prompt`] (blocks joined)        |
//! | a `system`-role message inside `messages`           | a system [`Message`] where it stands              |
//! | `text` block                                        | [`Part::Text`]                                    |
//! | `image` block (`base64` or `url` source)            | [`Part::Image`] (a `data:` URL for base64)        |
//! | `document` block with a `text` source               | [`Part::Text`]                                    |
//! | `thinking` block                                    | [`Part::Reasoning`], its `signature` as the part's [`Seal`] |
//! | `redacted_thinking` block                           | [`Part::Reasoning`] with no text, its `data` as a redacted [`Seal`] |
//! | `tool_use` block                                    | [`Part::ToolCall`] (`input` as JSON text)         |
//! | `tool_result` block (string or blocks, `is_error`)  | a tool [`Message`] per result, before the rest of the user message |
//! | tools with an `input_schema`                        | [`Inbound::tools`]; Anthropic's server tools are left out |
//!
//! `cache_control`, `metadata`, `thinking` budgets, `context_management`, `tool_choice` and other
//! fields are accepted and have no effect on a chat-completions upstream; an Anthropic upstream
//! gets those [`PASSED_THROUGH`] names. Answers carry each thinking block's signature as the
//! upstream wrote it (an empty one when a chat-completions upstream reasoned).

pub mod upstream;

use std::collections::HashMap;

use phosphor_base::config::Api;
use phosphor_base::{Message, Part, Role, Seal, ToolCall, ToolResult, ToolSpec};
use serde_json::{Map, Value, json};

use crate::inbound::{
    Answer, Delta, Failure, FailureKind, Inbound, Meta, WireError, Writer, arguments_value, join, object,
    opt_bool, opt_number, opt_positive, opt_str, req_str, sse,
};

/// The block types a message's `content` may hold.
const BLOCK_TYPES: &str = "text, image, document, thinking, redacted_thinking, tool_use, tool_result";

/// The fields of a Messages request that reach an Anthropic upstream as the client sent them.
/// `thinking` among them: with thinking on, Anthropic wants the last assistant turn of a tool loop
/// back with its signed thinking first, which [`upstream::request_body`] checks before it keeps it.
pub const PASSED_THROUGH: &[&str] = &[
    "metadata",
    "context_management",
    "thinking",
    "tool_choice",
    "top_k",
    "top_p",
    "stop_sequences",
    "service_tier",
];

/// The request headers that reach an Anthropic upstream as the client sent them.
pub const HEADERS_PASSED_THROUGH: &[&str] = &["anthropic-beta"];

/// Reads a Messages request body.
pub fn read_request(bytes: &[u8]) -> Result<Inbound, WireError> {
    let body = object(bytes)?;
    let model = opt_str(&body, "model", "")?.map(str::to_owned);
    let mut system_prompt = match body.get("system") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => text_blocks(blocks, "system")?,
        Some(other) => return Err(WireError::at("system", other, "a string or an array of text blocks")),
    };
    let Some(raw) = body.get("messages") else {
        return Err(WireError::missing("messages", "an array of messages"));
    };
    let Value::Array(raw) = raw else { return Err(WireError::at("messages", raw, "an array of messages")) };
    if raw.is_empty() {
        return Err(WireError::new("`messages` is empty: send at least one message"));
    }
    let mut messages = Vec::new();
    let mut names = HashMap::new();
    for (index, message) in raw.iter().enumerate() {
        read_message(message, &format!("messages[{index}]"), &mut names, &mut messages)?;
    }
    // Leading system-role messages belong to the system prompt, as in the other formats.
    let leading = messages.iter().take_while(|m| m.role == Role::System).count();
    for message in messages.drain(..leading) {
        push_paragraph(&mut system_prompt, &message.text_content());
    }
    if messages.is_empty() {
        return Err(WireError::new("`messages` holds only system messages: send a user message"));
    }
    let tools = match body.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => {
            let mut specs = Vec::new();
            for (index, tool) in tools.iter().enumerate() {
                if let Some(spec) = tool_spec(tool, &format!("tools[{index}]"))? {
                    specs.push(spec);
                }
            }
            specs
        }
        Some(other) => return Err(WireError::at("tools", other, "an array of tools")),
    };
    let thinking = match body.get("thinking") {
        Some(Value::Object(thinking)) => thinking.get("type").and_then(Value::as_str) == Some("enabled"),
        _ => false,
    };
    Ok(Inbound {
        model,
        system_prompt,
        tools,
        messages,
        max_output_tokens: opt_positive(&body, "max_tokens")?,
        temperature: opt_number(&body, "temperature", 0.0..=1.0)?,
        stream: opt_bool(&body, "stream")?,
        conversation_key: None,
        show_reasoning: thinking,
        stream_usage: true,
        passed_through: crate::inbound::passed_through(&body, PASSED_THROUGH),
    })
}

fn push_paragraph(out: &mut String, text: &str) {
    if text.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(text);
}

/// The text of an array of text blocks, joined with blank lines.
fn text_blocks(blocks: &[Value], at: &str) -> Result<String, WireError> {
    let mut out = String::new();
    for (index, block) in blocks.iter().enumerate() {
        let at = format!("{at}[{index}]");
        let Value::Object(block) = block else { return Err(WireError::at(&at, block, "a text block")) };
        match req_str(block, "type", &at)? {
            "text" => push_paragraph(&mut out, req_str(block, "text", &at)?),
            other => {
                return Err(WireError::new(format!("`{at}.type` is {other:?}; expected \"text\"")));
            }
        }
    }
    Ok(out)
}

/// Reads one message into `out`: one message, or for a user message with tool results, a tool
/// message per result and then the rest.
fn read_message(
    value: &Value,
    at: &str,
    names: &mut HashMap<String, String>,
    out: &mut Vec<Message>,
) -> Result<(), WireError> {
    let Value::Object(message) = value else { return Err(WireError::at(at, value, "a message object")) };
    let role = match req_str(message, "role", at)? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "system" => Role::System,
        other => {
            return Err(WireError::new(format!(
                "`{at}.role` is {other:?}; expected \"user\", \"assistant\" or \"system\""
            )));
        }
    };
    let blocks = match message.get("content") {
        Some(Value::String(text)) => {
            out.push(Message::text(role, text.clone()));
            return Ok(());
        }
        Some(Value::Array(blocks)) => blocks,
        Some(other) => {
            return Err(WireError::at(&join(at, "content"), other, "a string or an array of blocks"));
        }
        None => return Err(WireError::missing(&join(at, "content"), "a string or an array of blocks")),
    };
    let mut parts = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        let at = format!("{at}.content[{index}]");
        let Value::Object(block) = block else { return Err(WireError::at(&at, block, "a content block")) };
        let kind = req_str(block, "type", &at)?;
        let allowed = match role {
            Role::User => matches!(kind, "text" | "image" | "document" | "tool_result"),
            Role::Assistant => matches!(kind, "text" | "thinking" | "redacted_thinking" | "tool_use"),
            _ => kind == "text",
        };
        if !allowed && BLOCK_TYPES.split(", ").any(|t| t == kind) {
            return Err(WireError::new(format!(
                "`{at}.type` is {kind:?}, which a {} message cannot hold",
                role.as_str()
            )));
        }
        match kind {
            "text" => parts.push(Part::Text { text: req_str(block, "text", &at)?.to_owned() }),
            "image" => parts.push(image(block, &at)?),
            "document" => parts.push(document(block, &at)?),
            "thinking" => {
                let text = req_str(block, "thinking", &at)?.to_owned();
                let signature = opt_str(block, "signature", &at)?.filter(|s| !s.is_empty());
                let seal = signature.map(|data| Seal::new(Api::Anthropic, data));
                parts.push(Part::Reasoning { text, seal });
            }
            "redacted_thinking" => {
                let data = req_str(block, "data", &at)?;
                parts.push(Part::Reasoning {
                    text: String::new(),
                    seal: Some(Seal::redacted(Api::Anthropic, data)),
                });
            }
            "tool_use" => {
                let id = req_str(block, "id", &at)?.to_owned();
                let name = req_str(block, "name", &at)?.to_owned();
                let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                names.insert(id.clone(), name.clone());
                parts.push(Part::ToolCall(ToolCall { id, name, arguments: input.to_string() }));
            }
            "tool_result" => {
                let call_id = req_str(block, "tool_use_id", &at)?.to_owned();
                let Some(name) = names.get(&call_id).cloned() else {
                    return Err(WireError::new(format!(
                        "`{at}.tool_use_id` is {call_id:?}, but no earlier assistant message has a tool_use \
                         with this id: every tool_result answers a tool_use"
                    )));
                };
                let (content, images) = result_content(block.get("content"), &at)?;
                let is_error =
                    opt_bool(block, "is_error").map_err(|e| WireError::new(format!("`{at}`: {e}")))?;
                let mut result = vec![Part::ToolResult(ToolResult { call_id, name, content, is_error })];
                result.extend(images);
                out.push(Message::new(Role::Tool, result));
            }
            other => {
                return Err(WireError::new(format!("`{at}.type` is {other:?}; allowed: {BLOCK_TYPES}")));
            }
        }
    }
    // A user message that held only tool results has been written as tool messages.
    let only_results = role == Role::User
        && parts.is_empty()
        && blocks.iter().any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"));
    if !only_results {
        out.push(Message::new(role, parts));
    }
    Ok(())
}

fn image(block: &Map<String, Value>, at: &str) -> Result<Part, WireError> {
    let at = join(at, "source");
    let Some(Value::Object(source)) = block.get("source") else {
        return Err(WireError::missing(&at, "an object {type: \"base64\" | \"url\", ...}"));
    };
    let url = match req_str(source, "type", &at)? {
        "base64" => {
            format!("data:{};base64,{}", req_str(source, "media_type", &at)?, req_str(source, "data", &at)?)
        }
        "url" => req_str(source, "url", &at)?.to_owned(),
        other => {
            return Err(WireError::new(format!("`{at}.type` is {other:?}; expected \"base64\" or \"url\"")));
        }
    };
    Ok(Part::Image { url, detail: None })
}

fn document(block: &Map<String, Value>, at: &str) -> Result<Part, WireError> {
    let at = join(at, "source");
    let Some(Value::Object(source)) = block.get("source") else {
        return Err(WireError::missing(&at, "an object {type: \"text\", data}"));
    };
    match req_str(source, "type", &at)? {
        "text" => Ok(Part::Text { text: req_str(source, "data", &at)?.to_owned() }),
        other => Err(WireError::new(format!(
            "`{at}.type` is {other:?}; only text documents can go to this server's model (expected \"text\")"
        ))),
    }
}

/// A tool result's content: the text (blocks joined), and its images.
fn result_content(content: Option<&Value>, at: &str) -> Result<(String, Vec<Part>), WireError> {
    let at = join(at, "content");
    match content {
        None | Some(Value::Null) => Ok((String::new(), Vec::new())),
        Some(Value::String(text)) => Ok((text.clone(), Vec::new())),
        Some(Value::Array(blocks)) => {
            let mut text = String::new();
            let mut images = Vec::new();
            for (index, block) in blocks.iter().enumerate() {
                let at = format!("{at}[{index}]");
                let Value::Object(block) = block else {
                    return Err(WireError::at(&at, block, "a content block"));
                };
                match req_str(block, "type", &at)? {
                    "text" => push_paragraph(&mut text, req_str(block, "text", &at)?),
                    "image" => images.push(image(block, &at)?),
                    "document" => {
                        if let Part::Text { text: doc } = document(block, &at)? {
                            push_paragraph(&mut text, &doc);
                        }
                    }
                    other => {
                        return Err(WireError::new(format!(
                            "`{at}.type` is {other:?}; allowed: text, image, document"
                        )));
                    }
                }
            }
            Ok((text, images))
        }
        Some(other) => Err(WireError::at(&at, other, "a string or an array of blocks")),
    }
}

/// A tool the model may call, or `None` for Anthropic's server tools (web search, code
/// execution, ...), which only Anthropic runs.
fn tool_spec(tool: &Value, at: &str) -> Result<Option<ToolSpec>, WireError> {
    let Value::Object(tool) = tool else { return Err(WireError::at(at, tool, "a tool object")) };
    let custom = matches!(tool.get("type").and_then(Value::as_str), None | Some("custom"));
    let Some(schema) = tool.get("input_schema") else {
        if custom {
            return Err(WireError::missing(&join(at, "input_schema"), "the JSON Schema of the tool's input"));
        }
        tracing::debug!(tool = ?tool.get("name"), "an Anthropic server tool is left out of the upstream request");
        return Ok(None);
    };
    if !schema.is_object() {
        return Err(WireError::at(&join(at, "input_schema"), schema, "a JSON Schema object"));
    }
    let name = req_str(tool, "name", at)?;
    if name.is_empty() {
        return Err(WireError::new(format!("`{at}.name` is empty")));
    }
    Ok(Some(ToolSpec {
        name: name.to_owned(),
        description: opt_str(tool, "description", at)?.unwrap_or("").to_owned(),
        parameters: schema.clone(),
    }))
}

/// A reasoning part as Anthropic writes it: a `thinking` block with its signature (an empty one
/// when no Anthropic provider signed it), or the `redacted_thinking` block it came as.
pub(crate) fn thinking_block(part: &Part) -> Option<Value> {
    let Part::Reasoning { text, .. } = part else { return None };
    Some(match part.seal_for(Api::Anthropic) {
        Some(seal) if seal.redacted => json!({"type": "redacted_thinking", "data": seal.data}),
        Some(seal) => json!({"type": "thinking", "thinking": text, "signature": seal.data}),
        None => json!({"type": "thinking", "thinking": text, "signature": ""}),
    })
}

/// The answer's content blocks, in the order Anthropic writes them: thinking first (when shown),
/// then text, then tool calls.
fn content_blocks(answer: &Answer<'_>, meta: &Meta) -> Vec<Value> {
    let mut blocks = Vec::new();
    for part in &answer.message.parts {
        match part {
            Part::Reasoning { .. } if meta.show_reasoning => blocks.extend(thinking_block(part)),
            Part::Text { text } if !text.is_empty() => blocks.push(json!({"type": "text", "text": text})),
            _ => {}
        }
    }
    for call in answer.message.tool_calls() {
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments_value(&call.arguments)}));
    }
    blocks
}

/// `stop_reason`: `tool_use` whenever the answer calls tools.
fn stop_reason(answer: &Answer<'_>) -> &'static str {
    if answer.calls_tools() {
        "tool_use"
    } else if answer.truncated() {
        "max_tokens"
    } else {
        "end_turn"
    }
}

fn usage(answer: &Answer<'_>) -> Value {
    let usage = answer.usage;
    json!({
        "input_tokens": usage.input_tokens.saturating_sub(usage.cached_input_tokens),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached_input_tokens,
        "output_tokens": usage.output_tokens,
    })
}

/// The answer as a `message` object.
pub fn whole(meta: &Meta, answer: &Answer<'_>) -> Value {
    json!({
        "id": meta.id,
        "type": "message",
        "role": "assistant",
        "model": meta.model,
        "content": content_blocks(answer, meta),
        "stop_reason": stop_reason(answer),
        "stop_sequence": null,
        "usage": usage(answer),
    })
}

/// Anthropic's error `type` for a failure.
fn error_type(failure: &Failure) -> &'static str {
    match failure.kind {
        FailureKind::InvalidRequest | FailureKind::ContextTooLong { .. } => "invalid_request_error",
        FailureKind::Authentication => "authentication_error",
        FailureKind::NotFound => "not_found_error",
        FailureKind::TooLarge => "request_too_large",
        FailureKind::RateLimited => "rate_limit_error",
        FailureKind::Timeout => "timeout_error",
        FailureKind::Upstream if failure.status == 529 || failure.status == 503 => "overloaded_error",
        FailureKind::Upstream | FailureKind::Internal => "api_error",
    }
}

/// An error as Anthropic shapes it: `{"type": "error", "error": {"type", "message"}}`. A
/// conversation that does not fit starts with the words Claude Code reacts to,
/// `prompt is too long: N tokens > M maximum`.
pub fn error_body(failure: &Failure) -> Value {
    let message = match failure.kind {
        FailureKind::ContextTooLong { tokens: Some(tokens), window: Some(window) } => {
            format!("prompt is too long: {tokens} tokens > {window} maximum ({})", failure.message)
        }
        FailureKind::ContextTooLong { .. } => format!("prompt is too long: {}", failure.message),
        _ => failure.message.clone(),
    };
    json!({"type": "error", "error": {"type": error_type(failure), "message": message}})
}

/// The answer as Anthropic's stream events.
#[derive(Debug)]
pub struct Stream {
    meta: Meta,
    /// The index and kind (`text`, `thinking`) of the content block open now.
    open: Option<(usize, &'static str)>,
    blocks: usize,
}

impl Stream {
    /// A stream for the answer `meta` describes.
    pub fn new(meta: Meta) -> Stream {
        Stream { meta, open: None, blocks: 0 }
    }

    fn close(&mut self, out: &mut Vec<String>) {
        self.close_signed("", out);
    }

    /// Closes the open block; a thinking block gets `signature` (empty when unsigned).
    fn close_signed(&mut self, signature: &str, out: &mut Vec<String>) {
        if let Some((index, kind)) = self.open.take() {
            if kind == "thinking" {
                let delta = json!({"type": "signature_delta", "signature": signature});
                out.push(sse(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index, "delta": delta}),
                ));
            }
            out.push(sse("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
        }
    }

    fn open(&mut self, block: Value, out: &mut Vec<String>) -> usize {
        self.close(out);
        let index = self.blocks;
        self.blocks += 1;
        out.push(sse(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        index
    }

    fn text(&mut self, kind: &'static str, text: &str, out: &mut Vec<String>) {
        let index = match self.open {
            Some((index, open)) if open == kind => index,
            _ => {
                let block = if kind == "text" {
                    json!({"type": "text", "text": ""})
                } else {
                    json!({"type": "thinking", "thinking": ""})
                };
                let index = self.open(block, out);
                self.open = Some((index, kind));
                index
            }
        };
        let delta = if kind == "text" {
            json!({"type": "text_delta", "text": text})
        } else {
            json!({"type": "thinking_delta", "thinking": text})
        };
        out.push(sse(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
    }
}

impl Writer for Stream {
    fn begin(&mut self) -> Vec<String> {
        let message = json!({
            "id": self.meta.id,
            "type": "message",
            "role": "assistant",
            "model": self.meta.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        });
        vec![sse("message_start", &json!({"type": "message_start", "message": message}))]
    }

    fn delta(&mut self, delta: Delta<'_>) -> Vec<String> {
        let mut out = Vec::new();
        match delta {
            Delta::Text(text) if !text.is_empty() => self.text("text", text, &mut out),
            Delta::Reasoning(text) if self.meta.show_reasoning && !text.is_empty() => {
                self.text("thinking", text, &mut out);
            }
            Delta::Seal(seal) if self.meta.show_reasoning && seal.api == Api::Anthropic => {
                if seal.redacted {
                    let index = self.open(json!({"type": "redacted_thinking", "data": seal.data}), &mut out);
                    out.push(sse(
                        "content_block_stop",
                        &json!({"type": "content_block_stop", "index": index}),
                    ));
                } else {
                    if !matches!(self.open, Some((_, "thinking"))) {
                        let index = self.open(json!({"type": "thinking", "thinking": ""}), &mut out);
                        self.open = Some((index, "thinking"));
                    }
                    self.close_signed(&seal.data, &mut out);
                }
            }
            Delta::ToolCall(call) => {
                let block = json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}});
                let index = self.open(block, &mut out);
                let delta = json!({"type": "input_json_delta", "partial_json": call.arguments});
                out.push(sse(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index, "delta": delta}),
                ));
                out.push(sse("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
            }
            _ => {}
        }
        out
    }

    fn end(&mut self, answer: &Answer<'_>) -> Vec<String> {
        let mut out = Vec::new();
        self.close(&mut out);
        let delta = json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(answer), "stop_sequence": null},
            "usage": usage(answer),
        });
        out.push(sse("message_delta", &delta));
        out.push(sse("message_stop", &json!({"type": "message_stop"})));
        out
    }

    fn fail(&mut self, failure: &Failure) -> Vec<String> {
        vec![sse("error", &error_body(failure))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_base::{FinishReason, Usage};
    use pretty_assertions::assert_eq;

    fn read(body: Value) -> Result<Inbound, WireError> {
        read_request(body.to_string().as_bytes())
    }

    #[test]
    fn reads_what_claude_code_sends() {
        let inbound = read(json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 32000,
            "stream": true,
            "thinking": {"type": "enabled", "budget_tokens": 4000},
            "system": [{"type": "text", "text": "You are Claude Code."}, {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "tools": [
                {"name": "Read", "description": "Reads a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
                {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
            ],
            "metadata": {"user_id": "{\"session\":\"x\"}"},
            "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"}, {"type": "text", "text": "Read a.txt", "cache_control": {"type": "ephemeral"}}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "I should read it.", "signature": "sig=="},
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.txt"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "hello"}]},
                    {"type": "text", "text": "and now?"},
                ]},
                {"role": "system", "content": "A later system note."},
            ],
        }))
        .unwrap();
        assert_eq!(inbound.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(inbound.system_prompt, "You are Claude Code.\n\nBe brief.");
        assert_eq!(inbound.tools.len(), 1, "the server tool is left out");
        assert!(inbound.stream && inbound.show_reasoning);
        assert_eq!(inbound.max_output_tokens, Some(32000));
        let roles: Vec<Role> = inbound.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::User, Role::System]);
        assert_eq!(
            inbound.messages[1].parts,
            vec![
                Part::Reasoning {
                    text: "I should read it.".into(),
                    seal: Some(Seal { api: Api::Anthropic, data: "sig==".into(), redacted: false }),
                },
                Part::Text { text: "Reading.".into() },
                Part::ToolCall(ToolCall {
                    id: "toolu_1".into(),
                    name: "Read".into(),
                    arguments: r#"{"path":"a.txt"}"#.into()
                }),
            ]
        );
        assert_eq!(
            inbound.messages[2].parts,
            vec![Part::ToolResult(ToolResult {
                call_id: "toolu_1".into(),
                name: "Read".into(),
                content: "hello".into(),
                is_error: false
            })]
        );
    }

    #[test]
    fn bad_requests_say_where_and_what_is_allowed() {
        let error = |body: Value| read(body).unwrap_err().message;
        assert!(read_request(b"{").unwrap_err().message.contains("not valid JSON"));
        assert!(error(json!({"model": "m"})).contains("`messages` is missing"));
        assert!(error(json!({"messages": []})).contains("empty"));
        assert!(
            error(json!({"messages": [{"role": "robot", "content": "x"}]})).contains("`messages[0].role`")
        );
        assert!(
            error(json!({"messages": [{"role": "user", "content": 7}]}))
                .contains("`messages[0].content` is the number 7")
        );
        let video = error(json!({"messages": [{"role": "user", "content": [{"type": "video"}]}]}));
        assert!(
            video.contains("`messages[0].content[0].type`") && video.contains("allowed: text, image"),
            "{video}"
        );
        let orphan = error(
            json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]}]}),
        );
        assert!(orphan.contains("toolu_9") && orphan.contains("no earlier assistant message"), "{orphan}");
        assert!(
            error(json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}))
                .contains("max_tokens")
        );
        assert!(
            error(json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "t"}]}))
                .contains("input_schema")
        );
    }

    fn meta(show_reasoning: bool) -> Meta {
        Meta { id: "msg_1".into(), model: "m".into(), created: 0, stream_usage: true, show_reasoning }
    }

    #[test]
    fn a_tool_calling_answer_stops_for_tool_use_whole_and_streamed() {
        let call =
            ToolCall { id: "toolu_2".into(), name: "Read".into(), arguments: r#"{"path":"b"}"#.into() };
        let message = Message::new(
            Role::Assistant,
            vec![Part::reasoning("hmm"), Part::Text { text: "Next.".into() }, Part::ToolCall(call.clone())],
        );
        let usage =
            Usage { input_tokens: 120, output_tokens: 9, cached_input_tokens: 100, reasoning_tokens: 0 };
        let answer = Answer { message: &message, usage, finish_reason: Some(&FinishReason::Stop) };
        let body = whole(&meta(true), &answer);
        assert_eq!(body["stop_reason"], "tool_use");
        assert_eq!(body["content"][0]["type"], "thinking", "thinking comes first");
        assert_eq!(body["content"][2]["input"], json!({"path": "b"}));
        assert_eq!(body["usage"]["input_tokens"], 20);
        assert_eq!(body["usage"]["cache_read_input_tokens"], 100);
        assert_eq!(whole(&meta(false), &answer)["content"][0]["type"], "text");

        let mut stream = Stream::new(meta(false));
        let mut frames = stream.begin();
        frames.extend(stream.delta(Delta::Reasoning("hmm")));
        frames.extend(stream.delta(Delta::Text("Ne")));
        frames.extend(stream.delta(Delta::Text("xt.")));
        frames.extend(stream.delta(Delta::ToolCall(&call)));
        frames.extend(stream.end(&answer));
        let events: Vec<&str> =
            frames.iter().map(|f| f.lines().next().unwrap().trim_start_matches("event: ")).collect();
        assert_eq!(
            events,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        assert!(frames[8].contains(r#""stop_reason":"tool_use""#), "{}", frames[8]);
    }

    #[test]
    fn signed_and_redacted_thinking_go_back_to_the_client_as_they_came() {
        let signed = Seal { api: Api::Anthropic, data: "EqQBCgIYAhIM".into(), redacted: false };
        let redacted = Seal { api: Api::Anthropic, data: "EmwKAhgB".into(), redacted: true };
        let client = json!({"model": "m", "max_tokens": 10, "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "redacted_thinking", "data": "EmwKAhgB"},
                {"type": "thinking", "thinking": "ok", "signature": "EqQBCgIYAhIM"},
                {"type": "thinking", "thinking": "unsigned", "signature": ""},
                {"type": "text", "text": "done"},
            ]},
            {"role": "user", "content": "again"},
        ]});
        let parts = read(client).unwrap().messages[1].parts.clone();
        assert_eq!(parts[0], Part::Reasoning { text: String::new(), seal: Some(redacted.clone()) });
        assert_eq!(parts[1], Part::Reasoning { text: "ok".into(), seal: Some(signed.clone()) });
        assert_eq!(parts[2], Part::reasoning("unsigned"));

        let message = Message::new(Role::Assistant, parts);
        let answer = Answer { message: &message, usage: Usage::default(), finish_reason: None };
        let body = whole(&meta(true), &answer);
        assert_eq!(
            body["content"],
            json!([
                {"type": "redacted_thinking", "data": "EmwKAhgB"},
                {"type": "thinking", "thinking": "ok", "signature": "EqQBCgIYAhIM"},
                {"type": "thinking", "thinking": "unsigned", "signature": ""},
                {"type": "text", "text": "done"},
            ])
        );
        // Streamed: the seal closes the thinking block with its signature; a redacted one is a
        // block of its own; a seal of another API writes nothing.
        let mut stream = Stream::new(meta(true));
        let mut frames = stream.delta(Delta::Seal(&redacted));
        frames.extend(stream.delta(Delta::Reasoning("ok")));
        frames.extend(stream.delta(Delta::Seal(&signed)));
        let theirs = Seal { api: Api::Responses, data: "gAAAA".into(), redacted: false };
        frames.extend(stream.delta(Delta::Seal(&theirs)));
        frames.extend(stream.delta(Delta::Text("done")));
        let data: Vec<Value> = frames
            .iter()
            .map(|frame| {
                serde_json::from_str(frame.lines().nth(1).unwrap().trim_start_matches("data: ")).unwrap()
            })
            .collect();
        assert_eq!(data[0]["content_block"], json!({"type": "redacted_thinking", "data": "EmwKAhgB"}));
        assert_eq!(data[1]["type"], "content_block_stop");
        assert_eq!(data[2]["content_block"]["type"], "thinking");
        assert_eq!(data[3]["delta"], json!({"type": "thinking_delta", "thinking": "ok"}));
        assert_eq!(data[4]["delta"], json!({"type": "signature_delta", "signature": "EqQBCgIYAhIM"}));
        assert_eq!(data[5]["type"], "content_block_stop");
        assert_eq!(data[6]["content_block"]["type"], "text");
        assert_eq!(data.len(), 8);
    }

    #[test]
    fn overflow_errors_use_the_words_claude_code_reacts_to() {
        let failure = Failure::new(
            400,
            FailureKind::ContextTooLong { tokens: Some(30_000), window: Some(24_000) },
            "still too long after compaction",
        );
        let body = error_body(&failure);
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("prompt is too long: 30000 tokens > 24000 maximum")
        );
    }
}
