//! Answers of a scripted upstream in each API's own stream: the frames `phosphor-wire`'s front
//! writers produce, the same bytes Claude Code, Codex CLI and the Anthropic and OpenAI SDKs read
//! from `phosphor serve` in its tests.

use phosphor_base::config::Api;
use phosphor_base::{FinishReason, Message, Part, Role, ToolCall, Usage};
use phosphor_wire::{Answer, Delta, Meta, Writer, anthropic, chat, responses};

use crate::server::MockResponse;

/// `message` streamed as `api` streams an answer, with `usage`: text as one delta, each tool
/// call whole, then the finish.
pub fn wire_answer(api: Api, message: &Message, usage: Usage) -> MockResponse {
    let meta = Meta {
        id: match api {
            Api::Chat => "chatcmpl-mock".to_owned(),
            Api::Anthropic => "msg_mock".to_owned(),
            Api::Responses => "resp_mock".to_owned(),
        },
        model: "mock".to_owned(),
        created: 0,
        stream_usage: true,
        show_reasoning: true,
    };
    let mut writer: Box<dyn Writer> = match api {
        Api::Chat => Box::new(chat::Stream::new(meta)),
        Api::Anthropic => Box::new(anthropic::Stream::new(meta)),
        Api::Responses => Box::new(responses::Stream::new(meta)),
    };
    let mut frames = writer.begin();
    for part in &message.parts {
        match part {
            Part::Text { text } => frames.extend(writer.delta(Delta::Text(text))),
            Part::Reasoning { text } => frames.extend(writer.delta(Delta::Reasoning(text))),
            Part::ToolCall(call) => frames.extend(writer.delta(Delta::ToolCall(call))),
            _ => {}
        }
    }
    let finish =
        if message.tool_calls().next().is_some() { FinishReason::ToolCalls } else { FinishReason::Stop };
    frames.extend(writer.end(&Answer { message, usage, finish_reason: Some(&finish) }));
    MockResponse::Events(frames)
}

/// A text answer in `api`'s stream.
pub fn wire_text(api: Api, text: &str) -> MockResponse {
    wire_answer(api, &Message::text(Role::Assistant, text), Usage::default())
}

/// An answer of tool calls `(id, name, arguments)` in `api`'s stream.
pub fn wire_tool_calls(api: Api, calls: &[(&str, &str, &str)]) -> MockResponse {
    let parts = calls
        .iter()
        .map(|(id, name, arguments)| {
            Part::ToolCall(ToolCall {
                id: (*id).to_owned(),
                name: (*name).to_owned(),
                arguments: (*arguments).to_owned(),
            })
        })
        .collect();
    wire_answer(api, &Message::new(Role::Assistant, parts), Usage::default())
}
