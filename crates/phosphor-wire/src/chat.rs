//! Conversion between Phosphor [`Message`]s and OpenAI chat-completions request messages, the common format of
//! agent transcripts.
//!
//! [`to_openai`] writes `serde_json::Value` messages; [`from_openai`] reads them back; [`parse_transcript`] reads a
//! transcript file (a JSON array of messages, an object with a `messages` array, or JSON lines).
//!
//! ```
//! use phosphor_base::message::{Message, Part, Role, ToolCall};
//! use phosphor_wire::chat::{from_openai, to_openai};
//! use serde_json::json;
//!
//! let call = ToolCall { id: "call_1".into(), name: "ls".into(), arguments: "{}".into() };
//! let history = vec![
//!     Message::user("What is in this directory?").with_id("msg-0"),
//!     Message::new(Role::Assistant, vec![Part::ToolCall(call)]).with_id("msg-1"),
//!     Message::tool_result("call_1", "ls", "Cargo.toml\nsrc", false).with_id("msg-2"),
//! ];
//! let wire = to_openai(&history);
//! assert_eq!(wire[1], json!({
//!     "role": "assistant",
//!     "content": null,
//!     "tool_calls": [{ "id": "call_1", "type": "function", "function": { "name": "ls", "arguments": "{}" } }],
//! }));
//! assert_eq!(wire[2], json!({ "role": "tool", "tool_call_id": "call_1", "content": "Cargo.toml\nsrc" }));
//! // Ids aside (the format has none; messages read without one get `msg-{index}`), nothing is lost.
//! assert_eq!(from_openai(&wire)?, history);
//! # Ok::<(), phosphor_wire::chat::TranscriptError>(())
//! ```
//!
//! # Mapping
//!
//! | Phosphor                               | OpenAI message                                                        |
//! |----------------------------------------|-----------------------------------------------------------------------|
//! | [`Message::role`]                      | `role` (`developer` is read as `system`, legacy `function` as `tool`) |
//! | [`Part::Text`] only                    | `content` string (several text parts are joined)                      |
//! | [`Part::Text`] and [`Part::Image`]     | `content` array of `{type: text}` / `{type: image_url, image_url: {url, detail}}` |
//! | no text or image                       | `content: null` (`""` on tool messages)                              |
//! | [`Part::Reasoning`]                    | `reasoning_content` (several are joined)                              |
//! | [`Part::ToolCall`]                     | `tool_calls: [{id, type: "function", function: {name, arguments}}]`   |
//! | each [`Part::ToolResult`]              | its own `{role: tool, tool_call_id, content}` message                 |
//! | [`Message::name`]                      | `name`, on every message written for it                               |
//! | [`Message::id`], [`Message::is_summary`] | nothing, unless asked for with [`ToOpenAiOptions`]                  |
//!
//! # What the format cannot express
//!
//! [`to_openai`] drops what has no place in an OpenAI message, and [`from_openai`] fills it with defaults:
//! the message id (read back as `msg-{index}` unless an `id` field is present), [`Message::is_summary`] (a
//! compaction summary is written as the plain message it is; [`ToOpenAiOptions::summary_flag`] adds a non-standard
//! `is_summary` field instead), [`Message::status`], [`Message::model`], [`Message::usage`], the session id and
//! timestamps, [`ToolResult::is_error`], [`Part::Finish`], the `developer`/`system` distinction, and the order of parts
//! of different kinds. A tool result's name is not written either: reading recovers it from the earlier call with the
//! same id.
//!
//! So the round trip `from_openai(&to_openai(&messages)) == messages` holds for messages in *canonical form*:
//! ids `msg-{index}`, fields above at their defaults, and parts ordered as reading produces them:
//!
//! - system, user and assistant messages: at most one [`Part::Reasoning`], then either at most one [`Part::Text`] or
//!   any text and image parts of which at least one is an image, then the tool calls;
//! - tool messages: exactly one [`Part::ToolResult`] (named as its call is, or by [`Message::name`] when no earlier
//!   call has its id, or `""`), then image parts.
//!
//! Conversely `to_openai(&from_openai(&values)?) == values` for canonical JSON: what [`to_openai`] writes. Reading
//! accepts more than it writes (see [`from_openai`]), and everything [`to_openai`] writes reads back without error.
//!
//! The serve front (a request read into an [`crate::Inbound`], answers written whole or streamed) is in
//! `chat/front.rs`, the tests in `chat/tests.rs`. This file keeps the reader and the writer of messages
//! together, a little over 800 lines, because each is the other's inverse: the round-trip rules above
//! are kept by reading the two side by side.

