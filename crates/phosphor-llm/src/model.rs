//! [`OpenAiModel`]: a [`ChatModel`] over any OpenAI-compatible chat-completions endpoint.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use futures::{Stream, StreamExt};
use phosphor_base::config::{ModelConfig, ProviderConfig};
use phosphor_base::model::error_stream;
use phosphor_base::{
    ApproxCounter, ChatModel, ChatRequest, ChatStream, ModelInfo, StreamEvent, TokenCounter,
};
use serde_json::{Value, json};
use tracing::field::Empty;

use crate::assemble::Assembler;
use crate::error::{Error, Result, classify_error};
use crate::transport::{HttpFailure, Transport};

/// The stream async-openai hands back for a bring-your-own-types request.
type RawStream = Pin<Box<dyn Stream<Item = std::result::Result<Value, OpenAIError>> + Send>>;

/// How long to wait for a connection to a provider.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// When and how long to wait before sending a failed request again.
///
/// Only retryable failures ([`Error::is_retryable`]: rate limits, 5xx, connection errors, broken
/// streams) are retried, and only while nothing of the answer was streamed yet. A context
/// overflow is never retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 turns retrying off).
    pub max_retries: u32,
    /// The wait before the first retry; each later one doubles it.
    pub initial_backoff: Duration,
    /// The longest backoff wait.
    pub max_backoff: Duration,
    /// The longest `retry-after` honoured. A server asking for more gets no retry: the
    /// [`Error::RateLimited`] (with its `retry_after`) goes to the caller.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    /// 3 retries after 0.5 s, 1 s and 2 s (capped at 8 s), honouring `retry-after` up to 60 s.
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> RetryPolicy {
        RetryPolicy { max_retries: 0, ..RetryPolicy::default() }
    }

    /// The backoff before retry number `retry` (0-based): `initial_backoff * 2^retry`, capped.
    pub fn backoff(&self, retry: u32) -> Duration {
        self.initial_backoff.saturating_mul(2u32.saturating_pow(retry)).min(self.max_backoff)
    }

    /// The wait before retry number `retry` after `error`, or `None` to give up. `retry_after`
    /// is what the server asked for (it wins over the backoff).
    pub fn wait_before(&self, retry: u32, error: &Error, retry_after: Option<Duration>) -> Option<Duration> {
        if !error.is_retryable() || retry >= self.max_retries {
            return None;
        }
        let asked = match error {
            Error::RateLimited { retry_after: asked, .. } => retry_after.or(*asked),
            _ => retry_after,
        };
        match asked {
            Some(wait) if wait > self.max_retry_after => None,
            Some(wait) => Some(wait),
            None => Some(self.backoff(retry)),
        }
    }
}

/// A chat model behind an OpenAI-compatible endpoint (OpenAI, OpenRouter, DeepSeek, vLLM,
/// llama.cpp, Ollama, LM Studio, mistral.rs, ...). Cheap to clone.
///
/// Its [`Debug`](std::fmt::Debug) output never shows the API key nor the values of extra
/// headers (which may hold credentials too).
#[derive(Clone)]
pub struct OpenAiModel {
    inner: Arc<Inner>,
    retry: RetryPolicy,
}

struct Inner {
    client: Client<OpenAIConfig>,
    info: ModelInfo,
    counter: Arc<dyn TokenCounter>,
    base_url: String,
    api_key_env: Option<String>,
    has_key: bool,
    header_names: Vec<String>,
    /// `max_completion_tokens` for api.openai.com (its reasoning models refuse `max_tokens`),
    /// `max_tokens` for everyone else (what every compatible server reads).
    output_limit_field: &'static str,
    /// Cleared once the server refused `stream_options`; usage is then counted by us.
    send_stream_options: AtomicBool,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = &self.inner;
        f.debug_struct("OpenAiModel")
            .field("provider", &inner.info.provider)
            .field("model", &inner.info.model)
            .field("base_url", &inner.base_url)
            .field("context_window", &inner.info.context_window)
            .field("max_output_tokens", &inner.info.max_output_tokens)
            .field("api_key_env", &inner.api_key_env)
            .field("api_key", &if inner.has_key { "<redacted>" } else { "<none>" })
            .field("headers", &inner.header_names)
            .field("retry", &self.retry)
            .finish()
    }
}

