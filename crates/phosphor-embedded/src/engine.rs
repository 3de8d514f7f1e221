//! The loaded model: one engine per model file, engine and device, shared by the whole process.
// A build without any engine still compiles (loading then fails, naming the features); its engine-specific paths
// are empty.
#![cfg_attr(
    not(any(feature = "mistralrs", feature = "llamacpp")),
    allow(unused_variables, unused_imports, unreachable_code, dead_code)
)]

use std::collections::HashMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use phosphor_base::Error;
use phosphor_base::TokenCounter;
use phosphor_base::config::{Engine, InferenceConfig};
use phosphor_base::gguf::GgufMetadata;
use phosphor_base::model::{ChatModel, ChatRequest, ChatStream, ModelInfo, StreamEvent};
use tokio::sync::OnceCell;
use tracing::field::Empty;

use crate::busy::Busy;
use crate::error::{EmbeddedError, Result};
use crate::hub::{HubSettings, ResolvedModel, resolve};
use crate::select::{EngineKind, choose_engine};

/// The provider name reported for embedded models (`gen_ai.provider.name`).
pub const PROVIDER: &str = "embedded";

/// The most tokens one answer may have unless a request says otherwise: 4096, or half the window if smaller.
const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 4096;

#[cfg(feature = "mistralrs")]
/// A chat template for GGUF files that carry none: ChatML, which most small instruction-tuned models use.
pub(crate) const FALLBACK_CHAT_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + \
     message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// The engine behind a model.
enum Backend {
    #[cfg(feature = "mistralrs")]
    MistralRs(crate::mistral::MistralEngine),
    #[cfg(feature = "llamacpp")]
    LlamaCpp(Arc<crate::llama::LlamaEngine>),
}

/// A GGUF model running in this process, on llama.cpp or mistral.rs. Load it with [`load`]; it implements
/// [`ChatModel`].
pub struct EmbeddedModel {
    info: ModelInfo,
    counter: Arc<dyn TokenCounter>,
    path: PathBuf,
    architecture: String,
    engine: EngineKind,
    device: String,
    load_time: Duration,
    parameters: Option<u64>,
    backend: Backend,
}

impl std::fmt::Debug for EmbeddedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedModel")
            .field("info", &self.info)
            .field("path", &self.path)
            .field("architecture", &self.architecture)
            .field("engine", &self.engine)
            .field("device", &self.device)
            .field("load_time", &self.load_time)
            .finish_non_exhaustive()
    }
}

impl EmbeddedModel {
    /// The GGUF file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its `general.architecture`.
    pub fn architecture(&self) -> &str {
        &self.architecture
    }

    /// The engine running it.
    pub fn engine(&self) -> EngineKind {
        self.engine
    }

    /// Where it runs: `cpu`, or the GPU (`cuda:0`, `metal:0`, `vulkan:0`).
    pub fn device(&self) -> &str {
        &self.device
    }

    /// How long loading took (reading the weights and starting the engine).
    pub fn load_time(&self) -> Duration {
        self.load_time
    }
}

/// Loads the model `config` describes, with the Hugging Face settings of the environment ([`HubSettings::from_env`]).
///
/// See [`load_with`].
pub async fn load(config: &InferenceConfig) -> Result<Arc<EmbeddedModel>> {
    load_with(config, HubSettings::from_env()).await
}

/// Loads the model `config` describes: resolves the file ([`resolve`]: `model_path`, else `model_repo`, else the
/// default model; this may download it), picks the engine (`config.engine`; `auto` reads the file's architecture),
/// then starts that engine on it, once per process: a later load of the same file on the same engine and device
/// returns the same model. Resolution and loading run on blocking threads, never on the async runtime's workers.
///
/// Refuses with [`EmbeddedError::Disabled`] when `config.enabled` is false.
pub async fn load_with(config: &InferenceConfig, hub: HubSettings) -> Result<Arc<EmbeddedModel>> {
    if !config.enabled {
        return Err(EmbeddedError::Disabled);
    }
    let resolve_config = config.clone();
    let resolved =
        blocking("resolving the model", PathBuf::new(), move || resolve(&resolve_config, &hub)).await?;
    load_resolved(resolved, config.engine, config.gpu).await
}

/// A model being loaded or loaded.
type Slot = Arc<OnceCell<Arc<EmbeddedModel>>>;

/// An engine's identity: the canonical path of its file, the engine and whether it runs on the CPU.
type EngineKey = (PathBuf, EngineKind, bool);

/// Every engine of the process.
static ENGINES: LazyLock<Mutex<HashMap<EngineKey, Slot>>> = LazyLock::new(Mutex::default);