mod front;
#[cfg(test)]
mod tests;

pub use front::{Stream, error_body, read_request, whole};

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde_json::{Map, Value, json};

use phosphor_base::message::{Message, Part, Role, ToolCall, ToolResult};

/// Where in a transcript a problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The 1-based line a message of a JSON-lines transcript starts on; `None` for a JSON document.
    pub line: Option<usize>,
    /// The JSON path within the document (or the line), e.g. `$[3].tool_calls[0].function.name`.
    pub path: String,
}

impl Location {
    fn root(path: &str) -> Location {
        Location { line: None, path: path.to_owned() }
    }

    fn field(&self, key: &str) -> Location {
        Location { line: self.line, path: format!("{}.{key}", self.path) }
    }

    fn index(&self, index: usize) -> Location {
        Location { line: self.line, path: format!("{}[{index}]", self.path) }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.path),
            None => f.write_str(&self.path),
        }
    }
}

/// Why a transcript could not be read. Both variants are faults of the input: fix it and read again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TranscriptError {
    /// The text is not JSON (or a line of a JSON-lines file is not). Fix the text at `line` and `column`.
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Syntax {
        /// 1-based line of the text.
        line: usize,
        /// 1-based column (in bytes) of the line.
        column: usize,
        /// What the JSON parser expected.
        message: String,
    },
    /// The JSON is not a transcript, or a message in it breaks the format. Fix the value at `location`; `expected`
    /// says what is allowed there.
    #[error("{location}: {found}; expected {expected}")]
    Invalid {
        /// Where the offending value is (or where a missing one belongs).
        location: Location,
        /// What is there, e.g. `unknown role "robot"`, `missing` or `found a number`.
        found: String,
        /// What is allowed there.
        expected: String,
    },
}

fn invalid(location: &Location, found: impl Into<String>, expected: impl Into<String>) -> TranscriptError {
    TranscriptError::Invalid { location: location.clone(), found: found.into(), expected: expected.into() }
}

fn syntax(error: &serde_json::Error) -> TranscriptError {
    let text = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    let message = text.strip_suffix(&suffix).unwrap_or(&text).to_owned();
    TranscriptError::Syntax { line: error.line(), column: error.column(), message }
}

/// Options of [`to_openai_with`]. The default writes plain OpenAI messages, which strict servers accept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToOpenAiOptions {
    /// Write each message's (non-empty) id as an `id` field, which [`from_openai`] keeps. When a message becomes
    /// several OpenAI messages, the first carries the id.
    pub ids: bool,
    /// Write `"is_summary": true` on compaction summaries (on the first OpenAI message written for each), which
    /// [`from_openai`] reads back. Not part of the OpenAI format: servers that reject unknown fields refuse it.
    pub summary_flag: bool,
}

/// The OpenAI messages for a whole history, in order, with the default [`ToOpenAiOptions`].
pub fn to_openai(messages: &[Message]) -> Vec<Value> {
    to_openai_with(messages, &ToOpenAiOptions::default())
}

/// The OpenAI messages for a whole history, in order.
pub fn to_openai_with(messages: &[Message], options: &ToOpenAiOptions) -> Vec<Value> {
    messages.iter().flat_map(|message| message_to_openai_with(message, options)).collect()
}

