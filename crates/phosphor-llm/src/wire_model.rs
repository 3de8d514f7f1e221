//! [`WireModel`]: a [`ChatModel`] over Anthropic Messages or OpenAI Responses, sent with reqwest
//! and read with `phosphor-wire`'s readers.
//!
//! The body is `phosphor_wire::anthropic::upstream::request_body` or
//! `phosphor_wire::responses::upstream::request_body`; the answer's server-sent events go through
//! `phosphor_wire::sse::Decoder` into the wire's `Reader`. Retries, error classification, spans
//! and key handling are [`crate::OpenAiModel`]'s: one [`RetryPolicy`], one [`classify_error`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use phosphor_base::config::{Api, ModelConfig, ProviderConfig};
use phosphor_base::model::error_stream;
use phosphor_base::{
    ApproxCounter, ChatModel, ChatRequest, ChatStream, ModelInfo, StreamEvent, TokenCounter,
};
use phosphor_wire::sse::Decoder;
use phosphor_wire::upstream::{ReadError, Reader};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::error::{Error, Result, classify_error, retry_after_from_headers};
use crate::model::{
    InSpan, RetryPolicy, call_span, checked_base_url, checked_headers, config_error, counter_for, error_type,
    http_client, key_from_env, observe,
};

/// A chat model behind an Anthropic Messages endpoint (`api: "anthropic"`: Anthropic, or any
/// server that speaks its API) or an OpenAI Responses endpoint (`api: "responses"`). Cheap to
/// clone. Its [`Debug`](std::fmt::Debug) output never shows the key nor extra header values.
#[derive(Clone)]
pub struct WireModel {
    inner: Arc<Inner>,
    retry: RetryPolicy,
}

struct Inner {
    api: Api,
    http: reqwest::Client,
    url: String,
    /// Every header of a request: the key (`x-api-key` or `Authorization`), `anthropic-version`,
    /// then the provider's own, which win.
    headers: HeaderMap,
    info: ModelInfo,
    counter: Arc<dyn TokenCounter>,
    api_key_env: Option<String>,
    has_key: bool,
    header_names: Vec<String>,
}

impl std::fmt::Debug for WireModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = &self.inner;
        f.debug_struct("WireModel")
            .field("api", &inner.api.as_str())
            .field("provider", &inner.info.provider)
            .field("model", &inner.info.model)
            .field("url", &inner.url)
            .field("context_window", &inner.info.context_window)
            .field("api_key_env", &inner.api_key_env)
            .field("api_key", &if inner.has_key { "<redacted>" } else { "<none>" })
            .field("headers", &inner.header_names)
            .field("retry", &self.retry)
            .finish()
    }
}

impl WireModel {
    /// A model of `provider`, which must speak `anthropic` or `responses`, reading its key from
    /// `provider.api_key_env`; errors as [`crate::OpenAiModel::new`]'s.
    pub fn new(provider_name: &str, provider: &ProviderConfig, model: &ModelConfig) -> Result<WireModel> {
        WireModel::build(provider_name, provider, model, key_from_env(provider)?.map(Credential::ApiKey))
    }

    /// Like [`WireModel::new`], with the key given (`None` for a keyless server).
    pub fn with_api_key(
        provider_name: &str,
        provider: &ProviderConfig,
        model: &ModelConfig,
        api_key: Option<&str>,
    ) -> Result<WireModel> {
        WireModel::build(
            provider_name,
            provider,
            model,
            api_key.map(|key| Credential::ApiKey(key.to_owned())),
        )
    }

