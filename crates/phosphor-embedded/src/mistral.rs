//! The mistral.rs engine: one `mistralrs::Model` per file and device, fed requests over its channel.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use mistralrs::{
    Constraint, GgufModelBuilder, NormalRequest, Request, RequestMessage, Response, TokenSource, best_device,
};
use phosphor_base::Error;
use phosphor_base::gguf::GgufMetadata;
use phosphor_base::model::{ChatRequest, ChatStream, StreamEvent};
use tokio::sync::mpsc;

use crate::convert::{self, ChunkReader};
use crate::error::{EmbeddedError, Result};
use crate::select::EngineKind;

/// How many streamed chunks may wait for a slow reader before the engine waits too.
const STREAM_BUFFER: usize = 512;

/// A running mistral.rs engine.
pub(crate) struct MistralEngine {
    model: Arc<mistralrs::Model>,
}

/// Starts mistral.rs on a GGUF file. Blocks while it reads the weights.
pub(crate) fn start(path: &Path, metadata: &GgufMetadata, force_cpu: bool) -> Result<MistralEngine> {
    let load_error = |message: String| EmbeddedError::Load {
        engine: EngineKind::MistralRs.name(),
        path: path.to_path_buf(),
        message,
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut builder =
        GgufModelBuilder::new(dir.to_string_lossy(), vec![file_name]).with_token_source(TokenSource::None);
    if force_cpu {
        builder = builder.with_force_cpu();
    }
    if metadata.chat_template().is_none() {
        tracing::warn!(path = %path.display(), "the model file has no chat template; using ChatML");
        builder = builder.with_jinja_explicit(fallback_template_file(path)?);
    }
    // The builder is async but blocks while it reads the weights; it runs here, on a blocking thread, in a
    // runtime of its own. The engine it starts runs on a thread of its own too.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| load_error(format!("cannot start a runtime: {e}")))?;
    let model = runtime.block_on(builder.build()).map_err(|e| load_error(format!("{e:#}")))?;
    Ok(MistralEngine { model: Arc::new(model) })
}

impl MistralEngine {
    /// Streams one answer of at most `max_tokens` tokens.
    pub(crate) fn stream(&self, request: ChatRequest, max_tokens: u64) -> ChatStream {
        let call = Call {
            engine: self.model.clone(),
            request: Some(request),
            max_tokens,
            rx: None,
            reader: ChunkReader::default(),
            pending: VecDeque::new(),
            done: false,
        };
        futures::stream::unfold(call, |mut call| async move { call.next().await.map(|item| (item, call)) })
            .boxed()
    }
}

/// Writes the fallback chat template where mistral.rs can read it (it takes templates from `.jinja` files).
fn fallback_template_file(model: &Path) -> Result<String> {
    let dir = std::env::temp_dir().join("phosphor-embedded");
    let path = dir.join("chatml-fallback.jinja");
    let io = |source| EmbeddedError::Load {
        engine: EngineKind::MistralRs.name(),
        path: model.to_path_buf(),
        message: format!("cannot write the fallback chat template to {}: {source}", path.display()),
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let temp = dir.join(format!("chatml-fallback.{}.tmp", std::process::id()));
    std::fs::write(&temp, crate::engine::FALLBACK_CHAT_TEMPLATE).map_err(io)?;
    std::fs::rename(&temp, &path).map_err(io)?;
    Ok(path.to_string_lossy().into_owned())
}

/// Whether to force the CPU, and the device's name. A GPU that was asked for but is not there (or not compiled
/// in) gets one warning and the CPU.
pub(crate) fn choose_device(gpu: bool) -> (bool, String) {
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

/// Request ids, for mistral.rs's logs.
static NEXT_REQUEST_ID: AtomicUsize = AtomicUsize::new(0);

/// One model call in progress.
struct Call {
    engine: Arc<mistralrs::Model>,
    /// The request, until it is sent.
    request: Option<ChatRequest>,
    max_tokens: u64,
    rx: Option<mpsc::Receiver<Response>>,
    reader: ChunkReader,
    pending: VecDeque<phosphor_base::Result<StreamEvent>>,
    done: bool,
}

impl Call {
    /// The next event; `None` after the finish or an error.
    async fn next(&mut self) -> Option<phosphor_base::Result<StreamEvent>> {
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

    fn fail(&mut self, error: Error) -> Option<phosphor_base::Result<StreamEvent>> {
        self.done = true;
        self.pending.clear();
        Some(Err(error))
    }

    /// Hands the request to the engine's thread; its answer arrives on the returned channel.
    async fn send(&mut self) -> phosphor_base::Result<mpsc::Receiver<Response>> {
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
            sampling_params: convert::sampling(request.temperature, request.repeat_penalty, self.max_tokens),
            response: tx,
            return_logprobs: false,
            is_streaming: true,
            id: NEXT_REQUEST_ID.fetch_add(1, Ordering::Relaxed),
            constraint: request.outline.as_ref().map_or(Constraint::None, |o| Constraint::Regex(o.regex())),
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
}
