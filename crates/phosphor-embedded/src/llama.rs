//! The llama.cpp engine: a `LlamaModel` per file and device; each answer gets a fresh context on the
//! model's own thread, and its tokens stream back over a channel.

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use futures::StreamExt;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use llama_cpp_2::{
    LlamaBackendDeviceType, LogOptions, list_llama_ggml_backend_devices, send_logs_to_tracing,
};
use phosphor_base::gguf::GgufMetadata;
use phosphor_base::model::{ChatRequest, ChatStream, StreamEvent};
use phosphor_base::{Error, FinishReason, Message, Part, Result as CoreResult, Role, TokenCounter, Usage};
use tokio::sync::mpsc;

use crate::busy::Busy;
use crate::error::{EmbeddedError, Result};
use crate::select::EngineKind;

/// Tokens decoded per batch while reading the prompt.
const BATCH: usize = 512;

/// How many streamed events may wait for a slow reader before generation waits too.
const STREAM_BUFFER: usize = 512;

/// What Qwen3-style templates emit when thinking is off: an empty thought before the answer.
const NO_THINKING: &str = "<think>\n\n</think>\n\n";

/// The process's llama.cpp backend, started once (llama.cpp allows one).
fn backend() -> std::result::Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<std::result::Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp's own logs go to `tracing` (target `llama-cpp-2`), not straight to stderr.
            send_logs_to_tracing(LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// A GPU llama.cpp can use: its ggml device index and a name such as `vulkan:0`.
fn gpu_device() -> Option<(usize, String)> {
    backend().ok()?;
    list_llama_ggml_backend_devices()
        .into_iter()
        .find(|d| {
            matches!(d.device_type, LlamaBackendDeviceType::Gpu | LlamaBackendDeviceType::IntegratedGpu)
        })
        .map(|d| {
            let name = d.name.to_lowercase();
            let split = name.find(|c: char| c.is_ascii_digit()).unwrap_or(name.len());
            let (backend, number) = name.split_at(split);
            (d.index, format!("{backend}:{}", if number.is_empty() { "0" } else { number }))
        })
}

/// Whether to force the CPU, and the device's name. A GPU that was asked for but is not there (or no GPU backend
/// is compiled in) gets one warning and the CPU.
pub(crate) fn choose_device(gpu: bool) -> (bool, String) {
    if !gpu {
        return (true, "cpu".to_owned());
    }
    if !cfg!(any(feature = "vulkan", feature = "cuda", feature = "metal")) {
        tracing::warn!(
            "`embedded_models.inference.gpu` is true, but this build of llama.cpp has no GPU backend (build with \
             the `vulkan`, `cuda` or `metal` feature); running the embedded model on the CPU"
        );
        return (true, "cpu".to_owned());
    }
    match gpu_device() {
        Some((_, name)) => (false, name),
        None => {
            tracing::warn!(
                "`embedded_models.inference.gpu` is true, but llama.cpp found no GPU; running the embedded model \
                 on the CPU"
            );
            (true, "cpu".to_owned())
        }
    }
}

/// A model loaded by llama.cpp.
pub(crate) struct LlamaEngine {
    model: LlamaModel,
    template: LlamaChatTemplate,
    /// The template turns thinking off the Qwen3 way (an empty `<think>` block).
    no_thinking: bool,
    context_window: u64,
    threads: i32,
    on_gpu: bool,
    /// llama.cpp contexts of one model must not be created concurrently: answers take turns.
    turn: Mutex<()>,
    /// The model's own thread, which runs every answer (started by the first; see [`LlamaEngine::run`]).
    thread: Mutex<Option<std::sync::mpsc::Sender<Job>>>,
}

/// An answer to run on a model's thread.
type Job = Box<dyn FnOnce() + Send>;

/// Loads a GGUF file with llama.cpp. Blocks while it reads the weights.
pub(crate) fn start(
    path: &Path,
    metadata: &GgufMetadata,
    context_window: u64,
    force_cpu: bool,
) -> Result<LlamaEngine> {
    let load_error = |message: String| EmbeddedError::Load {
        engine: EngineKind::LlamaCpp.name(),
        path: path.to_path_buf(),
        message,
    };
    let backend = backend().map_err(|e| load_error(format!("cannot start llama.cpp: {e}")))?;
    let params = if force_cpu {
        // No device list at all: nothing, not even single operations, goes to a GPU.
        LlamaModelParams::default()
            .with_n_gpu_layers(0)
            .with_devices(&[])
            .map_err(|e| load_error(format!("cannot keep the model on the CPU: {e}")))?
    } else {
        let (index, _) = gpu_device().ok_or_else(|| load_error("the GPU disappeared".into()))?;
        LlamaModelParams::default()
            .with_n_gpu_layers(u32::MAX)
            .with_devices(&[index])
            .map_err(|e| load_error(format!("cannot use the GPU: {e}")))?
    };
    let model = LlamaModel::load_from_file(backend, path, &params).map_err(|e| load_error(e.to_string()))?;
    let fallback = || {
        let name = fallback_template_name(metadata.architecture());
        let template = LlamaChatTemplate::new(name).ok().filter(|t| renders(&model, t));
        template.map_or_else(|| ("ChatML", chatml()), |t| (name, t))
    };
    let template = match model.chat_template(None) {
        Ok(template) if renders(&model, &template) => template,
        Ok(_) => {
            let (name, template) = fallback();
            tracing::warn!(
                path = %path.display(),
                "llama.cpp does not recognise the model's chat template; using {name}"
            );
            template
        }
        Err(_) => {
            let (name, template) = fallback();
            tracing::warn!(path = %path.display(), "the model file has no chat template; using {name}");
            template
        }
    };
    let no_thinking = metadata.chat_template().is_some_and(|t| t.contains("enable_thinking"));
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get()).min(64) as i32;
    Ok(LlamaEngine {
        model,
        template,
        no_thinking,
        context_window,
        threads,
        on_gpu: !force_cpu,
        turn: Mutex::new(()),
        thread: Mutex::new(None),
    })
}

