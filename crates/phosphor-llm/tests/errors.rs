//! Error classification: every server's real error bodies, by the pure function and through
//! the real HTTP path, and errors inside a 200 stream.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns unwrap too

mod common;

use std::time::Duration;

use common::{model, request, run};
use phosphor_base::{Error, StreamEvent};
use phosphor_llm::{RetryPolicy, classify_error};
use phosphor_testkit::{ERROR_FIXTURES, MockResponse, MockServer, SseBuilder, error_fixture};
use pretty_assertions::assert_eq;

/// What an error is, comparably.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Overflow { requested: Option<u64>, limit: Option<u64> },
    RateLimited { retry_after: Option<Duration> },
    Auth,
    Transient(Option<u16>),
    BadRequest(Option<u16>),
    Other(String),
}

fn kind(error: &Error) -> Kind {
    match error {
        Error::ContextOverflow { requested_tokens, limit_tokens, .. } => {
            Kind::Overflow { requested: *requested_tokens, limit: *limit_tokens }
        }
        Error::RateLimited { retry_after, .. } => Kind::RateLimited { retry_after: *retry_after },
        Error::Auth { .. } => Kind::Auth,
        Error::Transient { status, .. } => Kind::Transient(*status),
        Error::BadRequest { status, .. } => Kind::BadRequest(*status),
        other => Kind::Other(format!("{other:?}")),
    }
}

fn overflow(requested: Option<u64>, limit: Option<u64>) -> Kind {
    Kind::Overflow { requested, limit }
}

/// The expected class of every stored server answer, in `ERROR_FIXTURES` order.
fn expected() -> Vec<(&'static str, Kind)> {
    vec![
        ("openai_context_length_exceeded", overflow(Some(130_000), Some(128_000))),
        ("anthropic_prompt_too_long", overflow(Some(210_000), Some(200_000))),
        ("anthropic_input_plus_max_tokens", overflow(Some(199_759), Some(200_000))),
        ("gemini_input_token_count", overflow(Some(1_200_000), Some(1_048_576))),
        ("openrouter_context_length", overflow(Some(9000), Some(8192))),
        ("vllm_context_length", overflow(Some(5000), Some(4096))),
        ("llamacpp_exceed_context_size", overflow(Some(5000), Some(4096))),
        ("lmstudio_context_overflow", overflow(Some(5000), Some(4096))),
        ("mistralrs_sequence_too_long", overflow(None, Some(4096))),
        ("deepseek_context_length", overflow(Some(70_000), Some(65_536))),
        ("cerebras_context_length_exceeded", overflow(Some(9000), Some(8192))),
        ("nginx_413", overflow(None, None)),
        ("openai_rate_limit_tpm", Kind::RateLimited { retry_after: Some(Duration::from_secs(8)) }),
        ("openai_insufficient_quota", Kind::BadRequest(Some(429))),
        ("openai_max_tokens_too_large", Kind::BadRequest(Some(400))),
        ("anthropic_max_tokens_over_output_limit", Kind::BadRequest(Some(400))),
        ("openai_invalid_api_key", Kind::Auth),
        ("openai_unsupported_region", Kind::Auth),
        ("openai_server_error", Kind::Transient(Some(500))),
        ("cloudflare_502", Kind::Transient(Some(502))),
        ("openai_overloaded_503", Kind::Transient(Some(503))),
    ]
}

#[test]
fn every_server_error_body_is_classified_exactly() {
    let actual: Vec<(&str, Kind)> =
        ERROR_FIXTURES.iter().map(|f| (f.name, kind(&classify_error(Some(f.status), f.body)))).collect();
    assert_eq!(actual, expected());
}

#[test]
fn the_provider_message_is_kept_verbatim() {
    let messages: Vec<String> =
        ["lmstudio_context_overflow", "mistralrs_sequence_too_long", "nginx_413", "cloudflare_502"]
            .iter()
            .map(|name| {
                let fixture = error_fixture(name);
                classify_error(Some(fixture.status), fixture.body).to_string()
            })
            .collect();
    assert_eq!(
        messages,
        vec![
            "context window exceeded: Trying to keep the first 5000 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input",
            "context window exceeded: Prompt sequence length is greater than 4096, perhaps consider using `truncate_sequence`?",
            "context window exceeded: 413 Request Entity Too Large",
            "transient model error (HTTP 502): 502 Bad Gateway",
        ]
    );
}

