//! Retries, observed in the server's request log.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns unwrap too

mod common;

use std::time::{Duration, Instant};

use common::{model, request, run};
use phosphor_base::{Error, FinishReason, StreamEvent};
use phosphor_testkit::{MockResponse, MockServer, error_fixture, sse_text};
use pretty_assertions::assert_eq;

fn ok_events() -> Vec<StreamEvent> {
    vec![
        StreamEvent::TextDelta { text: "fine".into() },
        StreamEvent::Usage(phosphor_base::Usage { input_tokens: 5, output_tokens: 1, ..Default::default() }),
        StreamEvent::Finish { reason: FinishReason::Stop },
    ]
}

fn ok() -> MockResponse {
    sse_text(&["fine"], Some((5, 1)))
}

#[tokio::test]
async fn a_503_then_success_takes_two_requests() {
    let server = MockServer::start(vec![error_fixture("openai_overloaded_503").response(), ok()]).await;
    let (events, error) = run(&model(&server), request()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(events, ok_events());
    assert_eq!(server.requests().len(), 2);
    assert_eq!(server.requests()[0].body, server.requests()[1].body);
}

#[tokio::test]
async fn an_overflow_is_sent_exactly_once() {
    let server =
        MockServer::start(vec![error_fixture("openai_context_length_exceeded").response(), ok()]).await;
    let error = run(&model(&server), request()).await.1.expect("an error");
    assert!(error.is_context_overflow(), "{error:?}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_401_is_sent_exactly_once() {
    let server = MockServer::start(vec![error_fixture("openai_invalid_api_key").response(), ok()]).await;
    let error = run(&model(&server), request()).await.1.expect("an error");
    assert!(matches!(error, Error::Auth { .. }), "{error:?}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn retries_stop_after_the_policy_limit() {
    let failure = error_fixture("openai_server_error").response();
    let server =
        MockServer::start(vec![failure.clone(), failure.clone(), failure.clone(), failure, ok()]).await;
    let error = run(&model(&server), request()).await.1.expect("an error");
    assert!(matches!(error, Error::Transient { status: Some(500), .. }), "{error:?}");
    assert_eq!(server.requests().len(), 4, "1 attempt and 3 retries");
}

#[tokio::test]
async fn retry_after_is_honoured_up_to_the_cap() {
    let limited = |name: &str, value: &str| MockResponse::Raw {
        status: 429,
        headers: vec![(name.to_owned(), value.to_owned())],
        body: r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#
            .to_owned(),
    };
    let server =
        MockServer::start(vec![limited("retry-after-ms", "60"), ok(), limited("retry-after", "120")]).await;
    let model = model(&server);

    let started = Instant::now();
    let (events, error) = run(&model, request()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(events, ok_events());
    assert!(started.elapsed() >= Duration::from_millis(60), "waited only {:?}", started.elapsed());

    // 120 s is over the policy's 200 ms cap: no retry, the caller gets the wait.
    let error = run(&model, request()).await.1.expect("an error");
    assert!(
        matches!(error, Error::RateLimited { retry_after: Some(wait), .. } if wait == Duration::from_secs(120)),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_stream_broken_before_any_event_is_retried() {
    let role_only = phosphor_testkit::SseBuilder::new().role().build();
    let server = MockServer::start(vec![MockResponse::SseCut(role_only), ok()]).await;
    let (events, error) = run(&model(&server), request()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(events, ok_events());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_server_refusing_stream_options_is_asked_again_without_them() {
    let refusal = MockResponse::json(
        422,
        r#"{"object":"error","message":"Extra inputs are not permitted: body.stream_options","type":"invalid_request_error"}"#,
    );
    let server =
        MockServer::start(vec![refusal, sse_text(&["fine"], None), sse_text(&["again"], None)]).await;
    let model = model(&server);
    let (events, error) = run(&model, request()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(events[0], StreamEvent::TextDelta { text: "fine".into() });
    run(&model, request()).await;
    let sent: Vec<bool> = server.requests().iter().map(|r| r.body.get("stream_options").is_some()).collect();
    assert_eq!(sent, vec![true, false, false]);
}
