//! OpenAI Responses as an upstream speaks it: [`request_body`] writes what Phosphor sends
//! (`POST {base_url}/responses`, stateless: `store: false` and the whole conversation in
//! `input`), [`Reader`] reads the streamed answer.
//!
//! # What is sent
//!
//! | Phosphor                          | Responses input item                                      |
//! |-----------------------------------|-----------------------------------------------------------|
//! | leading system messages           | `instructions`                                            |
//! | a later system message            | a `developer` message                                     |
//! | a user message                    | a `user` message of `input_text` / `input_image` parts    |
//! | an assistant message's text       | an `assistant` message of one `output_text` part          |
//! | [`Part::ToolCall`]                | a `function_call` (`call_id`, `name`, `arguments`)        |
//! | a tool message                    | a `function_call_output` (`call_id`, `output`)            |
//! | [`Part::Reasoning`] sealed by Responses | a `reasoning` item (summary, `encrypted_content`), before the message's other items |
//! | other [`Part::Reasoning`]         | nothing: a reasoning item goes back only with its `encrypted_content` |
//!
//! `prompt_cache_key` is the request's conversation (the stored session): OpenAI routes requests
//! with one key to one cache.

use phosphor_base::config::Api;
use phosphor_base::{ChatRequest, FinishReason, Message, Part, Role, Seal, StreamEvent, ToolCall, Usage};
use serde_json::{Value, json};

use crate::sse::Event;
use crate::upstream::{ReadError, Tally, data};

/// The body of a streamed, stateless Responses request for `model`, answering in at most
/// `max_output_tokens`, with the fields a Responses client passed through
/// (`ChatRequest::passthrough`) where Phosphor writes none of its own.
pub fn request_body(model: &str, request: &ChatRequest, max_output_tokens: u64) -> Value {
    let leading = request.messages.iter().take_while(|m| m.role == Role::System).count();
    let instructions: Vec<String> = request.messages[..leading]
        .iter()
        .map(Message::text_content)
        .filter(|text| !text.is_empty())
        .collect();
    let mut input = Vec::new();
    for message in &request.messages[leading..] {
        items(message, &mut input);
    }
    let mut body = json!({
        "model": model,
        "input": input,
        "stream": true,
        "store": false,
        "max_output_tokens": max_output_tokens,
    });
    if !instructions.is_empty() {
        body["instructions"] = json!(instructions.join("\n\n"));
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({"type": "function", "name": tool.name, "description": tool.description, "parameters": tool.parameters})
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    if let Some(temperature) = request.temperature {
        let value: f64 = temperature.to_string().parse().unwrap_or(f64::from(temperature));
        body["temperature"] = json!(value);
    }
    if let Some(key) = &request.conversation_id {
        body["prompt_cache_key"] = json!(key);
    }
    phosphor_base::Passthrough::merge_into(request.passthrough.as_ref(), Api::Responses, &mut body);
    body
}

fn message_item(role: &str, content: Vec<Value>) -> Value {
    json!({"type": "message", "role": role, "content": content})
}

/// The input items of one message.
fn items(message: &Message, out: &mut Vec<Value>) {
    match message.role {
        Role::User | Role::System => {
            let content: Vec<Value> = message
                .parts
                .iter()
                .filter_map(|part| match part {
                    Part::Text { text } if !text.is_empty() => {
                        Some(json!({"type": "input_text", "text": text}))
                    }
                    Part::Image { url, detail } => Some(json!({
                        "type": "input_image",
                        "image_url": url,
                        "detail": detail.as_deref().unwrap_or("auto"),
                    })),
                    _ => None,
                })
                .collect();
            if !content.is_empty() {
                let role = if message.role == Role::System { "developer" } else { "user" };
                out.push(message_item(role, content));
            }
        }
        Role::Assistant => {
            for (text, encrypted) in crate::responses::sealed_reasoning(message) {
                out.push(crate::responses::reasoning_item(None, text, encrypted));
            }
            let text = message.text_content();
            if !text.is_empty() {
                out.push(message_item("assistant", vec![json!({"type": "output_text", "text": text})]));
            }
            for call in message.tool_calls() {
                out.push(json!({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments}));
            }
        }
        Role::Tool => {
            for part in &message.parts {
                if let Part::ToolResult(result) = part {
                    out.push(json!({"type": "function_call_output", "call_id": result.call_id, "output": result.content}));
                }
            }
        }
    }
}

/// Reads the Responses stream: text and reasoning deltas as they come, each `function_call`
/// when its `response.output_item.done` arrives, usage and status from `response.completed`
/// (or `response.incomplete`); `response.failed` and `error` end it with the provider's error.
#[derive(Debug, Default)]
pub struct Reader {
    tally: Tally,
    /// Whether reasoning text streamed since the last reasoning item ended.
    reasoned: bool,
}

fn count(value: Option<&Value>, key: &str) -> u64 {
    value.and_then(|v| v.get(key)).and_then(Value::as_u64).unwrap_or(0)
}

impl Reader {
    fn ended(&mut self, response: &Value) {
        if let Some(usage) = response.get("usage").filter(|u| u.is_object()) {
            self.tally.usage = Some(Usage {
                input_tokens: count(Some(usage), "input_tokens"),
                output_tokens: count(Some(usage), "output_tokens"),
                cached_input_tokens: count(usage.get("input_tokens_details"), "cached_tokens"),
                reasoning_tokens: count(usage.get("output_tokens_details"), "reasoning_tokens"),
            });
        }
        let incomplete = response.pointer("/incomplete_details/reason").and_then(Value::as_str);
        self.tally.finish = Some(match incomplete {
            Some("max_output_tokens") => FinishReason::Length,
            Some("content_filter") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_owned()),
            None => FinishReason::Stop,
        });
    }
}

