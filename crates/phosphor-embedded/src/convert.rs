//! Phosphor requests to mistral.rs requests, and mistral.rs responses to stream events.

use either::Either;
use indexmap::IndexMap;
use mistralrs::{
    ChatCompletionChunkResponse, ChatCompletionResponse, ChunkChoice, Delta, MessageContent, SamplingParams,
    Tool,
};
use phosphor_base::message::{FinishReason, Message, Part, Role, ToolCall, Usage};
use phosphor_base::model::{StreamEvent, ToolSpec};
use phosphor_base::{Error, Result};
use serde_json::{Value, json};

use crate::IMAGE_PLACEHOLDER;

/// One chat message as mistral.rs's chat templates read it.
pub(crate) type ChatMessage = IndexMap<String, MessageContent>;

/// The messages as the `messages` of a Hugging Face chat template: `role` and `content` strings, `tool_calls` with
/// parsed arguments on assistant messages, `tool_call_id` and `name` on tool messages. Reasoning is not sent back;
/// images become a placeholder (the count is returned, for a warning).
pub(crate) fn chat_messages(messages: &[Message]) -> (Vec<ChatMessage>, usize) {
    let mut out = Vec::with_capacity(messages.len());
    let mut images = 0;
    for message in messages {
        let mut text = String::new();
        let mut calls = Vec::new();
        let mut results = Vec::new();
        for part in &message.parts {
            match part {
                Part::Text { text: t } => text.push_str(t),
                Part::Image { .. } => {
                    images += 1;
                    if !text.is_empty() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(IMAGE_PLACEHOLDER);
                }
                Part::ToolCall(call) => calls.push(call),
                Part::ToolResult(result) => results.push(result),
                Part::Reasoning { .. } | Part::Finish { .. } => {}
            }
        }
        if message.role == Role::Tool || !results.is_empty() {
            // Each result is its own tool message; text beside them (rare) follows as a user message.
            for result in results {
                out.push(IndexMap::from([
                    ("role".to_owned(), Either::Left("tool".to_owned())),
                    ("content".to_owned(), Either::Left(result.content.clone())),
                    ("tool_call_id".to_owned(), Either::Left(result.call_id.clone())),
                    ("name".to_owned(), Either::Left(result.name.clone())),
                ]));
            }
            if !text.is_empty() {
                out.push(text_message("user", text));
            }
            continue;
        }
        let mut entry = text_message(message.role.as_str(), text);
        if !calls.is_empty() {
            let calls = calls.into_iter().map(tool_call_entry).collect();
            entry.insert("tool_calls".to_owned(), Either::Right(calls));
        }
        out.push(entry);
    }
    (out, images)
}

fn text_message(role: &str, text: String) -> ChatMessage {
    IndexMap::from([
        ("role".to_owned(), Either::Left(role.to_owned())),
        ("content".to_owned(), Either::Left(text)),
    ])
}

/// A tool call as chat templates expect it: arguments as a JSON object when they parse (templates apply
/// `tojson` to them), verbatim text otherwise.
fn tool_call_entry(call: &ToolCall) -> IndexMap<String, Value> {
    let arguments = match serde_json::from_str::<Value>(&call.arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => Value::String(call.arguments.clone()),
    };
    IndexMap::from([
        ("id".to_owned(), Value::String(call.id.clone())),
        ("type".to_owned(), Value::String("function".to_owned())),
        ("function".to_owned(), json!({ "name": call.name, "arguments": arguments })),
    ])
}

/// The tools as mistral.rs takes them. Parameters must be a JSON Schema object.
pub(crate) fn tools(specs: &[ToolSpec]) -> Result<Vec<Tool>> {
    specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            if !spec.parameters.is_object() {
                return Err(Error::BadRequest {
                    status: None,
                    message: format!(
                        "tools[{i}] (`{}`): parameters must be a JSON Schema object, found {}",
                        spec.name, spec.parameters
                    ),
                });
            }
            serde_json::from_value(json!({
                "type": "function",
                "function": {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.parameters,
                }
            }))
            .map_err(|e| Error::BadRequest {
                status: None,
                message: format!("tools[{i}] (`{}`) cannot be given to mistral.rs: {e}", spec.name),
            })
        })
        .collect()
}

/// Sampling for a request: greedy when the temperature is 0 or unset (summaries should be reproducible),
/// sampled at the given temperature otherwise; at most `max_tokens` tokens.
pub(crate) fn sampling(
    temperature: Option<f32>,
    repeat_penalty: Option<f32>,
    max_tokens: u64,
) -> SamplingParams {
    let mut params = match temperature {
        Some(t) if t > 0.0 => SamplingParams { temperature: Some(f64::from(t)), ..SamplingParams::neutral() },
        _ => SamplingParams::deterministic(),
    };
    params.max_len = Some(usize::try_from(max_tokens).unwrap_or(usize::MAX));
    params.repetition_penalty = repeat_penalty.filter(|p| *p > 0.0 && *p != 1.0);
    params
}

