//! `phosphor-agent`: an agent loop over a stored session that compacts its history automatically
//! when the model's context window fills (docs/ARCHITECTURE.md says how and why), without
//! compaction loops, orphaned tool results or lost messages.
//!
//! A turn ([`SessionAgent::run_turn`]):
//! 1. stores the user message (it is never lost, whatever happens next);
//! 2. before **every** request of the turn, runs the triggers of [`policy::trigger`]: the
//!    **post-user-message overflow check** (the estimated request exceeds the window, or leaves no
//!    room for the model's maximum answer: forced) and the **pre-request threshold check**
//!    (`estimate / window >= summarize_threshold`, unless `disable_auto_summarize`);
//! 3. a compaction inside the turn may fold the turn's own earlier tool rounds: the user message
//!    that opened the turn stays verbatim right after the summary, the most recent round(s) stay
//!    verbatim, and no tool call is separated from its result ([`policy::cut`]);
//! 4. asks the large model, runs its tool calls and loops until it answers (bounded), storing
//!    every message;
//! 5. if the model rejects a request as too long, compacts and retries.
//!
//! Compactions follow a progress rule instead of a fixed count ([`policy::permit`]): one may run
//! only when something is left to fold and a model response arrived since the previous one, so
//! compactions never outnumber responses and cannot loop; `summarize_max_per_turn` (default 8)
//! is a backstop. When the triggers fire and no compaction can bring the request under the window
//! with room for the answer, the turn stops with [`AgentError::StillOverflowing`], which names
//! the tokens, the window, the model and what was tried; when it fits but stays above the
//! threshold, the turn goes on with one warning.
//!
//! Every summary ends with a [`SessionState`] trail that Phosphor writes itself, whatever the model
//! wrote: the user's requests verbatim, the latest plan, files with their last change, commands
//! with their outcome, within `summarize_state_max_tokens`.
//!
//! Compaction never deletes or rewrites stored messages: it appends a summary message, and the
//! session's summary pointer moves to it only once it completed.
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn phosphor_store::SessionStore>, model: std::sync::Arc<dyn phosphor_base::ChatModel>) -> Result<(), phosphor_agent::AgentError> {
//! use phosphor_agent::{Models, SessionAgent};
//! use phosphor_base::config::Options;
//!
//! let agent = SessionAgent::new(store, Models::new(model), Options::default())
//!     .with_system_prompt("You are a careful coding assistant.");
//! let session = agent.create_session("demo").await?;
//! let (events, mut rx) = tokio::sync::mpsc::unbounded_channel();
//! let outcome = agent.run_turn(&session.id, "Where is the config parsed?", Some(&events)).await?;
//! println!("{}", outcome.final_message.text_content());
//! # Ok(()) }
//! ```

mod agent;
mod compaction;
mod error;
pub mod eval;
mod events;
pub mod exchange;
pub mod names;
pub mod policy;
mod prepare;
mod repetition;
mod shown;
pub mod state;
mod tool;
mod turn;

pub use agent::{AgentSettings, Models, SessionAgent, TokenStatus};
pub use compaction::{CompactionReport, SummaryInput, first_summary_input};
pub use error::{AgentError, Result};
pub use events::{AgentEvent, CompactionReason, EventSender};
pub use exchange::{Claim, Exchange, Reply};
pub use prepare::Preparations;
pub use shown::SUMMARY_PREFIX;
pub use state::{FileOp, SessionState};
pub use tool::{Tool, ToolOutput, Tools};
pub use turn::TurnOutcome;