impl crate::upstream::Reader for Reader {
    fn event(&mut self, event: &Event) -> Result<Vec<StreamEvent>, ReadError> {
        let value = data(event)?;
        let kind = value.get("type").and_then(Value::as_str).unwrap_or(event.name.as_str());
        let delta = || value.get("delta").and_then(Value::as_str).unwrap_or("").to_owned();
        let mut out = Vec::new();
        match kind {
            "response.output_text.delta" | "response.refusal.delta" => {
                let text = delta();
                if !text.is_empty() {
                    self.tally.wrote(&text);
                    out.push(StreamEvent::TextDelta { text });
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let text = delta();
                if !text.is_empty() {
                    self.tally.wrote(&text);
                    self.reasoned = true;
                    out.push(StreamEvent::ReasoningDelta { text });
                }
            }
            "response.output_item.done" => {
                let item = value.get("item").cloned().unwrap_or(Value::Null);
                let encrypted =
                    item.get("encrypted_content").and_then(Value::as_str).filter(|d| !d.is_empty());
                if item.get("type").and_then(Value::as_str) == Some("reasoning") {
                    // A server that streamed no summary deltas has the summary here, whole.
                    if !std::mem::take(&mut self.reasoned) {
                        let text = crate::responses::summary_text(&item);
                        if !text.is_empty() {
                            self.tally.wrote(&text);
                            out.push(StreamEvent::ReasoningDelta { text });
                        }
                    }
                    // The encrypted content seals the reasoning of this item.
                    if let Some(data) = encrypted {
                        out.push(StreamEvent::ReasoningSeal(Seal::new(Api::Responses, data)));
                    }
                }
                if item.get("type").and_then(Value::as_str) == Some("function_call") {
                    let field = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
                    let (id, name) = (field("call_id"), field("name"));
                    if id.is_empty() || name.is_empty() {
                        return Err(ReadError::Malformed(format!(
                            "a function_call item without its call_id or name: {item}"
                        )));
                    }
                    let arguments = field("arguments");
                    let arguments = if arguments.trim().is_empty() { "{}".to_owned() } else { arguments };
                    self.tally.wrote(&arguments);
                    self.tally.calls += 1;
                    out.push(StreamEvent::ToolCall(ToolCall { id, name, arguments }));
                }
            }
            "response.completed" | "response.incomplete" => {
                self.ended(value.get("response").unwrap_or(&Value::Null));
            }
            "response.failed" => {
                let error = value.pointer("/response/error").cloned().unwrap_or(Value::Null);
                return Err(ReadError::Provider { status: None, body: json!({"error": error}).to_string() });
            }
            "error" => {
                // `{"type": "error", "code", "message", "param"}`, or with them under `error`.
                let error = value.get("error").cloned().unwrap_or_else(|| value.clone());
                return Err(ReadError::Provider { status: None, body: json!({"error": error}).to_string() });
            }
            _ => {}
        }
        Ok(out)
    }

    fn finish(&mut self, input_estimate: u64) -> Result<Vec<StreamEvent>, ReadError> {
        self.tally.close(input_estimate, "response.completed")
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

    /// A function-calling answer in the shape OpenAI streams it (sequence numbers, added and done
    /// items, argument deltas that the done item repeats whole).
    const CALL_STREAM: &str = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Checking."}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Checking.","annotations":[]}]}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_abc","name":"exec_command"}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_1","output_index":1,"delta":"{\"cmd\":\"ls\"}"}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","sequence_number":6,"item_id":"fc_1","output_index":1,"arguments":"{\"cmd\":\"ls\"}"}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":7,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"cmd\":\"ls\"}","call_id":"call_abc","name":"exec_command"}}

