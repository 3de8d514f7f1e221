//! OpenAI Responses (`POST /v1/responses`), stateless, as Codex CLI speaks it (`store: false`,
//! the whole conversation in `input` every time): [`read_request`] reads a request into an
//! [`Inbound`], [`whole`] writes an answer as a `response` object, [`Stream`] as the
//! `response.created` ... `response.completed` events, [`error_body`] an error.
//!
//! # Mapping
//!
//! | Responses input item                                  | Phosphor                                       |
//! |-------------------------------------------------------|------------------------------------------------|
//! | `instructions`, leading `system` / `developer` messages | [`Inbound::system_prompt`], joined            |
//! | a later `system` / `developer` message                | a system [`Message`] where it stands           |
//! | `message` (`input_text`, `output_text`, `input_image`, `refusal` parts; or a string) | a user or assistant [`Message`] |
//! | `reasoning` (its `summary` texts, `encrypted_content`) | [`Part::Reasoning`], the encrypted content as its [`Seal`] |
//! | `function_call` (`call_id`, `name`, `arguments`)       | [`Part::ToolCall`] with the `call_id` as its id |
//! | `function_call_output` (`call_id`, `output`)           | a tool [`Message`]                             |
//! | tools of `"type": "function"`                          | [`Inbound::tools`]; hosted and namespaced tools are left out |
//!
//! Consecutive assistant-side items (reasoning, an assistant message, function calls) read as one
//! assistant message, as chat completions has them. `previous_response_id` is refused with a 400:
//! this server keeps no responses by id, the client sends the whole conversation.

pub mod upstream;

use std::collections::HashMap;

use phosphor_base::config::Api;
use phosphor_base::{Message, Part, Role, Seal, ToolCall, ToolResult, ToolSpec};
use serde_json::{Value, json};

use crate::inbound::{
    Answer, Delta, Failure, Inbound, Meta, WireError, Writer, arguments_text, join, object, opt_bool,
    opt_number, opt_positive, opt_str, req_str, sse,
};

/// The input item types this server reads.
const ITEM_TYPES: &str = "message, function_call, function_call_output, reasoning";

/// The fields of a Responses request that reach a Responses upstream as the client sent them: the
/// reasoning effort and summary, what to include (Codex asks for `reasoning.encrypted_content`),
/// the text verbosity, the tool choice, ... Phosphor writes `store`, `prompt_cache_key`,
/// `instructions` and `input` itself.
pub const PASSED_THROUGH: &[&str] = &[
    "reasoning",
    "include",
    "text",
    "tool_choice",
    "parallel_tool_calls",
    "service_tier",
    "top_p",
    "metadata",
];

