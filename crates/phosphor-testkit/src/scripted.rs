//! An in-process [`ChatModel`] that replays scripted event streams, for fast agent tests.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use phosphor_base::model::error_stream;
use phosphor_base::{
    ChatModel, ChatRequest, ChatStream, Error, FinishReason, ModelInfo, Result, StreamEvent,
};
use phosphor_base::{ToolCall, Usage};

/// One scripted answer: the events (or errors) its stream yields, in order.
pub type Script = Vec<Result<StreamEvent>>;

#[derive(Default)]
struct State {
    scripts: VecDeque<Script>,
    scripted: usize,
    requests: Vec<ChatRequest>,
}

/// A [`ChatModel`] that answers call `n` with script `n` and records every [`ChatRequest`].
///
/// A call past the end of the script yields one [`Error::Model`] saying the script ran out. A request
/// whose tool calls and results are not paired (`phosphor_prune::check_tool_pairing`) is rejected
/// with [`Error::BadRequest`], as OpenAI rejects one, so no test passes with an unpaired request.
///
/// ```
/// use phosphor_base::{ChatModel, ChatRequest, Message};
/// use phosphor_testkit::{text_turn, ScriptedModel};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let model = ScriptedModel::new(vec![text_turn("Hello", None)]);
/// let request = ChatRequest { messages: vec![Message::user("Hi")], ..ChatRequest::default() };
/// let answer = model.complete(request.clone()).await.unwrap();
/// assert_eq!(answer.text, "Hello");
/// assert_eq!(model.requests(), vec![request]);
/// # });
/// ```
pub struct ScriptedModel {
    info: ModelInfo,
    parameters: Option<u64>,
    event_delay: Duration,
    state: Mutex<State>,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("ScriptedModel")
            .field("info", &self.info)
            .field("scripted", &state.scripted)
            .field("calls", &state.requests.len())
            .finish()
    }
}

impl ScriptedModel {
    /// A model that answers with `scripts` in order. Its [`ModelInfo`] is provider `scripted`,
    /// model `scripted-model`, a 128 000-token window and 4 096 output tokens.
    pub fn new(scripts: Vec<Script>) -> ScriptedModel {
        ScriptedModel {
            info: ModelInfo {
                provider: "scripted".to_owned(),
                model: "scripted-model".to_owned(),
                context_window: 128_000,
                max_output_tokens: 4096,
            },
            parameters: None,
            event_delay: Duration::ZERO,
            state: Mutex::new(State {
                scripted: scripts.len(),
                scripts: scripts.into(),
                requests: Vec::new(),
            }),
        }
    }

    /// Replaces the [`ModelInfo`] (to test window-dependent behaviour).
    pub fn with_info(mut self, info: ModelInfo) -> ScriptedModel {
        self.info = info;
        self
    }

    /// Says the model has `parameters` parameters, as a local model does ([`ChatModel::parameters`]).
    pub fn with_parameters(mut self, parameters: u64) -> ScriptedModel {
        self.parameters = Some(parameters);
        self
    }

    /// Pauses before each event after the first, so that a test can cancel mid-stream.
    pub fn with_event_delay(mut self, delay: Duration) -> ScriptedModel {
        self.event_delay = delay;
        self
    }

    /// Every request received so far, in call order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.lock().requests.clone()
    }

    /// How many scripted answers are still unused.
    pub fn remaining(&self) -> usize {
        self.lock().scripts.len()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl ChatModel for ScriptedModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn parameters(&self) -> Option<u64> {
        self.parameters
    }

    fn stream(&self, request: ChatRequest) -> ChatStream {
        // As a strict provider does: a request with an unpaired tool call or result is rejected.
        let broken = phosphor_prune::check_tool_pairing(&request.messages).err();
        let (script, call, scripted) = {
            let mut state = self.lock();
            state.requests.push(request);
            (state.scripts.pop_front(), state.requests.len(), state.scripted)
        };
        if let Some(violation) = broken {
            return error_stream(Error::BadRequest {
                status: Some(400),
                message: format!("scripted model: call #{call} breaks tool pairing: {violation}"),
            });
        }
        let Some(script) = script else {
            return error_stream(Error::Model(format!(
                "scripted model ran out: call #{call} has no scripted answer; {scripted} were scripted"
            )));
        };
        let delay = self.event_delay;
        if delay.is_zero() {
            return futures::stream::iter(script).boxed();
        }
        futures::stream::iter(script.into_iter().enumerate())
            .then(move |(i, event)| async move {
                if i > 0 {
                    tokio::time::sleep(delay).await;
                }
                event
            })
            .boxed()
    }
}

/// A text answer: one [`StreamEvent::TextDelta`], the usage when given, and `Finish { Stop }`.
pub fn text_turn(text: &str, usage: Option<Usage>) -> Script {
    let mut events = vec![Ok(StreamEvent::TextDelta { text: text.to_owned() })];
    events.extend(usage.map(|u| Ok(StreamEvent::Usage(u))));
    events.push(Ok(StreamEvent::Finish { reason: FinishReason::Stop }));
    events
}

/// A tool-call answer: one [`StreamEvent::ToolCall`] per `(id, name, arguments)`, the usage
/// when given, and `Finish { ToolCalls }`.
pub fn tool_calls_turn(calls: &[(&str, &str, &str)], usage: Option<Usage>) -> Script {
    let mut events: Script = calls
        .iter()
        .map(|(id, name, arguments)| {
            Ok(StreamEvent::ToolCall(ToolCall {
                id: (*id).to_owned(),
                name: (*name).to_owned(),
                arguments: (*arguments).to_owned(),
            }))
        })
        .collect();
    events.extend(usage.map(|u| Ok(StreamEvent::Usage(u))));
    events.push(Ok(StreamEvent::Finish { reason: FinishReason::ToolCalls }));
    events
}
