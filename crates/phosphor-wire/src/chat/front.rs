//! The chat-completions front of `phosphor serve`: `POST /v1/chat/completions` read into an
//! [`Inbound`], and answered as a `chat.completion` or a stream of `chat.completion.chunk`s.

use phosphor_base::{FinishReason, Message, Role, ToolSpec, Usage};
use serde_json::{Map, Value, json};

use crate::inbound::{
    Answer, Delta, Failure, Inbound, Meta, WireError, Writer, describe, object, opt_bool, opt_number,
    opt_positive, opt_str, req_str,
};

/// Reads a chat-completions request: `messages` (leading system and developer messages become the
/// system prompt; every other message is the conversation, in order), `tools` of type `function`,
/// `max_completion_tokens` (or the older `max_tokens`), `temperature`, `stream` and
/// `stream_options.include_usage`. `n` must be 1. Other fields are accepted and not forwarded.
pub fn read_request(bytes: &[u8]) -> Result<Inbound, WireError> {
    let body = object(bytes)?;
    let raw = match body.get("messages") {
        Some(Value::Array(raw)) if !raw.is_empty() => raw,
        Some(Value::Array(_)) => {
            return Err(WireError::new("`messages` is empty: send at least one message"));
        }
        Some(other) => return Err(WireError::at("messages", other, "an array of chat messages")),
        None => return Err(WireError::missing("messages", "an array of chat messages")),
    };
    if let Some(n) = body.get("n").filter(|n| !n.is_null())
        && n.as_u64() != Some(1)
    {
        return Err(WireError::at("n", n, "1: this server returns one choice"));
    }
    let all = super::from_openai(raw).map_err(|err| WireError::new(format!("`messages`: {err}")))?;
    let leading = all.iter().take_while(|m| m.role == Role::System).count();
    let system_prompt = all[..leading].iter().map(Message::text_content).collect::<Vec<_>>().join("\n\n");
    let messages = all[leading..].to_vec();
    if messages.is_empty() {
        return Err(WireError::new("`messages` holds only system messages: send a user message"));
    }
    let tools = match body.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => {
            tools.iter().enumerate().map(|(i, t)| tool_spec(i, t)).collect::<Result<_, _>>()?
        }
        Some(other) => {
            return Err(WireError::at(
                "tools",
                other,
                "an array of {\"type\": \"function\", \"function\": {...}}",
            ));
        }
    };
    let max_output_tokens = match opt_positive(&body, "max_completion_tokens")? {
        Some(n) => Some(n),
        None => opt_positive(&body, "max_tokens")?,
    };
    let stream_usage = match body.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(options)) => opt_bool(options, "include_usage").map_err(|_| {
            WireError::at("stream_options.include_usage", &options["include_usage"], "true or false")
        })?,
        Some(other) => return Err(WireError::at("stream_options", other, "an object")),
    };
    Ok(Inbound {
        model: opt_str(&body, "model", "")?.map(str::to_owned),
        system_prompt,
        tools,
        messages,
        max_output_tokens,
        temperature: opt_number(&body, "temperature", 0.0..=2.0)?,
        stream: opt_bool(&body, "stream")?,
        conversation_key: None,
        show_reasoning: true,
        stream_usage,
        passed_through: serde_json::Map::new(),
    })
}