/// Starts (or finds) the engine for a resolved model file: `engine` as configured (`auto` picks by the file's
/// architecture, without loading it), on the GPU when `gpu` and one is usable.
pub async fn load_resolved(resolved: ResolvedModel, engine: Engine, gpu: bool) -> Result<Arc<EmbeddedModel>> {
    let canonical = std::fs::canonicalize(&resolved.path)
        .map_err(|source| EmbeddedError::Io { path: resolved.path.clone(), source })?;
    let path = resolved.path.clone();
    let (metadata, kind) = blocking("reading the model's metadata", path.clone(), move || {
        let metadata = read_metadata(&path)?;
        let architecture = metadata.architecture().ok_or_else(|| {
            missing(&path, "general.architecture".into(), "it names the model's architecture")
        })?;
        let kind = choose_engine(engine, architecture, &path.display().to_string())?;
        Ok((metadata, kind))
    })
    .await?;
    // Probing a GPU may take a while (it starts a driver context): not on the runtime's workers either.
    let (force_cpu, device) =
        blocking("choosing the device", resolved.path.clone(), move || Ok(choose_device(kind, gpu))).await?;
    let slot = {
        let mut engines = ENGINES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        engines.entry((canonical, kind, force_cpu)).or_default().clone()
    };
    let model = slot
        .get_or_try_init(move || async move {
            let path = resolved.path.clone();
            blocking("loading the model", path, move || {
                with_cpu_fallback(force_cpu, |cpu| {
                    let device = if cpu { "cpu".to_owned() } else { device.clone() };
                    start(resolved.clone(), metadata.clone(), kind, cpu, device)
                })
            })
            .await
            .map(Arc::new)
        })
        .await?;
    Ok(model.clone())
}

/// Runs `work` on a blocking thread, turning a panic into [`EmbeddedError::Load`].
async fn blocking<T: Send + 'static>(
    what: &str,
    path: PathBuf,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let busy = Busy::start();
    let work = move || {
        let _busy = busy;
        work()
    };
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(join) => {
            let message = match join.try_into_panic() {
                Ok(panic) => panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "unknown panic".to_owned()),
                Err(join) => join.to_string(),
            };
            Err(EmbeddedError::Load {
                engine: "phosphor",
                path,
                message: format!("{what} panicked: {message}"),
            })
        }
    }
}

/// The GGUF header of a model file and its tensor descriptions, for the parameter count (the weights are
/// not read).
fn read_metadata(path: &Path) -> Result<GgufMetadata> {
    let file =
        std::fs::File::open(path).map_err(|source| EmbeddedError::Io { path: path.to_owned(), source })?;
    GgufMetadata::read_with_parameters(BufReader::new(file))
        .map_err(|source| EmbeddedError::Gguf { path: path.to_owned(), source })
}

fn missing(path: &Path, key: String, why: &'static str) -> EmbeddedError {
    EmbeddedError::MissingMetadata { path: path.to_owned(), key, why }
}

/// Whether to force the CPU, and the device's name, for the engine. A GPU that was asked for but is not there (or
/// not compiled in) gets one warning and the CPU.
fn choose_device(kind: EngineKind, gpu: bool) -> (bool, String) {
    match kind {
        #[cfg(feature = "mistralrs")]
        EngineKind::MistralRs => crate::mistral::choose_device(gpu),
        #[cfg(feature = "llamacpp")]
        EngineKind::LlamaCpp => crate::llama::choose_device(gpu),
        #[allow(unreachable_patterns)]
        _ => (true, "cpu".to_owned()),
    }
}

/// The GGUF file's vocabulary as a Hugging Face tokenizer (the mistral.rs engine's counter); the
/// approximation, with a warning, for a vocabulary it cannot rebuild.
#[cfg(feature = "mistralrs")]
fn vocabulary_counter(metadata: &GgufMetadata, path: &Path) -> Arc<dyn TokenCounter> {
    match phosphor_base::exact::HfCounter::from_gguf(metadata) {
        Ok(counter) => Arc::new(counter),
        Err(err) => {
            tracing::warn!(path = %path.display(), error = %err, "counting tokens approximately");
            Arc::new(phosphor_base::ApproxCounter)
        }
    }
}

/// Runs `start` on the GPU unless `force_cpu`; a GPU that fails to load the model (out of memory,
/// a driver error) gets one warning and the CPU, as a missing GPU does.
fn with_cpu_fallback<T>(force_cpu: bool, mut start: impl FnMut(bool) -> Result<T>) -> Result<T> {
    if force_cpu {
        return start(true);
    }
    start(false).or_else(|err| {
        tracing::warn!(
            error = %err,
            "`embedded_models.inference.gpu` is true, but the GPU could not load the model; running the \
             embedded model on the CPU"
        );
        start(true)
    })
}