/// Turns mistral.rs chunks into stream events; remembers usage and the finish reason for the end.
#[derive(Debug, Default)]
pub(crate) struct ChunkReader {
    /// Usage, once the last chunk brought it.
    pub usage: Option<Usage>,
    /// The finish reason, once a chunk brought it.
    pub finish: Option<FinishReason>,
}

impl ChunkReader {
    /// The events of one chunk, in order: reasoning, text, tool calls. Usage and finish wait for [`Self::end`].
    pub(crate) fn read(&mut self, chunk: ChatCompletionChunkResponse) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        for choice in chunk.choices {
            let delta = choice.delta;
            if let Some(text) = delta.reasoning_content.filter(|t| !t.is_empty()) {
                events.push(StreamEvent::ReasoningDelta { text });
            }
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                events.push(StreamEvent::TextDelta { text });
            }
            for call in delta.tool_calls.unwrap_or_default() {
                events.push(StreamEvent::ToolCall(ToolCall {
                    id: call.id,
                    name: call.function.name,
                    arguments: call.function.arguments,
                }));
            }
            if let Some(reason) = choice.finish_reason {
                self.finish = Some(finish_reason(&reason));
            }
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens as u64,
                output_tokens: usage.completion_tokens as u64,
                ..Usage::default()
            });
        }
        events
    }

    /// The events of a whole (non-streamed) answer, which mistral.rs may send instead of chunks.
    pub(crate) fn read_done(&mut self, done: ChatCompletionResponse) -> Vec<StreamEvent> {
        let chunk = ChatCompletionChunkResponse {
            id: done.id,
            choices: done
                .choices
                .into_iter()
                .map(|c| ChunkChoice {
                    finish_reason: Some(c.finish_reason),
                    index: c.index,
                    delta: Delta {
                        content: c.message.content,
                        role: c.message.role,
                        tool_calls: c.message.tool_calls,
                        reasoning_content: c.message.reasoning_content,
                    },
                    logprobs: None,
                })
                .collect(),
            created: u128::from(done.created),
            model: done.model,
            system_fingerprint: done.system_fingerprint,
            object: done.object,
            usage: Some(done.usage),
        };
        self.read(chunk)
    }

    /// The closing events once a finish reason arrived: usage (when reported), then the finish.
    pub(crate) fn end(&mut self) -> Option<Vec<StreamEvent>> {
        let reason = self.finish.take()?;
        let mut events = Vec::new();
        if let Some(usage) = self.usage.take() {
            events.push(StreamEvent::Usage(usage));
        }
        events.push(StreamEvent::Finish { reason });
        Some(events)
    }
}

/// mistral.rs's finish reasons (`stop`, `length`, `model_length`, `tool_calls`, `canceled`).
fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "model_length" => FinishReason::Length,
        "canceled" => FinishReason::Cancelled,
        other => FinishReason::from_wire(other),
    }
}

/// The prefix of mistral.rs's refusal of a prompt longer than the model's window.
const OVERFLOW_PREFIX: &str = "Prompt sequence length is greater than ";

