//! What the upstream side of every wire shares: a model's streamed answer read event by event
//! into [`StreamEvent`]s ([`Reader`]), and what can go wrong while reading it ([`ReadError`]).
//!
//! The chat-completions reader lives in `phosphor-llm` (it reads async-openai's chunks); the
//! Anthropic and Responses readers are [`crate::anthropic::upstream::Reader`] and
//! [`crate::responses::upstream::Reader`], each beside its wire's request body.

use phosphor_base::{ApproxCounter, FinishReason, StreamEvent, TokenCounter, Usage};

use crate::sse::Event;

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The stream broke the format: what was wrong.
    Malformed(String),
    /// The provider reported an error inside the stream: the status its error type stands for
    /// (Anthropic's `overloaded_error` is a 529), and the error as the provider wrote it, for
    /// `phosphor-llm`'s classification.
    Provider {
        /// The HTTP status the error would have had, when its type says.
        status: Option<u16>,
        /// The error JSON, verbatim.
        body: String,
    },
}

/// Reads one wire's streamed answer.
pub trait Reader: Send {
    /// Reads one server-sent event; returns the events it completes.
    fn event(&mut self, event: &Event) -> Result<Vec<StreamEvent>, ReadError>;

    /// The closing events once the stream ended: the usage (the provider's, else `input_estimate`
    /// and a count of the output) and the finish. Fails when the answer never said it ended.
    fn finish(&mut self, input_estimate: u64) -> Result<Vec<StreamEvent>, ReadError>;
}

/// What every reader keeps of an answer: its usage, its finish, and a count of what it wrote for
/// a provider that reports no usage.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) usage: Option<Usage>,
    pub(crate) finish: Option<FinishReason>,
    pub(crate) calls: usize,
    pub(crate) output_tokens: u64,
}

impl Tally {
    /// Counts `text` as written output.
    pub(crate) fn wrote(&mut self, text: &str) {
        self.output_tokens += ApproxCounter.count_text(text);
    }

    /// The closing events; see [`Reader::finish`]. `ended` names the event that should have ended
    /// the answer, for the error.
    pub(crate) fn close(&mut self, input_estimate: u64, ended: &str) -> Result<Vec<StreamEvent>, ReadError> {
        let Some(mut reason) = self.finish.take() else {
            return Err(ReadError::Malformed(format!("the stream ended before {ended}")));
        };
        if self.calls > 0 && reason == FinishReason::Stop {
            reason = FinishReason::ToolCalls;
        }
        let usage = self.usage.take().unwrap_or(Usage {
            input_tokens: input_estimate,
            output_tokens: self.output_tokens,
            ..Usage::default()
        });
        Ok(vec![StreamEvent::Usage(usage), StreamEvent::Finish { reason }])
    }
}

/// The data of `event` as JSON.
pub(crate) fn data(event: &Event) -> Result<serde_json::Value, ReadError> {
    serde_json::from_str(&event.data).map_err(|error| {
        let excerpt: String = event.data.chars().take(200).collect();
        ReadError::Malformed(format!("the data of a {:?} event is not JSON ({error}): {excerpt}", event.name))
    })
}
