//! The HTTP transport under async-openai's client.
//!
//! async-openai's default transport retries on its own (so our retry policy and request counts
//! would be off), drops the response headers of failures (so `retry-after` is lost), and loses
//! the HTTP status when an error body is not OpenAI's shape (LM Studio, vLLM, Gemini, ...). This
//! transport sends each request once and turns every non-2xx response into an [`HttpFailure`]
//! carrying status, retry-after and the raw body, which [`crate::classify_error`] then reads.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;

use crate::error::retry_after_from_headers;

/// A response with a non-2xx status, read whole.
#[derive(Debug)]
pub(crate) struct HttpFailure {
    /// The HTTP status.
    pub(crate) status: u16,
    /// The wait asked for by `retry-after-ms` or `retry-after`.
    pub(crate) retry_after: Option<Duration>,
    /// The body, verbatim (lossy UTF-8).
    pub(crate) body: String,
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}", self.status)
    }
}

impl std::error::Error for HttpFailure {}

/// Sends each request once with `client`; see the module docs.
#[derive(Clone)]
pub(crate) struct Transport {
    pub(crate) client: reqwest::Client,
    /// Keyless providers: async-openai always writes `Authorization: Bearer <key>`, so an empty
    /// key would still send `Bearer `. Drop the header instead.
    pub(crate) drop_authorization: bool,
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send>>;

impl tower::Service<HttpRequestFactory> for Transport {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let client = self.client.clone();
        let drop_authorization = self.drop_authorization;
        Box::pin(async move {
            let mut request = factory.build().await?;
            if drop_authorization {
                request.headers_mut().remove(reqwest::header::AUTHORIZATION);
            }
            let response = client.execute(request).await.map_err(OpenAIError::Reqwest)?;
            if response.status().is_success() {
                return Ok(response);
            }
            let status = response.status().as_u16();
            let header = |name: &str| {
                response.headers().get(name).and_then(|value| value.to_str().ok()).map(str::to_owned)
            };
            let retry_after = retry_after_from_headers(
                header("retry-after-ms").as_deref(),
                header("retry-after").as_deref(),
                SystemTime::now(),
            );
            let body = match response.bytes().await {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(error) => format!("(the error body could not be read: {error})"),
            };
            Err(OpenAIError::Boxed(Box::new(HttpFailure { status, retry_after, body })))
        })
    }
}
