//! The error type shared by every model backend, and by the agent when it reports them.

use std::time::Duration;

/// Result alias for this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong talking to a model. Each variant says what the caller should do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request does not fit the model's context window. Do not retry as is: compact the
    /// history (or prune harder) and send a smaller request.
    #[error("context window exceeded: {message}")]
    ContextOverflow {
        /// The provider's words.
        message: String,
        /// Tokens the provider says the request had, when it says.
        requested_tokens: Option<u64>,
        /// The window the provider says it has, when it says.
        limit_tokens: Option<u64>,
    },
    /// The provider is throttling. Retry after `retry_after` (or a backoff of your own).
    #[error("rate limited: {message}")]
    RateLimited {
        /// The provider's words.
        message: String,
        /// How long the provider asked us to wait.
        retry_after: Option<Duration>,
    },
    /// The credentials were refused. Do not retry; fix the key.
    #[error("authentication failed: {message}")]
    Auth {
        /// The provider's words.
        message: String,
    },
    /// No API key: the named environment variable is unset or empty. Set it and run again.
    #[error("missing API key: set the environment variable {env_var}")]
    MissingApiKey {
        /// The environment variable to set.
        env_var: String,
    },
    /// A server-side or network failure that may pass. Retry with backoff.
    #[error("transient model error{}: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    Transient {
        /// The HTTP status, when there was one.
        status: Option<u16>,
        /// What happened.
        message: String,
    },
    /// The request was refused as malformed. Do not retry; the message says what to change.
    #[error("request rejected{}: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    BadRequest {
        /// The HTTP status, when there was one.
        status: Option<u16>,
        /// The provider's words.
        message: String,
    },
    /// The model's stream broke its protocol (bad JSON, a tool call without a name). Retrying may help.
    #[error("malformed model stream: {0}")]
    Stream(String),
    /// A local model could not be found, loaded or run. Do not retry; the message says what to fix.
    #[error("model error: {0}")]
    Model(String),
    /// The caller cancelled the request.
    #[error("cancelled")]
    Cancelled,
}

impl Error {
    /// Whether retrying the same request later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::RateLimited { .. } | Error::Transient { .. } | Error::Stream(_))
    }

    /// Whether this is a context overflow (the trigger for compaction).
    pub fn is_context_overflow(&self) -> bool {
        matches!(self, Error::ContextOverflow { .. })
    }
}
