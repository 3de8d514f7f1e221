//! What every front reads a request into, and what every answer is written from.

use phosphor_base::{FinishReason, Message, ToolCall, ToolSpec, Usage};
use serde_json::Value;

/// A client's request, read from any of the formats: what the proxy needs of it, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inbound {
    /// The model the client asked for (`model`), when it named one.
    pub model: Option<String>,
    /// The system prompt: the format's own field and the leading system (or `developer`) messages,
    /// joined with blank lines.
    pub system_prompt: String,
    /// The client's function tools (tools of other kinds have no place in a function call and are
    /// left out; see each format).
    pub tools: Vec<ToolSpec>,
    /// Every other message, in order: a system message later in the conversation stays where it is.
    pub messages: Vec<Message>,
    /// The most tokens the answer may have.
    pub max_output_tokens: Option<u64>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Whether the client asked for a stream of events.
    pub stream: bool,
    /// A key the client gave its conversation in the body (Responses' `prompt_cache_key`), used to
    /// name the session when no header does.
    pub conversation_key: Option<String>,
    /// Whether the client asked to see the model's reasoning (see [`Meta::show_reasoning`]).
    pub show_reasoning: bool,
    /// Whether a stream should end with usage (see [`Meta::stream_usage`]).
    pub stream_usage: bool,
    /// The body's fields that pass to an upstream of the same API as they came (each format's
    /// `PASSED_THROUGH`; chat completions passes none).
    pub passed_through: serde_json::Map<String, Value>,
}

/// The fields of `body` named in `names`, as they are.
pub(crate) fn passed_through(
    body: &serde_json::Map<String, Value>,
    names: &[&str],
) -> serde_json::Map<String, Value> {
    names
        .iter()
        .filter_map(|name| Some(((*name).to_owned(), body.get(*name).filter(|v| !v.is_null())?.clone())))
        .collect()
}

/// What an answer carries besides its content, known before the model answers (a stream begins
/// with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// The response's id (`msg_...`, `resp_...`, `chatcmpl-...`).
    pub id: String,
    /// The model that answers.
    pub model: String,
    /// Unix seconds the answer was begun.
    pub created: u64,
    /// Whether a chat-completions stream ends with a usage chunk (`stream_options.include_usage`);
    /// the other formats always carry usage.
    pub stream_usage: bool,
    /// Whether the client asked to see the model's reasoning (Anthropic `thinking`); chat always
    /// writes it as `reasoning_content`, Responses never writes it.
    pub show_reasoning: bool,
}

/// A finished answer.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    /// The assistant message: text, reasoning, tool calls.
    pub message: &'a Message,
    /// The model call's usage: the request as it was sent upstream, after compaction.
    pub usage: Usage,
    /// Why the answer ended, when the backend said.
    pub finish_reason: Option<&'a FinishReason>,
}

impl Answer<'_> {
    /// Whether the answer calls tools (every format then says so as its stop reason).
    pub fn calls_tools(&self) -> bool {
        self.message.tool_calls().next().is_some()
    }

    /// Whether the answer was cut at its output limit.
    pub fn truncated(&self) -> bool {
        !self.calls_tools() && matches!(self.finish_reason, Some(FinishReason::Length))
    }
}