pub(crate) fn config_error(provider: &str, message: impl std::fmt::Display) -> Error {
    Error::Model(format!("provider {provider:?}: {message}"))
}

/// The API key of `provider`, read from its `api_key_env`: `None` for a keyless provider,
/// [`Error::MissingApiKey`] when the variable is unset or empty.
pub(crate) fn key_from_env(provider: &ProviderConfig) -> Result<Option<String>> {
    match &provider.api_key_env {
        None => Ok(None),
        Some(env_var) => match std::env::var(env_var) {
            Ok(key) if !key.trim().is_empty() => Ok(Some(key)),
            _ => Err(Error::MissingApiKey { env_var: env_var.clone() }),
        },
    }
}

/// The base URL without a trailing `/`, and its host (lowercase); an error unless it is an
/// `http://` or `https://` URL with a host.
pub(crate) fn checked_base_url(provider_name: &str, provider: &ProviderConfig) -> Result<(String, String)> {
    let base_url = provider.base_url.trim().trim_end_matches('/').to_owned();
    let Some(host) = base_url.strip_prefix("https://").or_else(|| base_url.strip_prefix("http://")) else {
        return Err(config_error(
            provider_name,
            format!("base_url {:?} must start with http:// or https://", provider.base_url),
        ));
    };
    let host = host.split(['/', ':']).next().unwrap_or_default().to_ascii_lowercase();
    if host.is_empty() {
        return Err(config_error(provider_name, format!("base_url {:?} has no host", provider.base_url)));
    }
    Ok((base_url, host))
}

/// The provider's extra headers, each checked to be a valid HTTP name and value.
pub(crate) fn checked_headers(
    provider_name: &str,
    provider: &ProviderConfig,
) -> Result<Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>> {
    provider
        .headers
        .iter()
        .map(|(name, value)| {
            let header = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                config_error(provider_name, format!("header name {name:?} is not a valid HTTP header name"))
            })?;
            let value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                config_error(
                    provider_name,
                    format!("the value of header {name:?} is not a valid HTTP header value"),
                )
            })?;
            Ok((header, value))
        })
        .collect()
}

/// The HTTP client of a provider's requests.
pub(crate) fn http_client(provider_name: &str) -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(|error| config_error(provider_name, format!("cannot build the HTTP client: {error}")))
}

impl OpenAiModel {
    /// A model of `provider` (named `provider_name` in the configuration), reading its API key
    /// from the environment variable `provider.api_key_env`.
    ///
    /// Fails with [`Error::MissingApiKey`] when that variable is unset or empty (keyless
    /// providers, with no `api_key_env`, need none), and with [`Error::Model`] when the base URL
    /// or a header cannot be used.
    pub fn new(provider_name: &str, provider: &ProviderConfig, model: &ModelConfig) -> Result<OpenAiModel> {
        OpenAiModel::build(provider_name, provider, model, key_from_env(provider)?)
    }

    /// Like [`OpenAiModel::new`], with the API key given (`None` for a keyless provider) instead
    /// of read from the environment.
    pub fn with_api_key(
        provider_name: &str,
        provider: &ProviderConfig,
        model: &ModelConfig,
        api_key: Option<&str>,
    ) -> Result<OpenAiModel> {
        OpenAiModel::build(provider_name, provider, model, api_key.map(str::to_owned))
    }