/// Starts the engine on the device chosen. Blocks.
fn start(
    resolved: ResolvedModel,
    metadata: GgufMetadata,
    kind: EngineKind,
    force_cpu: bool,
    device: String,
) -> Result<EmbeddedModel> {
    let started = Instant::now();
    let path = resolved.path;
    let architecture = metadata.architecture().unwrap_or_default().to_owned();
    let context_window = metadata.context_length().ok_or_else(|| {
        missing(&path, format!("{architecture}.context_length"), "it gives the context window")
    })?;
    // Each engine counts with the model's own vocabulary: llama.cpp tokenizes exactly as it reads a
    // prompt; for mistral.rs the GGUF vocabulary is rebuilt as a Hugging Face tokenizer.
    let (backend, counter): (Backend, Arc<dyn TokenCounter>) = match kind {
        #[cfg(feature = "mistralrs")]
        EngineKind::MistralRs => {
            let engine = crate::mistral::start(&path, &metadata, force_cpu)?;
            (Backend::MistralRs(engine), vocabulary_counter(&metadata, &path))
        }
        #[cfg(feature = "llamacpp")]
        EngineKind::LlamaCpp => {
            let engine = Arc::new(crate::llama::start(&path, &metadata, context_window, force_cpu)?);
            let counter = Arc::new(crate::llama::VocabCounter::new(engine.clone(), &resolved.name));
            (Backend::LlamaCpp(engine), counter)
        }
        #[allow(unreachable_patterns)]
        other => {
            return Err(EmbeddedError::Load {
                engine: other.name(),
                path,
                message: "the engine is not compiled in".into(),
            });
        }
    };
    let load_time = started.elapsed();
    tracing::info!(
        model = %resolved.name,
        path = %path.display(),
        %architecture,
        engine = %kind,
        context_window,
        %device,
        load_ms = load_time.as_millis() as u64,
        "embedded model loaded"
    );
    Ok(EmbeddedModel {
        counter,
        info: ModelInfo {
            provider: PROVIDER.to_owned(),
            model: resolved.name,
            context_window,
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS.min(context_window / 2).max(1),
        },
        path,
        architecture,
        engine: kind,
        device,
        load_time,
        parameters: metadata.parameters,
        backend,
    })
}

impl ChatModel for EmbeddedModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn counter(&self) -> Arc<dyn TokenCounter> {
        self.counter.clone()
    }

    fn parameters(&self) -> Option<u64> {
        self.parameters
    }

    fn stream(&self, request: ChatRequest) -> ChatStream {
        let info = &self.info;
        let span = tracing::info_span!(
            "chat",
            otel.name = %format!("chat {}", info.model),
            otel.kind = "internal",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = %info.provider,
            gen_ai.request.model = %info.model,
            gen_ai.request.max_tokens = Empty,
            gen_ai.conversation.id = request.conversation_id.as_deref(),
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.response.finish_reasons = Empty,
            error.type = Empty,
            phosphor.engine = self.engine.name(),
        );
        let max_tokens = request.max_output_tokens.unwrap_or(info.max_output_tokens);
        span.record("gen_ai.request.max_tokens", max_tokens);
        let inner: ChatStream = {
            let _entered = span.enter();
            match self.backend {
                #[cfg(feature = "mistralrs")]
                Backend::MistralRs(ref engine) => engine.stream(request, max_tokens),
                #[cfg(feature = "llamacpp")]
                Backend::LlamaCpp(ref engine) => {
                    crate::llama::stream(engine.clone(), request, max_tokens, &info.model)
                }
            }
        };
        futures::stream::unfold((inner, span), |(mut inner, span)| async move {
            let item = {
                let next = inner.next();
                tracing::Instrument::instrument(next, span.clone()).await?
            };
            observe(&span, &item);
            Some((item, (inner, span)))
        })
        .boxed()
    }
}

/// Records usage, finish and errors on the call's span as they pass.
fn observe(span: &tracing::Span, item: &phosphor_base::Result<StreamEvent>) {
    match item {
        Ok(StreamEvent::Usage(usage)) => {
            span.record("gen_ai.usage.input_tokens", usage.input_tokens);
            span.record("gen_ai.usage.output_tokens", usage.output_tokens);
        }
        Ok(StreamEvent::Finish { reason }) => {
            span.record("gen_ai.response.finish_reasons", reason.as_wire());
        }
        Err(error) => {
            span.record("error.type", error_kind(error));
            tracing::debug!(parent: span, %error, "embedded model call failed");
        }
        Ok(_) => {}
    }
}

/// The `error.type` of a failed call.
fn error_kind(error: &Error) -> &'static str {
    match error {
        Error::ContextOverflow { .. } => "context_overflow",
        Error::BadRequest { .. } => "bad_request",
        Error::Stream(_) => "stream",
        Error::Cancelled => "cancelled",
        _ => "model",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_error(message: &str) -> EmbeddedError {
        EmbeddedError::Load { engine: "test", path: "m.gguf".into(), message: message.into() }
    }

    #[test]
    fn a_gpu_that_fails_to_load_falls_back_to_the_cpu() {
        let mut tries = Vec::new();
        let loaded = with_cpu_fallback(false, |cpu| {
            tries.push(cpu);
            if cpu { Ok("on the cpu") } else { Err(load_error("out of memory")) }
        });
        assert_eq!(loaded.unwrap(), "on the cpu");
        assert_eq!(tries, vec![false, true]);

        let mut tries = Vec::new();
        let loaded = with_cpu_fallback(true, |cpu| {
            tries.push(cpu);
            Ok(cpu)
        });
        assert!(loaded.unwrap());
        assert_eq!(tries, vec![true], "the CPU was chosen: no GPU attempt");

        let failed = with_cpu_fallback(false, |_| -> Result<()> { Err(load_error("bad file")) });
        assert!(matches!(failed, Err(EmbeddedError::Load { .. })), "the CPU's error is the error");
    }
}