/// Exact token counts: the text tokenized by llama.cpp with the model's own vocabulary, as it
/// tokenizes a prompt (no BOS/EOS added; a special token's text inside the text is that token).
pub(crate) struct VocabCounter {
    engine: Arc<LlamaEngine>,
    name: String,
}

impl VocabCounter {
    /// A counter over `engine`'s vocabulary, named `llama.cpp:<model>`.
    pub(crate) fn new(engine: Arc<LlamaEngine>, model: &str) -> VocabCounter {
        VocabCounter { engine, name: format!("llama.cpp:{model}") }
    }
}

impl TokenCounter for VocabCounter {
    fn name(&self) -> &str {
        &self.name
    }

    fn count_text(&self, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        self.engine.model.vocab().tokenize(text.as_bytes(), false, true).len() as u64
    }
}

/// llama.cpp's built-in ChatML template.
/// llama.cpp's built-in template for a model file without a usable one, by `general.architecture`:
/// Gemma's turns (`<start_of_turn>user`) for the Gemma family, which never saw ChatML's markers (Gemma
/// 3 270M answered a ChatML summary request with `<|im_start|>user` and nothing else), and
/// `chatml` for the rest, which most small instruction-tuned models use. (mistral.rs loads no Gemma
/// model from GGUF, so its fallback is ChatML alone.)
fn fallback_template_name(architecture: Option<&str>) -> &'static str {
    match architecture {
        Some(arch) if arch.to_ascii_lowercase().starts_with("gemma") => "gemma",
        _ => "chatml",
    }
}

fn chatml() -> LlamaChatTemplate {
    #[allow(clippy::expect_used)]
    LlamaChatTemplate::new("chatml").expect("a literal without NUL bytes")
}

/// Whether llama.cpp can apply the template (it recognises templates by their text).
fn renders(model: &LlamaModel, template: &LlamaChatTemplate) -> bool {
    LlamaChatMessage::new("user".into(), "Hi".into())
        .ok()
        .is_some_and(|message| model.apply_chat_template(template, &[message], true).is_ok())
}

