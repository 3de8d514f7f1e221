//! The scripted in-process model: replay, request recording, running out, pacing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns unwrap too

use std::time::{Duration, Instant};

use futures::StreamExt;
use phosphor_base::{
    ChatModel, ChatRequest, Completion, Error, FinishReason, Message, StreamEvent, ToolCall, Usage,
};
use phosphor_testkit::{ScriptedModel, text_turn, tool_calls_turn};
use pretty_assertions::assert_eq;

fn request(text: &str) -> ChatRequest {
    ChatRequest { messages: vec![Message::user(text)], ..ChatRequest::default() }
}

#[tokio::test]
async fn answers_in_order_and_records_every_request() {
    let usage = Usage { input_tokens: 10, output_tokens: 2, ..Usage::default() };
    let model = ScriptedModel::new(vec![
        tool_calls_turn(&[("c1", "ls", "{}")], None),
        text_turn("done", Some(usage)),
        vec![Ok(StreamEvent::TextDelta { text: "half".into() }), Err(Error::Stream("reset".into()))],
    ]);
    let first = model.complete(request("one")).await.unwrap();
    let second = model.complete(request("two")).await.unwrap();
    let third = model.complete(request("three")).await.unwrap_err();
    let fourth = model.complete(request("four")).await.unwrap_err();

    assert_eq!(
        first,
        Completion {
            tool_calls: vec![ToolCall { id: "c1".into(), name: "ls".into(), arguments: "{}".into() }],
            finish_reason: Some(FinishReason::ToolCalls),
            ..Completion::default()
        }
    );
    assert_eq!(
        second,
        Completion {
            text: "done".into(),
            usage: Some(usage),
            finish_reason: Some(FinishReason::Stop),
            ..Completion::default()
        }
    );
    assert!(matches!(third, Error::Stream(ref m) if m == "reset"), "{third:?}");
    assert_eq!(
        fourth.to_string(),
        "model error: scripted model ran out: call #4 has no scripted answer; 3 were scripted"
    );
    assert_eq!(model.requests(), ["one", "two", "three", "four"].map(request).to_vec());
    assert_eq!(model.remaining(), 0);
}

#[tokio::test]
async fn event_delay_lets_a_test_cancel_mid_stream() {
    let model = ScriptedModel::new(vec![text_turn("first", None)]).with_event_delay(Duration::from_secs(30));
    let started = Instant::now();
    let mut stream = model.stream(request("hi"));
    assert_eq!(stream.next().await.unwrap().unwrap(), StreamEvent::TextDelta { text: "first".into() });
    drop(stream);
    assert!(started.elapsed() < Duration::from_secs(5));
}
