//! The model trait every backend implements: streaming chat with tools.
//!
//! It lives beside the message types so that the remote backend (`phosphor-llm`) and the embedded
//! one (`phosphor-embedded`) implement it without knowing each other.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::message::{FinishReason, Message, Part, Role, ToolCall, Usage};
use crate::tokens::{ApproxCounter, TokenCounter};

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model uses to call it.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub parameters: serde_json::Value,
}

/// One request to a model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation, system prompt first.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Upper bound on the answer's tokens.
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    /// Sampling temperature; `None` leaves the model's default (0 means greedy).
    #[serde(default)]
    pub temperature: Option<f32>,
    /// The session this call belongs to, for telemetry (`gen_ai.conversation.id`).
    #[serde(default)]
    pub conversation_id: Option<String>,
    /// A penalty on repeating recent tokens (`None` or 1.0: none). The local engines apply it
    /// (llama.cpp's penalties sampler over the last 64 tokens, mistral.rs's repetition penalty);
    /// OpenAI-compatible servers have no such parameter, and it is not sent to them.
    #[serde(default)]
    pub repeat_penalty: Option<f32>,
    /// The outline the answer must follow (headed sections of bullet lines): the local engines
    /// sample under it (llama.cpp's grammar sampler, mistral.rs's regex constraint); remote servers
    /// are not sent it, and follow the prompt alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outline: Option<crate::outline::Outline>,
    /// What a proxied client sent that only an upstream of its own API understands (see
    /// [`Passthrough`]); never stored, and sent only by a backend that speaks `passthrough.api`.
    #[serde(skip)]
    pub passthrough: Option<Passthrough>,
}

/// Fields and headers of a proxied client's request that Phosphor does not read but an upstream
/// speaking the client's own API does (Anthropic's `metadata` and `context_management` with its
/// `anthropic-beta` header, Responses' `reasoning` and `include`, ...). Which ones pass is each
/// wire's list (`phosphor_wire::anthropic::PASSED_THROUGH`, `phosphor_wire::responses::PASSED_THROUGH`);
/// a backend of another API drops them, and none overrides a field Phosphor writes itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Passthrough {
    /// The API they belong to.
    pub api: crate::config::Api,
    /// Top-level body fields, as the client sent them.
    pub fields: serde_json::Map<String, serde_json::Value>,
    /// Request headers (lowercase names), as the client sent them.
    pub headers: Vec<(String, String)>,
}

impl Passthrough {
    /// Adds the fields to `body` (a JSON object) when they belong to `api`, leaving every field
    /// `body` already has as it is. A body without `tools` gets no tool choice: the APIs refuse one
    /// (the client's tools are the request's, so it had none either).
    pub fn merge_into(this: Option<&Passthrough>, api: crate::config::Api, body: &mut serde_json::Value) {
        let (Some(passthrough), Some(object)) = (this.filter(|p| p.api == api), body.as_object_mut()) else {
            return;
        };
        let has_tools = object.contains_key("tools");
        for (key, value) in &passthrough.fields {
            if has_tools || !matches!(key.as_str(), "tool_choice" | "parallel_tool_calls") {
                object.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
    }
}

/// What a backend knows about the model behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// Who serves it (`openai`, `openrouter`, `embedded`, ...): `gen_ai.provider.name`.
    pub provider: String,
    /// The model id sent to the provider: `gen_ai.request.model`.
    pub model: String,
    /// The context window in tokens.
    pub context_window: u64,
    /// The most tokens one answer may have.
    pub max_output_tokens: u64,
}

/// One event of a streamed answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// A piece of answer text.
    TextDelta {
        /// The text.
        text: String,
    },
    /// A piece of visible reasoning.
    ReasoningDelta {
        /// The text.
        text: String,
    },
    /// The provider's seal on the reasoning streamed since the last seal (or since the start):
    /// that text is one reasoning block, to be handed back with it (see [`crate::message::Seal`]).
    /// A redacted block arrives as a seal with no reasoning text before it.
    ReasoningSeal(crate::message::Seal),
    /// A whole tool call (backends assemble streamed fragments before emitting it).
    ToolCall(ToolCall),
    /// Token usage of the call.
    Usage(Usage),
    /// The end of the answer.
    Finish {
        /// Why it ended.
        reason: FinishReason,
    },
}

/// A streamed answer. Errors may arrive as the first item (the request failed) or later (the stream broke).
pub type ChatStream = BoxStream<'static, Result<StreamEvent>>;

/// A chat model with tool calling.
///
/// Implement [`ChatModel::stream`]; [`ChatModel::complete`] collects it.
pub trait ChatModel: Send + Sync {
    /// What the model is and how large its window is.
    fn info(&self) -> &ModelInfo;

    /// Sends `request` and streams the answer.
    fn stream(&self, request: ChatRequest) -> ChatStream;

    /// The counter that counts this model's tokens: exact where the backend knows the model's
    /// tokenizer (tiktoken for OpenAI models, the GGUF file's own vocabulary for a local model),
    /// else the approximation `ceil(bytes/4)` ([`ApproxCounter`], the default). Called once per agent;
    /// an implementation may build the counter here.
    fn counter(&self) -> Arc<dyn TokenCounter> {
        Arc::new(ApproxCounter)
    }

