//! The loaded model: one mistral.rs engine per model file and device, shared by the whole process.

use std::collections::{HashMap, VecDeque};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use mistralrs::{
    Constraint, GgufModelBuilder, NormalRequest, Request, RequestMessage, Response, TokenSource, best_device,
};
use phosphor_core::Error;
use phosphor_core::config::InferenceConfig;
use phosphor_core::gguf::GgufMetadata;
use phosphor_core::model::{ChatModel, ChatRequest, ChatStream, ModelInfo, StreamEvent};
use tokio::sync::{OnceCell, mpsc};
use tracing::Instrument;
use tracing::field::Empty;

use crate::catalog::{is_supported_architecture, unsupported};
use crate::convert::{self, ChunkReader};
use crate::error::{EmbeddedError, Result};
use crate::hub::{HubSettings, ResolvedModel, resolve};

/// The provider name reported for embedded models (`gen_ai.provider.name`).
pub const PROVIDER: &str = "embedded";

/// The most tokens one answer may have unless a request says otherwise: 4096, or half the window if smaller.
const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 4096;

/// How many streamed chunks may wait for a slow reader before the engine waits too.
const STREAM_BUFFER: usize = 512;

/// A chat template for GGUF files that carry none: ChatML, which most small instruction-tuned models use.
const FALLBACK_CHAT_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + \
     message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// A GGUF model running in this process on mistral.rs. Load it with [`load`]; it implements [`ChatModel`].
pub struct EmbeddedModel {
    info: ModelInfo,
    path: PathBuf,
    architecture: String,
    device: String,
    load_time: Duration,
    engine: Arc<mistralrs::Model>,
}

impl std::fmt::Debug for EmbeddedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedModel")
            .field("info", &self.info)
            .field("path", &self.path)
            .field("architecture", &self.architecture)
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

    /// Where it runs: `cpu`, or the GPU (`cuda:0`, `metal:0`).
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
/// default model; this may download it), then starts a mistral.rs engine on it, once per process: a later load of
/// the same file on the same device returns the same model. Resolution and loading run on blocking threads, never
/// on the async runtime's workers.
///
/// Refuses with [`EmbeddedError::Disabled`] when `config.enabled` is false.
pub async fn load_with(config: &InferenceConfig, hub: HubSettings) -> Result<Arc<EmbeddedModel>> {
    if !config.enabled {
        return Err(EmbeddedError::Disabled);
    }
    let resolve_config = config.clone();
    let resolved =
        blocking("resolving the model", PathBuf::new(), move || resolve(&resolve_config, &hub)).await?;
    load_resolved(resolved, config.gpu).await
}

/// A model being loaded or loaded, by file and device.
type Slot = Arc<OnceCell<Arc<EmbeddedModel>>>;

/// Every engine of the process, keyed by the canonical path of its file and whether it runs on the CPU.
static ENGINES: LazyLock<Mutex<HashMap<(PathBuf, bool), Slot>>> = LazyLock::new(Mutex::default);

/// Starts (or finds) the engine for a resolved model file.
pub async fn load_resolved(resolved: ResolvedModel, gpu: bool) -> Result<Arc<EmbeddedModel>> {
    let canonical = std::fs::canonicalize(&resolved.path)
        .map_err(|source| EmbeddedError::Io { path: resolved.path.clone(), source })?;
    // Probing a GPU may take a while (it starts a driver context): not on the runtime's workers either.
    let (force_cpu, device) =
        blocking("choosing the device", resolved.path.clone(), move || Ok(choose_device(gpu))).await?;
    let slot = {
        let mut engines = ENGINES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        engines.entry((canonical, force_cpu)).or_default().clone()
    };
    let model = slot
        .get_or_try_init(move || async move {
            let path = resolved.path.clone();
            blocking("loading the model", path, move || start(resolved, force_cpu, device))
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
            Err(EmbeddedError::Load { path, message: format!("{what} panicked: {message}") })
        }
    }
}