/// Streams one answer of at most `max_tokens` tokens. Generation runs on the model's own thread and stops when the
/// stream is dropped (between two tokens, or between two prompt batches).
pub(crate) fn stream(
    engine: Arc<LlamaEngine>,
    request: ChatRequest,
    max_tokens: u64,
    model: &str,
) -> ChatStream {
    let span = tracing::Span::current();
    let model = model.to_owned();
    // The thread starts on the first poll, inside the caller's runtime.
    let start = async move {
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let busy = Busy::start();
        let runner = engine.clone();
        runner.run(Box::new(move || {
            let _busy = busy;
            let _entered = span.enter();
            if let Err(error) = engine.generate(&request, max_tokens, &model, &tx) {
                // The reader may be gone already; then nobody needs the error.
                let _ = tx.blocking_send(Err(error));
            }
        }));
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
    };
    futures::stream::once(start).flatten().boxed()
}

/// The sender of an answer's events.
type Events = mpsc::Sender<CoreResult<StreamEvent>>;

impl LlamaEngine {
    /// Runs `job` (an answer) on the model's own thread, one after the other. llama.cpp's OpenMP
    /// threads belong to the thread that calls it: answers run from whichever blocking thread the
    /// runtime handed out sometimes left a second team of OpenMP threads competing for the cores,
    /// and generation ran at half speed for the rest of the process (51 against 103 tokens/s for
    /// SmolLM2 on this project's 2-core machine; docs/BENCHMARKS.md). If the thread cannot be
    /// started, the answer runs on a blocking thread of the runtime instead.
    fn run(&self, job: Job) {
        let mut thread = self.thread.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if thread.is_none() {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            let started = std::thread::Builder::new().name("llama.cpp".into()).spawn(move || {
                for job in rx {
                    job();
                }
            });
            match started {
                Ok(_) => *thread = Some(tx),
                Err(error) => tracing::warn!(%error, "cannot start the model's llama.cpp thread"),
            }
        }
        let sent = match thread.as_ref() {
            Some(tx) => tx.send(job).map_err(|std::sync::mpsc::SendError(job)| job),
            None => Err(job),
        };
        let Err(job) = sent else { return };
        // The thread is gone (it panicked): the next answer starts a new one.
        *thread = None;
        drop(thread);
        tokio::task::spawn_blocking(job);
    }