    /// The model's parameter count, where the backend knows it (a local GGUF model: its tensors'
    /// elements); `None` for a remote model. The agent writes summaries with the compact prompt
    /// profile for small models (`phosphor_prompt::Profiles::for_model`).
    fn parameters(&self) -> Option<u64> {
        None
    }

    /// Sends `request` and waits for the whole answer.
    fn complete(&self, request: ChatRequest) -> BoxFuture<'static, Result<Completion>> {
        let stream = self.stream(request);
        Box::pin(Completion::collect(stream))
    }
}

/// A whole answer, collected from a stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The answer text.
    pub text: String,
    /// The visible reasoning.
    pub reasoning: String,
    /// The seals on it, each with the byte length of `reasoning` when it came: the text between
    /// two of them is one sealed block.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seals: Vec<(usize, crate::message::Seal)>,
    /// The tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Usage, when the backend reported it.
    pub usage: Option<Usage>,
    /// Why it ended, when the backend said.
    pub finish_reason: Option<FinishReason>,
}

impl Completion {
    /// Adds one stream event.
    pub fn apply(&mut self, event: StreamEvent) {
        match event {
            StreamEvent::TextDelta { text } => self.text.push_str(&text),
            StreamEvent::ReasoningDelta { text } => self.reasoning.push_str(&text),
            StreamEvent::ReasoningSeal(seal) => self.seals.push((self.reasoning.len(), seal)),
            StreamEvent::ToolCall(call) => self.tool_calls.push(call),
            StreamEvent::Usage(usage) => self.usage = Some(usage),
            StreamEvent::Finish { reason } => self.finish_reason = Some(reason),
        }
    }

    /// Drains `stream`, stopping at the first error.
    pub async fn collect(mut stream: ChatStream) -> Result<Completion> {
        let mut completion = Completion::default();
        while let Some(event) = stream.next().await {
            completion.apply(event?);
        }
        Ok(completion)
    }

    /// The answer as an assistant message (reasoning, text, tool calls, finish reason).
    pub fn into_message(self, model: Option<String>) -> Message {
        let mut parts = Vec::new();
        // Each sealed block as its own part, its text exactly as it streamed; what follows the
        // last seal (a provider that seals nothing: all of it) as one unsealed part.
        let mut start = 0;
        for (end, seal) in self.seals {
            let end = end.clamp(start, self.reasoning.len());
            parts.push(Part::Reasoning { text: self.reasoning[start..end].to_owned(), seal: Some(seal) });
            start = end;
        }
        if start < self.reasoning.len() {
            parts.push(Part::reasoning(&self.reasoning[start..]));
        }
        if !self.text.is_empty() {
            parts.push(Part::Text { text: self.text });
        }
        parts.extend(self.tool_calls.into_iter().map(Part::ToolCall));
        if let Some(reason) = self.finish_reason {
            parts.push(Part::Finish { reason });
        }
        let mut message = Message::new(Role::Assistant, parts);
        message.model = model;
        message.usage = self.usage;
        message
    }
}

/// A stream made of one error, for backends that fail before sending anything.
pub fn error_stream(error: Error) -> ChatStream {
    futures::stream::once(async move { Err(error) }).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream;

    #[tokio::test]
    async fn collect_assembles_every_event_kind() {
        let events = vec![
            Ok(StreamEvent::ReasoningDelta { text: "think".into() }),
            Ok(StreamEvent::TextDelta { text: "Hel".into() }),
            Ok(StreamEvent::TextDelta { text: "lo".into() }),
            Ok(StreamEvent::ToolCall(ToolCall {
                id: "c1".into(),
                name: "ls".into(),
                arguments: "{}".into(),
            })),
            Ok(StreamEvent::Usage(Usage { input_tokens: 10, output_tokens: 3, ..Usage::default() })),
            Ok(StreamEvent::Finish { reason: FinishReason::ToolCalls }),
        ];
        let completion = Completion::collect(stream::iter(events).boxed()).await.unwrap();
        let message = completion.into_message(Some("m".into()));
        let expected = Message {
            model: Some("m".into()),
            usage: Some(Usage { input_tokens: 10, output_tokens: 3, ..Usage::default() }),
            ..Message::new(
                Role::Assistant,
                vec![
                    Part::reasoning("think"),
                    Part::Text { text: "Hello".into() },
                    Part::ToolCall(ToolCall { id: "c1".into(), name: "ls".into(), arguments: "{}".into() }),
                    Part::Finish { reason: FinishReason::ToolCalls },
                ],
            )
        };
        pretty_assertions::assert_eq!(message, expected);
    }

    #[tokio::test]
    async fn collect_stops_at_the_first_error() {
        let events = vec![
            Ok(StreamEvent::TextDelta { text: "partial".into() }),
            Err(Error::Stream("connection reset".into())),
            Ok(StreamEvent::TextDelta { text: "never".into() }),
        ];
        let err = Completion::collect(stream::iter(events).boxed()).await.unwrap_err();
        assert!(matches!(err, Error::Stream(ref m) if m == "connection reset"), "{err:?}");
    }
}
