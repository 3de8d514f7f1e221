//! Streaming answers over real HTTP from the mock server: text, tool calls, reasoning, usage.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns unwrap too

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{SECRET_KEY, model, model_config, provider, request, run};
use futures::StreamExt;
use phosphor_base::{
    ApproxCounter, ChatModel, ChatRequest, Error, FinishReason, StreamEvent, TokenCounter, ToolCall,
    ToolSpec, Usage,
};
use phosphor_llm::OpenAiModel;
use phosphor_testkit::{
    MockResponse, MockServer, SseBuilder, sse_reasoning_then_text, sse_text, sse_tool_calls,
};
use pretty_assertions::assert_eq;
use serde_json::json;

fn text(text: &str) -> StreamEvent {
    StreamEvent::TextDelta { text: text.into() }
}

fn usage(input_tokens: u64, output_tokens: u64) -> StreamEvent {
    StreamEvent::Usage(Usage { input_tokens, output_tokens, ..Usage::default() })
}

fn finish(reason: FinishReason) -> StreamEvent {
    StreamEvent::Finish { reason }
}

#[tokio::test]
async fn plain_text_streams_deltas_then_usage_then_finish() {
    let server = MockServer::start(vec![sse_text(&["Hel", "lo", " world"], Some((42, 3)))]).await;
    let (events, error) = run(&model(&server), request()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events,
        vec![text("Hel"), text("lo"), text(" world"), usage(42, 3), finish(FinishReason::Stop)]
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!((requests[0].method.as_str(), requests[0].path.as_str()), ("POST", "/v1/chat/completions"));
    assert_eq!(
        requests[0].body,
        json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Say hello"},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 1024,
        })
    );
}

