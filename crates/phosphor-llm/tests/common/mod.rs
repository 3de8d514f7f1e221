//! Shared setup of the phosphor-llm integration tests: a model pointed at a MockServer.

#![allow(dead_code)]

use std::time::Duration;

use futures::StreamExt;
use phosphor_base::config::{ModelConfig, ProviderConfig};
use phosphor_base::{ChatModel, ChatRequest, Error, Message, StreamEvent};
use phosphor_llm::{OpenAiModel, RetryPolicy};
use phosphor_testkit::MockServer;

/// The API key the tests use; it must never show up in logs or Debug output.
pub const SECRET_KEY: &str = "sk-test-0123456789-very-secret";

pub fn provider(server: &MockServer) -> ProviderConfig {
    ProviderConfig { base_url: server.base_url(), ..ProviderConfig::default() }
}

pub fn model_config() -> ModelConfig {
    ModelConfig {
        provider: "mock".into(),
        model: "gpt-4o-mini".into(),
        context_window: 128_000,
        max_output_tokens: 1024,
    }
}

/// Retries with millisecond waits.
pub fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(4),
        max_retry_after: Duration::from_millis(200),
    }
}

/// A keyed model of the server, with fast retries.
pub fn model(server: &MockServer) -> OpenAiModel {
    OpenAiModel::with_api_key("mock", &provider(server), &model_config(), Some(SECRET_KEY))
        .unwrap()
        .with_retry_policy(fast_retry())
}

pub fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::system("You are terse."), Message::user("Say hello")],
        ..ChatRequest::default()
    }
}

/// Every event until the end or the first error.
pub async fn run(model: &OpenAiModel, request: ChatRequest) -> (Vec<StreamEvent>, Option<Error>) {
    let mut stream = model.stream(request);
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => return (events, Some(error)),
        }
    }
    (events, None)
}