/// The OpenAI messages for one message, with the default [`ToOpenAiOptions`]: usually one, but each tool result
/// becomes its own `role: tool` message.
pub fn message_to_openai(message: &Message) -> Vec<Value> {
    message_to_openai_with(message, &ToOpenAiOptions::default())
}

/// The OpenAI messages for one message: usually one, but each tool result becomes its own `role: tool` message.
///
/// Any message converts, canonical or not (see the [module docs](self)): a tool message's text and images
/// join the tool result before them (or the first one), and tool results in a message of another role follow
/// that message as tool messages.
pub fn message_to_openai_with(message: &Message, options: &ToOpenAiOptions) -> Vec<Value> {
    let mut out = match message.role {
        Role::Tool => tool_messages(message),
        role => other_messages(role, message),
    };
    for value in &mut out {
        if let (Some(name), Value::Object(object)) = (&message.name, &mut *value) {
            object.insert("name".into(), Value::String(name.clone()));
        }
    }
    if let Some(Value::Object(first)) = out.first_mut() {
        if options.ids && !message.id.is_empty() {
            first.insert("id".into(), Value::String(message.id.clone()));
        }
        if options.summary_flag && message.is_summary {
            first.insert("is_summary".into(), Value::Bool(true));
        }
    }
    out
}

/// The parts of one OpenAI message, gathered by kind.
#[derive(Default)]
struct Gathered<'a> {
    result: Option<&'a ToolResult>,
    content: Vec<&'a Part>,
    reasoning: Vec<&'a str>,
    calls: Vec<&'a ToolCall>,
}

impl<'a> Gathered<'a> {
    /// Adds a part other than a tool result; finish reasons have no place and are dropped.
    fn add(&mut self, part: &'a Part) {
        match part {
            Part::Text { .. } | Part::Image { .. } => self.content.push(part),
            Part::Reasoning { text, .. } => self.reasoning.push(text),
            Part::ToolCall(call) => self.calls.push(call),
            Part::ToolResult(_) | Part::Finish { .. } => {}
        }
    }

    fn is_empty(&self) -> bool {
        self.result.is_none() && self.content.is_empty() && self.reasoning.is_empty() && self.calls.is_empty()
    }

    /// Adds `reasoning_content` and `tool_calls` when there are any.
    fn finish(&self, mut object: Map<String, Value>) -> Value {
        if !self.reasoning.is_empty() {
            object.insert("reasoning_content".into(), Value::String(self.reasoning.concat()));
        }
        if !self.calls.is_empty() {
            let calls = self
                .calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": { "name": call.name, "arguments": call.arguments },
                    })
                })
                .collect();
            object.insert("tool_calls".into(), Value::Array(calls));
        }
        Value::Object(object)
    }
}

fn base(role: &str) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert("role".into(), Value::String(role.to_owned()));
    object
}

fn other_messages(role: Role, message: &Message) -> Vec<Value> {
    let mut main = Gathered::default();
    let mut results = Vec::new();
    for part in &message.parts {
        match part {
            Part::ToolResult(result) => results.push(result),
            part => main.add(part),
        }
    }
    let mut out = Vec::new();
    if !main.is_empty() || results.is_empty() {
        let mut object = base(role.as_str());
        object.insert("content".into(), content_value(&main.content));
        out.push(main.finish(object));
    }
    for result in results {
        let mut object = base("tool");
        object.insert("tool_call_id".into(), Value::String(result.call_id.clone()));
        object.insert("content".into(), Value::String(result.content.clone()));
        out.push(Value::Object(object));
    }
    out
}

