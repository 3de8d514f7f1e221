//! The API key shows up in no log line, span field or Debug output; the call's span carries
//! the OpenTelemetry fields and the usage.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns unwrap too

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use common::{SECRET_KEY, model_config, provider, request, run};
use phosphor_llm::OpenAiModel;
use phosphor_testkit::{MockServer, error_fixture, sse_text};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::FmtSpan;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[tokio::test]
async fn the_key_is_in_no_log_and_usage_is_on_the_span() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(captured.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = MockServer::start(vec![
        error_fixture("openai_overloaded_503").response(),
        sse_text(&["Hello"], Some((42, 3))),
        error_fixture("openai_invalid_api_key").response(),
    ])
    .await;
    let mut provider = provider(&server);
    provider.headers = BTreeMap::from([("X-Api-Key".to_owned(), "header-secret-value".to_owned())]);
    let model = OpenAiModel::with_api_key("mock", &provider, &model_config(), Some(SECRET_KEY))
        .unwrap()
        .with_retry_policy(common::fast_retry());
    let mut request = request();
    request.conversation_id = Some("session-7".into());
    assert!(run(&model, request.clone()).await.1.is_none());
    assert!(run(&model, request).await.1.is_some());
    drop(_guard);

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(!logs.contains(SECRET_KEY), "the key leaked into the logs:\n{logs}");
    assert!(!logs.contains("header-secret-value"), "a header value leaked into the logs:\n{logs}");
    assert!(logs.contains("retrying"), "the retry was not logged:\n{logs}");
    let closed = logs
        .lines()
        .find(|l| l.contains("close") && l.contains("gen_ai.usage.input_tokens"))
        .unwrap_or_default();
    for field in [
        "chat{",
        "otel.name=chat gpt-4o-mini ",
        "gen_ai.provider.name=mock",
        "gen_ai.request.model=gpt-4o-mini",
        "gen_ai.conversation.id=\"session-7\"",
        "gen_ai.usage.input_tokens=42",
        "gen_ai.usage.output_tokens=3",
    ] {
        assert!(
            closed.contains(field),
            "{field} missing from the span close line {closed:?}\nin logs:\n{logs}"
        );
    }
    assert!(logs.contains("error.type=\"auth\""), "the failed call's span has no error.type:\n{logs}");
}

#[tokio::test]
async fn debug_output_redacts_the_key_and_header_values() {
    let server = MockServer::start(vec![]).await;
    let mut provider = provider(&server);
    provider.api_key_env = Some("MOCK_API_KEY".into());
    provider.headers = BTreeMap::from([("X-Api-Key".to_owned(), "header-secret-value".to_owned())]);
    let model = OpenAiModel::with_api_key("mock", &provider, &model_config(), Some(SECRET_KEY)).unwrap();
    let debug = format!("{model:?} {model:#?}");
    assert!(!debug.contains(SECRET_KEY), "{debug}");
    assert!(!debug.contains("header-secret-value"), "{debug}");
    assert!(debug.contains("api_key: \"<redacted>\""), "{debug}");
    assert!(debug.contains("MOCK_API_KEY") && debug.contains("X-Api-Key"), "{debug}");
}
