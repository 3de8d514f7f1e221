//! One turn: store the prompt, run the triggers before every request, call the model, run its
//! tools, and compact inside the turn as often as the policy allows.

use std::borrow::Cow;

use futures::StreamExt;
use phosphor_base::{
    ChatModel, ChatRequest, Completion, FinishReason, Message, MessageStatus, ModelInfo, Part, Role,
    StreamEvent, TokenLedger, ToolCall, Usage,
};
use tracing::Instrument;

use crate::agent::{Cache, SessionAgent, new_id, now_ms};
use crate::compaction::CompactionReport;
use crate::error::{AgentError, Result};
use crate::events::{AgentEvent, CompactionReason, EventSender, emit};
use crate::policy::{self, Fit, Permit};
use crate::shown::shown_history;

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The user message the turn stored.
    pub user_message_id: String,
    /// The final assistant message.
    pub final_message: Message,
    /// Model calls made (tool rounds, plus a retry after a rejected request).
    pub model_calls: u32,
    /// The automatic compactions the turn ran, in order: at most `summarize_max_per_turn`, and
    /// never more than one per model response (plus one before the first request).
    pub compactions: Vec<CompactionReport>,
}

/// What the client of a request chose (a proxied client's own settings; the agent's are defaults).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Sampling {
    /// The most tokens the answer may have (never more than fits the window).
    pub(crate) max_output_tokens: Option<u64>,
    /// Sampling temperature.
    pub(crate) temperature: Option<f32>,
}

impl Sampling {
    /// The output limit of a request of `estimate` tokens to the model `info` describes: the
    /// client's, capped by the model's and by what fits (the reserve check may have used a capped
    /// reserve, so never ask for more than the window has left).
    pub(crate) fn output_limit(&self, info: &ModelInfo, estimate: u64) -> u64 {
        let room = info.context_window.saturating_sub(estimate).max(1);
        self.max_output_tokens.unwrap_or(u64::MAX).min(info.max_output_tokens).min(room)
    }
}

/// What one request of a turn came to.
pub(crate) enum Step {
    /// The model answered; the answer is stored.
    Answered {
        message: Box<Message>,
        calls: Vec<ToolCall>,
        usage: Option<Usage>,
        finish_reason: Option<FinishReason>,
    },
    /// The model rejected the request as too long and a compaction ran: send it again.
    Retry,
}

/// What a turn has done about compaction so far.
pub(crate) struct TurnState {
    user_id: String,
    pub(crate) compactions: Vec<CompactionReport>,
    /// The last time the triggers fired, what came of it (for warnings and errors).
    last: Attempt,
    /// The still-over-threshold warning is given once per turn.
    warned: bool,
}

/// What came of a trigger inside a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// The triggers have not fired in this turn.
    None,
    /// A compaction ran.
    Compacted,
    /// The policy found nothing left to fold.
    NothingToFold,
    /// The progress rule or the backstop refused.
    Refused(Permit),
}

impl TurnState {
    /// A turn whose user message is `user_id` (empty: none in the history).
    pub(crate) fn new(user_id: String) -> TurnState {
        TurnState { user_id, compactions: Vec::new(), last: Attempt::None, warned: false }
    }

    /// Where the turn's request is in the history (its end when it is not there).
    fn user_index(&self, cache: &Cache) -> usize {
        cache.history.iter().rposition(|m| m.id == self.user_id).unwrap_or(cache.history.len())
    }

    /// What was tried, for a warning or a `StillOverflowing` error.
    pub(crate) fn tried(&self) -> String {
        let count = self.compactions.len();
        let ran = match count {
            0 => "no compaction ran in this turn".to_owned(),
            1 => "1 compaction ran in this turn".to_owned(),
            n => format!("{n} compactions ran in this turn"),
        };
        match self.last {
            Attempt::None | Attempt::Compacted => ran,
            Attempt::NothingToFold => format!(
                "{ran}, and nothing is left to fold (only the turn's request and its latest tool round remain)"
            ),
            Attempt::Refused(Permit::NoResponseSince) => {
                format!(
                    "{ran}, and the model has not answered since the last compaction, so another cannot fold more"
                )
            }
            Attempt::Refused(Permit::Backstop(limit)) => {
                format!("{ran}, the limit of options.summarize_max_per_turn ({limit})")
            }
            Attempt::Refused(Permit::Allowed) => ran,
        }
    }
}