fn tool_spec(index: usize, tool: &Value) -> Result<ToolSpec, WireError> {
    let at = format!("tools[{index}]");
    let Value::Object(tool) = tool else { return Err(WireError::at(&at, tool, "a tool object")) };
    match tool.get("type") {
        Some(Value::String(kind)) if kind == "function" => {}
        Some(other) => {
            return Err(WireError::at(
                &format!("{at}.type"),
                other,
                "\"function\" (the only tool type served)",
            ));
        }
        None => return Err(WireError::missing(&format!("{at}.type"), "\"function\"")),
    }
    let function: &Map<String, Value> = match tool.get("function") {
        Some(Value::Object(function)) => function,
        Some(other) => return Err(WireError::at(&format!("{at}.function"), other, "an object")),
        None => return Err(WireError::missing(&format!("{at}.function"), "an object with a `name`")),
    };
    let at = format!("{at}.function");
    let name = req_str(function, "name", &at)?;
    if name.is_empty() {
        return Err(WireError::new(format!("`{at}.name` is empty; expected a tool name")));
    }
    let parameters = match function.get("parameters") {
        None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
        Some(value @ Value::Object(_)) => value.clone(),
        Some(other) => {
            return Err(WireError::new(format!(
                "`{at}.parameters` is {}; expected a JSON schema object",
                describe(other)
            )));
        }
    };
    Ok(ToolSpec {
        name: name.to_owned(),
        description: opt_str(function, "description", &at)?.unwrap_or("").to_owned(),
        parameters,
    })
}

fn finish_reason(answer: &Answer<'_>) -> &'static str {
    match answer.finish_reason {
        _ if answer.calls_tools() => "tool_calls",
        Some(FinishReason::Length) => "length",
        Some(FinishReason::ContentFilter) => "content_filter",
        _ => "stop",
    }
}

fn usage(usage: &Usage) -> Value {
    let mut value = json!({
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    });
    if usage.cached_input_tokens > 0 {
        value["prompt_tokens_details"] = json!({"cached_tokens": usage.cached_input_tokens});
    }
    value
}

fn call_value(call: &phosphor_base::ToolCall) -> Value {
    json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}})
}

/// The answer as a `chat.completion`. Reasoning is written as `reasoning_content`, as the servers
/// of reasoning models do.
pub fn whole(meta: &Meta, answer: &Answer<'_>) -> Value {
    let text = answer.message.text_content();
    let calls: Vec<Value> = answer.message.tool_calls().map(call_value).collect();
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::String(text) },
        "refusal": null,
    });
    let reasoning: String = answer
        .message
        .parts
        .iter()
        .filter_map(|part| match part {
            phosphor_base::Part::Reasoning { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if !reasoning.is_empty() {
        message["reasoning_content"] = json!(reasoning);
    }
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": meta.id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason(answer)}],
        "usage": usage(&answer.usage),
    })
}

/// An error as OpenAI shapes it: `{"error": {"message", "type", "param", "code"}}`.
pub fn error_body(failure: &Failure) -> Value {
    json!({"error": failure.openai_error()})
}

/// The answer as `chat.completion.chunk` events: a first chunk with the role, one per piece, the
/// finish, a usage chunk when the client asked (`stream_options.include_usage`), then `[DONE]`. An
/// error after the stream began is an `{"error": ...}` event, as OpenAI's servers send it.
#[derive(Debug)]
pub struct Stream {
    meta: Meta,
    calls: usize,
}

