//! Anthropic Messages as an upstream speaks it: [`request_body`] writes what Phosphor sends
//! (`POST {base_url}/messages`), [`Reader`] reads the streamed answer.
//!
//! # What is sent
//!
//! | Phosphor                                   | Anthropic                                         |
//! |--------------------------------------------|---------------------------------------------------|
//! | leading system messages                    | `system`: one text block                          |
//! | a later system message                     | a user message with its text (the API has no system role inside `messages`) |
//! | [`Part::Text`], [`Part::Image`]            | `text`, `image` blocks (`base64` for a `data:` URL, else `url`); empty texts are left out |
//! | [`Part::ToolCall`]                         | `tool_use` with the arguments as its `input` object |
//! | the tool messages after an assistant turn  | one user message of `tool_result` blocks (`is_error`, images inside) |
//! | [`Part::Reasoning`] sealed by Anthropic    | its `thinking` (or `redacted_thinking`) block first, byte for byte, when the client asked for thinking |
//! | other [`Part::Reasoning`]                  | nothing: Anthropic refuses a thinking block it did not sign |
//!
//! The client's `thinking` passes only where Anthropic would take it: a tool loop still going
//! must have its assistant turn's signed thinking, and `budget_tokens` must fit under the answer
//! limit Phosphor sets (lowered, or thinking left out under 1,024 tokens).
//!
//! Two prompt-cache breakpoints (`cache_control: {"type": "ephemeral"}`): after the system
//! prompt (with the tools before it, the part of a request that never changes), and on the last
//! block of the last message. Between two compactions Phosphor sends the same bytes followed by
//! what is new, so each request reads the cache the one before wrote; after a compaction the
//! head changed and the first request writes it again.

use phosphor_base::config::Api;
use phosphor_base::{ChatRequest, FinishReason, Message, Part, Role, Seal, StreamEvent, ToolCall, Usage};
use serde_json::{Map, Value, json};

use crate::inbound::arguments_value;
use crate::sse::Event;
use crate::upstream::{ReadError, Tally, data};

/// The `anthropic-version` header every request carries.
pub const VERSION: &str = "2023-06-01";

/// The body of a streamed Messages request for `model`, answering in at most `max_tokens`, with
/// the fields a Messages client passed through (`ChatRequest::passthrough`) where Phosphor writes
/// none of its own.
pub fn request_body(model: &str, request: &ChatRequest, max_tokens: u64) -> Value {
    let leading = request.messages.iter().take_while(|m| m.role == Role::System).count();
    let thinking = thinking_on(request) && tool_loop_signed(&request.messages[leading..]);
    let system: Vec<String> = request.messages[..leading]
        .iter()
        .map(Message::text_content)
        .filter(|text| !text.is_empty())
        .collect();
    let mut messages: Vec<Value> = Vec::new();
    for message in &request.messages[leading..] {
        let (role, blocks) = match message.role {
            Role::Tool => ("user", result_blocks(message)),
            Role::Assistant => ("assistant", assistant_blocks(message, thinking)),
            Role::User | Role::System => ("user", user_blocks(message)),
        };
        if blocks.is_empty() {
            continue;
        }
        // The results of one assistant turn travel in one user message, as the API wants them.
        let joins = message.role == Role::Tool
            && messages.last().is_some_and(|last| last["role"] == "user" && holds_results(last));
        match messages.last_mut() {
            Some(last) if joins => {
                if let Some(content) = last["content"].as_array_mut() {
                    content.extend(blocks);
                }
            }
            _ => messages.push(json!({"role": role, "content": blocks})),
        }
    }
    if let Some(block) = messages
        .last_mut()
        .and_then(|last| last["content"].as_array_mut())
        .and_then(|content| content.last_mut())
    {
        block["cache_control"] = json!({"type": "ephemeral"});
    }
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens,
        "stream": true,
        "messages": messages,
    });
    if !system.is_empty() {
        body["system"] =
            json!([{"type": "text", "text": system.join("\n\n"), "cache_control": {"type": "ephemeral"}}]);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters}))
            .collect();
        body["tools"] = Value::Array(tools);
    }
    if let Some(temperature) = request.temperature {
        // Through its decimal text, so that 0.7f32 is sent as 0.7. Anthropic allows 0 to 1.
        let value: f64 = temperature.to_string().parse().unwrap_or(f64::from(temperature));
        body["temperature"] = json!(value.clamp(0.0, 1.0));
    }
    phosphor_base::Passthrough::merge_into(request.passthrough.as_ref(), Api::Anthropic, &mut body);
    if let Some(object) = body.as_object_mut() {
        if !thinking && object.get("thinking").is_some_and(|t| t["type"] != "disabled") {
            object.remove("thinking");
        }
        fit_thinking_budget(object, max_tokens);
    }
    body
}