    fn build(
        provider_name: &str,
        provider: &ProviderConfig,
        model: &ModelConfig,
        key: Option<Credential>,
    ) -> Result<WireModel> {
        let (base_url, _) = checked_base_url(provider_name, provider)?;
        let path = match provider.api {
            Api::Anthropic => "messages",
            Api::Responses => "responses",
            Api::Chat => {
                return Err(config_error(
                    provider_name,
                    "speaks chat completions: build it with OpenAiModel (phosphor_llm::connect picks by `api`)",
                ));
            }
        };
        let mut headers = HeaderMap::new();
        let value = |text: &str| {
            HeaderValue::from_str(text)
                .map_err(|_| config_error(provider_name, "the API key is not a valid HTTP header value"))
        };
        if let Some(key) = &key {
            // Anthropic takes an API key as `x-api-key` and an OAuth token as a bearer; OpenAI
            // takes either as a bearer.
            let (name, mut secret) = match (provider.api, key) {
                (Api::Anthropic, Credential::ApiKey(key)) => ("x-api-key", value(key)?),
                (_, Credential::ApiKey(key) | Credential::Bearer(key)) => {
                    ("authorization", value(&format!("Bearer {key}"))?)
                }
            };
            secret.set_sensitive(true);
            headers.insert(HeaderName::from_static(name), secret);
        }
        if provider.api == Api::Anthropic {
            headers.insert(
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static(phosphor_wire::anthropic::upstream::VERSION),
            );
        }
        headers.insert(reqwest::header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        headers.insert(reqwest::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in checked_headers(provider_name, provider)? {
            headers.insert(name, value);
        }
        let info = ModelInfo {
            provider: provider_name.to_owned(),
            model: model.model.clone(),
            context_window: model.context_window,
            max_output_tokens: model.max_output_tokens,
        };
        let inner = Inner {
            api: provider.api,
            http: http_client(provider_name)?,
            url: format!("{base_url}/{path}"),
            headers,
            counter: counter_for(&info.model),
            info,
            api_key_env: provider.api_key_env.clone(),
            has_key: key.is_some(),
            header_names: provider.headers.keys().cloned().collect(),
        };
        Ok(WireModel { inner: Arc::new(inner), retry: RetryPolicy::default() })
    }

    /// Replaces the retry policy (tests use millisecond delays).
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> WireModel {
        self.retry = retry;
        self
    }

    /// The URL requests go to (`{base_url}/messages` or `{base_url}/responses`).
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The JSON body sent for `request`, in the provider's API.
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        self.inner.request_body(request)
    }
}

impl Inner {
    fn request_body(&self, request: &ChatRequest) -> Value {
        let limit = request.max_output_tokens.unwrap_or(self.info.max_output_tokens);
        match self.api {
            Api::Anthropic => {
                phosphor_wire::anthropic::upstream::request_body(&self.info.model, request, limit)
            }
            _ => phosphor_wire::responses::upstream::request_body(&self.info.model, request, limit),
        }
    }

    fn reader(&self) -> Box<dyn Reader> {
        match self.api {
            Api::Anthropic => Box::new(phosphor_wire::anthropic::upstream::Reader::default()),
            _ => Box::new(phosphor_wire::responses::upstream::Reader::default()),
        }
    }
}

impl ChatModel for WireModel {
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

struct Call {
    inner: Arc<Inner>,
    retry: RetryPolicy,
    request: ChatRequest,
    input_estimate: u64,
    span: tracing::Span,
}

/// An answer whose first events arrived.
struct Open {
    response: reqwest::Response,
    decoder: Decoder,
    reader: Box<dyn Reader>,
    pending: VecDeque<Result<StreamEvent>>,
    ended: bool,
    input_estimate: u64,
    span: tracing::Span,
}

fn read_error(error: ReadError) -> Error {
    match error {
        ReadError::Malformed(message) => Error::Stream(message),
        ReadError::Provider { status, body } => classify_error(status, &body),
    }
}

/// A reqwest error with its causes, as one line.
fn transport_error(error: &reqwest::Error) -> Error {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    Error::Transient { status: error.status().map(|s| s.as_u16()), message }
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

    /// Sends the request until its first events arrive, retrying what the policy allows.
    async fn open(self) -> Result<Open> {
        let mut retry = 0;
        loop {
            let (error, retry_after) = match self.attempt().await {
                Ok(open) => return Ok(open),
                Err(failure) => failure,
            };
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

    async fn attempt(&self) -> std::result::Result<Open, (Error, Option<Duration>)> {
        let body = self.inner.request_body(&self.request).to_string();
        let mut headers = self.inner.headers.clone();
        // A client's own headers of this API (`anthropic-beta`), next to ours.
        for (name, value) in
            self.request.passthrough.iter().filter(|p| p.api == self.inner.api).flat_map(|p| &p.headers)
        {
            if let (Ok(name), Ok(value)) =
                (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value))
            {
                headers.entry(name).or_insert(value);
            }
        }
        let response = self
            .inner
            .http
            .post(&self.inner.url)
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|error| (transport_error(&error), None))?;
        if !response.status().is_success() {
            let status = response.status().as_u16();
            let header =
                |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
            let retry_after = retry_after_from_headers(
                header("retry-after-ms").as_deref(),
                header("retry-after").as_deref(),
                SystemTime::now(),
            );
            let body = match response.bytes().await {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(error) => format!("(the error body could not be read: {error})"),
            };
            let mut error = classify_error(Some(status), &body);
            if let (Error::RateLimited { retry_after: slot, .. }, Some(asked)) = (&mut error, retry_after) {
                *slot = Some(asked);
            }
            return Err((error, retry_after));
        }
        let mut open = Open {
            response,
            decoder: Decoder::default(),
            reader: self.inner.reader(),
            pending: VecDeque::new(),
            ended: false,
            input_estimate: self.input_estimate,
            span: self.span.clone(),
        };
        // Read until something arrives, so that a failure before the first event is retried.
        while open.pending.is_empty() && !open.ended {
            open.read_more().await;
        }
        if let Some(Err(_)) = open.pending.front() {
            let Some(Err(error)) = open.pending.pop_front() else { unreachable!() };
            return Err((error, None));
        }
        Ok(open)
    }
}

impl Open {
    /// Reads the next piece of the body into `pending`; at its end, the closing events.
    async fn read_more(&mut self) {
        match self.response.chunk().await {
            Ok(Some(bytes)) => {
                for event in self.decoder.push(&bytes) {
                    self.read_event(&event);
                    if self.ended {
                        return;
                    }
                }
            }
            Ok(None) => {
                if let Some(event) = self.decoder.finish() {
                    self.read_event(&event);
                    if self.ended {
                        return;
                    }
                }
                self.ended = true;
                match self.reader.finish(self.input_estimate) {
                    Ok(events) => self.pending.extend(events.into_iter().map(Ok)),
                    Err(error) => self.pending.push_back(Err(read_error(error))),
                }
            }
            Err(error) => {
                self.pending.push_back(Err(transport_error(&error)));
                self.ended = true;
            }
        }
    }