impl Stream {
    /// A stream for the answer `meta` describes.
    pub fn new(meta: Meta) -> Stream {
        Stream { meta, calls: 0 }
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> String {
        let chunk = json!({
            "id": self.meta.id,
            "object": "chat.completion.chunk",
            "created": self.meta.created,
            "model": self.meta.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        format!("data: {chunk}\n\n")
    }
}

impl Writer for Stream {
    fn begin(&mut self) -> Vec<String> {
        vec![self.chunk(json!({"role": "assistant", "content": ""}), None)]
    }

    fn delta(&mut self, delta: Delta<'_>) -> Vec<String> {
        let delta = match delta {
            Delta::Text(text) => json!({"content": text}),
            Delta::Reasoning(text) => json!({"reasoning_content": text}),
            // Chat completions has no field for a provider's seal.
            Delta::Seal(_) => return Vec::new(),
            Delta::ToolCall(call) => {
                let mut value = call_value(call);
                value["index"] = json!(self.calls);
                self.calls += 1;
                json!({"tool_calls": [value]})
            }
        };
        vec![self.chunk(delta, None)]
    }

    fn end(&mut self, answer: &Answer<'_>) -> Vec<String> {
        let mut out = vec![self.chunk(json!({}), Some(finish_reason(answer)))];
        if self.meta.stream_usage {
            let last = json!({
                "id": self.meta.id,
                "object": "chat.completion.chunk",
                "created": self.meta.created,
                "model": self.meta.model,
                "choices": [],
                "usage": usage(&answer.usage),
            });
            out.push(format!("data: {last}\n\n"));
        }
        out.push("data: [DONE]\n\n".to_owned());
        out
    }

    fn fail(&mut self, failure: &Failure) -> Vec<String> {
        vec![format!("data: {}\n\n", error_body(failure))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_base::{Part, ToolCall};
    use pretty_assertions::assert_eq;

    fn error(body: &str) -> String {
        read_request(body.as_bytes()).err().map(|e| e.message).unwrap_or_default()
    }

    #[test]
    fn bad_bodies_say_what_is_wrong() {
        assert!(error("{").contains("not valid JSON"));
        assert!(error("[]").contains("JSON object"));
        assert!(error("{}").contains("`messages` is missing"));
        assert!(error(r#"{"messages": []}"#).contains("empty"));
        assert!(error(r#"{"messages": [{"role": "system", "content": "x"}]}"#).contains("only system"));
        assert!(error(r#"{"messages": [{"role": "user", "content": "x"}], "n": 2}"#).contains("one choice"));
        assert_eq!(
            error(r#"{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web"}]}"#),
            "`tools[0].type` is the string \"web\"; expected \"function\" (the only tool type served)"
        );
        assert!(
            error(r#"{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}"#)
                .contains("max_tokens")
        );
        assert!(
            error(r#"{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}"#)
                .contains("`stream`")
        );
    }

    #[test]
    fn reads_the_conversation_and_its_settings() {
        let inbound = read_request(
            br#"{"model": "m", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
                 "stream": true, "max_tokens": 5, "stream_options": {"include_usage": true},
                 "tools": [{"type": "function", "function": {"name": "ls"}}]}"#,
        )
        .unwrap();
        assert_eq!(inbound.system_prompt, "be brief");
        assert_eq!(inbound.messages.len(), 1);
        assert!(inbound.stream && inbound.stream_usage);
        assert_eq!(inbound.max_output_tokens, Some(5));
        assert_eq!(inbound.model.as_deref(), Some("m"));
        assert_eq!(inbound.tools[0].name, "ls");
    }

    #[test]
    fn whole_and_streamed_answers_agree() {
        let meta = Meta {
            id: "chatcmpl-1".into(),
            model: "m".into(),
            created: 7,
            stream_usage: true,
            show_reasoning: true,
        };
        let call = ToolCall { id: "call_1".into(), name: "ls".into(), arguments: "{}".into() };
        let message = Message::new(
            Role::Assistant,
            vec![Part::Text { text: "Looking.".into() }, Part::ToolCall(call.clone())],
        );
        let usage = Usage { input_tokens: 10, output_tokens: 3, ..Usage::default() };
        let answer = Answer { message: &message, usage, finish_reason: Some(&FinishReason::Stop) };
        let whole = whole(&meta, &answer);
        assert_eq!(whole["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(whole["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "ls");
        assert_eq!(whole["usage"]["total_tokens"], 13);
        let mut stream = Stream::new(meta);
        let mut frames = stream.begin();
        frames.extend(stream.delta(Delta::Text("Looking.")));
        frames.extend(stream.delta(Delta::ToolCall(&call)));
        frames.extend(stream.end(&answer));
        assert_eq!(frames.len(), 6);
        assert!(frames[3].contains(r#""finish_reason":"tool_calls""#), "{}", frames[3]);
        assert!(frames[4].contains(r#""total_tokens":13"#), "{}", frames[4]);
        assert_eq!(frames[5], "data: [DONE]\n\n");
    }
}
