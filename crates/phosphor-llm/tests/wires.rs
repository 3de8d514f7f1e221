//! `WireModel` over a loopback server speaking Anthropic Messages and OpenAI Responses: what is
//! sent (path, headers, body), what is read back, and how failures are classified and retried.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{SECRET_KEY, fast_retry, model_config, provider, request};
use futures::StreamExt;
use phosphor_base::config::{Api, ProviderConfig};
use phosphor_base::{
    ChatModel, ChatRequest, Error, FinishReason, Message, Part, Role, StreamEvent, ToolCall, Usage,
};
use phosphor_llm::{WireModel, connect};
use phosphor_testkit::{MockResponse, MockServer, wire_answer, wire_text, wire_tool_calls};
use serde_json::json;

fn wire_provider(server: &MockServer, api: Api) -> ProviderConfig {
    ProviderConfig { api, ..provider(server) }
}

fn model(server: &MockServer, api: Api) -> WireModel {
    WireModel::with_api_key("mock", &wire_provider(server, api), &model_config(), Some(SECRET_KEY))
        .unwrap()
        .with_retry_policy(fast_retry())
}

async fn run(model: &dyn ChatModel, request: ChatRequest) -> (Vec<StreamEvent>, Option<Error>) {
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

#[tokio::test]
async fn anthropic_requests_carry_its_key_version_and_body_and_answers_stream_back() {
    let answer = Message::new(
        Role::Assistant,
        vec![
            Part::Text { text: "Reading it.".into() },
            Part::ToolCall(ToolCall {
                id: "toolu_1".into(),
                name: "Read".into(),
                arguments: r#"{"path":"a"}"#.into(),
            }),
        ],
    );
    let usage =
        Usage { input_tokens: 1200, output_tokens: 30, cached_input_tokens: 1000, reasoning_tokens: 0 };
    let server = MockServer::start(vec![wire_answer(Api::Anthropic, &answer, usage)]).await;
    let model = model(&server, Api::Anthropic);
    let (events, error) = run(&model, request()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta { text: "Reading it.".into() },
            StreamEvent::ToolCall(ToolCall {
                id: "toolu_1".into(),
                name: "Read".into(),
                arguments: r#"{"path":"a"}"#.into()
            }),
            StreamEvent::Usage(usage),
            StreamEvent::Finish { reason: FinishReason::ToolCalls },
        ]
    );
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(SECRET_KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None, "Anthropic reads the key from x-api-key only");
    assert_eq!(sent.body["system"][0]["text"], "You are terse.");
    assert_eq!(
        sent.body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Say hello", "cache_control": {"type": "ephemeral"}}]}])
    );
    assert_eq!(sent.body["max_tokens"], 1024);
    assert!(!format!("{model:?}").contains(SECRET_KEY));
}

#[tokio::test]
async fn responses_requests_are_stateless_and_bearer_keyed() {
    let server = MockServer::start(vec![wire_tool_calls(
        Api::Responses,
        &[("call_9", "exec_command", r#"{"cmd":"ls"}"#)],
    )])
    .await;
    let model: Arc<dyn ChatModel> = Arc::new(self::model(&server, Api::Responses));
    let mut request = request();
    request.conversation_id = Some("session-3".into());
    let (events, error) = run(model.as_ref(), request).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events[0],
        StreamEvent::ToolCall(ToolCall {
            id: "call_9".into(),
            name: "exec_command".into(),
            arguments: r#"{"cmd":"ls"}"#.into()
        })
    );
    assert_eq!(events.last(), Some(&StreamEvent::Finish { reason: FinishReason::ToolCalls }));
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/responses");
    assert_eq!(sent.header("authorization"), Some(format!("Bearer {SECRET_KEY}").as_str()));
    assert_eq!(sent.body["store"], false);
    assert_eq!(sent.body["instructions"], "You are terse.");
    assert_eq!(sent.body["prompt_cache_key"], "session-3");
    assert_eq!(sent.body["input"][0]["content"][0], json!({"type": "input_text", "text": "Say hello"}));
}

#[tokio::test]
async fn connect_builds_the_model_of_the_providers_api_and_sends_no_key_it_was_not_given() {
    let server =
        MockServer::start(vec![wire_text(Api::Anthropic, "Hi"), wire_text(Api::Responses, "Ho")]).await;
    for (api, text) in [(Api::Anthropic, "Hi"), (Api::Responses, "Ho")] {
        let model = connect("mock", &wire_provider(&server, api), &model_config()).unwrap();
        let (events, error) = run(model.as_ref(), request()).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(events[0], StreamEvent::TextDelta { text: text.into() });
    }
    let requests = server.requests();
    assert_eq!(
        requests.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
        ["/v1/messages", "/v1/responses"]
    );
    assert!(requests.iter().all(|r| r.header("x-api-key").is_none() && r.header("authorization").is_none()));
    let chat = connect("mock", &provider(&server), &model_config()).unwrap();
    assert_eq!(chat.info().model, "gpt-4o-mini");
}

#[tokio::test]
async fn overloaded_anthropic_is_retried_and_too_long_is_an_overflow_sent_once() {
    let overloaded = MockResponse::json(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    );
    let server = MockServer::start(vec![overloaded, wire_text(Api::Anthropic, "Hi")]).await;
    let (events, error) = run(&model(&server, Api::Anthropic), request()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(events[0], StreamEvent::TextDelta { text: "Hi".into() });
    assert_eq!(server.requests().len(), 2);

    let too_long = MockResponse::json(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208430 tokens > 200000 maximum"}}"#,
    );
    let server = MockServer::start(vec![too_long]).await;
    let (_, error) = run(&model(&server, Api::Anthropic), request()).await;
    match error {
        Some(Error::ContextOverflow { requested_tokens, limit_tokens, .. }) => {
            assert_eq!((requested_tokens, limit_tokens), (Some(208_430), Some(200_000)));
        }
        other => panic!("expected an overflow, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1, "an overflow is never retried");
}

#[tokio::test]
async fn an_error_inside_a_stream_is_the_providers_error() {
    let failed = MockResponse::Events(vec![
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"status\":\"in_progress\"}}\n\n".into(),
        "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model. Please adjust your input and try again.\"}}}\n\n".into(),
    ]);
    let server = MockServer::start(vec![failed]).await;
    let (events, error) = run(&model(&server, Api::Responses), request()).await;
    assert!(events.is_empty());
    assert!(matches!(error, Some(Error::ContextOverflow { .. })), "{error:?}");
    assert_eq!(server.requests().len(), 1);

    let cut = MockResponse::Events(vec![
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n".into(),
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n".into(),
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Half\"}}\n\n".into(),
    ]);
    let server = MockServer::start(vec![cut]).await;
    let (events, error) = run(&model(&server, Api::Anthropic), request()).await;
    assert_eq!(events, vec![StreamEvent::TextDelta { text: "Half".into() }]);
    assert!(matches!(&error, Some(Error::Stream(m)) if m.contains("stop_reason")), "{error:?}");
}