/// Reads a Responses request body.
pub fn read_request(bytes: &[u8]) -> Result<Inbound, WireError> {
    let body = object(bytes)?;
    if let Some(id) = opt_str(&body, "previous_response_id", "")? {
        return Err(WireError::new(format!(
            "`previous_response_id` is {id:?}: this server keeps no responses by id; send the whole conversation \
             in `input` (with `store: false`, as Codex CLI does)"
        )));
    }
    let mut system_prompt = opt_str(&body, "instructions", "")?.unwrap_or("").to_owned();
    let mut messages: Vec<Message> = Vec::new();
    match body.get("input") {
        Some(Value::String(text)) => messages.push(Message::user(text.clone())),
        Some(Value::Array(items)) => {
            let mut names = HashMap::new();
            for (index, item) in items.iter().enumerate() {
                read_item(item, &format!("input[{index}]"), &mut names, &mut messages)?;
            }
        }
        Some(other) => return Err(WireError::at("input", other, "a string or an array of input items")),
        None => return Err(WireError::missing("input", "a string or an array of input items")),
    }
    let leading = messages.iter().take_while(|m| m.role == Role::System).count();
    for message in messages.drain(..leading) {
        let text = message.text_content();
        if !text.is_empty() {
            if !system_prompt.is_empty() {
                system_prompt.push_str("\n\n");
            }
            system_prompt.push_str(&text);
        }
    }
    if messages.is_empty() {
        return Err(WireError::new("`input` holds no user message: send at least one"));
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
    Ok(Inbound {
        model: opt_str(&body, "model", "")?.map(str::to_owned),
        system_prompt,
        tools,
        messages,
        max_output_tokens: opt_positive(&body, "max_output_tokens")?,
        temperature: opt_number(&body, "temperature", 0.0..=2.0)?,
        stream: opt_bool(&body, "stream")?,
        conversation_key: opt_str(&body, "prompt_cache_key", "")?.map(str::to_owned),
        show_reasoning: false,
        stream_usage: true,
        passed_through: crate::inbound::passed_through(&body, PASSED_THROUGH),
    })
}

/// The assistant message the next assistant-side item joins: the last message when it is an
/// assistant message, else a new one.
fn assistant(out: &mut Vec<Message>) -> &mut Message {
    if out.last().is_none_or(|m| m.role != Role::Assistant) {
        out.push(Message::new(Role::Assistant, Vec::new()));
    }
    let last = out.len() - 1;
    &mut out[last]
}

fn read_item(
    value: &Value,
    at: &str,
    names: &mut HashMap<String, String>,
    out: &mut Vec<Message>,
) -> Result<(), WireError> {
    let Value::Object(item) = value else { return Err(WireError::at(at, value, "an input item object")) };
    // An item with a role and no type is a message ("easy input message").
    let kind = match opt_str(item, "type", at)? {
        Some(kind) => kind,
        None if item.contains_key("role") => "message",
        None => return Err(WireError::missing(&join(at, "type"), ITEM_TYPES)),
    };
    match kind {
        "message" => {
            let role = match req_str(item, "role", at)? {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                "system" | "developer" => Role::System,
                other => {
                    return Err(WireError::new(format!(
                        "`{at}.role` is {other:?}; expected \"user\", \"assistant\", \"system\" or \"developer\""
                    )));
                }
            };
            let parts = content(item.get("content"), &join(at, "content"))?;
            // An assistant message that follows reasoning joins it; one after a tool call starts anew.
            let joins = role == Role::Assistant
                && out.last().is_some_and(|m| m.role == Role::Assistant && m.tool_calls().next().is_none());
            if joins {
                assistant(out).parts.extend(parts);
            } else {
                out.push(Message::new(role, parts));
            }
        }
        "reasoning" => {
            let mut texts = Vec::new();
            if let Some(Value::Array(summary)) = item.get("summary") {
                for (index, part) in summary.iter().enumerate() {
                    let at = format!("{at}.summary[{index}]");
                    let Value::Object(part) = part else {
                        return Err(WireError::at(&at, part, "a summary_text part"));
                    };
                    texts.push(req_str(part, "text", &at)?);
                }
            }
            let text = join_summary(&texts);
            let encrypted = opt_str(item, "encrypted_content", at)?.filter(|data| !data.is_empty());
            let seal = encrypted.map(|data| Seal::new(Api::Responses, data));
            if !text.is_empty() || seal.is_some() {
                let message = assistant(out);
                message.parts.push(Part::Reasoning { text, seal });
            } else if out.last().is_none_or(|m| m.role != Role::Assistant) {
                // Reasoning with nothing readable (encrypted only) still opens the assistant turn.
                out.push(Message::new(Role::Assistant, Vec::new()));
            }
        }
        "function_call" => {
            let call_id = req_str(item, "call_id", at)?.to_owned();
            let name = req_str(item, "name", at)?.to_owned();
            let arguments = match item.get("arguments") {
                None | Some(Value::Null) => String::new(),
                Some(value) => arguments_text(value),
            };
            names.insert(call_id.clone(), name.clone());
            assistant(out).parts.push(Part::ToolCall(ToolCall { id: call_id, name, arguments }));
        }
        "function_call_output" => {
            let call_id = req_str(item, "call_id", at)?.to_owned();
            let Some(name) = names.get(&call_id).cloned() else {
                return Err(WireError::new(format!(
                    "`{at}.call_id` is {call_id:?}, but no earlier function_call has this call_id: every \
                     function_call_output answers a function_call"
                )));
            };
            let (text, images) = match item.get("output") {
                Some(Value::String(text)) => (text.clone(), Vec::new()),
                Some(Value::Array(_)) => {
                    let parts = content(item.get("output"), &join(at, "output"))?;
                    let mut text = String::new();
                    let mut images = Vec::new();
                    for part in parts {
                        match part {
                            Part::Text { text: t } => text.push_str(&t),
                            image => images.push(image),
                        }
                    }
                    (text, images)
                }
                Some(other) => {
                    return Err(WireError::at(&join(at, "output"), other, "a string or an array of parts"));
                }
                None => return Err(WireError::missing(&join(at, "output"), "a string or an array of parts")),
            };
            let mut parts =
                vec![Part::ToolResult(ToolResult { call_id, name, content: text, is_error: false })];
            parts.extend(images);
            out.push(Message::new(Role::Tool, parts));
        }
        other => {
            return Err(WireError::new(format!(
                "`{at}.type` is {other:?}; this server reads the input item types {ITEM_TYPES}"
            )));
        }
    }
    Ok(())
}

/// A message's content: a string, or `input_text` / `output_text` / `input_image` / `refusal` parts.
fn content(value: Option<&Value>, at: &str) -> Result<Vec<Part>, WireError> {
    match value {
        Some(Value::String(text)) => Ok(vec![Part::Text { text: text.clone() }]),
        Some(Value::Array(parts)) => {
            let mut out: Vec<Part> = Vec::new();
            for (index, part) in parts.iter().enumerate() {
                let at = format!("{at}[{index}]");
                let Value::Object(part) = part else {
                    return Err(WireError::at(&at, part, "a content part"));
                };
                match req_str(part, "type", &at)? {
                    "input_text" | "output_text" | "text" => {
                        let text = req_str(part, "text", &at)?;
                        match out.last_mut() {
                            Some(Part::Text { text: last }) => {
                                last.push_str("\n\n");
                                last.push_str(text);
                            }
                            _ => out.push(Part::Text { text: text.to_owned() }),
                        }
                    }
                    "refusal" => out.push(Part::Text { text: req_str(part, "refusal", &at)?.to_owned() }),
                    "input_image" => {
                        let url = req_str(part, "image_url", &at)?.to_owned();
                        let detail = opt_str(part, "detail", &at)?.map(str::to_owned);
                        out.push(Part::Image { url, detail });
                    }
                    other => {
                        return Err(WireError::new(format!(
                            "`{at}.type` is {other:?}; allowed: input_text, output_text, input_image, refusal"
                        )));
                    }
                }
            }
            Ok(out)
        }
        Some(other) => Err(WireError::at(at, other, "a string or an array of content parts")),
        None => Err(WireError::missing(at, "a string or an array of content parts")),
    }
}

/// A function tool, or `None` for hosted tools (`web_search`, `file_search`, ...) and namespaces,
/// which a chat-completions model cannot call.
fn tool_spec(tool: &Value, at: &str) -> Result<Option<ToolSpec>, WireError> {
    let Value::Object(tool) = tool else { return Err(WireError::at(at, tool, "a tool object")) };
    if req_str(tool, "type", at)? != "function" {
        tracing::debug!(tool = ?tool.get("type"), "a hosted Responses tool is left out of the upstream request");
        return Ok(None);
    }
    let name = req_str(tool, "name", at)?;
    if name.is_empty() {
        return Err(WireError::new(format!("`{at}.name` is empty")));
    }
    Ok(Some(ToolSpec {
        name: name.to_owned(),
        description: opt_str(tool, "description", at)?.unwrap_or("").to_owned(),
        parameters: tool
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    }))
}

/// The item id of the answer's `n`th output item.
fn item_id(meta: &Meta, prefix: &str, n: usize) -> String {
    let stem = meta.id.strip_prefix("resp_").unwrap_or(&meta.id);
    format!("{prefix}_{stem}{n}")
}

fn usage(answer: &Answer<'_>) -> Value {
    let usage = answer.usage;
    json!({
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    })
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    let content = if status == "completed" {
        json!([{"type": "output_text", "text": text, "annotations": []}])
    } else {
        json!([])
    };
    json!({"type": "message", "id": id, "status": status, "role": "assistant", "content": content})
}

/// A reasoning item: its text as one summary part (none when empty), its encrypted content, and
/// an `id` in an answer (input items go without one: with `store: false` there is nothing to
/// refer to).
pub(crate) fn reasoning_item(id: Option<&str>, text: &str, encrypted: &str) -> Value {
    let summary: Vec<Value> =
        (!text.is_empty()).then(|| json!({"type": "summary_text", "text": text})).into_iter().collect();
    let mut item = json!({"type": "reasoning", "summary": summary, "encrypted_content": encrypted});
    if let Some(id) = id {
        item["id"] = json!(id);
    }
    item
}

/// A reasoning item's summary texts as one reasoning text, joined with blank lines as the
/// request reader joins them, read leniently: parts without a text are passed over.
pub fn summary_text(item: &Value) -> String {
    let texts: Vec<&str> =
        item["summary"].as_array().into_iter().flatten().filter_map(|part| part["text"].as_str()).collect();
    join_summary(&texts)
}

/// The parts of a reasoning summary joined with blank lines: how Phosphor reads a summary of
/// several parts, and the text its encrypted content seals.
fn join_summary(texts: &[&str]) -> String {
    texts.join("\n\n")
}

/// The reasoning parts of `message` a Responses provider sealed, with their encrypted content.
pub(crate) fn sealed_reasoning(message: &Message) -> impl Iterator<Item = (&str, &str)> {
    message.parts.iter().filter_map(|part| match (part, part.seal_for(Api::Responses)) {
        (Part::Reasoning { text, .. }, Some(seal)) => Some((text.as_str(), seal.data.as_str())),
        _ => None,
    })
}

fn call_item(id: &str, call: &ToolCall, arguments: &str, status: &str) -> Value {
    json!({
        "type": "function_call",
        "id": id,
        "call_id": call.id,
        "name": call.name,
        "arguments": arguments,
        "status": status,
    })
}

/// The `response` object around `output`.
fn response(meta: &Meta, status: &str, output: Vec<Value>, answer: Option<&Answer<'_>>) -> Value {
    let mut response = json!({
        "id": meta.id,
        "object": "response",
        "created_at": meta.created,
        "status": status,
        "model": meta.model,
        "output": output,
        "error": null,
        "incomplete_details": null,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "store": false,
        "usage": null,
    });
    if let Some(answer) = answer {
        response["usage"] = usage(answer);
        if answer.truncated() {
            response["status"] = json!("incomplete");
            response["incomplete_details"] = json!({"reason": "max_output_tokens"});
        }
    }
    response
}

/// The answer as a `response` object.
pub fn whole(meta: &Meta, answer: &Answer<'_>) -> Value {
    let mut output = Vec::new();
    for (text, encrypted) in sealed_reasoning(answer.message) {
        output.push(reasoning_item(Some(&item_id(meta, "rs", output.len())), text, encrypted));
    }
    let text = answer.message.text_content();
    if !text.is_empty() {
        output.push(message_item(&item_id(meta, "msg", output.len()), &text, "completed"));
    }
    for call in answer.message.tool_calls() {
        output.push(call_item(&item_id(meta, "fc", output.len()), call, &call.arguments, "completed"));
    }
    response(meta, "completed", output, Some(answer))
}

/// An error as OpenAI shapes it: `{"error": {"message", "type", "param", "code"}}`.
pub fn error_body(failure: &Failure) -> Value {
    json!({"error": failure.openai_error()})
}

/// The answer as the Responses stream events, each with its `sequence_number`.
#[derive(Debug)]
pub struct Stream {
    meta: Meta,
    sequence: u64,
    /// Output items written so far (done).
    output: Vec<Value>,
    /// The text message item open now: its id and text.
    text: Option<(String, String)>,
    /// Reasoning text since the last seal: the summary of the reasoning item the next seal closes.
    reasoning: String,
}

impl Stream {
    /// A stream for the answer `meta` describes.
    pub fn new(meta: Meta) -> Stream {
        Stream { meta, sequence: 0, output: Vec::new(), text: None, reasoning: String::new() }
    }

    fn event(&mut self, kind: &str, mut data: Value) -> String {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        sse(kind, &data)
    }

    fn close_text(&mut self, out: &mut Vec<String>) {
        let Some((id, text)) = self.text.take() else { return };
        let index = self.output.len();
        let part = json!({"type": "output_text", "text": text, "annotations": []});
        out.push(self.event(
            "response.output_text.done",
            json!({"item_id": id, "output_index": index, "content_index": 0, "text": text}),
        ));
        out.push(self.event(
            "response.content_part.done",
            json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
        ));
        let item = message_item(&id, &text, "completed");
        out.push(self.event("response.output_item.done", json!({"output_index": index, "item": item})));
        self.output.push(item);
    }
}

impl Writer for Stream {
    fn begin(&mut self) -> Vec<String> {
        let response = response(&self.meta, "in_progress", Vec::new(), None);
        vec![
            self.event("response.created", json!({"response": response})),
            self.event("response.in_progress", json!({"response": response})),
        ]
    }

    fn delta(&mut self, delta: Delta<'_>) -> Vec<String> {
        let mut out = Vec::new();
        match delta {
            Delta::Text(text) if !text.is_empty() => {
                let index = self.output.len();
                if self.text.is_none() {
                    let id = item_id(&self.meta, "msg", index);
                    let item = message_item(&id, "", "in_progress");
                    out.push(
                        self.event(
                            "response.output_item.added",
                            json!({"output_index": index, "item": item}),
                        ),
                    );
                    let part = json!({"type": "output_text", "text": "", "annotations": []});
                    out.push(self.event(
                        "response.content_part.added",
                        json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
                    ));
                    self.text = Some((id, String::new()));
                }
                let id = self.text.as_ref().map(|(id, _)| id.clone()).unwrap_or_default();
                if let Some((_, all)) = self.text.as_mut() {
                    all.push_str(text);
                }
                out.push(self.event(
                    "response.output_text.delta",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text}),
                ));
            }
            Delta::Reasoning(text) => self.reasoning.push_str(text),
            Delta::Seal(seal) if seal.api == Api::Responses => {
                self.close_text(&mut out);
                let index = self.output.len();
                let id = item_id(&self.meta, "rs", index);
                let added = json!({"type": "reasoning", "id": id, "summary": []});
                out.push(
                    self.event("response.output_item.added", json!({"output_index": index, "item": added})),
                );
                let text = std::mem::take(&mut self.reasoning);
                if !text.is_empty() {
                    // The summary as OpenAI streams it: one part, its text, done.
                    let at = json!({"item_id": id, "output_index": index, "summary_index": 0});
                    let part = json!({"type": "summary_text", "text": text});
                    let with = |mut value: Value, key: &str, field: Value| {
                        value[key] = field;
                        value
                    };
                    let empty = json!({"type": "summary_text", "text": ""});
                    out.push(
                        self.event("response.reasoning_summary_part.added", with(at.clone(), "part", empty)),
                    );
                    out.push(self.event(
                        "response.reasoning_summary_text.delta",
                        with(at.clone(), "delta", json!(text)),
                    ));
                    out.push(self.event(
                        "response.reasoning_summary_text.done",
                        with(at.clone(), "text", json!(text)),
                    ));
                    out.push(self.event("response.reasoning_summary_part.done", with(at, "part", part)));
                }
                let item = reasoning_item(Some(&id), &text, &seal.data);
                out.push(
                    self.event("response.output_item.done", json!({"output_index": index, "item": item})),
                );
                self.output.push(item);
            }
            Delta::ToolCall(call) => {
                self.close_text(&mut out);
                let index = self.output.len();
                let id = item_id(&self.meta, "fc", index);
                out.push(self.event(
                    "response.output_item.added",
                    json!({"output_index": index, "item": call_item(&id, call, "", "in_progress")}),
                ));
                out.push(self.event(
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": index, "delta": call.arguments}),
                ));
                out.push(self.event(
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": index, "arguments": call.arguments}),
                ));
                let item = call_item(&id, call, &call.arguments, "completed");
                out.push(
                    self.event("response.output_item.done", json!({"output_index": index, "item": item})),
                );
                self.output.push(item);
            }
            _ => {}
        }
        out
    }

    fn end(&mut self, answer: &Answer<'_>) -> Vec<String> {
        let mut out = Vec::new();
        self.close_text(&mut out);
        let response = response(&self.meta, "completed", self.output.clone(), Some(answer));
        let kind =
            if response["status"] == "incomplete" { "response.incomplete" } else { "response.completed" };
        out.push(self.event(kind, json!({"response": response})));
        out
    }

    fn fail(&mut self, failure: &Failure) -> Vec<String> {
        let mut response = response(&self.meta, "failed", self.output.clone(), None);
        let code = failure.openai_code().unwrap_or(if failure.status >= 500 {
            "server_error"
        } else {
            "invalid_request"
        });
        response["error"] = json!({"code": code, "message": failure.message});
        vec![self.event("response.failed", json!({"response": response}))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FailureKind;
    use phosphor_base::{FinishReason, Usage};
    use pretty_assertions::assert_eq;

    fn read(body: Value) -> Result<Inbound, WireError> {
        read_request(body.to_string().as_bytes())
    }

    #[test]
    fn reads_what_codex_sends() {
        let inbound = read(json!({
            "model": "gpt-5-codex",
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "0199-session",
            "reasoning": {"summary": "auto"},
            "tool_choice": "auto",
            "parallel_tool_calls": false,
            "tools": [
                {"type": "function", "name": "exec_command", "description": "Runs a command", "strict": false,
                 "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
                {"type": "web_search"},
                {"type": "namespace", "name": "multi_agent_v1", "tools": []},
            ],
            "input": [
                {"type": "message", "id": "m0", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<env/>"}, {"type": "input_text", "text": "list files"}]},
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Run ls."}], "encrypted_content": "gAAA"},
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "One file."}]},
                {"role": "user", "content": "thanks"},
            ],
        }))
        .unwrap();
        assert_eq!(inbound.system_prompt, "You are Codex.");
        assert_eq!(inbound.conversation_key.as_deref(), Some("0199-session"));
        assert_eq!(inbound.tools.len(), 1);
        let roles: Vec<Role> = inbound.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::Assistant, Role::User]);
        assert_eq!(inbound.messages[0].text_content(), "<env/>\n\nlist files");
        assert_eq!(
            inbound.messages[1].parts,
            vec![
                Part::Reasoning {
                    text: "Run ls.".into(),
                    seal: Some(Seal { api: Api::Responses, data: "gAAA".into(), redacted: false }),
                },
                Part::ToolCall(ToolCall {
                    id: "call_1".into(),
                    name: "exec_command".into(),
                    arguments: "{\"cmd\":\"ls\"}".into()
                }),
            ]
        );
        assert_eq!(inbound.messages[2].tool_results().next().unwrap().name, "exec_command");
    }

    #[test]
    fn bad_requests_say_where_and_what_is_allowed() {
        let error = |body: Value| read(body).unwrap_err().message;
        assert!(error(json!({"model": "m"})).contains("`input` is missing"));
        assert!(
            error(json!({"input": "hi", "previous_response_id": "resp_1"})).contains("keeps no responses")
        );
        let odd = error(json!({"input": [{"type": "local_shell_call"}]}));
        assert!(odd.contains("`input[0].type`") && odd.contains(ITEM_TYPES), "{odd}");
        let orphan =
            error(json!({"input": [{"type": "function_call_output", "call_id": "call_9", "output": "x"}]}));
        assert!(orphan.contains("call_9"), "{orphan}");
        assert!(error(json!({"input": "hi", "max_output_tokens": "many"})).contains("max_output_tokens"));
        assert!(
            error(json!({"input": [{"role": "developer", "content": "only rules"}]}))
                .contains("no user message")
        );
    }

    #[test]
    fn answers_whole_and_streamed_carry_the_same_items() {
        let meta = Meta {
            id: "resp_abc".into(),
            model: "m".into(),
            created: 7,
            stream_usage: true,
            show_reasoning: false,
        };
        let call = ToolCall {
            id: "call_2".into(),
            name: "exec_command".into(),
            arguments: "{\"cmd\":\"cat a.txt\"}".into(),
        };
        let message = Message::new(
            Role::Assistant,
            vec![Part::Text { text: "Reading.".into() }, Part::ToolCall(call.clone())],
        );
        let usage =
            Usage { input_tokens: 50, output_tokens: 5, cached_input_tokens: 40, reasoning_tokens: 0 };
        let answer = Answer { message: &message, usage, finish_reason: Some(&FinishReason::ToolCalls) };
        let body = whole(&meta, &answer);
        assert_eq!(body["output"][1]["call_id"], "call_2");
        assert!(body["output"][1]["id"].as_str().unwrap().starts_with("fc_"));
        assert_eq!(body["usage"]["input_tokens_details"]["cached_tokens"], 40);

        let mut stream = Stream::new(meta.clone());
        let mut frames = stream.begin();
        frames.extend(stream.delta(Delta::Text("Read")));
        frames.extend(stream.delta(Delta::Text("ing.")));
        frames.extend(stream.delta(Delta::ToolCall(&call)));
        frames.extend(stream.end(&answer));
        let data: Vec<Value> = frames
            .iter()
            .map(|f| serde_json::from_str(f.lines().nth(1).unwrap().trim_start_matches("data: ")).unwrap())
            .collect();
        let sequence: Vec<u64> = data.iter().map(|d| d["sequence_number"].as_u64().unwrap()).collect();
        assert_eq!(sequence, (0..data.len() as u64).collect::<Vec<_>>());
        let last = data.last().unwrap();
        assert_eq!(last["type"], "response.completed");
        assert_eq!(last["response"]["output"], body["output"], "the stream's items are the whole answer's");

        let failed = Stream::new(meta).fail(&Failure::new(
            400,
            FailureKind::ContextTooLong { tokens: None, window: None },
            "too long",
        ));
        assert!(failed[0].contains("context_length_exceeded"));
    }

    #[test]
    fn sealed_reasoning_is_an_output_item_whole_and_streamed() {
        let seal = Seal { api: Api::Responses, data: "gAAAAB".into(), redacted: false };
        let meta = Meta {
            id: "resp_1".into(),
            model: "m".into(),
            created: 0,
            stream_usage: true,
            show_reasoning: false,
        };
        let message = Message::new(
            Role::Assistant,
            vec![
                Part::Reasoning { text: "Think.".into(), seal: Some(seal.clone()) },
                Part::Text { text: "Done.".into() },
            ],
        );
        let answer = Answer { message: &message, usage: Default::default(), finish_reason: None };
        let body = whole(&meta, &answer);
        assert_eq!(
            body["output"][0],
            json!({"type": "reasoning", "id": "rs_10", "summary": [{"type": "summary_text", "text": "Think."}], "encrypted_content": "gAAAAB"})
        );
        assert_eq!(body["output"][1]["type"], "message");

        let mut stream = Stream::new(meta);
        let mut frames = stream.delta(Delta::Reasoning("Think."));
        assert!(frames.is_empty(), "reasoning waits for its seal");
        frames.extend(stream.delta(Delta::Seal(&seal)));
        let anthropic = Seal { api: Api::Anthropic, data: "sig".into(), redacted: false };
        frames.extend(stream.delta(Delta::Seal(&anthropic)));
        let events: Vec<&str> =
            frames.iter().map(|f| f.lines().next().unwrap().trim_start_matches("event: ")).collect();
        assert_eq!(
            events,
            [
                "response.output_item.added",
                "response.reasoning_summary_part.added",
                "response.reasoning_summary_text.delta",
                "response.reasoning_summary_text.done",
                "response.reasoning_summary_part.done",
                "response.output_item.done",
            ]
        );
        assert!(frames[2].contains(r#""delta":"Think.""#), "{}", frames[2]);
        assert!(
            frames[5].contains(r#""encrypted_content":"gAAAAB""#) && frames[5].contains("Think."),
            "{}",
            frames[5]
        );
        // What Codex reads back from the answer, it sends next time: the seal survives the trip.
        let done: Value =
            serde_json::from_str(frames[5].lines().nth(1).unwrap().trim_start_matches("data: ")).unwrap();
        let next = json!({"input": [
            {"type": "message", "role": "user", "content": "go"},
            done["item"],
            {"type": "message", "role": "user", "content": "again"},
        ]});
        let inbound = read_request(next.to_string().as_bytes()).unwrap();
        assert_eq!(inbound.messages[1].parts[0], Part::Reasoning { text: "Think.".into(), seal: Some(seal) });
    }
}