fn tool_messages(message: &Message) -> Vec<Value> {
    // Every tool result starts a message; the parts before the first result join it.
    let mut segments = vec![Gathered::default()];
    for part in &message.parts {
        match (part, segments.last_mut()) {
            (Part::ToolResult(result), Some(last)) if last.result.is_none() => last.result = Some(result),
            (Part::ToolResult(result), _) => {
                segments.push(Gathered { result: Some(result), ..Gathered::default() })
            }
            (part, Some(last)) => last.add(part),
            (_, None) => {}
        }
    }
    segments
        .iter()
        .map(|segment| {
            let mut text = segment.result.map(|r| r.content.clone()).unwrap_or_default();
            let mut images = Vec::new();
            for part in &segment.content {
                match part {
                    Part::Text { text: more } => text.push_str(more),
                    image => images.push(*image),
                }
            }
            let content = if images.is_empty() {
                Value::String(text)
            } else {
                let mut items = Vec::new();
                if !text.is_empty() {
                    items.push(json!({ "type": "text", "text": text }));
                }
                items.extend(images.into_iter().filter_map(content_item));
                Value::Array(items)
            };
            let mut object = base("tool");
            let call_id = segment.result.map(|r| r.call_id.clone()).unwrap_or_default();
            object.insert("tool_call_id".into(), Value::String(call_id));
            object.insert("content".into(), content);
            segment.finish(object)
        })
        .collect()
}

/// `null` without parts, a string for text alone, an array of content parts once there is an image.
fn content_value(parts: &[&Part]) -> Value {
    if parts.is_empty() {
        Value::Null
    } else if parts.iter().any(|part| matches!(part, Part::Image { .. })) {
        Value::Array(parts.iter().filter_map(|part| content_item(part)).collect())
    } else {
        let mut text = String::new();
        for part in parts {
            if let Part::Text { text: more } = part {
                text.push_str(more);
            }
        }
        Value::String(text)
    }
}

fn content_item(part: &Part) -> Option<Value> {
    match part {
        Part::Text { text } => Some(json!({ "type": "text", "text": text })),
        Part::Image { url, detail } => {
            let mut image = Map::new();
            image.insert("url".into(), Value::String(url.clone()));
            if let Some(detail) = detail {
                image.insert("detail".into(), Value::String(detail.clone()));
            }
            Some(json!({ "type": "image_url", "image_url": image }))
        }
        _ => None,
    }
}

/// Reads OpenAI chat-completions messages.
///
/// Accepted, beyond what [`to_openai`] writes:
///
/// - roles `system`, `developer` (read as system), `user`, `assistant`, `tool` and the legacy `function`;
/// - `content` as a string, `null` (or absent), or an array of parts: `text`, `input_text` and `output_text`
///   (`{text}`), `refusal` (`{refusal}`, kept as text), `image_url` (`{image_url: {url, detail}}` or a URL string)
///   and `input_image` (`{image_url, detail}`); a message-level `refusal` string is kept as text too;
/// - `reasoning_content` or `reasoning` (a string; when both are given they must agree);
/// - `tool_calls` (function calls; `arguments` given as a JSON object is kept as its JSON text) and the legacy
///   `function_call`, whose call gets the id `function-call-{index}` and is answered by the next `function`
///   message of the same name;
/// - `tool_call_id` (on tool messages, where it is required), `name`, `id` (kept as the message id; otherwise
///   the id is `msg-{index}`, `index` counting messages from 0), and `is_summary` (see [`ToOpenAiOptions`]).
///
/// A tool message's result is named after the earlier tool call with its `tool_call_id`, else by its `name` field,
/// else `""`. Other fields are ignored, with a `tracing` warning when they held something (see
/// [`from_openai_with_warnings`]). A tool message's content parts join into the result's text; its images follow
/// the result as image parts.
pub fn from_openai(values: &[Value]) -> Result<Vec<Message>, TranscriptError> {
    let (messages, warnings) = from_openai_with_warnings(values)?;
    log_warnings(&warnings);
    Ok(messages)
}

