//! The message model: what an agent transcript holds, independent of any provider's wire format.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from the application (the OpenAI `developer` role maps here too).
    System,
    /// The person driving the agent.
    User,
    /// The model.
    Assistant,
    /// The output of a tool the model called.
    Tool,
}

impl Role {
    /// The lowercase name used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// Parses the lowercase name; `developer` is read as [`Role::System`].
    pub fn parse(name: &str) -> Option<Role> {
        Some(match name {
            "system" | "developer" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" | "function" => Role::Tool,
            _ => return None,
        })
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the model stopped producing output.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end of the answer.
    Stop,
    /// The output token limit was reached.
    Length,
    /// The model asked for tool calls.
    ToolCalls,
    /// The provider's content filter stopped the output.
    ContentFilter,
    /// The caller cancelled the request.
    Cancelled,
    /// The request failed; the text says how.
    Error(String),
    /// A reason this model does not know, kept verbatim.
    Other(String),
}

impl FinishReason {
    /// Maps a provider's `finish_reason` string.
    pub fn from_wire(reason: &str) -> FinishReason {
        match reason {
            "stop" | "end_turn" | "eos" => FinishReason::Stop,
            "length" | "max_tokens" => FinishReason::Length,
            "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            "cancelled" => FinishReason::Cancelled,
            other => FinishReason::Other(other.to_owned()),
        }
    }

    /// The string a provider would send for this reason.
    pub fn as_wire(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Cancelled => "cancelled",
            FinishReason::Error(_) => "error",
            FinishReason::Other(other) => other,
        }
    }
}

/// One tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id; the matching [`ToolResult::call_id`] names it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model wrote them: JSON text, kept verbatim even when it does not parse.
    pub arguments: String,
}

/// The output of one tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the [`ToolCall`] this answers.
    pub call_id: String,
    /// The tool's name (recovered from the call when a transcript omits it).
    pub name: String,
    /// The output text.
    pub content: String,
    /// Whether the tool failed; the content then describes the failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model's visible reasoning (`reasoning_content` on OpenAI-compatible servers, an
    /// Anthropic `thinking` block, a Responses `reasoning` item's summary).
    Reasoning {
        /// The reasoning text.
        text: String,
        /// The provider's seal on it, when it gave one: sent back, with `text` byte for byte,
        /// only to a provider of the same API (see [`Seal`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seal: Option<Seal>,
    },
    /// An image given by URL (a `data:` URL for inline images).
    Image {
        /// The URL.
        url: String,
        /// The OpenAI `detail` hint (`auto`, `low`, `high`), when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// A tool call made by the assistant.
    ToolCall(ToolCall),
    /// A tool's output.
    ToolResult(ToolResult),
    /// Why generation of this message ended.
    Finish {
        /// The reason.
        reason: FinishReason,
    },
}

/// What a provider attached to its reasoning so that it can be handed back: Anthropic's
/// `signature` on a `thinking` block (or a whole `redacted_thinking` block), OpenAI Responses'
/// `encrypted_content` on a `reasoning` item. Opaque: Phosphor stores it with the message and
/// writes it back, with the reasoning text unchanged, only to a provider speaking `api`; any
/// other provider gets the text alone, or nothing. A part whose text is changed (pruned, masked)
/// loses its seal, since the provider would refuse it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    /// The API whose provider wrote it.
    pub api: crate::config::Api,
    /// The signature, or the encrypted reasoning, as the provider sent it.
    pub data: String,
    /// Whether the reasoning is readable only by the provider (`redacted_thinking`): the part's
    /// text is then empty and `data` is all there is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

impl Seal {
    /// The seal `api`'s provider put on readable reasoning.
    pub fn new(api: crate::config::Api, data: impl Into<String>) -> Seal {
        Seal { api, data: data.into(), redacted: false }
    }

    /// Reasoning only `api`'s provider can read (`redacted_thinking`), whole in `data`.
    pub fn redacted(api: crate::config::Api, data: impl Into<String>) -> Seal {
        Seal { api, data: data.into(), redacted: true }
    }
}

impl Part {
    /// Reasoning text with no seal.
    pub fn reasoning(text: impl Into<String>) -> Part {
        Part::Reasoning { text: text.into(), seal: None }
    }

    /// The seal a reasoning part carries for `api`, if any.
    pub fn seal_for(&self, api: crate::config::Api) -> Option<&Seal> {
        match self {
            Part::Reasoning { seal: Some(seal), .. } if seal.api == api => Some(seal),
            _ => None,
        }
    }
}

