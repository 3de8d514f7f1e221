//! Answers of a scripted upstream in each API's own stream: the frames `phosphor-wire`'s front
//! writers produce, the same bytes Claude Code, Codex CLI and the Anthropic and OpenAI SDKs read
//! from `phosphor serve` in its tests.

use phosphor_base::config::Api;
use phosphor_base::{FinishReason, Message, Part, Role, Seal, ToolCall, Usage};
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
            Part::Reasoning { text, seal } => {
                frames.extend(writer.delta(Delta::Reasoning(text)));
                if let Some(seal) = seal {
                    frames.extend(writer.delta(Delta::Seal(seal)));
                }
            }
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
    wire_thinking_tool_calls(api, None, calls)
}

/// An answer of tool calls after `thinking` (when given), in `api`'s stream: for Anthropic a
/// thinking block signed, for Responses a reasoning item with encrypted content, each as the
/// mock server checks it when it comes back ([`signature`]); chat completions has no seal.
pub fn wire_thinking_tool_calls(
    api: Api,
    thinking: Option<&str>,
    calls: &[(&str, &str, &str)],
) -> MockResponse {
    let thinking = thinking.map(|text| Part::Reasoning {
        text: text.to_owned(),
        seal: (api != Api::Chat).then(|| Seal::new(api, signature(text))),
    });
    let parts = thinking
        .into_iter()
        .chain(calls.iter().map(|(id, name, arguments)| {
            Part::ToolCall(ToolCall {
                id: (*id).to_owned(),
                name: (*name).to_owned(),
                arguments: (*arguments).to_owned(),
            })
        }))
        .collect();
    wire_answer(api, &Message::new(Role::Assistant, parts), Usage::default())
}

/// The signature the mock server gives a thinking text, and checks when the text comes back, as
/// Anthropic checks its own: a thinking block whose text or signature changed on the way is refused.
pub fn signature(thinking: &str) -> String {
    // FNV-1a, 64 bits: any change of the text changes it.
    let hash = thinking.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("mock-signature-{hash:016x}")
}
