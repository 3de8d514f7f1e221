//! Test support for Phosphor crates (dev-only, never published).
//!
//! - [`MockServer`]: a loopback HTTP/1.1 server that speaks OpenAI's chat-completions streaming
//!   protocol byte for byte, serves scripted [`MockResponse`]s in order and records every request.
//! - [`SseBuilder`] and [`sse_text`], [`sse_tool_calls`], [`sse_reasoning_then_text`]: chunk
//!   streams shaped like OpenAI's (and DeepSeek's, for reasoning).
//! - [`ERROR_FIXTURES`]: the error bodies real servers send, for classification tests.
//! - [`ScriptedModel`]: an in-process [`phosphor_base::ChatModel`] that replays event scripts.
//!
//! ```
//! use phosphor_testkit::{sse_text, MockServer};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let server = MockServer::start(vec![sse_text(&["Hel", "lo"], Some((9, 2)))]).await;
//! assert!(server.base_url().starts_with("http://127.0.0.1:"));
//! assert!(server.requests().is_empty());
//! # });
//! ```

pub mod fixtures;
pub mod scripted;
pub mod server;
pub mod sse;
pub mod wires;

pub use fixtures::{ERROR_FIXTURES, ErrorFixture, error_fixture};
pub use scripted::{Script, ScriptedModel, text_turn, tool_calls_turn};
pub use server::{MockResponse, MockServer, RecordedRequest, Responder};
pub use sse::{SseBuilder, argument_fragments, sse_reasoning_then_text, sse_text, sse_tool_calls};
pub use wires::{signature, wire_answer, wire_text, wire_thinking_tool_calls, wire_tool_calls};