event: response.completed
data: {"type":"response.completed","sequence_number":8,"response":{"id":"resp_1","object":"response","status":"completed","incomplete_details":null,"usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":256},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":4},"total_tokens":348}}}

"#;

    #[test]
    fn reads_a_function_calling_answer() {
        assert_eq!(
            read(CALL_STREAM).unwrap(),
            vec![
                StreamEvent::TextDelta { text: "Checking.".into() },
                StreamEvent::ToolCall(ToolCall {
                    id: "call_abc".into(),
                    name: "exec_command".into(),
                    arguments: r#"{"cmd":"ls"}"#.into()
                }),
                StreamEvent::Usage(Usage {
                    input_tokens: 328,
                    output_tokens: 20,
                    cached_input_tokens: 256,
                    reasoning_tokens: 4
                }),
                StreamEvent::Finish { reason: FinishReason::ToolCalls },
            ]
        );
    }

    #[test]
    fn failed_and_cut_answers_are_errors() {
        let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model.\"}}}\n\n";
        assert_eq!(
            read(failed).unwrap_err(),
            ReadError::Provider {
                status: None,
                body: r#"{"error":{"code":"context_length_exceeded","message":"Your input exceeds the context window of this model."}}"#.into()
            }
        );
        let cut = &CALL_STREAM[..CALL_STREAM.find("event: response.completed").unwrap()];
        assert!(matches!(read(cut), Err(ReadError::Malformed(m)) if m.contains("response.completed")));
        let incomplete = "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"}}}\n\n";
        assert_eq!(
            read(incomplete).unwrap().last(),
            Some(&StreamEvent::Finish { reason: FinishReason::Length })
        );
    }

    #[test]
    fn encrypted_reasoning_is_read_sealed_and_goes_back_as_it_came() {
        let stream = r#"event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}

event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","sequence_number":2,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"List first."}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"List first."}],"encrypted_content":"gAAAAABpZ2VuY3J5cHRlZA=="}}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":4,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"cmd\":\"ls\"}","call_id":"call_abc","name":"exec_command"}}

event: response.completed
data: {"type":"response.completed","sequence_number":5,"response":{"id":"resp_1","status":"completed","usage":{"input_tokens":10,"output_tokens":5}}}