impl SessionAgent {
    pub(crate) async fn turn(
        &self,
        cache: &mut Cache,
        prompt: String,
        events: Option<&EventSender>,
    ) -> Result<TurnOutcome> {
        let large = self.model_of(cache).clone();
        let info = large.info().clone();
        let window = info.context_window;
        let reserve = policy::reserve(&info);

        // A message that cannot fit even alone: no compaction can help. It is stored (never lost)
        // but marked failed, so it never becomes history and cannot wedge the session.
        let mut user = self.new_message(&cache.session.id, Role::User, vec![Part::Text { text: prompt }]);
        let user_tokens = self.counter.count_message(&user);
        let overhead = self.fixed_tokens(cache) + reserve;
        if user_tokens + overhead > window {
            user.status = MessageStatus::Failed;
            self.store.append_message(&user).await?;
            return Err(AgentError::MessageTooLarge {
                tokens: user_tokens,
                overhead,
                window,
                model: info.model,
            });
        }

        // Store the user message first: it is never lost, whatever happens next.
        self.store.append_message(&user).await?;
        let user_id = user.id.clone();
        if cache.session.title.is_empty() {
            cache.session.title = title_from(&user.text_content());
        }
        cache.push(self.counter.as_ref(), user);
        emit(
            events,
            AgentEvent::TurnStarted { session_id: cache.session.id.clone(), message_id: user_id.clone() },
        );

        let mut turn = TurnState::new(user_id.clone());
        let mut model_calls = 0u32;
        loop {
            if model_calls >= self.settings.max_tool_rounds {
                emit(
                    events,
                    AgentEvent::Warning {
                        message: format!(
                            "stopped after {} model calls in one turn; send another message to continue",
                            self.settings.max_tool_rounds
                        ),
                    },
                );
                break;
            }
            model_calls += 1;
            let (assistant, calls) = match self.step(cache, &mut turn, &Sampling::default(), events).await? {
                Step::Answered { message, calls, .. } => (*message, calls),
                Step::Retry => continue,
            };

            if calls.is_empty() {
                emit(events, AgentEvent::TurnFinished { message_id: assistant.id.clone(), model_calls });
                return Ok(TurnOutcome {
                    user_message_id: user_id,
                    final_message: assistant,
                    model_calls,
                    compactions: turn.compactions,
                });
            }
            for call in &calls {
                let result = self.tools.run(call).await;
                emit(events, AgentEvent::ToolResult(result.clone()));
                let message = self.new_message(&cache.session.id, Role::Tool, vec![Part::ToolResult(result)]);
                self.store.append_message(&message).await?;
                cache.push(self.counter.as_ref(), message);
            }
        }
        let last = cache.history.last().cloned().unwrap_or_else(|| Message::assistant(""));
        emit(events, AgentEvent::TurnFinished { message_id: last.id.clone(), model_calls });
        Ok(TurnOutcome {
            user_message_id: user_id,
            final_message: last,
            model_calls,
            compactions: turn.compactions,
        })
    }

    /// One request of a turn: masking and the triggers before it (compacting when they fire and
    /// the policy allows), the request itself (compacting and asking for a retry when the model
    /// rejects it as too long), and the answer stored with the session's token fields.
    pub(crate) async fn step(
        &self,
        cache: &mut Cache,
        turn: &mut TurnState,
        sampling: &Sampling,
        events: Option<&EventSender>,
    ) -> Result<Step> {
        let large = self.model_of(cache).clone();
        let info = large.info().clone();
        let window = info.context_window;
        let reserve = policy::reserve(&info);
        // Before every request of the turn: the post-user-message overflow check and the
        // threshold check before the request, then whether the request can go.
        // Observation masking first: when it brings the request under the triggers, no summary
        // is written.
        let mut estimate = self.estimate(cache);
        if policy::should_mask(estimate, window, &self.options) && self.mask(cache, events).await? {
            estimate = self.estimate(cache);
        }
        if let Some(reason) = policy::trigger(estimate, reserve, window, &self.options) {
            self.compact_in_turn(cache, turn, reason, events).await?;
            self.check_fit(cache, turn, reserve, window, events)?;
        } else {
            // Below the triggers: the next compaction's summary may be written meanwhile.
            let user = turn.user_index(cache);
            self.prepare(cache, estimate, Some(user), events).await;
        }

        let request = self.build_request(cache, sampling);
        let estimated_request = self.counter.count_request(&request);
        let completion = match self.call_model(large.as_ref(), request, events).await {
            Ok(completion) => completion,
            Err(err) if err.is_context_overflow() => {
                // The model counts more than we estimated: compact (when the policy allows) and retry.
                emit(events, AgentEvent::Warning { message: format!("{err}; compacting and retrying") });
                if self.compact_in_turn(cache, turn, CompactionReason::Rejected, events).await? {
                    return Ok(Step::Retry);
                }
                return Err(AgentError::StillOverflowing {
                    tokens: self.estimate(cache),
                    reserve,
                    window,
                    model: info.model.clone(),
                    tried: format!("the model rejected the request as too long; {}", turn.tried()),
                });
            }
            Err(err) => return Err(err.into()),
        };

        let usage = completion.usage;
        let calls = completion.tool_calls.clone();
        let finish_reason = completion.finish_reason.clone();
        let mut assistant = completion.into_message(Some(info.model.clone()));
        assistant.id = new_id();
        assistant.session_id = cache.session.id.clone();
        assistant.created_at = now_ms();
        assistant.updated_at = assistant.created_at;
        self.store.append_message(&assistant).await?;
        cache.push(self.counter.as_ref(), assistant.clone());

        // Token fields after a normal call: from the provider's usage.
        let shown_tokens = self.fixed_tokens(cache) + cache.ledger.total();
        let session = &mut cache.session;
        if let Some(usage) = usage {
            session.prompt_tokens = usage.input_tokens;
            session.completion_tokens = usage.output_tokens;
            session.current_tokens = usage.input_tokens + usage.output_tokens;
            cache.calibration = Some((usage.input_tokens, estimated_request));
        } else {
            session.current_tokens = shown_tokens;
        }
        cache.session.updated_at = now_ms();
        self.store.update_session(&cache.session).await?;
        Ok(Step::Answered { message: Box::new(assistant), calls, usage, finish_reason })
    }