/// A piece of an answer as the model writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta<'a> {
    /// Visible text.
    Text(&'a str),
    /// Reasoning text.
    Reasoning(&'a str),
    /// The provider's seal on the reasoning written since the last one (see
    /// [`phosphor_base::Seal`]): a writer of the seal's API closes that block with it, any other
    /// writer writes nothing for it.
    Seal(&'a phosphor_base::Seal),
    /// A whole tool call (the agent passes calls on once their arguments are complete).
    ToolCall(&'a ToolCall),
}

/// Writes one answer as the server-sent events of a format: [`Writer::begin`], [`Writer::delta`]
/// for each piece as it arrives, then [`Writer::end`] or [`Writer::fail`]. Each returns the frames
/// to send, in order.
pub trait Writer: Send {
    /// The frames that open the stream, before any delta.
    fn begin(&mut self) -> Vec<String>;
    /// The frames for one piece of the answer.
    fn delta(&mut self, delta: Delta<'_>) -> Vec<String>;
    /// The frames that close the stream of a finished answer (stop reason, usage).
    fn end(&mut self, answer: &Answer<'_>) -> Vec<String>;
    /// The frames that close the stream of a request that failed after the stream began.
    fn fail(&mut self, failure: &Failure) -> Vec<String>;
}

/// What went wrong with a request, as every format can say it (each in its own error shape: see
/// the formats' `error_body`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The HTTP status.
    pub status: u16,
    /// The kind, for the format's error `type` and `code`.
    pub kind: FailureKind,
    /// The words.
    pub message: String,
    /// Seconds a client should wait before retrying (`Retry-After`).
    pub retry_after: Option<u64>,
}

/// The kinds of [`Failure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The request broke its format or asked for something this server does not do.
    InvalidRequest,
    /// The conversation does not fit the model's window even after compaction.
    ContextTooLong {
        /// The request's tokens, when known.
        tokens: Option<u64>,
        /// The window, when known.
        window: Option<u64>,
    },
    /// A missing or wrong key.
    Authentication,
    /// No such route.
    NotFound,
    /// The body is over the server's limit.
    TooLarge,
    /// Too many requests (in flight, or upstream).
    RateLimited,
    /// No answer in time.
    Timeout,
    /// The upstream model failed.
    Upstream,
    /// The proxy itself failed.
    Internal,
}

impl Failure {
    /// A failure of this status and kind.
    pub fn new(status: u16, kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure { status, kind, message: message.into(), retry_after: None }
    }

    /// OpenAI's error `type` (chat completions and Responses).
    pub fn openai_type(&self) -> &'static str {
        match self.kind {
            FailureKind::InvalidRequest | FailureKind::ContextTooLong { .. } | FailureKind::TooLarge => {
                "invalid_request_error"
            }
            FailureKind::Authentication => "authentication_error",
            FailureKind::NotFound => "not_found_error",
            FailureKind::RateLimited => "rate_limit_error",
            FailureKind::Timeout | FailureKind::Upstream | FailureKind::Internal => "api_error",
        }
    }

    /// OpenAI's error `code`, where it has one.
    pub fn openai_code(&self) -> Option<&'static str> {
        match self.kind {
            FailureKind::ContextTooLong { .. } => Some("context_length_exceeded"),
            FailureKind::RateLimited => Some("rate_limit_exceeded"),
            _ => None,
        }
    }

    /// OpenAI's error object (`{"message", "type", "param", "code"}`), without its envelope.
    pub fn openai_error(&self) -> Value {
        serde_json::json!({
            "message": self.message,
            "type": self.openai_type(),
            "param": null,
            "code": self.openai_code(),
        })
    }
}

impl From<WireError> for Failure {
    fn from(error: WireError) -> Failure {
        Failure::new(400, FailureKind::InvalidRequest, error.message)
    }
}

/// Unix seconds now.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A request that breaks its format: where, what is there, and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct WireError {
    /// The whole sentence, e.g. "`messages[2].content[0].type` is \"video\"; allowed: text, image, ...".
    pub message: String,
}

impl WireError {
    /// An error with these words.
    pub fn new(message: impl Into<String>) -> WireError {
        WireError { message: message.into() }
    }

    /// "`at` is FOUND; expected EXPECTED".
    pub(crate) fn at(at: &str, found: &Value, expected: &str) -> WireError {
        WireError::new(format!("`{at}` is {}; expected {expected}", describe(found)))
    }

    /// "`at` is missing; expected EXPECTED".
    pub(crate) fn missing(at: &str, expected: &str) -> WireError {
        WireError::new(format!("`{at}` is missing; expected {expected}"))
    }
}

/// A short description of a JSON value for an error: its type, and a string's start.
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("{b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) if s.chars().count() > 40 => {
            format!("the string {:?}...", s.chars().take(40).collect::<String>())
        }
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// Reads the body as a JSON object.
pub(crate) fn object(bytes: &[u8]) -> Result<serde_json::Map<String, Value>, WireError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|err| WireError::new(format!("the request body is not valid JSON: {err}")))?;
    match value {
        Value::Object(body) => Ok(body),
        other => {
            Err(WireError::new(format!("the request body is {}; expected a JSON object", describe(&other))))
        }
    }
}

/// An optional string field.
pub(crate) fn opt_str<'v>(
    object: &'v serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<&'v str>, WireError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(WireError::at(&join(at, key), other, "a string")),
    }
}

/// A required string field.
pub(crate) fn req_str<'v>(
    object: &'v serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<&'v str, WireError> {
    opt_str(object, key, at)?.ok_or_else(|| WireError::missing(&join(at, key), "a string"))
}

/// An optional positive integer field.
pub(crate) fn opt_positive(
    object: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<u64>, WireError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .filter(|n| *n > 0)
            .map(Some)
            .ok_or_else(|| WireError::at(key, value, "a positive integer")),
    }
}

/// An optional number field within `range`.
pub(crate) fn opt_number(
    object: &serde_json::Map<String, Value>,
    key: &str,
    range: std::ops::RangeInclusive<f64>,
) -> Result<Option<f32>, WireError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => {
            value.as_f64().filter(|t| range.contains(t)).map(|t| Some(t as f32)).ok_or_else(|| {
                WireError::at(key, value, &format!("a number from {} to {}", range.start(), range.end()))
            })
        }
    }
}

/// An optional boolean field (false when absent).
pub(crate) fn opt_bool(object: &serde_json::Map<String, Value>, key: &str) -> Result<bool, WireError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(WireError::at(key, other, "true or false")),
    }
}

/// `at.key`, or `key` at the root.
pub(crate) fn join(at: &str, key: &str) -> String {
    if at.is_empty() { key.to_owned() } else { format!("{at}.{key}") }
}

/// Tool arguments as the JSON text a tool call carries: a string is taken as written (the model's
/// text), anything else is serialised.
pub(crate) fn arguments_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The arguments of a call as a JSON value for formats that carry objects (Anthropic's `input`):
/// the parsed text, or `{}` for an empty one. Text that does not parse is passed as a string.
pub(crate) fn arguments_value(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// One server-sent event: `event: NAME` and its JSON data.
pub(crate) fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}