    pub(crate) fn build(
        provider_name: &str,
        provider: &ProviderConfig,
        model: &ModelConfig,
        key: Option<String>,
    ) -> Result<OpenAiModel> {
        let (base_url, host) = checked_base_url(provider_name, provider)?;
        // Every field set, so that async-openai reads none of OPENAI_API_KEY, OPENAI_ORG_ID, ...
        let mut config = OpenAIConfig::new()
            .with_api_base(base_url.clone())
            .with_api_key(key.clone().unwrap_or_default())
            .with_org_id("")
            .with_project_id("");
        for (name, value) in checked_headers(provider_name, provider)? {
            // Checked to be visible ASCII, so `to_str` keeps every byte.
            let value = value.to_str().unwrap_or_default();
            config = config.with_header(name, value).map_err(|error| config_error(provider_name, error))?;
        }
        let http = http_client(provider_name)?;
        let own_authorization =
            provider.headers.keys().any(|name| name.eq_ignore_ascii_case("authorization"));
        let transport =
            Transport { client: http.clone(), drop_authorization: key.is_none() && !own_authorization };
        let client = Client::build(http, config).with_http_service(transport);
        let info = ModelInfo {
            provider: provider_name.to_owned(),
            model: model.model.clone(),
            context_window: model.context_window,
            max_output_tokens: model.max_output_tokens,
        };
        let inner = Inner {
            client,
            counter: counter_for(&info.model),
            info,
            base_url,
            api_key_env: provider.api_key_env.clone(),
            has_key: key.is_some(),
            header_names: provider.headers.keys().cloned().collect(),
            output_limit_field: if host == "api.openai.com" { "max_completion_tokens" } else { "max_tokens" },
            send_stream_options: AtomicBool::new(true),
        };
        Ok(OpenAiModel { inner: Arc::new(inner), retry: RetryPolicy::default() })
    }

    /// Replaces the retry policy (tests use millisecond delays).
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> OpenAiModel {
        self.retry = retry;
        self
    }

    /// The retry policy in use.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }

    /// The base URL requests go to (`…/chat/completions` is appended).
    pub fn base_url(&self) -> &str {
        &self.inner.base_url
    }

    /// The JSON body sent for `request`: the model, the messages in OpenAI's format (without
    /// `reasoning_content`, which OpenAI's format lacks and DeepSeek refuses), the tools,
    /// `stream: true` with `stream_options.include_usage`, the output limit (the request's, else
    /// the model's) and the temperature when set.
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        self.inner.request_body(request)
    }
}

impl Inner {
    fn request_body(&self, request: &ChatRequest) -> Value {
        let mut messages = phosphor_wire::chat::to_openai(&request.messages);
        for message in &mut messages {
            if let Some(object) = message.as_object_mut() {
                object.remove("reasoning_content");
            }
        }
        let mut body = json!({
            "model": self.info.model,
            "messages": messages,
            "stream": true,
        });
        if self.send_stream_options.load(Ordering::Relaxed) {
            body["stream_options"] = json!({"include_usage": true});
        }
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "type": "function",
                        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
                    })
                })
                .collect();
            body["tools"] = Value::Array(tools);
        }
        let limit = request.max_output_tokens.unwrap_or(self.info.max_output_tokens);
        body[self.output_limit_field] = json!(limit);
        if let Some(temperature) = request.temperature {
            // Through its decimal text, so that 0.7f32 is sent as 0.7 and not 0.699999988079071.
            let value: f64 = temperature.to_string().parse().unwrap_or(f64::from(temperature));
            body["temperature"] = json!(value);
        }
        body
    }
}

/// The token counter for a remote model id: tiktoken's encoding for OpenAI model families
/// (`o200k_base` for GPT-4o, GPT-4.1, GPT-5, the o-series and gpt-oss; `cl100k_base` for GPT-4 and
/// GPT-3.5), else the approximation `ceil(bytes/4)` (other vendors do not publish a local tokenizer we could
/// run; the agent's calibration from reported usage corrects it upward). Without the `tiktoken`
/// feature, always the approximation.
pub fn counter_for(model_id: &str) -> Arc<dyn TokenCounter> {
    #[cfg(feature = "tiktoken")]
    if let Some(counter) = phosphor_base::exact::TiktokenCounter::for_model(model_id) {
        return Arc::new(counter);
    }
    #[cfg(not(feature = "tiktoken"))]
    let _ = model_id;
    Arc::new(ApproxCounter)
}

impl ChatModel for OpenAiModel {
    fn info(&self) -> &ModelInfo {
        &self.inner.info
    }

    fn counter(&self) -> Arc<dyn TokenCounter> {
        self.inner.counter.clone()
    }

    fn stream(&self, request: ChatRequest) -> ChatStream {
        let span = call_span(&self.inner.info, &request);
        let call = Call {
            inner: self.inner.clone(),
            retry: self.retry.clone(),
            input_estimate: ApproxCounter.count_request(&request),
            request,
            span: span.clone(),
        };
        InSpan { inner: call.run(), span }.boxed()
    }
}