    /// Renders the prompt, reads it and streams the answer into `tx`. Returns early, with `Ok`, when the reader
    /// is gone.
    fn generate(
        &self,
        request: &ChatRequest,
        max_tokens: u64,
        model_name: &str,
        tx: &Events,
    ) -> CoreResult<()> {
        let backend = backend().map_err(|e| Error::Model(format!("llama.cpp is not running: {e}")))?;
        if !request.tools.is_empty() {
            tracing::warn!(
                tools = request.tools.len(),
                "the llama.cpp engine does not call tools; the answer will be text only"
            );
        }
        let prompt = self.prompt(&request.messages)?;
        let vocab = self.model.vocab();
        let tokens = vocab.tokenize(prompt.as_bytes(), true, true);
        let prompt_tokens = tokens.len() as u64;
        if prompt_tokens >= self.context_window {
            return Err(Error::ContextOverflow {
                message: format!(
                    "the prompt has {prompt_tokens} tokens and {model_name} has a window of {} tokens",
                    self.context_window
                ),
                requested_tokens: Some(prompt_tokens),
                limit_tokens: Some(self.context_window),
            });
        }
        let max_tokens = max_tokens.min(self.context_window - prompt_tokens).max(1);
        let n_ctx = u32::try_from(prompt_tokens + max_tokens).unwrap_or(u32::MAX);

        let _turn = self.turn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(BATCH as u32)
            .with_n_ubatch(BATCH as u32)
            .with_n_threads(self.threads)
            .with_n_threads_batch(self.threads)
            .with_offload_kqv(self.on_gpu)
            .with_op_offload(self.on_gpu);
        let mut context = self.model.new_context(backend, params).map_err(|e| {
            Error::Model(format!("llama.cpp could not make a context of {n_ctx} tokens: {e}"))
        })?;

        // Read the prompt, a batch at a time; only the last token's logits are needed.
        let mut batch = LlamaBatch::new(BATCH, 1);
        let last = tokens.len() - 1;
        for (chunk_index, chunk) in tokens.chunks(BATCH).enumerate() {
            if tx.is_closed() {
                return Ok(());
            }
            batch.clear();
            for (offset, token) in chunk.iter().enumerate() {
                let position = chunk_index * BATCH + offset;
                batch
                    .add(*token, position as i32, &[0], position == last)
                    .map_err(|e| Error::Model(format!("llama.cpp batch: {e}")))?;
            }
            context
                .decode(&mut batch)
                .map_err(|e| Error::Model(format!("llama.cpp could not read the prompt: {e}")))?;
        }

        let grammar = match &request.outline {
            Some(outline) => {
                Some(LlamaSampler::grammar(&self.model, &outline.gbnf(), "root").map_err(|e| {
                    Error::BadRequest {
                        message: format!("llama.cpp rejected the outline's grammar: {e}"),
                        status: None,
                    }
                })?)
            }
            None => None,
        };
        let mut chooser =
            Chooser::new(request.temperature, request.repeat_penalty, grammar, self.model.n_vocab());
        let mut text = Utf8Stream::default();
        let mut generated = 0u64;
        let mut position = tokens.len() as i32;
        let reason = loop {
            let token = chooser.next(&context, batch.n_tokens() - 1);
            if vocab.is_eog(token) {
                break FinishReason::Stop;
            }
            generated += 1;
            let piece = text.push(&vocab.token_to_piece(token, false, None));
            if !piece.is_empty() && tx.blocking_send(Ok(StreamEvent::TextDelta { text: piece })).is_err() {
                return Ok(());
            }
            if generated >= max_tokens {
                break FinishReason::Length;
            }
            batch.clear();
            batch
                .add(token, position, &[0], true)
                .map_err(|e| Error::Model(format!("llama.cpp batch: {e}")))?;
            position += 1;
            context
                .decode(&mut batch)
                .map_err(|e| Error::Model(format!("llama.cpp could not go on: {e}")))?;
        };
        let rest = text.finish();
        let usage = Usage { input_tokens: prompt_tokens, output_tokens: generated, ..Usage::default() };
        let events = [
            (!rest.is_empty()).then_some(StreamEvent::TextDelta { text: rest }),
            Some(StreamEvent::Usage(usage)),
            Some(StreamEvent::Finish { reason }),
        ];
        for event in events.into_iter().flatten() {
            if tx.blocking_send(Ok(event)).is_err() {
                break;
            }
        }
        Ok(())
    }

    /// The prompt text: the messages through the model's chat template, ready for the assistant's answer.
    fn prompt(&self, messages: &[Message]) -> CoreResult<String> {
        let chat = template_messages(messages)
            .into_iter()
            .map(|(role, content)| LlamaChatMessage::new(role.to_owned(), content))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::BadRequest {
                message: format!("a message cannot be given to llama.cpp: {e}"),
                status: None,
            })?;
        let mut prompt = self
            .model
            .apply_chat_template(&self.template, &chat, true)
            .map_err(|e| Error::Model(format!("llama.cpp could not apply the chat template: {e}")))?;
        if self.no_thinking {
            prompt.push_str(NO_THINKING);
        }
        Ok(prompt)
    }
}

/// Tokens the repetition penalty looks back over.
const PENALTY_LAST_N: usize = 64;

/// Chooses each generated token: greedily unless the request sets a temperature above 0, after the
/// repetition penalty when the request asks for one, and within the request's outline when it has one
/// (llama.cpp's grammar sampler).
enum Chooser {
    /// The most likely token, read straight off the logits. llama.cpp's greedy and penalties samplers
    /// first copy every logit into a candidate array: 0.8 ms (greedy) and 1.2 ms (with penalties) a
    /// token for Gemma 3's 262,144-token vocabulary on a 2-core CPU, where the scan below takes 0.12 ms
    /// and the decoding step itself 15 ms (docs/BENCHMARKS.md).
    Greedy {
        /// The penalty, when there is one; `None` for plain greedy.
        penalty: Option<f32>,
        /// The tokens generated so far, the newest [`PENALTY_LAST_N`] of them.
        recent: VecDeque<LlamaToken>,
        /// The outline's grammar. The best token is checked against it alone, and only when the
        /// grammar rejects it is every token filtered (as llama.cpp's own samplers do it): most tokens
        /// of an answer that follows the outline are the model's first choice anyway.
        grammar: Option<LlamaSampler>,
    },
    /// Top-k, top-p and temperature through llama.cpp's sampler chain (the grammar first, when there is one).
    Sampled(LlamaSampler),
}