    /// A compaction inside the turn, when the progress rule and the backstop allow one. It may fold
    /// the turn's own earlier tool rounds; the turn's user message stays verbatim after the summary.
    /// Returns whether it compacted.
    async fn compact_in_turn(
        &self,
        cache: &mut Cache,
        turn: &mut TurnState,
        reason: CompactionReason,
        events: Option<&EventSender>,
    ) -> Result<bool> {
        let done = u32::try_from(turn.compactions.len()).unwrap_or(u32::MAX);
        let permit = policy::permit(done, cache.responses_since_compaction, &self.options);
        if permit != Permit::Allowed {
            turn.last = Attempt::Refused(permit);
            return Ok(false);
        }
        let prepared = self.use_prepared(cache, reason, events).await?;
        if let Some(report) = prepared.clone() {
            turn.compactions.push(report);
            turn.last = Attempt::Compacted;
            // What came after the prepared summary's cut stays verbatim when it fits; when it does
            // not, the next (iterative) summary folds it now, in the same step: the prepared one
            // folded only what was there when it started.
            let info = self.model_of(cache).info();
            let (reserve, window) = (policy::reserve(info), info.context_window);
            if policy::trigger(self.estimate(cache), reserve, window, &self.options).is_none() {
                return Ok(true);
            }
        }
        let user = turn.user_index(cache);
        match self.summarize(cache, reason, None, Some(user), events).await {
            Ok(report) => {
                turn.compactions.push(report);
                turn.last = Attempt::Compacted;
                Ok(true)
            }
            Err(AgentError::NothingToCompact) if prepared.is_some() => Ok(true),
            Err(AgentError::NothingToCompact) => {
                turn.last = Attempt::NothingToFold;
                Ok(false)
            }
            Err(err) => Err(err),
        }
    }

    /// Observation masking: moves the masking boundary so that the newest tool calls and outputs shown whole
    /// fit `mask_keep_recent_tokens`, and persists it on the session. Returns whether it moved.
    pub(crate) async fn mask(&self, cache: &mut Cache, events: Option<&EventSender>) -> Result<bool> {
        let window = self.model_of(cache).info().context_window;
        let keep = policy::mask_keep_budget(&self.options, window);
        let min_gain = policy::mask_min_gain(window);
        let Some(until) =
            policy::mask_point(&cache.history, cache.ledger.counts(), cache.masked, keep, min_gain)
        else {
            return Ok(false);
        };
        let tokens_before = self.estimate(cache);
        let span = tracing::info_span!(
            "masking",
            otel.name = "masking",
            gen_ai.conversation.id = %cache.session.id,
            phosphor.masking.tokens_before = tokens_before,
            phosphor.masking.tokens_after = tracing::field::Empty,
            phosphor.masking.outputs = tracing::field::Empty,
        );
        let mut shown = shown_history(&cache.history, cache.masked);
        let outputs = phosphor_prune::mask_tool_traffic(&mut shown, until);
        let ledger = TokenLedger::from_messages(self.counter.as_ref(), shown.iter().map(|m| m.as_ref()));
        drop(shown);
        let masked_until = cache.history[until - 1].id.clone();
        cache.masked = until;
        cache.ledger = ledger;
        cache.session.masked_until = Some(masked_until.clone());
        cache.session.current_tokens = self.fixed_tokens(cache) + cache.ledger.total();
        cache.session.updated_at = now_ms();
        self.store.update_session(&cache.session).instrument(span.clone()).await?;
        let tokens_after = self.estimate(cache);
        span.record("phosphor.masking.tokens_after", tokens_after);
        span.record("phosphor.masking.outputs", outputs as u64);
        emit(events, AgentEvent::OutputsMasked { masked_until, outputs, tokens_before, tokens_after });
        Ok(true)
    }

