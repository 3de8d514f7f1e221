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
//!
//! # Design notes
//!
//! **Architecture Invariant:** phosphor-base does no network I/O and starts no runtime. It reads only
//! the files it is handed: configuration files (`config::load`), a GGUF file's header
//! (`gguf::GgufMetadata::read` takes any reader) and a `tokenizer.json` (`exact::HfCounter::from_file`);
//! it writes nothing.
//!
//! **Architecture Invariant:** the model trait has one required streaming method; `complete` is a
//! default method that collects the stream. Context overflow is its own error variant
//! (`Error::ContextOverflow`): it is what drives compaction.
//!
//! **API Boundary:** every other crate speaks in `Message`, `ChatRequest` and `StreamEvent`; no
//! provider's wire types appear in this crate.
//!
//! **Decisions.** Config tiers are merged as raw JSON (objects merge key by key; scalars, arrays and
//! `null` replace), then deserialised, checked for unknown keys and validated once; each leaf value
//! remembers its file, so an error names the file that set the offending value. GGUF metadata is read
//! without touching tensor data. Tokenizers carried in a GGUF follow llama.cpp's behaviour (its
//! pre-tokenizer table for byte-level BPE; SentencePiece vocabularies as score-ranked BPE with byte
//! fallback), checked id for id against llama.cpp on SmolLM2.

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
pub use message::{
    FinishReason, Message, MessageStatus, Part, Role, Seal, Session, ToolCall, ToolResult, Usage,
};
pub use model::{
    ChatModel, ChatRequest, ChatStream, Completion, ModelInfo, Passthrough, StreamEvent, ToolSpec,
};
pub use tokens::{ApproxCounter, TokenCounter, TokenLedger};