"#;
        let mut completion = phosphor_base::Completion::default();
        read(stream).unwrap().into_iter().for_each(|event| completion.apply(event));
        let answer = completion.into_message(None);
        let seal = Seal { api: Api::Responses, data: "gAAAAABpZ2VuY3J5cHRlZA==".into(), redacted: false };
        assert_eq!(answer.parts[0], Part::Reasoning { text: "List first.".into(), seal: Some(seal.clone()) });
        // A server that streams no summary deltas: the summary comes from the done item.
        let quiet: String = stream
            .split("\n\n")
            .filter(|e| !e.contains("summary_text.delta"))
            .map(|e| format!("{e}\n\n"))
            .collect();
        let mut completion = phosphor_base::Completion::default();
        read(&quiet).unwrap().into_iter().for_each(|event| completion.apply(event));
        let parts = completion.into_message(None).parts;
        assert_eq!(parts[0], Part::Reasoning { text: "List first.".into(), seal: Some(seal) });
        // Sent back: the reasoning item first, with its encrypted content and no id.
        let request = ChatRequest {
            messages: vec![Message::user("List."), answer, {
                let result = ToolResult {
                    call_id: "call_abc".into(),
                    name: "exec_command".into(),
                    content: "a".into(),
                    is_error: false,
                };
                Message::new(Role::Tool, vec![Part::ToolResult(result)])
            }],
            ..ChatRequest::default()
        };
        let body = request_body("gpt-5", &request, 100);
        assert_eq!(
            body["input"][1],
            json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "List first."}], "encrypted_content": "gAAAAABpZ2VuY3J5cHRlZA=="})
        );
        assert_eq!(body["input"][2]["type"], "function_call");
        // An Anthropic seal is not this API's: nothing of it goes.
        let theirs = ChatRequest {
            messages: vec![
                Message::user("List."),
                Message::new(
                    Role::Assistant,
                    vec![
                        Part::Reasoning {
                            text: "x".into(),
                            seal: Some(Seal { api: Api::Anthropic, data: "sig".into(), redacted: false }),
                        },
                        Part::Text { text: "ok".into() },
                    ],
                ),
            ],
            ..ChatRequest::default()
        };
        assert_eq!(request_body("gpt-5", &theirs, 100)["input"][1]["type"], "message");
    }

    #[test]
    fn writes_a_stateless_request_that_reads_back() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "exec_command".into(),
            arguments: r#"{"cmd":"ls"}"#.into(),
        };
        let request = ChatRequest {
            messages: vec![
                Message::text(Role::System, "You are Codex."),
                Message::user("List the files."),
                Message::new(
                    Role::Assistant,
                    vec![Part::reasoning("ls"), Part::Text { text: "Listing.".into() }, Part::ToolCall(call)],
                ),
                Message::new(
                    Role::Tool,
                    vec![Part::ToolResult(ToolResult {
                        call_id: "call_1".into(),
                        name: "exec_command".into(),
                        content: "a.txt".into(),
                        is_error: false,
                    })],
                ),
                Message::text(Role::System, "Be brief."),
            ],
            tools: vec![ToolSpec {
                name: "exec_command".into(),
                description: "Runs".into(),
                parameters: json!({"type": "object"}),
            }],
            conversation_id: Some("s-1".into()),
            ..ChatRequest::default()
        };
        let body = request_body("gpt-5", &request, 500);
        assert_eq!(
            body,
            json!({
                "model": "gpt-5",
                "instructions": "You are Codex.",
                "stream": true,
                "store": false,
                "max_output_tokens": 500,
                "prompt_cache_key": "s-1",
                "tools": [{"type": "function", "name": "exec_command", "description": "Runs", "parameters": {"type": "object"}}],
                "input": [
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the files."}]},
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Listing."}]},
                    {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"},
                    {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
                    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
                ],
            })
        );
        let inbound = crate::responses::read_request(body.to_string().as_bytes()).unwrap();
        assert_eq!(inbound.system_prompt, "You are Codex.");
        let roles: Vec<Role> = inbound.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::System]);
    }

    #[test]
    fn codex_s_reasoning_and_includes_pass_to_a_responses_upstream() {
        let client = json!({
            "model": "gpt-5.1-codex", "instructions": "Be brief.", "store": false, "stream": true,
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
            "reasoning": {"effort": "high", "summary": "auto"}, "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "theirs", "parallel_tool_calls": false
        });
        let inbound = crate::responses::read_request(client.to_string().as_bytes()).unwrap();
        assert_eq!(
            inbound.passed_through.keys().collect::<Vec<_>>(),
            ["reasoning", "include", "parallel_tool_calls"]
        );
        let request = ChatRequest {
            messages: inbound.messages.clone(),
            conversation_id: Some("ours".into()),
            passthrough: Some(phosphor_base::Passthrough {
                api: phosphor_base::config::Api::Responses,
                fields: inbound.passed_through,
                headers: vec![],
            }),
            ..ChatRequest::default()
        };
        let body = request_body("gpt-5.1-codex", &request, 1000);
        assert_eq!(body["reasoning"], json!({"effort": "high", "summary": "auto"}));
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["prompt_cache_key"], "ours");
        assert_eq!(body["store"], false);
        assert!(body.get("parallel_tool_calls").is_none(), "no tools, no parallel tool calls");
    }
}
