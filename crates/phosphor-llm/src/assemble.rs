//! Turns streamed `chat.completion.chunk` JSON into [`StreamEvent`]s: text and reasoning as they
//! come, tool calls assembled from their fragments and emitted whole, usage, and the finish.

use std::collections::BTreeMap;

use phosphor_base::{ApproxCounter, Error, FinishReason, Result, StreamEvent, TokenCounter, ToolCall, Usage};
use serde_json::Value;

use crate::error::classify_error;

/// One tool call being streamed.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The state of one streamed answer.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    /// Calls by their `index` (order of first appearance when a server omits it).
    calls: BTreeMap<u64, PartialCall>,
    /// Whether the calls were already emitted (at the finish reason).
    calls_emitted: bool,
    /// How many calls were emitted.
    calls_count: usize,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    /// Output written so far, for the fallback count when the server reports no usage.
    output_tokens: u64,
}

fn text_field<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.get(key).and_then(Value::as_str).filter(|text| !text.is_empty())
}

fn count(value: Option<&Value>, key: &str) -> u64 {
    value.and_then(|v| v.get(key)).and_then(Value::as_u64).unwrap_or(0)
}

impl Assembler {
    /// Reads one chunk; returns the events it completes, or the error it carries.
    pub(crate) fn push(&mut self, chunk: &Value) -> Result<Vec<StreamEvent>> {
        if chunk.get("error").is_some_and(|e| !e.is_null())
            || chunk.get("object").and_then(Value::as_str) == Some("error")
        {
            return Err(classify_error(None, &chunk.to_string()));
        }
        let mut events = Vec::new();
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.read_usage(usage);
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Ok(events);
        };
        // We ask for one choice; servers number it 0 (a few omit the index).
        for choice in choices.iter().filter(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0) {
            if let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) {
                self.read_delta(delta, &mut events)?;
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(FinishReason::from_wire(reason));
                events.extend(self.take_calls()?);
            }
        }
        Ok(events)
    }

    fn read_delta(&mut self, delta: &Value, events: &mut Vec<StreamEvent>) -> Result<()> {
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = text_field(delta, key) {
                self.output_tokens += ApproxCounter.count_text(text);
                events.push(StreamEvent::ReasoningDelta { text: text.to_owned() });
            }
        }
        for key in ["content", "refusal"] {
            if let Some(text) = text_field(delta, key) {
                self.output_tokens += ApproxCounter.count_text(text);
                events.push(StreamEvent::TextDelta { text: text.to_owned() });
            }
        }
        let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) else {
            return Ok(());
        };
        if self.calls_emitted {
            return Err(Error::Stream("a tool call delta arrived after the finish reason".to_owned()));
        }
        for call in calls {
            let id = text_field(call, "id");
            let index = match call.get("index").and_then(Value::as_u64) {
                Some(index) => index,
                // Without an index, a new id starts a new call; anything else continues the last one.
                None => {
                    let last = self.calls.last_key_value();
                    match (last, id) {
                        (Some((&index, last)), Some(id)) if last.id == id => index,
                        (Some((&index, _)), None) => index,
                        (Some((&index, _)), Some(_)) => index + 1,
                        (None, _) => 0,
                    }
                }
            };
            let entry = self.calls.entry(index).or_default();
            if let Some(id) = id {
                entry.id = id.to_owned();
            }
            let function = call.get("function");
            if let Some(name) = function.and_then(|f| text_field(f, "name")) {
                entry.name = name.to_owned();
            }
            if let Some(arguments) = function.and_then(|f| f.get("arguments")) {
                match arguments {
                    Value::String(fragment) => entry.arguments.push_str(fragment),
                    Value::Null => {}
                    // A few servers send the arguments as an object; keep them as JSON text.
                    other => entry.arguments.push_str(&other.to_string()),
                }
            }
        }
        Ok(())
    }

    fn read_usage(&mut self, usage: &Value) {
        let input = count(Some(usage), "prompt_tokens");
        let output = count(Some(usage), "completion_tokens");
        if input == 0 && output == 0 {
            return;
        }
        self.usage = Some(Usage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: count(usage.get("prompt_tokens_details"), "cached_tokens"),
            reasoning_tokens: count(usage.get("completion_tokens_details"), "reasoning_tokens"),
        });
    }

    /// The assembled calls, once; each must have a name.
    fn take_calls(&mut self) -> Result<Vec<StreamEvent>> {
        if self.calls_emitted {
            return Ok(Vec::new());
        }
        self.calls_emitted = true;
        let mut events = Vec::new();
        for (position, (index, call)) in std::mem::take(&mut self.calls).into_iter().enumerate() {
            if call.name.is_empty() {
                return Err(Error::Stream(format!(
                    "tool call at index {index} (id {:?}) ended without a function name",
                    call.id
                )));
            }
            let id = if call.id.is_empty() { format!("call_{position}") } else { call.id };
            self.output_tokens += ApproxCounter.count_text(&id)
                + ApproxCounter.count_text(&call.name)
                + ApproxCounter.count_text(&call.arguments);
            events.push(StreamEvent::ToolCall(ToolCall { id, name: call.name, arguments: call.arguments }));
            self.calls_count += 1;
        }
        Ok(events)
    }

    /// The closing events once the stream ended: calls not yet emitted, the usage (the server's,
    /// or `input_estimate` and our count of the output), and the finish.
    pub(crate) fn finish(mut self, input_estimate: u64) -> Result<Vec<StreamEvent>> {
        let Some(mut reason) = self.finish.take() else {
            return Err(Error::Stream("the stream ended without a finish reason".to_owned()));
        };
        let mut events = self.take_calls()?;
        // vLLM and Ollama end tool-call answers with "stop": say what the answer holds.
        if self.calls_count > 0 && reason == FinishReason::Stop {
            reason = FinishReason::ToolCalls;
        }
        let usage = self.usage.unwrap_or(Usage {
            input_tokens: input_estimate,
            output_tokens: self.output_tokens,
            ..Usage::default()
        });
        events.push(StreamEvent::Usage(usage));
        events.push(StreamEvent::Finish { reason });
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn run(chunks: &[Value]) -> Result<Vec<StreamEvent>> {
        let mut assembler = Assembler::default();
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(assembler.push(chunk)?);
        }
        events.extend(assembler.finish(100)?);
        Ok(events)
    }

    fn delta(delta: Value) -> Value {
        json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    }

    fn finish(reason: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    }

    #[test]
    fn calls_without_index_are_told_apart_by_id() {
        let events = run(&[
            delta(json!({"tool_calls": [{"id": "a", "function": {"name": "ls", "arguments": "{}"}}]})),
            delta(json!({"tool_calls": [{"id": "b", "function": {"name": "cat", "arguments": "{\"p\":"}}]})),
            delta(json!({"tool_calls": [{"function": {"arguments": "1}"}}]})),
            finish("stop"),
        ])
        .unwrap();
        assert_eq!(
            events,
            vec![
                StreamEvent::ToolCall(ToolCall { id: "a".into(), name: "ls".into(), arguments: "{}".into() }),
                StreamEvent::ToolCall(ToolCall {
                    id: "b".into(),
                    name: "cat".into(),
                    arguments: "{\"p\":1}".into()
                }),
                StreamEvent::Usage(Usage { input_tokens: 100, output_tokens: 7, ..Usage::default() }),
                StreamEvent::Finish { reason: FinishReason::ToolCalls },
            ]
        );
    }

    #[test]
    fn a_call_without_a_name_is_a_stream_error() {
        let error = run(&[delta(json!({"tool_calls": [{"index": 0, "id": "a"}]})), finish("tool_calls")])
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "malformed model stream: tool call at index 0 (id \"a\") ended without a function name"
        );
    }

    #[test]
    fn a_stream_without_finish_reason_is_an_error() {
        let error = run(&[delta(json!({"content": "Hi"}))]).unwrap_err();
        assert!(matches!(error, Error::Stream(_)), "{error:?}");
    }

    #[test]
    fn reasoning_in_either_field_and_object_arguments() {
        let events = run(&[
            delta(json!({"reasoning": "hmm"})),
            delta(json!({"reasoning_content": "ok"})),
            delta(json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": {"x": 1}}}]})),
            finish("tool_calls"),
            json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3, "completion_tokens_details": {"reasoning_tokens": 2}}}),
        ])
        .unwrap();
        assert_eq!(
            events,
            vec![
                StreamEvent::ReasoningDelta { text: "hmm".into() },
                StreamEvent::ReasoningDelta { text: "ok".into() },
                StreamEvent::ToolCall(ToolCall {
                    id: "c".into(),
                    name: "f".into(),
                    arguments: "{\"x\":1}".into()
                }),
                StreamEvent::Usage(Usage {
                    input_tokens: 7,
                    output_tokens: 3,
                    reasoning_tokens: 2,
                    ..Usage::default()
                }),
                StreamEvent::Finish { reason: FinishReason::ToolCalls },
            ]
        );
    }
}
