//! `phosphor-agent`: an agent loop over a stored session that compacts its history automatically
//! when the model's context window fills, as `shared/spec/COMPACTION.md` describes, without
//! compaction loops, orphaned tool results or lost messages.
//!
//! A turn ([`SessionAgent::run_turn`]):
//! 1. stores the user message (it is never lost, whatever happens next);
//! 2. **post-user-message overflow check**: if the estimated request (system prompt, tool schemas,
//!    history since the summary) exceeds the window, compaction is forced; it is forced too when the
//!    request fits but leaves no room for the model's maximum answer;
//! 3. **pre-request threshold check**: `estimate / window >= summarize_threshold` compacts, unless
//!    `disable_auto_summarize` (the forced checks of step 2 and the rejected-request retry stay on);
//! 4. asks the large model, runs its tool calls and loops until it answers (bounded), storing
//!    every message; the same checks run before each later request of the turn;
//! 5. if the model rejects a request as too long, compacts once and retries once.
//!
//! At most one automatic compaction runs per turn. If the session is still over the threshold
//! afterwards the turn goes on with a warning when the request fits, and stops with
//! [`AgentError::StillOverflowing`] when it does not.
//!
//! Compaction never deletes or rewrites stored messages: it appends a summary message, and the
//! session's summary pointer moves to it only once it completed.
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn phosphor_store::SessionStore>, model: std::sync::Arc<dyn phosphor_core::ChatModel>) -> Result<(), phosphor_agent::AgentError> {
//! use phosphor_agent::{Models, SessionAgent};
//! use phosphor_core::config::Options;
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
pub mod artifacts;
mod error;
mod events;
mod tool;

pub use agent::{
    AgentSettings, CompactionReport, Models, SUMMARY_PREFIX, SessionAgent, TokenStatus, TurnOutcome,
};
pub use artifacts::ArtifactTrail;
pub use error::{AgentError, Result};
pub use events::{AgentEvent, CompactionReason, EventSender};
pub use tool::{Tool, ToolOutput, Tools};