impl Chooser {
    fn new(
        temperature: Option<f32>,
        repeat_penalty: Option<f32>,
        grammar: Option<LlamaSampler>,
        n_vocab: i32,
    ) -> Self {
        let penalty = repeat_penalty.filter(|p| *p > 0.0 && *p != 1.0);
        match temperature {
            Some(t) if t > 0.0 => {
                let seed = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                let pick = [
                    LlamaSampler::top_k(40),
                    LlamaSampler::top_p(0.95, 1),
                    LlamaSampler::temp(t),
                    LlamaSampler::dist(seed),
                ];
                let penalties =
                    penalty.map(|p| LlamaSampler::penalties(n_vocab, PENALTY_LAST_N as i32, p, 0.0, 0.0));
                Self::Sampled(LlamaSampler::chain_simple(grammar.into_iter().chain(penalties).chain(pick)))
            }
            _ => Self::Greedy { penalty, recent: VecDeque::with_capacity(PENALTY_LAST_N), grammar },
        }
    }

    /// The next token, from the logits of the batch's token `index`; it counts as generated from now on.
    fn next(&mut self, context: &LlamaContext<'_>, index: i32) -> LlamaToken {
        match self {
            // `sample` also accepts the token into every sampler of the chain.
            Self::Sampled(sampler) => sampler.sample(context, index),
            Self::Greedy { penalty, recent, grammar } => {
                let logits = context.get_logits_ith(index);
                let mut token = penalized_argmax(logits, *penalty, recent);
                if let Some(grammar) = grammar {
                    if !grammar_allows(grammar, token) {
                        token = constrained_argmax(grammar, logits, *penalty, recent);
                    }
                    grammar.accept(token);
                }
                if recent.len() == PENALTY_LAST_N {
                    recent.pop_front();
                }
                recent.push_back(token);
                token
            }
        }
    }
}

/// Whether the grammar, in its present state, lets `token` come next.
fn grammar_allows(grammar: &mut LlamaSampler, token: LlamaToken) -> bool {
    let mut one = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 0.0, 0.0)], false);
    one.apply_sampler(grammar);
    one.data.first().is_some_and(|d| d.logit() > f32::NEG_INFINITY)
}

/// The best token the grammar allows, after the same repetition penalty as [`penalized_argmax`]. When the
/// grammar allows none, its state is complete: the model's end-of-generation token is among what it
/// allows, so this does not happen with a well-formed outline; the unconstrained best is returned then.
fn constrained_argmax(
    grammar: &mut LlamaSampler,
    logits: &[f32],
    penalty: Option<f32>,
    recent: &VecDeque<LlamaToken>,
) -> LlamaToken {
    let penalty = penalty.filter(|_| !recent.is_empty());
    let mut candidates = LlamaTokenDataArray::from_iter(
        logits.iter().enumerate().map(|(id, &logit)| {
            let token = LlamaToken(id as i32);
            let logit = match penalty {
                Some(p) if recent.contains(&token) => penalized(logit, p),
                _ => logit,
            };
            LlamaTokenData::new(token, logit, 0.0)
        }),
        false,
    );
    candidates.apply_sampler(grammar);
    let mut best: Option<(LlamaToken, f32)> = None;
    for data in &candidates.data {
        if data.logit() > f32::NEG_INFINITY && best.is_none_or(|(_, logit)| data.logit() > logit) {
            best = Some((data.id(), data.logit()));
        }
    }
    best.map_or_else(|| penalized_argmax(logits, penalty, recent), |(token, _)| token)
}