/// [`from_openai`], returning the warnings about ignored fields instead of logging them: one line per field
/// name, e.g. `$[3].audio: ignored field "audio" (and 2 more like it); the message format has no place for it`.
pub fn from_openai_with_warnings(values: &[Value]) -> Result<(Vec<Message>, Vec<String>), TranscriptError> {
    let root = Location::root("$");
    read_all(values.iter().enumerate().map(|(index, value)| (root.index(index), value)))
}

/// Reads a transcript: a JSON array of messages, an object with a `messages` array (other keys are ignored), or
/// JSON lines with one message object per line (blank lines allowed). Messages are read as by [`from_openai`];
/// an empty text is an empty transcript.
pub fn parse_transcript(text: &str) -> Result<Vec<Message>, TranscriptError> {
    let (messages, warnings) = parse_transcript_with_warnings(text)?;
    log_warnings(&warnings);
    Ok(messages)
}

/// [`parse_transcript`], returning the warnings about ignored fields instead of logging them.
pub fn parse_transcript_with_warnings(text: &str) -> Result<(Vec<Message>, Vec<String>), TranscriptError> {
    const TRANSCRIPT: &str = "a JSON array of messages, an object with a \"messages\" array, or JSON lines with one message object each";
    let values = json_values(text.strip_prefix('\u{feff}').unwrap_or(text))?;
    match values.as_slice() {
        [(_, Value::Array(items))] => from_openai_with_warnings(items),
        [(_, Value::Object(object))] if object.contains_key("messages") => {
            let at = Location::root("$.messages");
            match object.get("messages") {
                Some(Value::Array(items)) => {
                    read_all(items.iter().enumerate().map(|(index, value)| (at.index(index), value)))
                }
                other => Err(invalid(&at, found(other.unwrap_or(&Value::Null)), "an array of messages")),
            }
        }
        [(_, Value::Object(object))] if !object.contains_key("role") => {
            Err(invalid(&Location::root("$"), "an object with neither \"messages\" nor \"role\"", TRANSCRIPT))
        }
        [(_, value)] if !value.is_object() => Err(invalid(&Location::root("$"), found(value), TRANSCRIPT)),
        lines => read_all(
            lines.iter().map(|(line, value)| (Location { line: Some(*line), path: "$".into() }, value)),
        ),
    }
}

/// The JSON values of `text` in order, each with the 1-based line it starts on.
fn json_values(text: &str) -> Result<Vec<(usize, Value)>, TranscriptError> {
    let mut values = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let (mut line, mut counted) = (1, 0);
    loop {
        let offset = stream.byte_offset();
        let Some(next) = stream.next() else { break };
        let value = next.map_err(|error| syntax(&error))?;
        let rest = &text[offset..];
        let start = offset + rest.len() - rest.trim_start_matches([' ', '\t', '\r', '\n']).len();
        line += text[counted..start].matches('\n').count();
        counted = start;
        values.push((line, value));
    }
    Ok(values)
}

fn log_warnings(warnings: &[String]) {
    for warning in warnings {
        tracing::warn!("transcript: {warning}");
    }
}

fn read_all<'v>(
    items: impl IntoIterator<Item = (Location, &'v Value)>,
) -> Result<(Vec<Message>, Vec<String>), TranscriptError> {
    let mut reader = Reader::default();
    let messages = items
        .into_iter()
        .enumerate()
        .map(|(index, (at, value))| reader.message(index, &at, value))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((messages, reader.ignored.warnings()))
}

const ROLES: &str = "one of system, developer, user, assistant, tool, function";
const MESSAGE_KEYS: &[&str] = &[
    "role",
    "content",
    "name",
    "id",
    "reasoning_content",
    "reasoning",
    "tool_calls",
    "function_call",
    "tool_call_id",
    "refusal",
    "is_summary",
];
const PART_TYPES: &str = "one of text, input_text, output_text, refusal, image_url, input_image";

/// Fields that were present, held something, and were ignored: per field name, the first path and a count.
#[derive(Default)]
struct Ignored(BTreeMap<String, (String, usize)>);

