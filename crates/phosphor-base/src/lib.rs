//! Phosphor's foundation: the message model, token accounting, the model trait and configuration.
//!
//! Every other Phosphor crate builds on these types. The crate does no network I/O and starts
//! no runtime; its one filesystem access is reading configuration files in [`config::load`].
//!
//! ```
//! use phosphor_base::message::Message;
//! use phosphor_base::tokens::{ApproxCounter, TokenCounter, TokenLedger};
//!
//! let history = vec![Message::user("Fix the failing test in src/lib.rs"), Message::assistant("On it.")];
//! let ledger = TokenLedger::from_messages(&ApproxCounter, &history);
//! assert_eq!(ledger.total(), history.iter().map(|m| ApproxCounter.count_message(m)).sum::<u64>());
//! ```

pub mod config;
pub mod error;
pub mod exact;
pub mod gguf;
pub mod message;
pub mod model;
pub mod outline;
#[doc(hidden)]
pub mod testing;
pub mod time;
pub mod windows;

pub mod tokens;

pub use error::{Error, Result};
pub use message::{FinishReason, Message, MessageStatus, Part, Role, Session, ToolCall, ToolResult, Usage};
pub use model::{
    ChatModel, ChatRequest, ChatStream, Completion, ModelInfo, Passthrough, StreamEvent, ToolSpec,
};
pub use tokens::{ApproxCounter, TokenCounter, TokenLedger};