/// Whether the client asked for thinking (`enabled` or `adaptive`), on an Anthropic upstream.
fn thinking_on(request: &ChatRequest) -> bool {
    let passthrough = request.passthrough.as_ref().filter(|p| p.api == Api::Anthropic);
    passthrough
        .and_then(|p| p.fields.get("thinking"))
        .is_some_and(|thinking| thinking.get("type").and_then(Value::as_str) != Some("disabled"))
}

/// Anthropic's rule with thinking on: the assistant message of a tool loop still going (its
/// calls answered by the tool messages that end the conversation) starts with a thinking block
/// it signed. A loop whose assistant turn has no such block (a chat upstream wrote it, or it came
/// from a client that dropped it) is sent without thinking rather than refused.
fn tool_loop_signed(messages: &[Message]) -> bool {
    let Some(last) = messages.iter().rposition(|m| m.role == Role::Assistant) else { return true };
    let assistant = &messages[last];
    let in_loop =
        assistant.tool_calls().next().is_some() && messages[last + 1..].iter().all(|m| m.role == Role::Tool);
    !in_loop || assistant.parts.iter().any(|part| part.seal_for(Api::Anthropic).is_some())
}

/// A `budget_tokens` must be under `max_tokens` and at least 1,024: one the answer limit Phosphor
/// set leaves no room for is lowered to fit, and thinking is turned off when even 1,024 does not.
fn fit_thinking_budget(body: &mut Map<String, Value>, max_tokens: u64) {
    const LEAST: u64 = 1_024;
    let Some(budget) = body.get("thinking").and_then(|t| t.get("budget_tokens")).and_then(Value::as_u64)
    else {
        return;
    };
    if budget < max_tokens {
        return;
    }
    if max_tokens > LEAST {
        body["thinking"]["budget_tokens"] = json!(max_tokens - 1);
    } else {
        body.remove("thinking");
    }
}

fn holds_results(message: &Value) -> bool {
    message["content"].as_array().is_some_and(|blocks| blocks.iter().all(|b| b["type"] == "tool_result"))
}

fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

fn image_block(url: &str) -> Value {
    let inline = url.strip_prefix("data:").and_then(|rest| rest.split_once(";base64,"));
    match inline {
        Some((media_type, data)) => {
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
        }
        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
    }
}

fn user_blocks(message: &Message) -> Vec<Value> {
    message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::Text { text } => text_block(text),
            Part::Image { url, .. } => Some(image_block(url)),
            _ => None,
        })
        .collect()
}