impl Ignored {
    fn check(&mut self, object: &Map<String, Value>, known: &[&str], at: &Location) {
        for (key, value) in object {
            let empty = match value {
                Value::Null => true,
                Value::Array(items) => items.is_empty(),
                Value::Object(fields) => fields.is_empty(),
                _ => false,
            };
            if !empty && !known.contains(&key.as_str()) {
                self.0.entry(key.clone()).or_insert_with(|| (at.field(key).to_string(), 0)).1 += 1;
            }
        }
    }

    fn warnings(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|(key, (first, count))| {
                let more = match count {
                    1 => String::new(),
                    2 => " (and 1 more like it)".to_owned(),
                    n => format!(" (and {} more like it)", n - 1),
                };
                format!("{first}: ignored field {}{more}; the message format has no place for it", quote(key))
            })
            .collect()
    }
}

#[derive(Default)]
struct Reader {
    /// Tool call id to tool name, for every call read so far (a later call with the same id wins).
    call_names: HashMap<String, String>,
    /// Legacy `function_call`s not yet answered by a `function` message: (id, name).
    legacy_calls: Vec<(String, String)>,
    ignored: Ignored,
}

impl Reader {
    fn message(&mut self, index: usize, at: &Location, value: &Value) -> Result<Message, TranscriptError> {
        let object = value.as_object().ok_or_else(|| invalid(at, found(value), "a message object"))?;
        let role_at = at.field("role");
        let role_name = match object.get("role") {
            None => return Err(invalid(&role_at, "missing", ROLES)),
            Some(Value::String(name)) => name.as_str(),
            Some(other) => return Err(invalid(&role_at, found(other), ROLES)),
        };
        let role = Role::parse(role_name)
            .ok_or_else(|| invalid(&role_at, format!("unknown role {}", quote(role_name)), ROLES))?;
        let id = optional_str(object, "id", at)?.map_or_else(|| format!("msg-{index}"), str::to_owned);
        let name = optional_str(object, "name", at)?;
        let is_summary = match object.get("is_summary") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(flag)) => *flag,
            Some(other) => return Err(invalid(&at.field("is_summary"), found(other), "true or false")),
        };
        let reasoning = reasoning(object, at)?;
        let mut content = content(object.get("content"), &at.field("content"), &mut self.ignored)?;
        if let Some(refusal) = optional_str(object, "refusal", at)? {
            content.push(Part::Text { text: refusal.to_owned() });
        }
        let calls = self.tool_calls(object, index, at)?;
        let call_id = optional_str(object, "tool_call_id", at)?;
        self.ignored.check(object, MESSAGE_KEYS, at);

        let mut parts = Vec::new();
        if let Some(text) = reasoning {
            parts.push(Part::reasoning(text.to_owned()));
        }
        let mut message_name = name.map(str::to_owned);
        if role == Role::Tool {
            let (call_id, result_name) = if role_name == "function" {
                let function = name.ok_or_else(|| {
                    invalid(&at.field("name"), "missing", "the name of the function whose result this is")
                })?;
                message_name = None;
                let call_id = match call_id {
                    Some(call_id) => call_id.to_owned(),
                    None => self.answer_legacy(function).unwrap_or_default(),
                };
                (call_id, function.to_owned())
            } else {
                let call_id = call_id.ok_or_else(|| {
                    invalid(
                        &at.field("tool_call_id"),
                        "missing",
                        "the id of the tool call this message answers",
                    )
                })?;
                let result_name =
                    self.call_names.get(call_id).map(String::as_str).or(name).unwrap_or_default();
                (call_id.to_owned(), result_name.to_owned())
            };
            let mut text = String::new();
            let mut images = Vec::new();
            for part in content {
                match part {
                    Part::Text { text: more } => text.push_str(&more),
                    image => images.push(image),
                }
            }
            parts.push(Part::ToolResult(ToolResult {
                call_id,
                name: result_name,
                content: text,
                is_error: false,
            }));
            parts.extend(images);
        } else {
            if call_id.is_some() {
                return Err(invalid(
                    &at.field("tool_call_id"),
                    format!("a tool_call_id on a {role_name} message"),
                    "tool_call_id only on tool messages",
                ));
            }
            parts.extend(content);
        }
        for call in &calls {
            self.call_names.insert(call.id.clone(), call.name.clone());
        }
        parts.extend(calls.into_iter().map(Part::ToolCall));

        let mut message = Message::new(role, parts).with_id(id);
        message.name = message_name;
        message.is_summary = is_summary;
        Ok(message)
    }

    /// The id of the first unanswered legacy call of `function`, now answered.
    fn answer_legacy(&mut self, function: &str) -> Option<String> {
        let position = self.legacy_calls.iter().position(|(_, name)| name == function)?;
        Some(self.legacy_calls.remove(position).0)
    }

    fn tool_calls(
        &mut self,
        object: &Map<String, Value>,
        index: usize,
        at: &Location,
    ) -> Result<Vec<ToolCall>, TranscriptError> {
        let mut calls = Vec::new();
        let calls_at = at.field("tool_calls");
        match object.get("tool_calls") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (position, item) in items.iter().enumerate() {
                    calls.push(tool_call(item, &calls_at.index(position), &mut self.ignored)?);
                }
            }
            Some(other) => return Err(invalid(&calls_at, found(other), "an array of tool calls")),
        }
        let function_at = at.field("function_call");
        match object.get("function_call") {
            None | Some(Value::Null) => {}
            Some(Value::Object(function)) => {
                let (name, arguments) = function_fields(function, &function_at, &mut self.ignored)?;
                let id = format!("function-call-{index}");
                self.legacy_calls.push((id.clone(), name.clone()));
                calls.push(ToolCall { id, name, arguments });
            }
            Some(other) => {
                return Err(invalid(&function_at, found(other), "an object with name and arguments"));
            }
        }
        Ok(calls)
    }
}