/// The token with the highest logit (the first of equals, as llama.cpp's greedy sampler picks), after
/// llama.cpp's repetition penalty on the tokens in `recent`: a positive logit divided by `penalty`, a
/// negative one multiplied by it, once however often the token occurs.
fn penalized_argmax(logits: &[f32], penalty: Option<f32>, recent: &VecDeque<LlamaToken>) -> LlamaToken {
    let penalty = penalty.filter(|_| !recent.is_empty());
    // The recent tokens first, penalized; then every other token, unchanged. A token is looked up in
    // `recent` only when it would become the best, which few do.
    let mut best = (usize::MAX, f32::NEG_INFINITY);
    if let Some(penalty) = penalty {
        for token in recent {
            let id = token.0 as usize;
            let Some(&logit) = logits.get(id) else { continue };
            let logit = penalized(logit, penalty);
            if logit > best.1 || (logit == best.1 && id < best.0) {
                best = (id, logit);
            }
        }
    }
    for (id, &logit) in logits.iter().enumerate() {
        if (logit > best.1 || (logit == best.1 && id < best.0))
            && !(penalty.is_some() && recent.iter().any(|t| t.0 as usize == id))
        {
            best = (id, logit);
        }
    }
    LlamaToken(best.0.min(logits.len().saturating_sub(1)) as i32)
}

/// llama.cpp's repetition penalty on one logit: a positive one divided by `penalty`, a negative one
/// multiplied by it.
fn penalized(logit: f32, penalty: f32) -> f32 {
    if logit <= 0.0 { logit * penalty } else { logit / penalty }
}

/// The messages as `(role, text)` pairs for llama.cpp's templates, which know `system`, `user` and `assistant`
/// only: tool calls become a line of assistant text, tool results user text naming the call, images a
/// placeholder. Consecutive messages of one role are joined, as some templates require alternation.
fn template_messages(messages: &[Message]) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = Vec::with_capacity(messages.len());
    for message in messages {
        let role = match message.role {
            Role::System => "system",
            Role::Assistant => "assistant",
            Role::User | Role::Tool => "user",
        };
        let mut text = String::new();
        let mut line = |piece: &str| {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(piece);
        };
        for part in &message.parts {
            match part {
                Part::Text { text } => line(text),
                Part::Image { .. } => line(crate::IMAGE_PLACEHOLDER),
                Part::ToolCall(call) => {
                    line(&format!("[tool call {} {}: {}]", call.id, call.name, call.arguments))
                }
                Part::ToolResult(result) => line(&format!(
                    "[result of tool call {} {}{}]\n{}",
                    result.call_id,
                    result.name,
                    if result.is_error { ", failed" } else { "" },
                    result.content
                )),
                Part::Reasoning { .. } | Part::Finish { .. } => {}
            }
        }
        match out.last_mut() {
            Some((last_role, last_text)) if *last_role == role && role != "system" => {
                last_text.push_str("\n\n");
                last_text.push_str(&text);
            }
            _ => out.push((role, text)),
        }
    }
    out
}