/// Reads the metadata and starts the engine on the device chosen. Blocks.
fn start(resolved: ResolvedModel, force_cpu: bool, device: String) -> Result<EmbeddedModel> {
    let started = Instant::now();
    let path = resolved.path;
    let file =
        std::fs::File::open(&path).map_err(|source| EmbeddedError::Io { path: path.clone(), source })?;
    let metadata = GgufMetadata::read(BufReader::new(file))
        .map_err(|source| EmbeddedError::Gguf { path: path.clone(), source })?;
    let missing = |key: String, why| EmbeddedError::MissingMetadata { path: path.clone(), key, why };
    let architecture = metadata
        .architecture()
        .ok_or_else(|| missing("general.architecture".into(), "it names the model's architecture"))?
        .to_owned();
    if !is_supported_architecture(&architecture) {
        return Err(unsupported(&path.display().to_string(), &architecture));
    }
    let context_window = metadata
        .context_length()
        .ok_or_else(|| missing(format!("{architecture}.context_length"), "it gives the context window"))?;

    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut builder =
        GgufModelBuilder::new(dir.to_string_lossy(), vec![file_name]).with_token_source(TokenSource::None);
    if force_cpu {
        builder = builder.with_force_cpu();
    }
    if metadata.chat_template().is_none() {
        tracing::warn!(path = %path.display(), "the model file has no chat template; using ChatML");
        builder = builder.with_jinja_explicit(fallback_template_file(&path)?);
    }
    // The builder is async but blocks while it reads the weights; it runs here, on a blocking thread, in a
    // runtime of its own. The engine it starts runs on a thread of its own too.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
        EmbeddedError::Load { path: path.clone(), message: format!("cannot start a runtime: {e}") }
    })?;
    let engine = runtime
        .block_on(builder.build())
        .map_err(|e| EmbeddedError::Load { path: path.clone(), message: format!("{e:#}") })?;
    let load_time = started.elapsed();
    tracing::info!(
        model = %resolved.name,
        path = %path.display(),
        %architecture,
        context_window,
        %device,
        load_ms = load_time.as_millis() as u64,
        "embedded model loaded"
    );
    Ok(EmbeddedModel {
        info: ModelInfo {
            provider: PROVIDER.to_owned(),
            model: resolved.name,
            context_window,
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS.min(context_window / 2).max(1),
        },
        path,
        architecture,
        device,
        load_time,
        engine: Arc::new(engine),
    })
}

/// Whether to force the CPU, and the device's name. A GPU that was asked for but is not there (or not compiled
/// in) gets one warning and the CPU.
fn choose_device(gpu: bool) -> (bool, String) {
    if !gpu {
        return (true, "cpu".to_owned());
    }
    if !cfg!(any(feature = "cuda", feature = "metal")) {
        tracing::warn!(
            "`embedded_models.inference.gpu` is true, but this build has no GPU backend (build with the `cuda` or \
             `metal` feature); running the embedded model on the CPU"
        );
        return (true, "cpu".to_owned());
    }
    match best_device(false) {
        Ok(device) if !device.is_cpu() => (false, device_name(&device)),
        Ok(_) => {
            tracing::warn!(
                "`embedded_models.inference.gpu` is true, but no GPU was found; running the embedded model on the CPU"
            );
            (true, "cpu".to_owned())
        }
        Err(e) => {
            tracing::warn!(error = %e, "`embedded_models.inference.gpu` is true, but the GPU cannot be used; running the embedded model on the CPU");
            (true, "cpu".to_owned())
        }
    }
}

/// `cuda:0`, `metal:0` or `cpu` (mistral.rs's device choice always takes GPU 0).
fn device_name(device: &mistralrs::Device) -> String {
    match device {
        mistralrs::Device::Cuda(_) => "cuda:0".to_owned(),
        mistralrs::Device::Metal(_) => "metal:0".to_owned(),
        mistralrs::Device::Cpu => "cpu".to_owned(),
    }
}

/// Writes the fallback chat template where mistral.rs can read it (it takes templates from `.jinja` files).
fn fallback_template_file(model: &Path) -> Result<String> {
    let dir = std::env::temp_dir().join("phosphor-embedded");
    let path = dir.join("chatml-fallback.jinja");
    let io = |source| EmbeddedError::Load {
        path: model.to_path_buf(),
        message: format!("cannot write the fallback chat template to {}: {source}", path.display()),
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let temp = dir.join(format!("chatml-fallback.{}.tmp", std::process::id()));
    std::fs::write(&temp, FALLBACK_CHAT_TEMPLATE).map_err(io)?;
    std::fs::rename(&temp, &path).map_err(io)?;
    Ok(path.to_string_lossy().into_owned())
}

/// Request ids, for mistral.rs's logs.
static NEXT_REQUEST_ID: AtomicUsize = AtomicUsize::new(0);

impl ChatModel for EmbeddedModel {
    fn info(&self) -> &ModelInfo {
        &self.info
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
        );
        let max_tokens = request.max_output_tokens.unwrap_or(info.max_output_tokens);
        span.record("gen_ai.request.max_tokens", max_tokens);
        let call = Call {
            engine: self.engine.clone(),
            request: Some(request),
            max_tokens,
            rx: None,
            reader: ChunkReader::default(),
            pending: VecDeque::new(),
            done: false,
            span: span.clone(),
        };
        futures::stream::unfold(call, |mut call| async move {
            let span = call.span.clone();
            let item = call.next().instrument(span).await?;
            call.observe(&item);
            Some((item, call))
        })
        .boxed()
    }
}

