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

pub mod anthropic;
pub mod chat;
mod inbound;
pub mod responses;
pub mod sse;
pub mod upstream;

pub use inbound::{Answer, Delta, Failure, FailureKind, Inbound, Meta, WireError, Writer, now_secs};