/// Turns token pieces into text, holding back a UTF-8 sequence split across tokens until it is whole.
#[derive(Debug, Default)]
struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// The text that is complete after this piece.
    fn push(&mut self, piece: &[u8]) -> String {
        self.pending.extend_from_slice(piece);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(text) => {
                    out.push_str(text);
                    self.pending.clear();
                    return out;
                }
                Err(error) => {
                    let valid = error.valid_up_to();
                    // SAFETY-free: the prefix up to `valid` is UTF-8 by the error's own account.
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match error.error_len() {
                        // An incomplete sequence at the end: wait for the next piece.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        // Bytes that can never be UTF-8: replace them and go on.
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Whatever is left at the end (an unfinished sequence becomes a replacement character).
    fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llama_cpp_2::token::data::LlamaTokenData;
    use llama_cpp_2::token::data_array::LlamaTokenDataArray;
    use phosphor_base::{ToolCall, ToolResult};
    use pretty_assertions::assert_eq;

    #[test]
    fn utf8_split_across_tokens_is_held_back() {
        let mut stream = Utf8Stream::default();
        let crab = "🦀".as_bytes();
        assert_eq!(stream.push(b"a"), "a");
        assert_eq!(stream.push(&crab[..2]), "");
        assert_eq!(stream.push(&crab[2..]), "🦀");
        assert_eq!(stream.push(&[b'x', 0xff, b'y']), "x\u{fffd}y");
        assert_eq!(stream.push(&crab[..1]), "");
        assert_eq!(stream.finish(), "\u{fffd}");
        assert_eq!(stream.finish(), "");
    }

    #[test]
    fn tool_traffic_becomes_text_and_roles_alternate() {
        let call =
            ToolCall { id: "c1".into(), name: "read_file".into(), arguments: r#"{"path":"a.rs"}"#.into() };
        let result = ToolResult {
            call_id: "c1".into(),
            name: "read_file".into(),
            content: "fn main() {}".into(),
            is_error: false,
        };
        let messages = vec![
            Message::system("Be brief."),
            Message::user("Read a.rs"),
            Message { role: Role::Assistant, parts: vec![Part::ToolCall(call)], ..Message::user("") },
            Message { role: Role::Tool, parts: vec![Part::ToolResult(result)], ..Message::user("") },
            Message::user("Now summarize."),
        ];
        assert_eq!(
            template_messages(&messages),
            vec![
                ("system", "Be brief.".to_owned()),
                ("user", "Read a.rs".to_owned()),
                ("assistant", r#"[tool call c1 read_file: {"path":"a.rs"}]"#.to_owned()),
                ("user", "[result of tool call c1 read_file]\nfn main() {}\n\nNow summarize.".to_owned()),
            ]
        );
    }

    #[test]
    fn tokens_are_chosen_greedily_without_a_temperature_and_penalized_when_asked() {
        for temperature in [None, Some(0.0)] {
            for penalty in [None, Some(1.0), Some(0.0)] {
                let chooser = Chooser::new(temperature, penalty, None, 32_000);
                assert!(
                    matches!(chooser, Chooser::Greedy { penalty: None, .. }),
                    "{temperature:?} {penalty:?}"
                );
            }
        }
        assert!(matches!(
            Chooser::new(None, Some(1.1), None, 32_000),
            Chooser::Greedy { penalty: Some(_), .. }
        ));
        let sampled = Chooser::new(Some(0.7), Some(1.1), None, 32_000);
        assert!(
            matches!(&sampled, Chooser::Sampled(s) if s.name().is_some_and(|n| n.to_bytes() == b"chain"))
        );
    }

    /// The greedy choice on the logits is llama.cpp's own penalties-then-greedy chain, token for token.
    #[test]
    fn the_penalized_argmax_picks_what_llama_cpp_s_samplers_pick() {
        // xorshift: the same cases on every run, with ties and negative logits among them.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let n_vocab = 97;
        for case in 0..2_000 {
            let logits: Vec<f32> = (0..n_vocab).map(|_| (next() % 41) as f32 / 4.0 - 5.0).collect();
            let penalty = [1.1, 1.5, 0.8, 2.0][case % 4];
            let recent: VecDeque<LlamaToken> =
                (0..next() % 12).map(|_| LlamaToken((next() % n_vocab as u64) as i32)).collect();

            let mut chain = LlamaSampler::chain_simple([
                LlamaSampler::penalties(n_vocab, PENALTY_LAST_N as i32, penalty, 0.0, 0.0),
                LlamaSampler::greedy(),
            ]);
            for token in &recent {
                chain.accept(*token);
            }
            // What llama.cpp's `sampler` picks from these logits.
            let pick = |sampler: &mut LlamaSampler| {
                let mut candidates = LlamaTokenDataArray::from_iter(
                    logits
                        .iter()
                        .enumerate()
                        .map(|(id, &logit)| LlamaTokenData::new(LlamaToken(id as i32), logit, 0.0)),
                    false,
                );
                candidates.apply_sampler(sampler);
                candidates.selected_token().unwrap()
            };
            assert_eq!(
                penalized_argmax(&logits, Some(penalty), &recent),
                pick(&mut chain),
                "case {case}: penalty {penalty}, recent {recent:?}, logits {logits:?}"
            );
            assert_eq!(penalized_argmax(&logits, None, &recent), pick(&mut LlamaSampler::greedy()));
        }
    }
}