#[test]
fn bodies_without_a_status_are_classified_from_what_they_say() {
    let openai_overflow = error_fixture("openai_context_length_exceeded").body;
    let cases: Vec<(Option<u16>, &str, Kind)> = vec![
        // An error event inside a 200 stream.
        (None, openai_overflow, overflow(Some(130_000), Some(128_000))),
        // A lost status: Gemini's numeric code stands in for it.
        (None, error_fixture("gemini_input_token_count").body, overflow(Some(1_200_000), Some(1_048_576))),
        (None, r#"{"error":{"message":"Provider returned error","code":502}}"#, Kind::Transient(Some(502))),
        (
            None,
            r#"{"error":{"message":"Rate limit reached. Please try again in 20ms.","type":"requests","code":"rate_limit_exceeded"}}"#,
            Kind::RateLimited { retry_after: Some(Duration::from_millis(20)) },
        ),
        (
            None,
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#,
            Kind::Auth,
        ),
        (
            None,
            r#"{"error":{"message":"The server had an error","type":"server_error","code":null}}"#,
            Kind::Transient(None),
        ),
        (
            None,
            r#"{"error":{"message":"Invalid 'messages[2].role'","type":"invalid_request_error"}}"#,
            Kind::BadRequest(None),
        ),
        (None, "not json at all", Kind::BadRequest(None)),
        // Any 429 is a rate limit, even when its message talks about context.
        (
            Some(429),
            r#"{"error":{"message":"maximum context length is 8192 tokens"}}"#,
            Kind::RateLimited { retry_after: None },
        ),
        // A 5xx is an overflow only with an exact overflow code.
        (
            Some(500),
            r#"{"error":{"message":"maximum context length reached in a worker"}}"#,
            Kind::Transient(Some(500)),
        ),
        (Some(500), r#"{"error":{"message":"x","code":"context_length_exceeded"}}"#, overflow(None, None)),
        (Some(408), "", Kind::Transient(Some(408))),
        (
            Some(404),
            r#"{"error":{"message":"The model `gpt-9` does not exist","code":"model_not_found"}}"#,
            Kind::BadRequest(Some(404)),
        ),
        // Mistral's API and xAI word it their own way.
        (
            Some(400),
            r#"{"object":"error","message":"Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length","type":"invalid_request_message_error","param":null,"code":"3051"}"#,
            overflow(Some(40_000), Some(32_768)),
        ),
        (
            Some(400),
            r#"{"code":"Client specified an invalid argument","error":"This model's maximum prompt length is 131072 but the request contains 140000 tokens."}"#,
            overflow(Some(140_000), Some(131_072)),
        ),
    ];
    let actual: Vec<(Option<u16>, &str, Kind)> = cases
        .iter()
        .map(|(status, body, _)| (*status, *body, kind(&classify_error(*status, body))))
        .collect();
    assert_eq!(actual, cases);
}

#[tokio::test]
async fn every_server_error_is_classified_through_the_http_path() {
    let server = MockServer::start(ERROR_FIXTURES.iter().map(|f| f.response()).collect()).await;
    let model = model(&server).with_retry_policy(RetryPolicy::none());
    let mut actual = Vec::new();
    for fixture in ERROR_FIXTURES {
        let (events, error) = run(&model, request()).await;
        assert_eq!(events, vec![], "{}", fixture.name);
        actual.push((fixture.name, kind(&error.expect("an error"))));
    }
    assert_eq!(actual, expected());
    assert_eq!(server.requests().len(), ERROR_FIXTURES.len());
}

#[tokio::test]
async fn retry_after_headers_reach_the_rate_limit_error() {
    let limited = |headers: Vec<(&str, &str)>| MockResponse::Raw {
        status: 429,
        headers: headers.into_iter().map(|(n, v)| (n.to_owned(), v.to_owned())).collect(),
        body: r#"{"error":{"message":"Too many requests","type":"requests","code":"rate_limit_exceeded"}}"#
            .to_owned(),
    };
    let server = MockServer::start(vec![
        limited(vec![("retry-after", "17")]),
        limited(vec![("retry-after-ms", "1500"), ("retry-after", "2")]),
        limited(vec![]),
    ])
    .await;
    let model = model(&server).with_retry_policy(RetryPolicy::none());
    let mut actual = Vec::new();
    for _ in 0..3 {
        actual.push(kind(&run(&model, request()).await.1.expect("an error")));
    }
    assert_eq!(
        actual,
        vec![
            Kind::RateLimited { retry_after: Some(Duration::from_secs(17)) },
            Kind::RateLimited { retry_after: Some(Duration::from_millis(1500)) },
            Kind::RateLimited { retry_after: None },
        ]
    );
}

#[tokio::test]
async fn an_error_event_inside_a_200_stream_is_classified() {
    let body: serde_json::Value =
        serde_json::from_str(error_fixture("openai_context_length_exceeded").body).unwrap();
    let at_start = MockResponse::Sse(vec![body.to_string()]);
    let midway = SseBuilder::new().role().text("Let me").event(body.to_string()).into_response();
    let server = MockServer::start(vec![at_start, midway]).await;
    let model = model(&server);

    let (events, error) = run(&model, request()).await;
    assert_eq!((events, kind(&error.expect("an error"))), (vec![], overflow(Some(130_000), Some(128_000))));
    let (events, error) = run(&model, request()).await;
    assert_eq!(
        (events, kind(&error.expect("an error"))),
        (vec![StreamEvent::TextDelta { text: "Let me".into() }], overflow(Some(130_000), Some(128_000)))
    );
    // Overflows are never retried: one request each.
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_refused_connection_is_transient() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let server = MockServer::start(vec![]).await;
    let mut provider = common::provider(&server);
    provider.base_url = format!("http://127.0.0.1:{port}/v1");
    let model = phosphor_llm::OpenAiModel::with_api_key("mock", &provider, &common::model_config(), None)
        .unwrap()
        .with_retry_policy(RetryPolicy::none());
    let error = run(&model, request()).await.1.expect("an error");
    assert_eq!(kind(&error), Kind::Transient(None), "{error}");
}