/// A validation error from mistral.rs: a context overflow when the prompt is too long, a bad request otherwise.
pub(crate) fn validation_error(message: String) -> Error {
    if let Some(rest) = message.strip_prefix(OVERFLOW_PREFIX) {
        let limit = rest.split(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse().ok());
        return Error::ContextOverflow { message, requested_tokens: None, limit_tokens: limit };
    }
    Error::BadRequest { status: None, message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn as_json(messages: &[ChatMessage]) -> Value {
        Value::Array(
            messages
                .iter()
                .map(|m| {
                    Value::Object(
                        m.iter()
                            .map(|(k, v)| {
                                let v = match v {
                                    Either::Left(s) => Value::String(s.clone()),
                                    Either::Right(items) => Value::Array(
                                        items
                                            .iter()
                                            .map(|i| Value::Object(i.clone().into_iter().collect()))
                                            .collect(),
                                    ),
                                };
                                (k.clone(), v)
                            })
                            .collect(),
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn messages_become_template_messages() {
        let call = ToolCall { id: "c1".into(), name: "ls".into(), arguments: r#"{"dir":"."}"#.into() };
        let bad_args = ToolCall { id: "c2".into(), name: "cat".into(), arguments: "not json".into() };
        let history = vec![
            Message::system("Be brief."),
            Message::new(
                Role::User,
                vec![
                    Part::Text { text: "What is this?".into() },
                    Part::Image { url: "data:image/png;base64,AAAA".into(), detail: None },
                ],
            ),
            Message::new(
                Role::Assistant,
                vec![
                    Part::reasoning("hidden"),
                    Part::Text { text: "Looking.".into() },
                    Part::ToolCall(call),
                    Part::ToolCall(bad_args),
                    Part::Finish { reason: FinishReason::ToolCalls },
                ],
            ),
            Message::tool_result("c1", "ls", "a.txt", false),
            Message::tool_result("c2", "cat", "error: no file", true),
        ];
        let (messages, images) = chat_messages(&history);
        assert_eq!(images, 1);
        assert_eq!(
            as_json(&messages),
            json!([
                { "role": "system", "content": "Be brief." },
                { "role": "user", "content": format!("What is this?\n{IMAGE_PLACEHOLDER}") },
                {
                    "role": "assistant",
                    "content": "Looking.",
                    "tool_calls": [
                        { "id": "c1", "type": "function", "function": { "name": "ls", "arguments": { "dir": "." } } },
                        { "id": "c2", "type": "function", "function": { "name": "cat", "arguments": "not json" } },
                    ],
                },
                { "role": "tool", "content": "a.txt", "tool_call_id": "c1", "name": "ls" },
                { "role": "tool", "content": "error: no file", "tool_call_id": "c2", "name": "cat" },
            ])
        );
    }

    #[test]
    fn tools_need_an_object_schema() {
        let ok = ToolSpec {
            name: "ls".into(),
            description: "List files".into(),
            parameters: json!({ "type": "object", "properties": {} }),
        };
        let converted = tools(std::slice::from_ref(&ok)).unwrap();
        assert_eq!(
            serde_json::to_value(&converted).unwrap(),
            json!([{ "type": "function", "function": {
                "description": "List files", "name": "ls", "parameters": { "type": "object", "properties": {} }
            } }])
        );
        let bad = ToolSpec { parameters: json!("object"), ..ok };
        let err = tools(&[bad]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "request rejected: tools[0] (`ls`): parameters must be a JSON Schema object, found \"object\""
        );
    }

    #[test]
    fn sampling_is_greedy_unless_a_temperature_is_given() {
        let greedy = sampling(None, None, 64);
        assert_eq!((greedy.top_k, greedy.temperature, greedy.max_len), (Some(1), None, Some(64)));
        assert_eq!(greedy.repetition_penalty, None);
        assert_eq!(sampling(Some(0.0), None, 8).top_k, Some(1));
        assert_eq!(sampling(None, Some(1.1), 8).repetition_penalty, Some(1.1));
        assert_eq!(sampling(None, Some(1.0), 8).repetition_penalty, None, "1.0 is no penalty");
        let warm = sampling(Some(0.7), None, 8);
        assert_eq!((warm.top_k, warm.temperature.map(|t| (t * 10.0).round())), (None, Some(7.0)));
    }

    fn chunk(
        content: Option<&str>,
        finish: Option<&str>,
        usage: Option<(usize, usize)>,
    ) -> ChatCompletionChunkResponse {
        ChatCompletionChunkResponse {
            id: "0".into(),
            choices: vec![ChunkChoice {
                finish_reason: finish.map(str::to_owned),
                index: 0,
                delta: Delta {
                    content: content.map(str::to_owned),
                    role: "assistant".into(),
                    tool_calls: None,
                    reasoning_content: None,
                },
                logprobs: None,
            }],
            created: 0,
            model: "m".into(),
            system_fingerprint: String::new(),
            object: "chat.completion.chunk".into(),
            usage: usage.map(|(prompt, completion)| mistralrs::Usage {
                completion_tokens: completion,
                prompt_tokens: prompt,
                total_tokens: prompt + completion,
                avg_tok_per_sec: 0.0,
                avg_prompt_tok_per_sec: 0.0,
                avg_compl_tok_per_sec: 0.0,
                total_time_sec: 0.0,
                total_prompt_time_sec: 0.0,
                total_completion_time_sec: 0.0,
            }),
        }
    }

    #[test]
    fn chunks_become_deltas_then_usage_and_finish() {
        let mut reader = ChunkReader::default();
        let mut events = reader.read(chunk(Some("Hel"), None, None));
        events.extend(reader.read(chunk(Some(""), None, None)));
        assert_eq!(reader.end(), None);
        events.extend(reader.read(chunk(Some("lo"), Some("model_length"), Some((12, 2)))));
        events.extend(reader.end().unwrap());
        assert_eq!(
            events,
            vec![
                StreamEvent::TextDelta { text: "Hel".into() },
                StreamEvent::TextDelta { text: "lo".into() },
                StreamEvent::Usage(Usage { input_tokens: 12, output_tokens: 2, ..Usage::default() }),
                StreamEvent::Finish { reason: FinishReason::Length },
            ]
        );
    }

    #[test]
    fn overflow_is_recognised() {
        let err = validation_error(
            "Prompt sequence length is greater than 8192, perhaps consider using `truncate_sequence`?".into(),
        );
        assert!(
            matches!(err, Error::ContextOverflow { limit_tokens: Some(8192), requested_tokens: None, .. }),
            "{err:?}"
        );
        assert!(matches!(validation_error("Received an empty prompt.".into()), Error::BadRequest { .. }));
    }
}