fn tool_call(item: &Value, at: &Location, ignored: &mut Ignored) -> Result<ToolCall, TranscriptError> {
    let call = item
        .as_object()
        .ok_or_else(|| invalid(at, found(item), "a tool call object with id, type and function"))?;
    let id = required_str(call, "id", at, "the call's id (a string)")?.to_owned();
    match call.get("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(kind)) if kind == "function" => {}
        Some(Value::String(kind)) => {
            return Err(invalid(
                &at.field("type"),
                format!("unsupported tool call type {}", quote(kind)),
                "\"function\"",
            ));
        }
        Some(other) => return Err(invalid(&at.field("type"), found(other), "\"function\"")),
    }
    let function_at = at.field("function");
    let function = match call.get("function") {
        Some(Value::Object(function)) => function,
        None => return Err(invalid(&function_at, "missing", "an object with name and arguments")),
        Some(other) => return Err(invalid(&function_at, found(other), "an object with name and arguments")),
    };
    ignored.check(call, &["id", "type", "function", "index"], at);
    let (name, arguments) = function_fields(function, &function_at, ignored)?;
    Ok(ToolCall { id, name, arguments })
}

/// The `name` and `arguments` of a function call; absent arguments are `""`, an object its JSON text.
fn function_fields(
    function: &Map<String, Value>,
    at: &Location,
    ignored: &mut Ignored,
) -> Result<(String, String), TranscriptError> {
    let name = required_str(function, "name", at, "the function's name (a string)")?.to_owned();
    let arguments = match function.get("arguments") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(value @ (Value::Object(_) | Value::Array(_))) => value.to_string(),
        Some(other) => {
            return Err(invalid(
                &at.field("arguments"),
                found(other),
                "the arguments as a string of JSON text",
            ));
        }
    };
    ignored.check(function, &["name", "arguments"], at);
    Ok((name, arguments))
}

