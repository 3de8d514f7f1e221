//! Remote chat models for Phosphor: [`OpenAiModel`] implements [`phosphor_base::ChatModel`] over
//! any OpenAI-compatible chat-completions endpoint, with async-openai underneath; [`WireModel`]
//! over Anthropic Messages and OpenAI Responses, with `phosphor-wire`'s bodies and readers.
//! [`connect`] builds the one a provider's `api` names (`chat`, `anthropic`, `responses`).
//!
//! Providers are data ([`ProviderConfig`](phosphor_base::config::ProviderConfig): base URL, the
//! environment variable holding the key, extra headers), not one type per vendor.
//!
//! - Answers stream: text and reasoning deltas (`reasoning_content` or `reasoning`) as they come,
//!   tool calls assembled from their fragments and emitted whole at the finish, then the usage
//!   (the server's, asked for with `stream_options.include_usage`, or our own
//!   [`ApproxCounter`](phosphor_base::ApproxCounter) count of request and output when it sends
//!   none), then the finish reason.
//! - Failures become [`phosphor_base::Error`]s by [`classify_error`], which knows how each server
//!   words a context overflow; [`RetryPolicy`] retries what may pass (rate limits, 5xx,
//!   connection errors) before anything was streamed, and never a context overflow: that goes
//!   to the caller, which compacts.
//! - Each call runs in a tracing span `chat {model}` with OpenTelemetry's `gen_ai.*` fields,
//!   usage included. The API key appears in no log, span or `Debug` output.
//!
//! Only this crate names async-openai types.
//!
//! # Ollama truncates instead of failing
//!
//! Ollama's OpenAI-compatible endpoint does not reject a prompt longer than the model's context
//! (`num_ctx`): it silently drops the oldest tokens and answers, so no overflow error ever comes
//! back. Configure the model's `context_window` to the `num_ctx` Ollama runs it with: Phosphor's
//! pre-request estimate against that window then compacts before anything is cut.
//!
//! ```no_run
//! use phosphor_base::config::{ModelConfig, ProviderConfig};
//! use phosphor_base::{ChatModel, ChatRequest, Message};
//! use phosphor_llm::OpenAiModel;
//!
//! # async fn run() -> phosphor_base::Result<()> {
//! let provider = ProviderConfig {
//!     base_url: "https://api.openai.com/v1".into(),
//!     api_key_env: Some("OPENAI_API_KEY".into()),
//!     ..ProviderConfig::default()
//! };
//! let model = ModelConfig {
//!     provider: "openai".into(),
//!     model: "gpt-4o-mini".into(),
//!     context_window: 128_000,
//!     max_output_tokens: 4096,
//! };
//! let model = OpenAiModel::new("openai", &provider, &model)?;
//! let request = ChatRequest { messages: vec![Message::user("Say hi")], ..ChatRequest::default() };
//! let answer = model.complete(request).await?;
//! println!("{} ({:?})", answer.text, answer.usage);
//! # Ok(())
//! # }
//! ```
//!
//! # Design notes
//!
//! **Architecture Invariant:** only phosphor-llm names async-openai types. API keys are read from the
//! environment variable the config names and appear in no log, span or `Debug` output.
//!
//! **Decisions.** Requests and responses go through async-openai as plain JSON (its `byot` feature)
//! so that `reasoning_content` and provider extensions pass. Our own tower transport keeps the HTTP
//! status, `retry-after` and the raw body of every error (async-openai would otherwise lose the status
//! on bodies it cannot parse) and replaces async-openai's built-in retry with ours: bounded
//! exponential backoff, only for retryable errors and only before the first event. A context overflow
//! is never retried. The backend records the `chat {model}` client span with the gen_ai attributes
//! and usage; the agent's turn and compaction spans enclose it.

mod assemble;
pub mod error;
mod model;
mod transport;
mod wire_model;

pub use error::{Error, Result, classify_error};
pub use model::{OpenAiModel, RetryPolicy, counter_for};
pub use wire_model::{Credential, WireModel, connect, connect_as};