/// An assistant message's blocks: with `thinking`, its Anthropic-signed thinking first, as it
/// came (other reasoning is never sent: Anthropic refuses a thinking block it did not sign); then
/// its text, then its tool calls.
fn assistant_blocks(message: &Message, thinking: bool) -> Vec<Value> {
    let signed = message.parts.iter().filter(|part| thinking && part.seal_for(Api::Anthropic).is_some());
    let mut blocks: Vec<Value> = signed.filter_map(crate::anthropic::thinking_block).collect();
    blocks.extend(message.parts.iter().filter_map(|part| match part {
        Part::Text { text } => text_block(text),
        _ => None,
    }));
    for call in message.tool_calls() {
        // `input` must be an object: arguments that are not one (a model's broken JSON) travel
        // under one key rather than be refused.
        let input = match arguments_value(&call.arguments) {
            object @ Value::Object(_) => object,
            other => json!({"arguments": other}),
        };
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    blocks
}

fn result_blocks(message: &Message) -> Vec<Value> {
    let images: Vec<Value> = message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::Image { url, .. } => Some(image_block(url)),
            _ => None,
        })
        .collect();
    let mut blocks = Vec::new();
    for part in &message.parts {
        let Part::ToolResult(result) = part else { continue };
        let mut content: Vec<Value> = text_block(&result.content).into_iter().collect();
        content.extend(images.iter().cloned());
        let mut block = Map::new();
        block.insert("type".into(), json!("tool_result"));
        block.insert("tool_use_id".into(), json!(result.call_id));
        block.insert("content".into(), Value::Array(content));
        if result.is_error {
            block.insert("is_error".into(), json!(true));
        }
        blocks.push(Value::Object(block));
    }
    blocks
}

/// The block being streamed at an index.
#[derive(Debug)]
enum Block {
    Text,
    /// A thinking block, with its signature as far as it has streamed.
    Thinking {
        signature: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: String,
    },
    /// A block type Phosphor does not read (server tool use, web search results, ...).
    Other,
}

/// Reads Anthropic's stream: `message_start`, `content_block_start` / `_delta` / `_stop` per
/// block, `message_delta` with the stop reason and the output count, `message_stop`; `ping`s are
/// skipped and an `error` event ends the answer with the provider's error.
#[derive(Debug, Default)]
pub struct Reader {
    blocks: Vec<(u64, Block)>,
    tally: Tally,
    /// Input tokens of `message_start`: uncached, written to the cache, read from it.
    input: (u64, u64, u64),
    output: u64,
    started: bool,
}

fn count(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

/// The status Anthropic gives each error type, for an error that arrives inside a stream.
fn error_status(kind: &str) -> Option<u16> {
    Some(match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "overloaded_error" => 529,
        _ => return None,
    })
}

/// A stop reason: Anthropic's names, and what each means here.
fn stop_reason(reason: &str) -> FinishReason {
    match reason {
        "stop_sequence" => FinishReason::Stop,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::from_wire(other),
    }
}

impl Reader {
    fn read_usage(&mut self, usage: &Value) {
        if let Some(input) = count(usage, "input_tokens") {
            self.input.0 = input;
        }
        if let Some(written) = count(usage, "cache_creation_input_tokens") {
            self.input.1 = written;
        }
        if let Some(read) = count(usage, "cache_read_input_tokens") {
            self.input.2 = read;
        }
        if let Some(output) = count(usage, "output_tokens") {
            self.output = output;
        }
        let (uncached, written, read) = self.input;
        if uncached + written + read + self.output > 0 {
            self.tally.usage = Some(Usage {
                input_tokens: uncached + written + read,
                output_tokens: self.output,
                cached_input_tokens: read,
                reasoning_tokens: 0,
            });
        }
    }

    fn block(&mut self, index: u64) -> Result<&mut Block, ReadError> {
        match self.blocks.iter_mut().find(|(i, _)| *i == index) {
            Some((_, block)) => Ok(block),
            None => {
                Err(ReadError::Malformed(format!("a delta for content block {index}, which never started")))
            }
        }
    }
}

