//! Builders for chat-completion event streams shaped like the ones OpenAI sends.
//!
//! Every chunk is `chat.completion.chunk` JSON with OpenAI's key order: `id` (`chatcmpl-…`),
//! `object`, `created`, `model`, `service_tier`, `system_fingerprint`, `choices` with one choice
//! (`index`, `delta`, `logprobs`, `finish_reason`) and, when the request asked for
//! `stream_options.include_usage`, `"usage":null` on every chunk and a last chunk with
//! `"choices":[]` and the usage.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::server::MockResponse;

/// The model name the builders put in chunks unless told otherwise.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini-2024-07-18";

/// The `created` timestamp of every chunk (fixed, so that streams are reproducible).
pub const CREATED: u64 = 1_735_689_600;

static SEQUENCE: AtomicU64 = AtomicU64::new(1);

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `len` base-62 characters derived from `seed`, like the random part of OpenAI's ids.
fn alphanumeric(seed: u64, len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = splitmix(state);
            char::from(ALPHABET[(state % ALPHABET.len() as u64) as usize])
        })
        .collect()
}

/// A JSON string literal.
fn quote(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// Splits tool-call arguments into the small irregular fragments OpenAI streams (a few
/// characters each, on character boundaries). Empty arguments give no fragment.
pub fn argument_fragments(arguments: &str) -> Vec<&str> {
    const SIZES: [usize; 5] = [2, 5, 3, 7, 4];
    let mut fragments = Vec::new();
    let mut start = 0;
    let mut turn = 0;
    while start < arguments.len() {
        let mut end = (start + SIZES[turn % SIZES.len()]).min(arguments.len());
        while !arguments.is_char_boundary(end) {
            end += 1;
        }
        fragments.push(&arguments[start..end]);
        start = end;
        turn += 1;
    }
    fragments
}

/// Builds the `data:` payloads of one streamed chat completion, chunk by chunk.
///
/// ```
/// use phosphor_testkit::SseBuilder;
///
/// let events = SseBuilder::new().role().text("Hi").finish("stop").usage(12, 1).build();
/// assert_eq!(events.len(), 4);
/// assert!(events[0].starts_with(r#"{"id":"chatcmpl-"#));
/// assert!(events[3].contains(r#""choices":[],"usage":{"prompt_tokens":12,"completion_tokens":1"#));
/// ```
#[derive(Debug, Clone)]
pub struct SseBuilder {
    id: String,
    model: String,
    fingerprint: String,
    usage_field: bool,
    events: Vec<String>,
}

impl Default for SseBuilder {
    fn default() -> SseBuilder {
        SseBuilder::new()
    }
}

impl SseBuilder {
    /// A new stream with a fresh `chatcmpl-` id, [`DEFAULT_MODEL`], and `"usage":null` on chunks.
    pub fn new() -> SseBuilder {
        let seed = splitmix(SEQUENCE.fetch_add(1, Ordering::Relaxed));
        SseBuilder {
            id: format!("chatcmpl-{}", alphanumeric(seed, 29)),
            model: DEFAULT_MODEL.to_owned(),
            fingerprint: format!("fp_{:010x}", splitmix(seed) & 0xff_ffff_ffff),
            usage_field: true,
            events: Vec::new(),
        }
    }

    /// The stream's `chatcmpl-` id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Sets the model name of the chunks added from now on.
    pub fn model(mut self, model: &str) -> SseBuilder {
        self.model = model.to_owned();
        self
    }

    /// Whether chunks carry `"usage":null` (OpenAI adds it to every chunk when the request set
    /// `stream_options.include_usage`). On by default.
    pub fn usage_field(mut self, on: bool) -> SseBuilder {
        self.usage_field = on;
        self
    }

    /// Adds a chunk with the given delta (JSON object text, sent verbatim) and finish reason.
    pub fn delta(mut self, delta_json: &str, finish_reason: Option<&str>) -> SseBuilder {
        let finish = finish_reason.map(quote).unwrap_or_else(|| "null".to_owned());
        let usage = if self.usage_field { r#","usage":null"# } else { "" };
        self.events.push(format!(
            r#"{{"id":{},"object":"chat.completion.chunk","created":{CREATED},"model":{},"service_tier":"default","system_fingerprint":{},"choices":[{{"index":0,"delta":{delta_json},"logprobs":null,"finish_reason":{finish}}}]{usage}}}"#,
            quote(&self.id),
            quote(&self.model),
            quote(&self.fingerprint),
        ));
        self
    }

    /// The first chunk of a text answer: `{"role":"assistant","content":"","refusal":null}`.
    pub fn role(self) -> SseBuilder {
        self.delta(r#"{"role":"assistant","content":"","refusal":null}"#, None)
    }

    /// The first chunk of a tool-call answer: `{"role":"assistant","content":null,"refusal":null}`.
    pub fn role_for_tool_calls(self) -> SseBuilder {
        self.delta(r#"{"role":"assistant","content":null,"refusal":null}"#, None)
    }

    /// A text delta: `{"content":"…"}`.
    pub fn text(self, text: &str) -> SseBuilder {
        let delta = format!(r#"{{"content":{}}}"#, quote(text));
        self.delta(&delta, None)
    }

    /// A reasoning delta in the named field (`reasoning_content` as DeepSeek and vLLM send it,
    /// `reasoning` as OpenRouter and Ollama do): `{"content":null,"<field>":"…"}`.
    pub fn reasoning(self, field: &str, text: &str) -> SseBuilder {
        let delta = format!(r#"{{"content":null,{}:{}}}"#, quote(field), quote(text));
        self.delta(&delta, None)
    }

    /// The opening delta of tool call `index`: id, type, function name and empty arguments.
    pub fn tool_call_start(self, index: usize, id: &str, name: &str) -> SseBuilder {
        let delta = format!(
            r#"{{"tool_calls":[{{"index":{index},"id":{},"type":"function","function":{{"name":{},"arguments":""}}}}]}}"#,
            quote(id),
            quote(name),
        );
        self.delta(&delta, None)
    }

    /// A later delta of tool call `index`: only the index and an argument fragment.
    pub fn tool_call_arguments(self, index: usize, fragment: &str) -> SseBuilder {
        let delta = format!(
            r#"{{"tool_calls":[{{"index":{index},"function":{{"arguments":{}}}}}]}}"#,
            quote(fragment)
        );
        self.delta(&delta, None)
    }

    /// A whole tool call as OpenAI streams it: the opening delta, then the arguments in
    /// [`argument_fragments`].
    pub fn tool_call(mut self, index: usize, id: &str, name: &str, arguments: &str) -> SseBuilder {
        self = self.tool_call_start(index, id, name);
        for fragment in argument_fragments(arguments) {
            self = self.tool_call_arguments(index, fragment);
        }
        self
    }

    /// The closing chunk: an empty delta with `finish_reason` (`stop`, `tool_calls`, `length`, ...).
    pub fn finish(self, reason: &str) -> SseBuilder {
        self.delta("{}", Some(reason))
    }

    /// The usage chunk (`"choices":[]`) with no cached or reasoning tokens.
    pub fn usage(self, prompt_tokens: u64, completion_tokens: u64) -> SseBuilder {
        self.usage_with_details(prompt_tokens, completion_tokens, 0, 0)
    }

    /// The usage chunk (`"choices":[]`) with cached prompt tokens and reasoning tokens.
    pub fn usage_with_details(
        mut self,
        prompt_tokens: u64,
        completion_tokens: u64,
        cached_tokens: u64,
        reasoning_tokens: u64,
    ) -> SseBuilder {
        self.events.push(format!(
            r#"{{"id":{},"object":"chat.completion.chunk","created":{CREATED},"model":{},"service_tier":"default","system_fingerprint":{},"choices":[],"usage":{{"prompt_tokens":{prompt_tokens},"completion_tokens":{completion_tokens},"total_tokens":{},"prompt_tokens_details":{{"cached_tokens":{cached_tokens},"audio_tokens":0}},"completion_tokens_details":{{"reasoning_tokens":{reasoning_tokens},"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}}}}"#,
            quote(&self.id),
            quote(&self.model),
            quote(&self.fingerprint),
            prompt_tokens + completion_tokens,
        ));
        self
    }

    /// Adds any payload verbatim (an error object, a malformed chunk, ...).
    pub fn event(mut self, payload: impl Into<String>) -> SseBuilder {
        self.events.push(payload.into());
        self
    }

    /// The payloads built so far.
    pub fn build(self) -> Vec<String> {
        self.events
    }

    /// The payloads as a [`MockResponse::Sse`].
    pub fn into_response(self) -> MockResponse {
        MockResponse::Sse(self.events)
    }
}

fn finish_usage(builder: SseBuilder, usage: Option<(u64, u64)>) -> MockResponse {
    match usage {
        Some((prompt, completion)) => builder.usage(prompt, completion),
        None => builder,
    }
    .into_response()
}

/// A text answer: the role chunk, one chunk per text piece, `finish_reason: "stop"`, and with
/// `usage = Some((prompt, completion))` the usage chunk (otherwise no usage at all, as a server
/// that ignores `stream_options`).
pub fn sse_text(text_chunks: &[&str], usage: Option<(u64, u64)>) -> MockResponse {
    let mut builder = SseBuilder::new().usage_field(usage.is_some()).role();
    for text in text_chunks {
        builder = builder.text(text);
    }
    finish_usage(builder.finish("stop"), usage)
}

/// A tool-call answer: the role chunk, then each `(id, name, arguments)` call as OpenAI streams
/// parallel calls (opening delta, then argument fragments), `finish_reason: "tool_calls"`, and
/// the usage chunk when `usage` is given.
pub fn sse_tool_calls(calls: &[(&str, &str, &str)], usage: Option<(u64, u64)>) -> MockResponse {
    let mut builder = SseBuilder::new().usage_field(usage.is_some()).role_for_tool_calls();
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        builder = builder.tool_call(index, id, name, arguments);
    }
    finish_usage(builder.finish("tool_calls"), usage)
}

/// A reasoning model's answer as DeepSeek streams it: `reasoning_content` deltas (with
/// `content: null`), then `content` deltas (with `reasoning_content: null`), then
/// `finish_reason: "stop"` and the usage chunk when `usage` is given.
pub fn sse_reasoning_then_text(
    reasoning_chunks: &[&str],
    text_chunks: &[&str],
    usage: Option<(u64, u64)>,
) -> MockResponse {
    let mut builder = SseBuilder::new()
        .model("deepseek-reasoner")
        .usage_field(usage.is_some())
        .delta(r#"{"role":"assistant","content":null,"reasoning_content":""}"#, None);
    for reasoning in reasoning_chunks {
        builder = builder.reasoning("reasoning_content", reasoning);
    }
    for text in text_chunks {
        builder = builder.delta(&format!(r#"{{"content":{},"reasoning_content":null}}"#, quote(text)), None);
    }
    let builder = builder.delta(r#"{"content":"","reasoning_content":null}"#, Some("stop"));
    finish_usage(builder, usage)
}
