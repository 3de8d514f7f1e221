//! Local GGUF chat models for Phosphor, run in-process by [llama.cpp](https://github.com/ggml-org/llama.cpp) or
//! [mistral.rs](https://github.com/EricLBuehler/mistral.rs).
//!
//! ```no_run
//! use phosphor_base::config::InferenceConfig;
//! use phosphor_base::{ChatModel, ChatRequest, Message};
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
//! # Engines
//!
//! Two engines sit behind the same [`ChatModel`](phosphor_base::ChatModel), each an optional cargo feature (both
//! are on by default):
//!
//! - `llamacpp`: llama.cpp through the `llama-cpp-2` crate, built from source with CMake (needs `cmake`, a C++
//!   compiler and libclang). It loads [`LLAMA_CPP_ARCHITECTURES`]: gemma3, qwen35 and the rest.
//! - `mistralrs`: mistral.rs, pure Rust. It loads [`MISTRAL_RS_ARCHITECTURES`] only.
//!
//! `embedded_models.inference.engine` picks one: `auto` (the default) reads the GGUF header's
//! `general.architecture` without loading the weights and takes llama.cpp when it is compiled in and knows the
//! architecture, else mistral.rs on the same terms ([`choose_engine`]). llama.cpp comes first because it measured
//! far faster on CPUs (see docs/BENCHMARKS.md: several times the prefill and generation speed on the same file).
//! An explicit engine that is not compiled in, or cannot run the file, fails naming what would work.
//!
//! # Which model
//!
//! [`load`] takes `embedded_models.inference` from `phosphor.json`:
//!
//! - `model_path`, a local GGUF file, wins.
//! - Otherwise `model_repo`: a Hugging Face repo id (`owner/name`, or `owner/name:file.gguf` to name the file;
//!   without one a single-file 4-bit quantization is picked, Q4_K_M first) or a short name from [`SHORT_NAMES`]:
//!
//!   | Short name | Repo and file | Architecture | Engines |
//!   |---|---|---|---|
//!   | `Qwen3-0.6B` (default) | `unsloth/Qwen3-0.6B-GGUF`, `Qwen3-0.6B-Q4_K_M.gguf` | qwen3 | both |
//!   | `Qwen3-1.7B` | `unsloth/Qwen3-1.7B-GGUF`, `Qwen3-1.7B-Q4_K_M.gguf` | qwen3 | both |
//!   | `Qwen3-4B` | `unsloth/Qwen3-4B-GGUF`, `Qwen3-4B-Q4_K_M.gguf` | qwen3 | both |
//!   | `Qwen2.5-0.5B-Instruct` | `Qwen/Qwen2.5-0.5B-Instruct-GGUF`, `qwen2.5-0.5b-instruct-q4_k_m.gguf` | qwen2 | both |
//!   | `Qwen2.5-1.5B-Instruct` | `Qwen/Qwen2.5-1.5B-Instruct-GGUF`, `qwen2.5-1.5b-instruct-q4_k_m.gguf` | qwen2 | both |
//!   | `Llama-3.2-1B` | `bartowski/Llama-3.2-1B-Instruct-GGUF`, `Llama-3.2-1B-Instruct-Q4_K_M.gguf` | llama | both |
//!   | `Phi-3-mini` | `microsoft/Phi-3-mini-4k-instruct-gguf`, `Phi-3-mini-4k-instruct-q4.gguf` | phi3 | both |
//!   | `Gemma-3-270M` | `unsloth/gemma-3-270m-it-GGUF`, `gemma-3-270m-it-Q4_K_M.gguf` | gemma3 | llama.cpp |
//!   | `Gemma-3-1B` | `unsloth/gemma-3-1b-it-GGUF`, `gemma-3-1b-it-Q4_K_M.gguf` | gemma3 | llama.cpp |
//!   | `Qwen3.5-0.8B` | `unsloth/Qwen3.5-0.8B-GGUF`, `Qwen3.5-0.8B-Q4_K_M.gguf` | qwen35 | llama.cpp |
//!   | `Gemma-2-2B` | `bartowski/gemma-2-2b-it-GGUF`, `gemma-2-2b-it-Q4_K_M.gguf` | gemma2 | llama.cpp |
//!
//!   A short name that no engine of this build (or not the configured engine) can run is refused before anything
//!   is downloaded, with the names that would work.
//! - Otherwise the default model, [`default_model`]: **Qwen3-0.6B** at Q4_K_M (about 400 MB), the most quality per
//!   megabyte among the architectures both engines load, so every build runs it.
//!
//! A repo's file is taken from the Hugging Face cache when it is there (no network at all), and downloaded into
//! it otherwise, with a progress bar, atomically (a `.part` file renamed when complete, its size checked).
//! `HF_HUB_OFFLINE=1` forbids downloads, `HF_ENDPOINT` names another server, `HF_HOME` / `HF_HUB_CACHE` move the
//! cache and `HF_TOKEN` opens gated repos: see [`HubSettings`]. When the model cannot be had, the error says what
//! was tried and how to point `model_path` at a local file. Both engines share this resolution.
//!
//! # How it runs
//!
//! - The context window is the GGUF's `{architecture}.context_length`; the chat template is the GGUF's own
//!   (`tokenizer.chat_template`), or when it has none ChatML (Gemma's turns for the Gemma family, on llama.cpp;
//!   also when llama.cpp does not recognise the file's template: llama.cpp applies templates it knows by their
//!   text, not by running Jinja).
//! - A model loads once per process: [`load`] keeps every engine, keyed by the file's canonical path, the engine
//!   and the device, and hands out the same [`Arc`](std::sync::Arc) again. Loading runs on a blocking thread;
//!   inference runs on threads of the engines' own (mistral.rs) or on a blocking thread per answer (llama.cpp),
//!   never on the async runtime's workers. On llama.cpp answers to one model take turns.
//! - Answers stream as [`StreamEvent::TextDelta`](phosphor_base::StreamEvent::TextDelta)s, then
//!   [`StreamEvent::Usage`](phosphor_base::StreamEvent::Usage) with the prompt and answer token counts, then the
//!   finish. mistral.rs also streams reasoning and tool calls when the model makes them; the llama.cpp engine
//!   answers in text only (tool definitions are ignored with a warning, tool traffic in the history is shown to
//!   the model as text). Each call runs in a `chat` span that records `gen_ai.usage.input_tokens` and
//!   `gen_ai.usage.output_tokens`.
//! - Sampling is greedy unless the request sets a temperature above 0; thinking is turned off for models whose
//!   template can (Qwen3): small local models gain little from it and take long.
//! - Dropping the stream cancels the answer: llama.cpp stops between two tokens (or two prompt batches).
//! - A prompt longer than the window fails with [`phosphor_base::Error::ContextOverflow`], which drives compaction.
//!
//! # GPUs
//!
//! `vulkan` compiles llama.cpp's Vulkan backend in (AMD, Intel and NVIDIA GPUs; needs `libvulkan-dev` and `glslc`
//! to build). `cuda` and `metal` compile the CUDA or Metal backend into every engine compiled in. With
//! `gpu: true` the model runs on the first GPU the chosen engine finds; with none compiled in or none present it
//! runs on the CPU after one warning, and so does a GPU that fails to load the model (out of memory, a driver
//! error). With `gpu: false` nothing runs on a GPU, even when one is compiled in.
//!
//! Only this crate names the engines' types.
//!
//! # Design notes
//!
//! **Architecture Invariant:** only phosphor-embedded names llama.cpp, mistral.rs and hf-hub types.
//! Resolution is one code path for both engines. A model that the configured engine (or, for `auto`,
//! no engine of the build) cannot run is refused before anything is downloaded.
//!
//! **Decisions.**
//! - `engine: auto` reads `general.architecture` from the GGUF header (phosphor-base's reader, no
//!   weights loaded) and takes llama.cpp when it is compiled in and knows the architecture, else
//!   mistral.rs. The rule comes from measurement: on this project's 2-core CI machine llama.cpp is
//!   several times faster than mistral.rs at prefill and generation on the same file
//!   (docs/BENCHMARKS.md). No GPU measurement exists; the order stays the same there, and only
//!   llama.cpp has a Vulkan backend.
//! - One engine per canonical file path, engine and device for the whole process, shared by every
//!   session and never unloaded. Loading runs on a blocking thread. mistral.rs infers on its own
//!   engine thread; llama.cpp on a blocking thread per answer, with a fresh context sized to the
//!   prompt plus the answer, and answers to one model take turns (llama-cpp-2 warns that creating
//!   contexts of one model concurrently is unsound). Dropping the stream stops llama.cpp between two
//!   tokens or two prompt batches. Loads and llama.cpp answers count themselves as running work
//!   (`busy.rs`), and the `phosphor` program waits for that count to reach zero before it exits
//!   (`wait_until_idle`, up to 60 s): a stream dropped just before the end (a summary stopped by the
//!   repetition guard) would otherwise still be inside llama.cpp when the C++ static destructors run,
//!   and the process died with a segmentation fault after its work was done (seen in CI).
//! - llama.cpp applies chat templates it recognises by their text (`llama_chat_apply_template`), not
//!   by running Jinja; a template it does not recognise, or none, falls back with a warning to
//!   llama.cpp's built-in `gemma` template for the Gemma family (Gemma 3 270M, whose GGUF on PyPI has
//!   no template, answered a ChatML summary request with `<|im_start|>user` and nothing else) and to
//!   ChatML for every other architecture. Qwen3-style templates get the empty `<think>` block their Jinja adds when thinking is
//!   off. The llama.cpp engine answers in text only: tool definitions are ignored with a warning and
//!   tool calls and results in the history are rendered as text, so a summarizer sees everything.
//!   The `llamacpp` build does not enable llama.cpp's `common` library (Jinja, tool-call parsing):
//!   it would double llama.cpp's build time for features a summarizer does not use.
//! - `HubSettings` carries the environment (`HF_HUB_OFFLINE`, `HF_ENDPOINT`, `HF_HOME`, `HF_TOKEN`)
//!   explicitly so tests never touch it. Greedy decoding unless a temperature above 0 is asked for;
//!   Qwen3 thinking is switched off (small local models gain little from it on a CPU).
//! - GPUs: `vulkan` is llama.cpp's Vulkan backend; `cuda` and `metal` switch the GPU backend on in
//!   every engine compiled in. phosphor-cli forwards these and the two engine features to
//!   phosphor-embedded, the one crate that uses them. With `gpu: false` llama.cpp is given an empty device list, so nothing (not even
//!   a single large operation) goes to a GPU. CI builds and tests with `vulkan` compiled in on a
//!   machine without a GPU, which also exercises the "`gpu: true`, no device: one warning, then the
//!   CPU" path.
//! - llama.cpp's own logs go to `tracing` (target `llama-cpp-2`) instead of stderr.
//! - Debian 12's Vulkan headers (1.3.239) are too old for llama.cpp's Vulkan backend
//!   (`VK_EXT_layer_settings`). `cargo xtask` (xtask/src/setup.rs) fetches the Khronos Vulkan-Headers
//!   1.4.325 that the crates.io crate `vk-mem` 0.5.0 vendors, by package name through `cargo fetch`,
//!   into `~/.cache/phosphor/vulkan-headers-*`, and `cargo xtask ci` points CMake at it with
//!   `CMAKE_PREFIX_PATH`; the loader library stays the system's. The README's "Development" section has the command for a build by hand.

mod busy;
mod catalog;
#[cfg(feature = "mistralrs")]
mod convert;
mod engine;
pub mod error;
mod hub;
#[cfg(feature = "llamacpp")]
mod llama;
#[cfg(feature = "mistralrs")]
mod mistral;
mod select;

pub use busy::wait_until_idle;
pub use catalog::{RepoSpec, SHORT_NAMES, ShortName, default_model, short_name};
pub use engine::{EmbeddedModel, PROVIDER, load, load_resolved, load_with};
pub use error::{EmbeddedError, Result};
pub use hub::{DEFAULT_ENDPOINT, HubSettings, ModelSource, ResolvedModel, resolve, resolve_repo};
pub use select::{
    EngineKind, LLAMA_CPP_ARCHITECTURES, MISTRAL_RS_ARCHITECTURES, choose_engine, is_supported_architecture,
};

/// What an image becomes for a text-only model.
#[cfg(any(feature = "mistralrs", feature = "llamacpp"))]
pub(crate) const IMAGE_PLACEHOLDER: &str = "[image omitted: this model reads text only]";