/// Whether a message is whole. A summary is `Streaming` while its deltas arrive, and ends
/// `Complete`, `Failed` or `Cancelled`; only `Complete` summaries ever become history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    /// Whole (the default, and every message a user or tool wrote).
    #[default]
    Complete,
    /// Still receiving deltas.
    Streaming,
    /// Generation failed; kept for the record, never used as history.
    Failed,
    /// Generation was cancelled; kept for the record, never used as history.
    Cancelled,
}

impl MessageStatus {
    /// Whether this is [`MessageStatus::Complete`].
    pub fn is_complete(&self) -> bool {
        matches!(self, MessageStatus::Complete)
    }

    /// The lowercase name used in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageStatus::Complete => "complete",
            MessageStatus::Streaming => "streaming",
            MessageStatus::Failed => "failed",
            MessageStatus::Cancelled => "cancelled",
        }
    }

    /// Parses the lowercase name.
    pub fn parse(name: &str) -> Option<MessageStatus> {
        Some(match name {
            "complete" => MessageStatus::Complete,
            "streaming" => MessageStatus::Streaming,
            "failed" => MessageStatus::Failed,
            "cancelled" => MessageStatus::Cancelled,
            _ => return None,
        })
    }
}

/// Token usage reported for one model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read by the model (the prompt).
    pub input_tokens: u64,
    /// Tokens written by the model.
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache, when reported.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// Output tokens spent on hidden reasoning, when reported.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// A stored message of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Unique id (time-ordered when made by Phosphor).
    pub id: String,
    /// The session it belongs to (empty for a free-standing transcript).
    #[serde(default)]
    pub session_id: String,
    /// Who wrote it.
    pub role: Role,
    /// Its content, in order.
    pub parts: Vec<Part>,
    /// Whether this message is a compaction summary that replaces the history before it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_summary: bool,
    /// For a summary: the id of the last message it replaces. The history shown to a model is the
    /// summary followed by the messages stored after that one (which may include messages stored
    /// before the summary itself: the prompt that forced it, and recent turns kept verbatim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarized_until: Option<String>,
    /// For a summary written inside a turn: the id of the user message that opened the turn, stored
    /// before `summarized_until`. It is shown verbatim right after the summary, so a turn whose
    /// own tool rounds were folded still carries its request word for word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_message: Option<String>,
    /// Whether the message is whole; only complete messages are ever shown to a model.
    #[serde(default, skip_serializing_if = "MessageStatus::is_complete")]
    pub status: MessageStatus,
    /// The author's display name (OpenAI `name`), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The model that wrote it, for assistant messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Usage of the call that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Creation time, Unix milliseconds.
    #[serde(default)]
    pub created_at: i64,
    /// Last change, Unix milliseconds.
    #[serde(default)]
    pub updated_at: i64,
}

impl Message {
    /// A message with the given role and parts and every other field empty.
    pub fn new(role: Role, parts: Vec<Part>) -> Message {
        Message {
            id: String::new(),
            session_id: String::new(),
            role,
            parts,
            is_summary: false,
            summarized_until: None,
            pinned_message: None,
            status: MessageStatus::Complete,
            name: None,
            model: None,
            usage: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    /// A message holding one text part.
    pub fn text(role: Role, text: impl Into<String>) -> Message {
        Message::new(role, vec![Part::Text { text: text.into() }])
    }

    /// A system message.
    pub fn system(text: impl Into<String>) -> Message {
        Message::text(Role::System, text)
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Message {
        Message::text(Role::User, text)
    }

    /// An assistant message.
    pub fn assistant(text: impl Into<String>) -> Message {
        Message::text(Role::Assistant, text)
    }

    /// A tool message answering `call_id`.
    pub fn tool_result(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Message {
        Message::new(
            Role::Tool,
            vec![Part::ToolResult(ToolResult {
                call_id: call_id.into(),
                name: name.into(),
                content: content.into(),
                is_error,
            })],
        )
    }

    /// Sets the id, builder style.
    pub fn with_id(mut self, id: impl Into<String>) -> Message {
        self.id = id.into();
        self
    }

    /// The concatenated text parts (reasoning excluded).
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if let Part::Text { text } = part {
                out.push_str(text);
            }
        }
        out
    }

    /// The tool calls of this message, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// The tool results of this message, in order.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResult> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolResult(result) => Some(result),
            _ => None,
        })
    }

    /// The finish reason, when the message records one.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.parts.iter().find_map(|p| match p {
            Part::Finish { reason } => Some(reason),
            _ => None,
        })
    }
}