fn reasoning<'v>(object: &'v Map<String, Value>, at: &Location) -> Result<Option<&'v str>, TranscriptError> {
    let content = optional_str(object, "reasoning_content", at)?;
    let plain = optional_str(object, "reasoning", at)?;
    match (content, plain) {
        (Some(content), Some(plain)) if content != plain => Err(invalid(
            &at.field("reasoning"),
            "text that differs from reasoning_content",
            "only one of reasoning_content and reasoning, or the same text in both",
        )),
        (Some(text), _) | (None, Some(text)) => Ok(Some(text)),
        (None, None) => Ok(None),
    }
}

/// The text and image parts of a `content` value.
fn content(
    value: Option<&Value>,
    at: &Location,
    ignored: &mut Ignored,
) -> Result<Vec<Part>, TranscriptError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![Part::Text { text: text.clone() }]),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| content_part(item, &at.index(index), ignored))
            .collect(),
        Some(other) => Err(invalid(at, found(other), "a string, null, or an array of content parts")),
    }
}

fn content_part(item: &Value, at: &Location, ignored: &mut Ignored) -> Result<Part, TranscriptError> {
    let part = item.as_object().ok_or_else(|| invalid(at, found(item), "a content part object"))?;
    let kind = required_str(part, "type", at, PART_TYPES)?;
    let (part_value, known): (Part, &[&str]) = match kind {
        "text" | "input_text" | "output_text" => {
            let text = required_str(part, "text", at, "the text (a string)")?;
            (Part::Text { text: text.to_owned() }, &["type", "text"])
        }
        "refusal" => {
            let text = required_str(part, "refusal", at, "the refusal text (a string)")?;
            (Part::Text { text: text.to_owned() }, &["type", "refusal"])
        }
        "image_url" => {
            let image_at = at.field("image_url");
            let (url, detail) = match part.get("image_url") {
                Some(Value::String(url)) => (url.as_str(), None),
                Some(Value::Object(image)) => {
                    let url = required_str(image, "url", &image_at, "the image URL (a string)")?;
                    let detail = optional_str(image, "detail", &image_at)?;
                    ignored.check(image, &["url", "detail"], &image_at);
                    (url, detail)
                }
                None => return Err(invalid(&image_at, "missing", "an object with a url, or a URL string")),
                Some(other) => {
                    return Err(invalid(&image_at, found(other), "an object with a url, or a URL string"));
                }
            };
            (Part::Image { url: url.to_owned(), detail: detail.map(str::to_owned) }, &["type", "image_url"])
        }
        "input_image" => {
            let url = required_str(part, "image_url", at, "the image URL (a string)")?;
            let detail = optional_str(part, "detail", at)?;
            (
                Part::Image { url: url.to_owned(), detail: detail.map(str::to_owned) },
                &["type", "image_url", "detail"],
            )
        }
        other => {
            return Err(invalid(
                &at.field("type"),
                format!("unsupported content part type {}", quote(other)),
                PART_TYPES,
            ));
        }
    };
    ignored.check(part, known, at);
    Ok(part_value)
}

/// The string at `key`; `None` when absent or `null`.
fn optional_str<'v>(
    object: &'v Map<String, Value>,
    key: &str,
    at: &Location,
) -> Result<Option<&'v str>, TranscriptError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(invalid(&at.field(key), found(other), "a string")),
    }
}

fn required_str<'v>(
    object: &'v Map<String, Value>,
    key: &str,
    at: &Location,
    expected: &str,
) -> Result<&'v str, TranscriptError> {
    match object.get(key) {
        Some(Value::String(text)) => Ok(text),
        None => Err(invalid(&at.field(key), "missing", expected)),
        Some(other) => Err(invalid(&at.field(key), found(other), expected)),
    }
}

fn found(value: &Value) -> String {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    format!("found {kind}")
}

/// `text` as a JSON string literal.
fn quote(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}
