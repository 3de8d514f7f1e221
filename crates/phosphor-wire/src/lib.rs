//! The wire formats of the LLM APIs Phosphor speaks, on both sides: what an upstream provider is sent
//! and answers (`phosphor-llm`), and what a client of `phosphor serve` sends and is answered.
//!
//! Each format reads into and writes from [`phosphor_base::Message`], so that compaction, storage and
//! the agent never see a provider's JSON:
//!
//! - [`chat`]: OpenAI chat completions, also the common format of agent transcripts;
//! - [`anthropic`]: Anthropic Messages (`POST /v1/messages`), as Claude Code speaks it;
//! - [`responses`]: OpenAI Responses (`POST /v1/responses`), as Codex CLI speaks it.
//!
//! A request of any front reads into one [`Inbound`]; an answer is written from one [`Answer`],
//! whole, or streamed through a [`Writer`] as the events of its format from the [`Delta`]s the agent
//! produces ([`anthropic::Stream`], [`responses::Stream`], [`chat::Stream`]).
//! Upstream, [`anthropic::upstream`] and [`responses::upstream`] write the body `phosphor-llm`
//! sends and read the streamed answer ([`sse::Decoder`], then an [`upstream::Reader`]) into
//! `phosphor_base::StreamEvent`s.
//! Errors read by a front are [`WireError`]s: what was wrong and where, in words a client can act
//! on, and written in each API's own error shape.
//!
//! # Design notes
//!
//! A failure is one `Failure` (status and kind) that each format writes in its own error shape; the
//! cause-to-status mapping lives in `phosphor serve` alone. Upstream, `anthropic::upstream` and
//! `responses::upstream` write the body phosphor-llm sends and read the answer's events
//! (`sse::Decoder`, then an `upstream::Reader`) into phosphor-base's `StreamEvent`s; errors inside
//! a stream come back verbatim (`ReadError::Provider`) for phosphor-llm's one classifier.
//! **Architecture Invariant:** no other crate parses or writes a provider's request or response
//! JSON (the chat-completions stream chunks, read in phosphor-llm's `assemble.rs` from
//! async-openai, are the one exception left). `chat.rs` documents the canonical form for which
//! OpenAI JSON round-trips exactly; what the format cannot express (ids, summary flag, status,
//! usage) is filled with defaults when read. Readers say where a request is wrong and what is
//! allowed (`` `messages[0].content[0].type` is the string "video"; expected one of: ... ``). Where
//! a format holds what the chat upstream cannot take (`cache_control`, hosted tools), it is read
//! and dropped, and each module's documentation lists what. Reasoning a provider sealed (Anthropic
//! signatures, Responses' encrypted reasoning) is read into `Part::Reasoning`'s `seal` and written
//! back only by the writers of its own API.

pub mod anthropic;
pub mod chat;
mod inbound;
pub mod responses;
pub mod sse;
pub mod upstream;

pub use inbound::{Answer, Delta, Failure, FailureKind, Inbound, Meta, WireError, Writer, now_secs};