/// The state of a session as the agent tracks it (spec: "Updates session state").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Unique id.
    pub id: String,
    /// A short title for lists.
    pub title: String,
    /// The latest completed summary message; the history shown to a model starts there.
    pub summary_message_id: Option<String>,
    /// Prompt tokens of the latest model call (reset to 0 by a summary).
    pub prompt_tokens: u64,
    /// Completion tokens of the latest model call.
    pub completion_tokens: u64,
    /// Estimated tokens of the history a model would be shown now.
    pub current_tokens: u64,
    /// Observation masking: the tool outputs of the history up to and including this message are
    /// shown to a model as one-line placeholders (the stored messages are untouched). `None`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masked_until: Option<String>,
    /// Creation time, Unix milliseconds.
    pub created_at: i64,
    /// Last change, Unix milliseconds.
    pub updated_at: i64,
}

impl Session {
    /// A new empty session.
    pub fn new(id: impl Into<String>, title: impl Into<String>, now_ms: i64) -> Session {
        Session {
            id: id.into(),
            title: title.into(),
            summary_message_id: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            current_tokens: 0,
            masked_until: None,
            created_at: now_ms,
            updated_at: now_ms,
        }
    }
}

/// The messages a model is shown, given every stored message of a session in order and the
/// session's summary pointer: the summary first, then its `pinned_message` (when it names a
/// complete, non-summary message), then each complete, non-summary message stored after the
/// summary's `summarized_until` message. Without a (known) summary: every complete,
/// non-summary message. Summaries the pointer does not name (failed, cancelled, superseded) never
/// appear. The store implements the same rule in SQL; this is the reference.
pub fn history_view<'a>(messages: &'a [Message], summary_id: Option<&str>) -> Vec<&'a Message> {
    let summary = summary_id
        .and_then(|id| messages.iter().find(|m| m.id == id && m.is_summary && m.status.is_complete()));
    let mut view = Vec::new();
    let start = match summary {
        Some(summary) => {
            view.push(summary);
            let pinned = summary.pinned_message.as_deref().and_then(|id| {
                messages.iter().find(|m| m.id == id && !m.is_summary && m.status.is_complete())
            });
            view.extend(pinned);
            match &summary.summarized_until {
                Some(until) => messages.iter().position(|m| &m.id == until).map_or(0, |i| i + 1),
                None => 0,
            }
        }
        None => 0,
    };
    view.extend(messages[start..].iter().filter(|m| !m.is_summary && m.status.is_complete()));
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str, role: Role) -> Message {
        Message::text(role, id).with_id(id)
    }

    #[test]
    fn history_view_starts_at_the_summary_and_resumes_after_its_cut() {
        let mut summary = msg("s1", Role::Assistant);
        summary.is_summary = true;
        summary.summarized_until = Some("a2".into());
        let mut failed = msg("s0", Role::Assistant);
        failed.is_summary = true;
        failed.status = MessageStatus::Failed;
        let messages = vec![
            msg("u1", Role::User),
            msg("a1", Role::Assistant),
            failed,
            msg("u2", Role::User),
            msg("a2", Role::Assistant),
            msg("u3", Role::User),
            summary,
            msg("a3", Role::Assistant),
        ];
        let ids = |v: Vec<&Message>| v.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(history_view(&messages, Some("s1"))), ["s1", "u3", "a3"]);
        assert_eq!(ids(history_view(&messages, None)), ["u1", "a1", "u2", "a2", "u3", "a3"]);
        assert_eq!(ids(history_view(&messages, Some("s0"))), ["u1", "a1", "u2", "a2", "u3", "a3"]);
    }

    #[test]
    fn a_pinned_message_follows_its_summary() {
        let mut summary = msg("s1", Role::Assistant);
        summary.is_summary = true;
        summary.summarized_until = Some("t1".into());
        summary.pinned_message = Some("u2".into());
        let messages = vec![
            msg("u1", Role::User),
            msg("a1", Role::Assistant),
            msg("u2", Role::User),
            msg("a2", Role::Assistant),
            msg("t1", Role::Tool),
            msg("a3", Role::Assistant),
            summary,
            msg("t3", Role::Tool),
        ];
        let ids = |v: Vec<&Message>| v.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(history_view(&messages, Some("s1"))), ["s1", "u2", "a3", "t3"]);
    }
}