/// One model call: the request, and what is needed to send it and read the answer.
struct Call {
    inner: Arc<Inner>,
    retry: RetryPolicy,
    request: ChatRequest,
    input_estimate: u64,
    span: tracing::Span,
}

/// An answer whose first events arrived.
struct Open {
    raw: RawStream,
    assembler: Assembler,
    pending: VecDeque<Result<StreamEvent>>,
    ended: bool,
    input_estimate: u64,
    span: tracing::Span,
}

/// Maps what async-openai reports; the second value is the server's `retry-after`.
fn map_openai_error(error: OpenAIError) -> (Error, Option<Duration>) {
    match error {
        OpenAIError::Boxed(boxed) => match boxed.downcast::<HttpFailure>() {
            Ok(failure) => {
                let mut error = classify_error(Some(failure.status), &failure.body);
                if let (Error::RateLimited { retry_after, .. }, Some(asked)) =
                    (&mut error, failure.retry_after)
                {
                    *retry_after = Some(asked);
                }
                (error, failure.retry_after)
            }
            Err(other) => (Error::Transient { status: None, message: other.to_string() }, None),
        },
        OpenAIError::Reqwest(error) => {
            let mut message = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                message.push_str(": ");
                message.push_str(&cause.to_string());
                source = cause.source();
            }
            (Error::Transient { status: error.status().map(|s| s.as_u16()), message }, None)
        }
        // Our transport answers every non-2xx itself, so this is only reached by a client
        // without it; keep the status and classify the body as the server wrote it.
        OpenAIError::ApiError(response) => {
            let body = json!({"error": {
                "message": response.api_error.message,
                "type": response.api_error.r#type,
                "param": response.api_error.param,
                "code": response.api_error.code,
            }});
            (classify_error(Some(response.status_code.as_u16()), &body.to_string()), None)
        }
        // Error bodies never reach async-openai's deserializer (the transport takes them), so
        // this is a stream event that is not JSON.
        OpenAIError::JSONDeserialize(error, content) => {
            let excerpt: String = content.chars().take(200).collect();
            (Error::Stream(format!("a stream event is not JSON ({error}): {excerpt}")), None)
        }
        OpenAIError::StreamError(error) => (Error::Stream(error.to_string()), None),
        OpenAIError::InvalidArgument(message) => (Error::BadRequest { status: None, message }, None),
        other => (Error::Transient { status: None, message: other.to_string() }, None),
    }
}

impl Call {
    fn run(self) -> ChatStream {
        futures::stream::once(self.open())
            .flat_map(|opened| match opened {
                Ok(open) => open.events(),
                Err(error) => error_stream(error),
            })
            .boxed()
    }

    /// Sends the request until its first event arrives, retrying what the policy allows.
    async fn open(self) -> Result<Open> {
        let mut retry = 0;
        let mut stream_options_refused = false;
        loop {
            let (error, retry_after) = match self.attempt().await {
                Ok(open) => return Ok(open),
                Err(failure) => failure,
            };
            // Some servers (Mistral's API, older local servers) refuse `stream_options`: send
            // again without it, once, and count usage ourselves from then on.
            if !stream_options_refused
                && matches!(&error, Error::BadRequest { message, .. } if message.contains("stream_options"))
                && self.inner.send_stream_options.swap(false, Ordering::Relaxed)
            {
                stream_options_refused = true;
                tracing::warn!(%error, "the server refused stream_options; sending again without it");
                continue;
            }
            let Some(wait) = self.retry.wait_before(retry, &error, retry_after) else {
                self.span.record("error.type", error_type(&error));
                tracing::debug!(%error, attempts = retry + 1, "model call failed");
                return Err(error);
            };
            retry += 1;
            tracing::warn!(%error, retry, wait_ms = wait.as_millis() as u64, "model call failed; retrying");
            tokio::time::sleep(wait).await;
        }
    }