/// One model call in progress.
struct Call {
    engine: Arc<mistralrs::Model>,
    /// The request, until it is sent.
    request: Option<ChatRequest>,
    max_tokens: u64,
    rx: Option<mpsc::Receiver<Response>>,
    reader: ChunkReader,
    pending: VecDeque<phosphor_core::Result<StreamEvent>>,
    done: bool,
    span: tracing::Span,
}

impl Call {
    /// The next event; `None` after the finish or an error.
    async fn next(&mut self) -> Option<phosphor_core::Result<StreamEvent>> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            if self.done {
                return None;
            }
            let Some(rx) = self.rx.as_mut() else {
                match self.send().await {
                    Ok(rx) => self.rx = Some(rx),
                    Err(error) => return self.fail(error),
                }
                continue;
            };
            let events = match rx.recv().await {
                Some(Response::Chunk(chunk)) => self.reader.read(chunk),
                Some(Response::Done(done)) => self.reader.read_done(done),
                Some(Response::ValidationError(e)) => {
                    return self.fail(convert::validation_error(e.to_string()));
                }
                Some(Response::InternalError(e)) => {
                    return self.fail(Error::Model(format!("mistral.rs failed: {e}")));
                }
                Some(Response::ModelError(message, _)) => {
                    return self.fail(Error::Model(format!("mistral.rs failed: {message}")));
                }
                Some(_) => {
                    return self
                        .fail(Error::Stream("mistral.rs sent a response that is not a chat answer".into()));
                }
                None => {
                    return self.fail(Error::Stream(
                        "the mistral.rs engine ended the answer without a finish reason".into(),
                    ));
                }
            };
            self.pending.extend(events.into_iter().map(Ok));
            if let Some(end) = self.reader.end() {
                self.pending.extend(end.into_iter().map(Ok));
                self.done = true;
            }
        }
    }

    fn fail(&mut self, error: Error) -> Option<phosphor_core::Result<StreamEvent>> {
        self.done = true;
        self.pending.clear();
        Some(Err(error))
    }

    /// Hands the request to the engine's thread; its answer arrives on the returned channel.
    async fn send(&mut self) -> phosphor_core::Result<mpsc::Receiver<Response>> {
        let request =
            self.request.take().ok_or_else(|| Error::Stream("the request was already sent".into()))?;
        let tools = convert::tools(&request.tools)?;
        let (messages, images) = convert::chat_messages(&request.messages);
        if images > 0 {
            tracing::warn!(
                images,
                "the embedded model reads text only; images were replaced by a placeholder"
            );
        }
        let sender = self
            .engine
            .inner()
            .get_sender(None)
            .map_err(|e| Error::Model(format!("the mistral.rs engine is not running: {e}")))?;
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let has_tools = !tools.is_empty();
        let normal = NormalRequest {
            messages: RequestMessage::Chat {
                messages,
                // Small local models think slowly and gain little from it: answers go straight to the point.
                enable_thinking: Some(false),
                reasoning_effort: None,
            },
            sampling_params: convert::sampling(request.temperature, self.max_tokens),
            response: tx,
            return_logprobs: false,
            is_streaming: true,
            id: NEXT_REQUEST_ID.fetch_add(1, Ordering::Relaxed),
            constraint: Constraint::None,
            suffix: None,
            tools: has_tools.then_some(tools),
            tool_choice: has_tools.then_some(mistralrs::ToolChoice::Auto),
            logits_processors: None,
            return_raw_logits: false,
            web_search_options: None,
            model_id: None,
            truncate_sequence: false,
        };
        sender
            .send(Request::Normal(Box::new(normal)))
            .await
            .map_err(|_| Error::Model("the mistral.rs engine stopped".into()))?;
        Ok(rx)
    }

    /// Records usage, finish and errors on the call's span as they pass.
    fn observe(&self, item: &phosphor_core::Result<StreamEvent>) {
        match item {
            Ok(StreamEvent::Usage(usage)) => {
                self.span.record("gen_ai.usage.input_tokens", usage.input_tokens);
                self.span.record("gen_ai.usage.output_tokens", usage.output_tokens);
            }
            Ok(StreamEvent::Finish { reason }) => {
                self.span.record("gen_ai.response.finish_reasons", reason.as_wire());
            }
            Err(error) => {
                self.span.record("error.type", error_kind(error));
                tracing::debug!(parent: &self.span, %error, "embedded model call failed");
            }
            Ok(_) => {}
        }
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
