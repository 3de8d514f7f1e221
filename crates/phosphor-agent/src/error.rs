//! The agent's error type.

use phosphor_prompt::Error as PromptError;
use phosphor_store::StoreError;

/// Result alias for [`AgentError`].
pub type Result<T, E = AgentError> = std::result::Result<T, E>;

/// What can stop a turn or a compaction. Every variant leaves the stored session consistent:
/// messages already stored stay stored, and the summary pointer moves only after a summary completed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A model call failed. See [`phosphor_base::Error`] for whether to retry.
    #[error(transparent)]
    Model(#[from] phosphor_base::Error),
    /// The session store failed. The session is as the store last saw it; retry once the store is healthy.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The summary prompt could not be rendered (the compiled-in default always renders, so this
    /// points at a profile problem). Fix the template or the profile name.
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// An evaluation could not grade (`phosphor eval --judge`): the judge's template failed, or the
    /// judge did not answer with a grade. The message says which; fix the template or choose another judge.
    #[error("{message}")]
    Eval {
        /// What went wrong.
        message: String,
    },
    /// No session with this id. Create it first, or check the id.
    #[error("no session with id {id}")]
    SessionNotFound {
        /// The id asked for.
        id: String,
    },
    /// One message is too large to fit the model's window on its own, even after compaction.
    /// It stays stored; shorten it or use a model with a larger window.
    #[error(
        "the message is {tokens} tokens, and with the system prompt, tool definitions and room for the answer \
         ({overhead} tokens) it cannot fit the {window}-token context window of {model}"
    )]
    MessageTooLarge {
        /// Estimated tokens of the message.
        tokens: u64,
        /// Tokens of everything else a request needs.
        overhead: u64,
        /// The model's window.
        window: u64,
        /// The model.
        model: String,
    },
    /// The request does not fit the window with room for the answer, and no compaction could make
    /// it fit (see `tried`). Nothing more is done automatically (no compaction loop); compact
    /// manually with narrower instructions, or use a larger window.
    #[error(
        "the request is still {tokens} tokens, and with {reserve} kept for the answer it does not fit the \
         {window}-token window of {model}; {tried}; stopping instead of compacting again"
    )]
    StillOverflowing {
        /// Estimated request tokens.
        tokens: u64,
        /// Tokens kept for the answer.
        reserve: u64,
        /// The window.
        window: u64,
        /// The model.
        model: String,
        /// What was tried, in words (compactions run, and why no further one could help).
        tried: String,
    },
    /// The summarizer rejected every reduced version of the history; nothing is left to shed.
    /// The session is unchanged. Use a summarizer with a larger window.
    #[error(
        "cannot summarize: even with every tool output omitted and only the latest turn kept, the input is \
         {tokens} tokens for the {window}-token window of {model}"
    )]
    NothingToShed {
        /// Estimated tokens of the smallest input tried.
        tokens: u64,
        /// The summarizer's window.
        window: u64,
        /// The summarizer.
        model: String,
    },
    /// The summarizer's answer ended without a usable summary (cancelled, filtered, failed or
    /// empty). It is marked failed and the session is unchanged; compact again later.
    #[error("the summary is incomplete: {reason}")]
    SummaryIncomplete {
        /// What was wrong with it.
        reason: String,
    },
    /// There is nothing to summarize (the history is empty or only the kept recent turns).
    #[error("nothing to compact: the history since the last summary has no message that would be folded")]
    NothingToCompact,
    /// `summarize_model` names a model that is not configured. Configure it, or pick another `summarize_model`.
    #[error("summarize_model is {choice:?} but no {choice} model is configured; {hint}")]
    ModelNotConfigured {
        /// The configured choice.
        choice: &'static str,
        /// What to configure.
        hint: &'static str,
    },
}