    fn read_event(&mut self, event: &phosphor_wire::sse::Event) {
        match self.reader.event(event) {
            Ok(events) => self.pending.extend(events.into_iter().map(Ok)),
            Err(error) => {
                self.pending.push_back(Err(read_error(error)));
                self.ended = true;
            }
        }
    }

    fn events(self) -> ChatStream {
        futures::stream::unfold(self, |mut open| async move {
            loop {
                if let Some(item) = open.pending.pop_front() {
                    observe(&open.span, &item);
                    return Some((item, open));
                }
                if open.ended {
                    return None;
                }
                open.read_more().await;
            }
        })
        .boxed()
    }
}

/// The model `model` names, over the API its provider speaks: an [`crate::OpenAiModel`] for
/// `chat`, a [`WireModel`] for `anthropic` and `responses`. The key is read from the provider's
/// `api_key_env`.
pub fn connect(
    provider_name: &str,
    provider: &ProviderConfig,
    model: &ModelConfig,
) -> Result<Arc<dyn ChatModel>> {
    connect_as(provider_name, provider, model, None)
}

/// Like [`connect`], sending `credential` (a proxied client's own key) when the provider has no
/// key of its own (no `api_key_env`); a provider's own key always wins.
pub fn connect_as(
    provider_name: &str,
    provider: &ProviderConfig,
    model: &ModelConfig,
    credential: Option<&Credential>,
) -> Result<Arc<dyn ChatModel>> {
    let key = match key_from_env(provider)? {
        Some(own) => Some(Credential::ApiKey(own)),
        None => credential.cloned(),
    };
    Ok(match provider.api {
        Api::Chat => Arc::new(crate::OpenAiModel::build(
            provider_name,
            provider,
            model,
            key.map(Credential::into_secret),
        )?),
        Api::Anthropic | Api::Responses => Arc::new(WireModel::build(provider_name, provider, model, key)?),
    })
}

/// A key a request is sent with, as the client that owns it sent it to `phosphor serve`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Credential {
    /// An API key (`x-api-key: KEY`, or OpenAI's `Authorization: Bearer KEY`).
    ApiKey(String),
    /// A bearer token that is not an API key: an OAuth access token (`Authorization: Bearer TOKEN`).
    Bearer(String),
}

impl Credential {
    fn into_secret(self) -> String {
        match self {
            Credential::ApiKey(secret) | Credential::Bearer(secret) => secret,
        }
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Credential::ApiKey(_) => "ApiKey",
            Credential::Bearer(_) => "Bearer",
        };
        write!(f, "{kind}(<redacted>)")
    }
}
