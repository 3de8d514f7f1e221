//! Events a turn emits, for a UI to consume as they happen.

use serde::{Deserialize, Serialize};

use phosphor_base::{ToolCall, ToolResult, Usage};

/// Why a compaction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionReason {
    /// The history reached `summarize_threshold` of the window before a request.
    Threshold,
    /// After the new user message the request would exceed the window (forced, even with
    /// `disable_auto_summarize`).
    Overflow,
    /// The request fits, but not with room for the model's maximum answer (forced).
    OutputReserve,
    /// The model rejected the request as too long; compacted, then retried (under the progress rule).
    Rejected,
    /// Asked for by the user (`/compact`).
    Manual,
}

/// One thing that happened during a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// Another turn or compaction of this session is running; this prompt waits its turn.
    Queued {
        /// The session.
        session_id: String,
    },
    /// The turn started: its user message is stored.
    TurnStarted {
        /// The session.
        session_id: String,
        /// The stored user message.
        message_id: String,
    },
    /// A piece of the answer.
    TextDelta {
        /// The text.
        text: String,
    },
    /// A piece of visible reasoning.
    ReasoningDelta {
        /// The text.
        text: String,
    },
    /// The provider sealed the reasoning streamed since the last seal (see
    /// [`phosphor_base::Seal`]); a proxy front hands it to a client of the same API.
    ReasoningSealed(phosphor_base::Seal),
    /// The model called a tool.
    ToolCall(ToolCall),
    /// A tool returned.
    ToolResult(ToolResult),
    /// Usage of one model call.
    Usage {
        /// The model.
        model: String,
        /// Its usage.
        usage: Usage,
    },
    /// Observation masking moved: the oldest tool outputs are now shown as placeholders (the
    /// store keeps them whole).
    OutputsMasked {
        /// The last message whose tool outputs are masked.
        masked_until: String,
        /// Tool outputs this step masked.
        outputs: usize,
        /// Estimated request tokens before.
        tokens_before: u64,
        /// Estimated request tokens after.
        tokens_after: u64,
    },
    /// A compaction started.
    CompactionStarted {
        /// Why.
        reason: CompactionReason,
        /// The summarizer.
        model: String,
        /// Estimated tokens of the request before compaction.
        tokens_before: u64,
    },
    /// A piece of the summary, as it streams.
    CompactionDelta {
        /// The text.
        text: String,
    },
    /// A compaction finished; the session now continues from the summary.
    CompactionFinished {
        /// The stored summary message.
        summary_message_id: String,
        /// The summarizer.
        model: String,
        /// Estimated request tokens before.
        tokens_before: u64,
        /// Estimated request tokens after.
        tokens_after: u64,
        /// Wall time, milliseconds.
        duration_ms: u64,
        /// How hard the summarizer's input had to be cut to fit (0 = standard pruning).
        shed_level: u32,
        /// The summary was prepared in the background (`options.summarize_prepare_at`):
        /// `duration_ms` is how long the session waited for what was left of it.
        #[serde(default)]
        prepared: bool,
    },
    /// A summary for the next compaction started in the background (`options.summarize_prepare_at`);
    /// the session goes on meanwhile.
    SummaryPreparing {
        /// The summarizer.
        model: String,
        /// Estimated request tokens when it started.
        tokens_before: u64,
        /// Messages of the history it was cut from (the previous summary and what it folds).
        messages: u64,
    },
    /// A prepared summary was thrown away unused: it was paid for, and the next compaction
    /// writes its own.
    PreparedSummaryDiscarded {
        /// Why.
        reason: String,
    },
    /// A compaction failed; the session is unchanged.
    CompactionFailed {
        /// Why.
        error: String,
    },
    /// Something the user should know that does not stop the turn.
    Warning {
        /// What.
        message: String,
    },
    /// The turn ended.
    TurnFinished {
        /// The final assistant message.
        message_id: String,
        /// Model calls made in this turn.
        model_calls: u32,
    },
    /// The turn failed; the message says why. Stored messages stay stored.
    Error {
        /// What went wrong.
        message: String,
    },
}

/// Where a turn sends its events. A dropped receiver is fine: events are then discarded.
pub type EventSender = tokio::sync::mpsc::UnboundedSender<AgentEvent>;

pub(crate) fn emit(events: Option<&EventSender>, event: AgentEvent) {
    if let Some(events) = events {
        // A closed channel means nobody listens any more; the turn goes on regardless.
        let _ = events.send(event);
    }
}