#[tokio::test]
async fn two_parallel_tool_calls_are_assembled_into_whole_calls() {
    let read = ("call_Vx1", "read_file", r#"{"path":"src/lib.rs","max_lines":200}"#);
    let grep = ("call_Qz2", "grep", r#"{"pattern":"fn main","path":"."}"#);
    let server = MockServer::start(vec![sse_tool_calls(&[read, grep], Some((310, 58)))]).await;
    let tool = ToolSpec {
        name: "read_file".into(),
        description: "Reads a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    };
    let request =
        ChatRequest { tools: vec![tool], max_output_tokens: Some(77), temperature: Some(0.7), ..request() };
    let (events, error) = run(&model(&server), request).await;
    assert!(error.is_none(), "{error:?}");
    let call = |(id, name, arguments): (&str, &str, &str)| {
        StreamEvent::ToolCall(ToolCall { id: id.into(), name: name.into(), arguments: arguments.into() })
    };
    assert_eq!(events, vec![call(read), call(grep), usage(310, 58), finish(FinishReason::ToolCalls)]);

    let body = &server.requests()[0].body;
    assert_eq!(
        (&body["tools"], &body["max_tokens"], &body["temperature"]),
        (
            &json!([{"type": "function", "function": {
                "name": "read_file",
                "description": "Reads a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            }}]),
            &json!(77),
            &json!(0.7),
        )
    );
}

#[tokio::test]
async fn reasoning_deltas_in_either_field_come_before_the_text() {
    let deepseek = sse_reasoning_then_text(&["The user", " greets me."], &["Hello!"], Some((12, 9)));
    let openrouter = SseBuilder::new()
        .role()
        .reasoning("reasoning", "Short answer.")
        .text("Hi")
        .finish("stop")
        .usage_with_details(20, 5, 8, 3)
        .into_response();
    let server = MockServer::start(vec![deepseek, openrouter]).await;
    let model = model(&server);
    let reasoning = |text: &str| StreamEvent::ReasoningDelta { text: text.into() };

    let (events, error) = run(&model, request()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events,
        vec![
            reasoning("The user"),
            reasoning(" greets me."),
            text("Hello!"),
            usage(12, 9),
            finish(FinishReason::Stop)
        ]
    );

    let (events, error) = run(&model, request()).await;
    assert!(error.is_none(), "{error:?}");
    let detailed = Usage { input_tokens: 20, output_tokens: 5, cached_input_tokens: 8, reasoning_tokens: 3 };
    assert_eq!(
        events,
        vec![
            reasoning("Short answer."),
            text("Hi"),
            StreamEvent::Usage(detailed),
            finish(FinishReason::Stop)
        ]
    );
}

#[tokio::test]
async fn usage_is_counted_by_us_when_the_server_reports_none() {
    let server = MockServer::start(vec![
        sse_text(&["Hello there, ", "how can I help?"], None),
        sse_tool_calls(&[("call_1", "ls", r#"{"dir":"."}"#)], None),
    ])
    .await;
    let model = model(&server);
    let request = request();
    let input = ApproxCounter.count_request(&request);

    let completion = model.complete(request.clone()).await.unwrap();
    let output = ApproxCounter.count_text("Hello there, ") + ApproxCounter.count_text("how can I help?");
    assert_eq!(
        completion.usage,
        Some(Usage { input_tokens: input, output_tokens: output, ..Usage::default() })
    );

    let completion = model.complete(request).await.unwrap();
    let output = ["call_1", "ls", r#"{"dir":"."}"#].iter().map(|t| ApproxCounter.count_text(t)).sum::<u64>();
    assert_eq!(
        completion.usage,
        Some(Usage { input_tokens: input, output_tokens: output, ..Usage::default() })
    );
}

#[tokio::test]
async fn extra_headers_and_the_bearer_key_reach_the_server() {
    let server = MockServer::start(vec![sse_text(&["ok"], None), sse_text(&["ok"], None)]).await;
    let mut provider = provider(&server);
    provider.headers = BTreeMap::from([
        ("HTTP-Referer".to_owned(), "https://phosphor.dev".to_owned()),
        ("X-Title".to_owned(), "Phosphor".to_owned()),
    ]);
    let keyed = OpenAiModel::with_api_key("mock", &provider, &model_config(), Some(SECRET_KEY)).unwrap();
    run(&keyed, request()).await;
    let keyless = OpenAiModel::with_api_key("local", &provider, &model_config(), None).unwrap();
    run(&keyless, request()).await;

    let requests = server.requests();
    let seen: Vec<_> = requests
        .iter()
        .map(|r| {
            (
                r.header("authorization"),
                r.header("http-referer"),
                r.header("x-title"),
                r.header("content-type"),
            )
        })
        .collect();
    let bearer = format!("Bearer {SECRET_KEY}");
    assert_eq!(
        seen,
        vec![
            (Some(bearer.as_str()), Some("https://phosphor.dev"), Some("Phosphor"), Some("application/json")),
            (None, Some("https://phosphor.dev"), Some("Phosphor"), Some("application/json")),
        ]
    );
}

#[tokio::test]
async fn a_missing_key_variable_is_named_in_the_error() {
    let server = MockServer::start(vec![]).await;
    let mut provider = provider(&server);
    provider.api_key_env = Some("PHOSPHOR_TEST_KEY_THAT_IS_NEVER_SET_4F7A".into());
    let error = OpenAiModel::new("mock", &provider, &model_config()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "missing API key: set the environment variable PHOSPHOR_TEST_KEY_THAT_IS_NEVER_SET_4F7A"
    );
    assert!(matches!(error, Error::MissingApiKey { .. }));
    // Keyless providers need no variable.
    provider.api_key_env = None;
    assert!(OpenAiModel::new("mock", &provider, &model_config()).is_ok());
}

#[tokio::test]
async fn bad_provider_settings_are_refused_with_the_field_named() {
    let server = MockServer::start(vec![]).await;
    let mut bad_url = provider(&server);
    bad_url.base_url = "localhost:8080/v1".into();
    let mut bad_header = provider(&server);
    bad_header.headers.insert("X-Bad".into(), "line\nbreak".into());
    let errors: Vec<String> = [bad_url, bad_header]
        .iter()
        .map(|p| OpenAiModel::with_api_key("local", p, &model_config(), None).unwrap_err().to_string())
        .collect();
    assert_eq!(
        errors,
        vec![
            r#"model error: provider "local": base_url "localhost:8080/v1" must start with http:// or https://"#,
            r#"model error: provider "local": the value of header "X-Bad" is not a valid HTTP header value"#,
        ]
    );
}

#[tokio::test]
async fn dropping_the_stream_mid_answer_cancels_it() {
    // The pause falls between events: "first" comes at once, the rest 30 s later.
    let events = SseBuilder::new().text("first").text("never read").finish("stop").build();
    let server =
        MockServer::start(vec![MockResponse::SsePaced { events, interval: Duration::from_secs(30) }]).await;
    let model = model(&server);
    let started = Instant::now();
    let mut stream = model.stream(request());
    assert_eq!(stream.next().await.unwrap().unwrap(), text("first"));
    drop(stream);
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_cut_after_events_ends_in_a_stream_error_without_retry() {
    let events = SseBuilder::new().role().text("partial").build();
    let server = MockServer::start(vec![MockResponse::SseCut(events), sse_text(&["unused"], None)]).await;
    let (events, error) = run(&model(&server), request()).await;
    assert_eq!(events, vec![text("partial")]);
    assert!(matches!(error, Some(Error::Stream(_))), "{error:?}");
    assert_eq!(server.requests().len(), 1);
}
