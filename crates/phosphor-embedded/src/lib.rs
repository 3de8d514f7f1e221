//! Local GGUF chat models for Phosphor, run in-process by [mistral.rs](https://github.com/EricLBuehler/mistral.rs).
//!
//! ```no_run
//! use phosphor_core::config::InferenceConfig;
//! use phosphor_core::{ChatModel, ChatRequest, Message};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = InferenceConfig { enabled: true, model_repo: Some("Qwen3-0.6B".into()), ..Default::default() };
//! let model = phosphor_embedded::load(&config).await?;
//! let request = ChatRequest { messages: vec![Message::user("Say hello.")], ..Default::default() };
//! let answer = model.complete(request).await?;
//! println!("{} ({} tokens of {})", answer.text, answer.usage.unwrap_or_default().total(), model.info().context_window);
//! # Ok(())
//! # }
//! ```
//!
//! # Which model
//!
//! [`load`] takes `embedded_models.inference` from `phosphor.json`:
//!
//! - `model_path`, a local GGUF file, wins.
//! - Otherwise `model_repo`: a Hugging Face repo id (`owner/name`, or `owner/name:file.gguf` to name the file;
//!   without one a single-file 4-bit quantization is picked, Q4_K_M first) or a short name from [`SHORT_NAMES`]:
//!
//!   | Short name | Repo and file | Architecture |
//!   |---|---|---|
//!   | `Qwen3-0.6B` (default) | `unsloth/Qwen3-0.6B-GGUF`, `Qwen3-0.6B-Q4_K_M.gguf` | qwen3 |
//!   | `Qwen3-1.7B` | `unsloth/Qwen3-1.7B-GGUF`, `Qwen3-1.7B-Q4_K_M.gguf` | qwen3 |
//!   | `Qwen3-4B` | `unsloth/Qwen3-4B-GGUF`, `Qwen3-4B-Q4_K_M.gguf` | qwen3 |
//!   | `Qwen2.5-0.5B-Instruct` | `Qwen/Qwen2.5-0.5B-Instruct-GGUF`, `qwen2.5-0.5b-instruct-q4_k_m.gguf` | qwen2 |
//!   | `Qwen2.5-1.5B-Instruct` | `Qwen/Qwen2.5-1.5B-Instruct-GGUF`, `qwen2.5-1.5b-instruct-q4_k_m.gguf` | qwen2 |
//!   | `Llama-3.2-1B` | `bartowski/Llama-3.2-1B-Instruct-GGUF`, `Llama-3.2-1B-Instruct-Q4_K_M.gguf` | llama |
//!   | `Phi-3-mini` | `microsoft/Phi-3-mini-4k-instruct-gguf`, `Phi-3-mini-4k-instruct-q4.gguf` | phi3 |
//!   | `Qwen3.5-0.8B` | `unsloth/Qwen3.5-0.8B-GGUF`, `Qwen3.5-0.8B-Q4_K_M.gguf` | qwen35: refused |
//!   | `Gemma-2-2B` | `bartowski/gemma-2-2b-it-GGUF`, `gemma-2-2b-it-Q4_K_M.gguf` | gemma2: refused |
//!
//!   mistral.rs loads GGUF files of the architectures in [`SUPPORTED_ARCHITECTURES`] only; a short name of another
//!   architecture is refused before anything is downloaded, with the names that would work.
//! - Otherwise the default model, [`default_model`]: **Qwen3-0.6B** at Q4_K_M (about 400 MB), the most quality per
//!   megabyte among the architectures mistral.rs loads from GGUF.
//!
//! A repo's file is taken from the Hugging Face cache when it is there (no network at all), and downloaded into
//! it otherwise, with a progress bar, atomically (a `.part` file renamed when complete, its size checked).
//! `HF_HUB_OFFLINE=1` forbids downloads, `HF_ENDPOINT` names another server, `HF_HOME` / `HF_HUB_CACHE` move the
//! cache and `HF_TOKEN` opens gated repos: see [`HubSettings`]. When the model cannot be had, the error says what
//! was tried and how to point `model_path` at a local file.
//!
//! # How it runs
//!
//! - The context window is the GGUF's `{architecture}.context_length`; the chat template is the GGUF's own
//!   (`tokenizer.chat_template`), or ChatML when it has none.
//! - A model loads once per process: [`load`] keeps every engine, keyed by the file's canonical path and the device,
//!   and hands out the same [`Arc`](std::sync::Arc) again. Loading runs on a blocking thread; mistral.rs runs
//!   inference on a thread of its own, never on the async runtime's workers.
//! - Answers stream as [`StreamEvent::TextDelta`](phosphor_core::StreamEvent::TextDelta)s (and reasoning and tool
//!   calls when the model makes them), then [`StreamEvent::Usage`](phosphor_core::StreamEvent::Usage) with the
//!   prompt and answer token counts, then the finish. Each call runs in a `chat` span that records
//!   `gen_ai.usage.input_tokens` and `gen_ai.usage.output_tokens`.
//! - Sampling is greedy unless the request sets a temperature above 0; thinking is turned off for models whose
//!   template can (Qwen3): small local models gain little from it and take long.
//! - A prompt longer than the window fails with [`phosphor_core::Error::ContextOverflow`], which drives compaction.
//!
//! # GPUs
//!
//! The `cuda` and `metal` features compile mistral.rs's GPU backends in. With `gpu: true` the model runs on the
//! GPU when one is compiled in and present; otherwise it runs on the CPU after one warning.
//!
//! Only this crate names mistral.rs types.

mod catalog;
mod convert;
mod engine;
pub mod error;
mod hub;

pub use catalog::{
    RepoSpec, SHORT_NAMES, SUPPORTED_ARCHITECTURES, ShortName, default_model, is_supported_architecture,
    short_name,
};
pub use engine::{EmbeddedModel, PROVIDER, load, load_resolved, load_with};
pub use error::{EmbeddedError, Result};
pub use hub::{DEFAULT_ENDPOINT, HubSettings, ModelSource, ResolvedModel, resolve, resolve_repo};