impl crate::upstream::Reader for Reader {
    fn event(&mut self, event: &Event) -> Result<Vec<StreamEvent>, ReadError> {
        if event.name == "ping" {
            return Ok(Vec::new());
        }
        let value = data(event)?;
        let kind = value.get("type").and_then(Value::as_str).unwrap_or(event.name.as_str()).to_owned();
        let index = count(&value, "index").unwrap_or(0);
        let mut out = Vec::new();
        match kind.as_str() {
            "message_start" => {
                self.started = true;
                if let Some(usage) = value.pointer("/message/usage") {
                    self.read_usage(usage);
                }
            }
            "content_block_start" => {
                let block = value.get("content_block").cloned().unwrap_or(Value::Null);
                let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
                let started = match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let text = text("text");
                        if !text.is_empty() {
                            self.tally.wrote(&text);
                            out.push(StreamEvent::TextDelta { text });
                        }
                        Block::Text
                    }
                    Some("thinking") => {
                        let signature = text("signature");
                        let text = text("thinking");
                        if !text.is_empty() {
                            self.tally.wrote(&text);
                            out.push(StreamEvent::ReasoningDelta { text });
                        }
                        Block::Thinking { signature }
                    }
                    Some("redacted_thinking") => {
                        out.push(StreamEvent::ReasoningSeal(Seal::redacted(Api::Anthropic, text("data"))));
                        Block::Other
                    }
                    Some("tool_use") => {
                        // Deltas bring the input; a non-empty `input` here is the whole of it.
                        let input = match block.get("input") {
                            Some(Value::Object(map)) if !map.is_empty() => block["input"].to_string(),
                            _ => String::new(),
                        };
                        Block::ToolUse { id: text("id"), name: text("name"), input }
                    }
                    _ => Block::Other,
                };
                self.blocks.push((index, started));
            }
            "content_block_delta" => {
                let delta = value.get("delta").cloned().unwrap_or(Value::Null);
                let field = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
                let delta_kind = delta.get("type").and_then(Value::as_str).unwrap_or("").to_owned();
                let block = self.block(index)?;
                match (block, delta_kind.as_str()) {
                    (Block::Text, "text_delta") => {
                        let text = field("text");
                        if !text.is_empty() {
                            self.tally.wrote(&text);
                            out.push(StreamEvent::TextDelta { text });
                        }
                    }
                    (Block::Thinking { signature }, "signature_delta") => {
                        signature.push_str(&field("signature"))
                    }
                    (Block::Thinking { .. }, "thinking_delta") => {
                        let text = field("thinking");
                        if !text.is_empty() {
                            self.tally.wrote(&text);
                            out.push(StreamEvent::ReasoningDelta { text });
                        }
                    }
                    (Block::ToolUse { input, .. }, "input_json_delta") => {
                        input.push_str(&field("partial_json"))
                    }
                    // Citations and deltas of blocks Phosphor does not read.
                    _ => {}
                }
            }
            "content_block_stop" => {
                let block = std::mem::replace(self.block(index)?, Block::Other);
                if let Block::Thinking { signature } = block {
                    // The signature seals the thinking text streamed in this block.
                    if !signature.is_empty() {
                        out.push(StreamEvent::ReasoningSeal(Seal::new(Api::Anthropic, signature)));
                    }
                } else if let Block::ToolUse { id, name, input } = block {
                    if name.is_empty() {
                        return Err(ReadError::Malformed(format!(
                            "tool_use block {index} (id {id:?}) has no name"
                        )));
                    }
                    let arguments = if input.trim().is_empty() { "{}".to_owned() } else { input };
                    self.tally.wrote(&arguments);
                    self.tally.calls += 1;
                    out.push(StreamEvent::ToolCall(ToolCall { id, name, arguments }));
                }
            }
            "message_delta" => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.tally.finish = Some(stop_reason(reason));
                }
                if let Some(usage) = value.get("usage") {
                    self.read_usage(usage);
                }
            }
            "message_stop" if self.tally.finish.is_none() => self.tally.finish = Some(FinishReason::Stop),
            "error" => {
                let error_kind = value.pointer("/error/type").and_then(Value::as_str).unwrap_or("");
                return Err(ReadError::Provider {
                    status: error_status(error_kind),
                    body: event.data.clone(),
                });
            }
            other if !self.started => {
                return Err(ReadError::Malformed(format!(
                    "the answer began with a {other:?} event; an Anthropic stream begins with message_start"
                )));
            }
            _ => {}
        }
        Ok(out)
    }

    fn finish(&mut self, input_estimate: u64) -> Result<Vec<StreamEvent>, ReadError> {
        self.tally.close(input_estimate, "its message_delta gave a stop_reason")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::Decoder;
    use crate::upstream::Reader as _;
    use phosphor_base::{ToolResult, ToolSpec};
    use pretty_assertions::assert_eq;

    fn read(stream: &str) -> Result<Vec<StreamEvent>, ReadError> {
        let mut reader = Reader::default();
        let mut events = Vec::new();
        for event in Decoder::default().push(stream.as_bytes()) {
            events.extend(reader.event(&event)?);
        }
        events.extend(reader.finish(99)?);
        Ok(events)
    }

    /// A tool-using answer as Anthropic's streaming documentation shows it, byte for byte in
    /// its shape (event names, `ping`, `input_json_delta` fragments, `message_delta` usage).
    const TOOL_STREAM: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5","stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":10,"cache_read_input_tokens":2000,"output_tokens":2},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay, let's check"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the weather."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San Francisco, CA\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;

    #[test]
    fn reads_a_tool_using_answer() {
        assert_eq!(
            read(TOOL_STREAM).unwrap(),
            vec![
                StreamEvent::TextDelta { text: "Okay, let's check".into() },
                StreamEvent::TextDelta { text: " the weather.".into() },
                StreamEvent::ToolCall(ToolCall {
                    id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                    name: "get_weather".into(),
                    arguments: r#"{"location": "San Francisco, CA"}"#.into(),
                }),
                StreamEvent::Usage(Usage {
                    input_tokens: 2482,
                    output_tokens: 89,
                    cached_input_tokens: 2000,
                    reasoning_tokens: 0
                }),
                StreamEvent::Finish { reason: FinishReason::ToolCalls },
            ]
        );
    }

    #[test]
    fn thinking_is_reasoning_sealed_with_its_signature() {
        let stream = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me see.\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAhIM\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"4\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":7}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let events = read(stream).unwrap();
        assert_eq!(events[0], StreamEvent::ReasoningDelta { text: "Let me see.".into() });
        let seal = Seal { api: Api::Anthropic, data: "EqQBCgIYAhIM".into(), redacted: false };
        assert_eq!(events[1], StreamEvent::ReasoningSeal(seal.clone()));
        assert_eq!(events[2], StreamEvent::TextDelta { text: "4".into() });
        assert_eq!(events[4], StreamEvent::Finish { reason: FinishReason::Length });
        // Collected, the block is one sealed part, before the text.
        let mut completion = phosphor_base::Completion::default();
        events.into_iter().for_each(|event| completion.apply(event));
        let message = completion.into_message(None);
        assert_eq!(message.parts[0], Part::Reasoning { text: "Let me see.".into(), seal: Some(seal) });
        assert_eq!(message.parts[1], Part::Text { text: "4".into() });
    }

    #[test]
    fn redacted_thinking_is_a_sealed_part_with_no_text() {
        let stream = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgBEgy3va\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Then this.\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"c2lnMg==\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":7}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let mut completion = phosphor_base::Completion::default();
        read(stream).unwrap().into_iter().for_each(|event| completion.apply(event));
        let message = completion.into_message(None);
        let redacted = Seal { api: Api::Anthropic, data: "EmwKAhgBEgy3va".into(), redacted: true };
        let signed = Seal { api: Api::Anthropic, data: "c2lnMg==".into(), redacted: false };
        assert_eq!(message.parts[0], Part::Reasoning { text: String::new(), seal: Some(redacted) });
        assert_eq!(message.parts[1], Part::Reasoning { text: "Then this.".into(), seal: Some(signed) });
    }

    /// A tool loop in Anthropic's shape, its assistant turn's reasoning sealed as given.
    fn tool_loop(seal: Option<Seal>, thinking: Value) -> ChatRequest {
        let call =
            ToolCall { id: "toolu_1".into(), name: "Read".into(), arguments: r#"{"path":"a"}"#.into() };
        let mut fields = Map::new();
        fields.insert("thinking".into(), thinking);
        ChatRequest {
            messages: vec![
                Message::user("Read a."),
                Message::new(
                    Role::Assistant,
                    vec![
                        Part::Text { text: "Reading.".into() },
                        Part::Reasoning { text: "I will read a.".into(), seal },
                        Part::ToolCall(call),
                    ],
                ),
                Message::new(
                    Role::Tool,
                    vec![Part::ToolResult(phosphor_base::ToolResult {
                        call_id: "toolu_1".into(),
                        name: "Read".into(),
                        content: "alpha".into(),
                        is_error: false,
                    })],
                ),
            ],
            tools: vec![ToolSpec {
                name: "Read".into(),
                description: "Reads".into(),
                parameters: json!({"type": "object"}),
            }],
            passthrough: Some(phosphor_base::Passthrough { api: Api::Anthropic, fields, headers: vec![] }),
            ..ChatRequest::default()
        }
    }

    #[test]
    fn signed_thinking_goes_back_first_and_byte_for_byte() {
        let seal = Seal { api: Api::Anthropic, data: "EqQBCgIYAhIM".into(), redacted: false };
        let thinking = json!({"type": "enabled", "budget_tokens": 31999});
        let body = request_body("claude-sonnet-4-5", &tool_loop(Some(seal), thinking), 32000);
        assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 31999}));
        assert_eq!(
            body["messages"][1]["content"],
            json!([
                {"type": "thinking", "thinking": "I will read a.", "signature": "EqQBCgIYAhIM"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}},
            ])
        );
        // A budget the answer limit leaves no room for is lowered under it.
        let seal = Seal { api: Api::Anthropic, data: "EqQBCgIYAhIM".into(), redacted: false };
        let thinking = json!({"type": "enabled", "budget_tokens": 31999});
        let body = request_body("claude-sonnet-4-5", &tool_loop(Some(seal), thinking), 8000);
        assert_eq!(body["thinking"]["budget_tokens"], 7999);
    }

    #[test]
    fn a_tool_loop_without_signed_thinking_goes_without_thinking() {
        let thinking = json!({"type": "enabled", "budget_tokens": 2000});
        let unsigned = request_body("claude-sonnet-4-5", &tool_loop(None, thinking.clone()), 32000);
        assert!(unsigned.get("thinking").is_none(), "Anthropic would refuse: {unsigned}");
        assert_eq!(
            unsigned["messages"][1]["content"][0]["type"], "text",
            "no unsigned thinking block is sent"
        );
        // Sealed by another API: not Anthropic's to check.
        let theirs = Seal { api: Api::Responses, data: "gAAAA".into(), redacted: false };
        let body = request_body("claude-sonnet-4-5", &tool_loop(Some(theirs), thinking.clone()), 32000);
        assert!(body.get("thinking").is_none());
        // Thinking off: the signed block stays home too.
        let signed = Seal { api: Api::Anthropic, data: "sig".into(), redacted: false };
        let off =
            request_body("claude-sonnet-4-5", &tool_loop(Some(signed), json!({"type": "disabled"})), 32000);
        assert_eq!(off["thinking"], json!({"type": "disabled"}));
        assert_eq!(off["messages"][1]["content"][0]["type"], "text");
    }

    #[test]
    fn an_error_event_is_the_providers_error_and_a_cut_stream_is_malformed() {
        let overloaded = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\nevent: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n";
        assert_eq!(
            read(overloaded).unwrap_err(),
            ReadError::Provider {
                status: Some(529),
                body: r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#
                    .into()
            }
        );
        let cut = &TOOL_STREAM[..TOOL_STREAM.find("event: message_delta").unwrap()];
        assert!(matches!(read(cut), Err(ReadError::Malformed(m)) if m.contains("stop_reason")));
        let chat = "data: {\"choices\":[]}\n\n";
        assert!(matches!(read(chat), Err(ReadError::Malformed(m)) if m.contains("message_start")));
    }

    #[test]
    fn writes_a_request_the_api_accepts() {
        let call =
            ToolCall { id: "toolu_1".into(), name: "Read".into(), arguments: r#"{"path":"a"}"#.into() };
        let other = ToolCall { id: "toolu_2".into(), name: "Read".into(), arguments: "not json".into() };
        let result = |id: &str, text: &str, is_error| {
            Message::new(
                Role::Tool,
                vec![Part::ToolResult(ToolResult {
                    call_id: id.into(),
                    name: "Read".into(),
                    content: text.into(),
                    is_error,
                })],
            )
        };
        let request = ChatRequest {
            messages: vec![
                Message::text(Role::System, "You are terse."),
                Message::user("Read a and b."),
                Message::new(
                    Role::Assistant,
                    vec![
                        Part::reasoning("plan"),
                        Part::Text { text: String::new() },
                        Part::ToolCall(call),
                        Part::ToolCall(other),
                    ],
                ),
                result("toolu_1", "alpha", false),
                result("toolu_2", "no such file", true),
                Message::text(Role::System, "A later note."),
                Message::new(
                    Role::User,
                    vec![Part::Image { url: "data:image/png;base64,AAAA".into(), detail: None }],
                ),
            ],
            tools: vec![ToolSpec {
                name: "Read".into(),
                description: "Reads".into(),
                parameters: json!({"type": "object"}),
            }],
            temperature: Some(0.7),
            ..ChatRequest::default()
        };
        let body = request_body("claude-sonnet-4-5", &request, 1000);
        assert_eq!(
            body,
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 1000,
                "stream": true,
                "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
                "tools": [{"name": "Read", "description": "Reads", "input_schema": {"type": "object"}}],
                "temperature": 0.7,
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Read a and b."}]},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}},
                        {"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"arguments": "not json"}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "alpha"}]},
                        {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "no such file"}], "is_error": true},
                    ]},
                    {"role": "user", "content": [{"type": "text", "text": "A later note."}]},
                    {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}, "cache_control": {"type": "ephemeral"}}]},
                ],
            })
        );
        // What Phosphor sends reads back, through the front, as the conversation it was.
        let inbound = crate::anthropic::read_request(body.to_string().as_bytes()).unwrap();
        assert_eq!(inbound.system_prompt, "You are terse.");
        assert_eq!(inbound.messages.len(), 6, "{:?}", inbound.messages);
    }

    #[test]
    fn a_clients_own_fields_pass_to_its_own_api_and_never_over_ours() {
        let client = json!({
            "model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": true,
            "messages": [{"role": "user", "content": "hi"}],
            "metadata": {"user_id": "user_abc"}, "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
            "tool_choice": {"type": "auto"}, "thinking": {"type": "enabled", "budget_tokens": 1024}
        });
        let inbound = crate::anthropic::read_request(client.to_string().as_bytes()).unwrap();
        assert_eq!(
            inbound.passed_through.keys().collect::<Vec<_>>(),
            ["metadata", "context_management", "thinking", "tool_choice"],
        );
        let mut fields = inbound.passed_through.clone();
        fields.insert("max_tokens".into(), json!(1));
        let passthrough = phosphor_base::Passthrough {
            api: phosphor_base::config::Api::Anthropic,
            fields,
            headers: vec![],
        };
        let tool = ToolSpec {
            name: "Read".into(),
            description: "Reads".into(),
            parameters: json!({"type": "object"}),
        };
        let request = ChatRequest {
            messages: inbound.messages.clone(),
            tools: vec![tool],
            passthrough: Some(passthrough.clone()),
            ..ChatRequest::default()
        };
        let body = request_body("claude-sonnet-4-5", &request, 1000);
        assert_eq!(body["metadata"], json!({"user_id": "user_abc"}));
        assert_eq!(body["context_management"]["edits"][0]["type"], "clear_tool_uses_20250919");
        assert_eq!(body["tool_choice"], json!({"type": "auto"}));
        assert_eq!(body["max_tokens"], 1000, "a field Phosphor writes stays Phosphor's");
        assert!(body.get("thinking").is_none(), "a 1,024-token budget does not fit under 1,000");
        // Without tools the tool choice would be refused; for another API nothing passes.
        let bare = ChatRequest { tools: vec![], ..request.clone() };
        assert!(request_body("m", &bare, 10).get("tool_choice").is_none());
        let other = ChatRequest {
            passthrough: Some(phosphor_base::Passthrough {
                api: phosphor_base::config::Api::Responses,
                ..passthrough
            }),
            ..request
        };
        assert!(request_body("m", &other, 10).get("metadata").is_none());
    }
}