    /// One attempt: sends the request and reads chunks until one yields an event.
    async fn attempt(&self) -> std::result::Result<Open, (Error, Option<Duration>)> {
        let body = self.inner.request_body(&self.request);
        let mut raw: RawStream =
            self.inner.client.chat().create_stream_byot(body).await.map_err(map_openai_error)?;
        let mut assembler = Assembler::default();
        let mut pending = VecDeque::new();
        let mut ended = false;
        while pending.is_empty() && !ended {
            match raw.next().await {
                Some(Ok(chunk)) => {
                    pending.extend(assembler.push(&chunk).map_err(|error| (error, None))?.into_iter().map(Ok))
                }
                Some(Err(error)) => return Err(map_openai_error(error)),
                None => ended = true,
            }
        }
        if ended {
            // Nothing but the finish: complete the answer now, so that a broken one can be retried.
            let events =
                std::mem::take(&mut assembler).finish(self.input_estimate).map_err(|error| (error, None))?;
            pending.extend(events.into_iter().map(Ok));
        }
        Ok(Open {
            raw,
            assembler,
            pending,
            ended,
            input_estimate: self.input_estimate,
            span: self.span.clone(),
        })
    }
}

pub(crate) fn error_type(error: &Error) -> &'static str {
    match error {
        Error::ContextOverflow { .. } => "context_overflow",
        Error::RateLimited { .. } => "rate_limited",
        Error::Auth { .. } => "auth",
        Error::MissingApiKey { .. } => "missing_api_key",
        Error::Transient { .. } => "transient",
        Error::BadRequest { .. } => "bad_request",
        Error::Stream(_) => "stream",
        Error::Cancelled => "cancelled",
        _ => "other",
    }
}

impl Open {
    fn events(self) -> ChatStream {
        futures::stream::unfold(self, |mut open| async move {
            loop {
                if let Some(item) = open.pending.pop_front() {
                    open.observe(&item);
                    return Some((item, open));
                }
                if open.ended {
                    return None;
                }
                match open.raw.next().await {
                    Some(Ok(chunk)) => match open.assembler.push(&chunk) {
                        Ok(events) => open.pending.extend(events.into_iter().map(Ok)),
                        Err(error) => open.fail(error),
                    },
                    Some(Err(error)) => open.fail(map_openai_error(error).0),
                    None => {
                        open.ended = true;
                        match std::mem::take(&mut open.assembler).finish(open.input_estimate) {
                            Ok(events) => open.pending.extend(events.into_iter().map(Ok)),
                            Err(error) => open.pending.push_back(Err(error)),
                        }
                    }
                }
            }
        })
        .boxed()
    }

    /// Ends the answer with `error` after the events already read.
    fn fail(&mut self, error: Error) {
        self.pending.push_back(Err(error));
        self.ended = true;
    }

    fn observe(&self, item: &Result<StreamEvent>) {
        observe(&self.span, item);
    }
}

/// The span of one model call: `chat {model}` with OpenTelemetry's `gen_ai.*` fields, usage,
/// finish and error recorded as they pass ([`observe`]).
pub(crate) fn call_span(info: &ModelInfo, request: &ChatRequest) -> tracing::Span {
    tracing::info_span!(
        "chat",
        otel.name = %format!("chat {}", info.model),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = %info.provider,
        gen_ai.request.model = %info.model,
        gen_ai.conversation.id = request.conversation_id.as_deref(),
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        error.type = Empty,
    )
}

/// Records usage, finish and errors of an answer on its call's span as they pass.
pub(crate) fn observe(span: &tracing::Span, item: &Result<StreamEvent>) {
    match item {
        Ok(StreamEvent::Usage(usage)) => {
            span.record("gen_ai.usage.input_tokens", usage.input_tokens);
            span.record("gen_ai.usage.output_tokens", usage.output_tokens);
        }
        Ok(StreamEvent::Finish { reason }) => {
            span.record("gen_ai.response.finish_reasons", reason.as_wire());
            tracing::debug!(finish_reason = reason.as_wire(), "model call finished");
        }
        Err(error) => {
            span.record("error.type", error_type(error));
            tracing::debug!(%error, "model stream failed");
        }
        Ok(_) => {}
    }
}

/// A stream polled inside a tracing span.
pub(crate) struct InSpan {
    pub(crate) inner: ChatStream,
    pub(crate) span: tracing::Span,
}

impl Stream for InSpan {
    type Item = Result<StreamEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        this.inner.poll_next_unpin(cx)
    }
}