    /// After the triggers fired: go on (warning once) if the request fits with room for the answer,
    /// stop with `StillOverflowing` otherwise.
    fn check_fit(
        &self,
        cache: &Cache,
        turn: &mut TurnState,
        reserve: u64,
        window: u64,
        events: Option<&EventSender>,
    ) -> Result<()> {
        let estimate = self.estimate(cache);
        match policy::fit(estimate, reserve, window, &self.options) {
            Fit::Fits => Ok(()),
            Fit::OverThreshold => {
                if !turn.warned {
                    turn.warned = true;
                    let percent = policy::fraction(estimate, window) * 100.0;
                    emit(
                        events,
                        AgentEvent::Warning {
                            message: format!(
                                "the session is still at {percent:.0}% of the window ({estimate} of {window} tokens): \
                                 {}; continuing",
                                turn.tried()
                            ),
                        },
                    );
                }
                Ok(())
            }
            Fit::Overflows => Err(AgentError::StillOverflowing {
                tokens: estimate,
                reserve,
                window,
                model: self.model_of(cache).info().model.clone(),
                tried: turn.tried(),
            }),
        }
    }

    /// The request for the large model: system prompt, history since the summary (tool pairing
    /// repaired), tools.
    fn build_request(&self, cache: &Cache, sampling: &Sampling) -> ChatRequest {
        let (system_prompt, tools) = self.frame(cache);
        let mut messages: Vec<Cow<'_, Message>> = Vec::with_capacity(cache.history.len() + 1);
        if !system_prompt.is_empty() {
            messages.push(Cow::Owned(Message::system(system_prompt)));
        }
        messages.extend(shown_history(&cache.history, cache.masked));
        let messages =
            phosphor_prune::repair_tool_pairing(messages).into_iter().map(Cow::into_owned).collect();
        let info = self.model_of(cache).info();
        ChatRequest {
            messages,
            tools,
            max_output_tokens: Some(sampling.output_limit(info, self.estimate(cache))),
            temperature: sampling.temperature,
            conversation_id: Some(cache.session.id.clone()),
            repeat_penalty: None,
            outline: None,
            passthrough: cache.passthrough.clone(),
        }
    }

    /// Streams one model call, forwarding deltas. The backend records the call's `chat {model}`
    /// client span (gen_ai attributes and usage); the agent's turn and compaction spans enclose it.
    pub(crate) async fn call_model(
        &self,
        model: &dyn ChatModel,
        request: ChatRequest,
        events: Option<&EventSender>,
    ) -> phosphor_base::Result<Completion> {
        let info = model.info();
        let input_estimate = self.counter.count_request(&request);
        let mut stream = model.stream(request);
        let mut completion = Completion::default();
        while let Some(event) = stream.next().await {
            let event = event?;
            match &event {
                StreamEvent::TextDelta { text } => emit(events, AgentEvent::TextDelta { text: text.clone() }),
                StreamEvent::ReasoningDelta { text } => {
                    emit(events, AgentEvent::ReasoningDelta { text: text.clone() })
                }
                StreamEvent::ReasoningSeal(seal) => emit(events, AgentEvent::ReasoningSealed(seal.clone())),
                StreamEvent::ToolCall(call) => emit(events, AgentEvent::ToolCall(call.clone())),
                StreamEvent::Usage(_) | StreamEvent::Finish { .. } => {}
            }
            completion.apply(event);
        }
        let usage = completion.usage.unwrap_or_else(|| Usage {
            input_tokens: input_estimate,
            output_tokens: self.counter.count_text(&completion.text)
                + self.counter.count_text(&completion.reasoning),
            ..Usage::default()
        });
        completion.usage = Some(usage);
        emit(events, AgentEvent::Usage { model: info.model.clone(), usage });
        Ok(completion)
    }
}

/// A session title from its first prompt: the first line, at most 60 characters.
pub(crate) fn title_from(prompt: &str) -> String {
    let line = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    match line.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}
