//! `SessionAgent`: runs turns over a stored session and compacts it when the window fills.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use phosphor_core::config::{Options, SummarizeModel};
use phosphor_core::tokens::REQUEST_OVERHEAD_TOKENS;
use phosphor_core::{
    ApproxCounter, ChatModel, ChatRequest, Completion, FinishReason, Message, MessageStatus, Part, Role,
    Session, StreamEvent, TokenCounter, TokenLedger, Usage,
};
use phosphor_prompt::{Profiles, SummaryContext};
use phosphor_store::SessionStore;
use tracing::{Instrument, field};

use crate::artifacts::{ArtifactTrail, TRAIL_HEADING};
use crate::error::{AgentError, Result};
use crate::events::{AgentEvent, CompactionReason, EventSender, emit};
use crate::tool::{Tool, Tools};

/// The models a session can use.
#[derive(Clone)]
pub struct Models {
    /// The session's main model (`summarize_model` `main` and `large` route here).
    pub large: Arc<dyn ChatModel>,
    /// The cheaper model (`summarize_model: "small"`).
    pub small: Option<Arc<dyn ChatModel>>,
    /// The local model (`summarize_model: "embedded"`).
    pub embedded: Option<Arc<dyn ChatModel>>,
}

impl Models {
    /// Only a large model.
    pub fn new(large: Arc<dyn ChatModel>) -> Models {
        Models { large, small: None, embedded: None }
    }

    /// Loads the local model of `embedded_models.inference` (downloading it on first use) as the
    /// `embedded` summarizer. The model is loaded once per process and shared.
    #[cfg(any(feature = "mistralrs", feature = "llamacpp"))]
    pub async fn with_embedded(
        mut self,
        inference: &phosphor_core::config::InferenceConfig,
    ) -> Result<Models, phosphor_embedded::error::EmbeddedError> {
        let model: Arc<dyn ChatModel> = phosphor_embedded::load(inference).await?;
        self.embedded = Some(model);
        Ok(self)
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The user message the turn stored.
    pub user_message_id: String,
    /// The final assistant message.
    pub final_message: Message,
    /// Model calls made (tool rounds, plus a retry after a rejected request).
    pub model_calls: u32,
    /// The compaction this turn ran, if any (at most one).
    pub compaction: Option<CompactionReport>,
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionReport {
    /// The stored summary message.
    pub summary_message_id: String,
    /// Why it ran.
    pub reason: CompactionReason,
    /// The summarizer.
    pub model: String,
    /// Estimated request tokens before.
    pub tokens_before: u64,
    /// Estimated request tokens after.
    pub tokens_after: u64,
    /// How hard the input had to be cut to fit the summarizer (0 = standard pruning).
    pub shed_level: u32,
    /// Wall time.
    pub duration: Duration,
}

/// Tunables beyond `phosphor.json`'s options.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// Model calls allowed in one turn before it stops (tool loops are bounded).
    pub max_tool_rounds: u32,
    /// How often a streaming summary is written to the store.
    pub persist_interval: Duration,
    /// The workspace directory, shown to the summarizer.
    pub workspace: Option<String>,
    /// The most tokens a summary may have (also capped by the summarizer's own limit and a
    /// quarter of its window).
    pub summary_max_output_tokens: u64,
}

impl Default for AgentSettings {
    fn default() -> AgentSettings {
        AgentSettings {
            max_tool_rounds: 25,
            persist_interval: Duration::from_millis(250),
            workspace: None,
            summary_max_output_tokens: 4096,
        }
    }
}

/// Runs turns on sessions of a store, compacting automatically (see the crate docs).
pub struct SessionAgent {
    store: Arc<dyn SessionStore>,
    models: Models,
    options: Options,
    tools: Tools,
    system_prompt: String,
    profiles: Profiles,
    counter: Arc<dyn TokenCounter>,
    settings: AgentSettings,
    slots: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
}

/// Per-session state. Its mutex is the session's FIFO queue: a prompt that arrives while a turn
/// or compaction runs waits here, in arrival order, and runs as soon as the lock is released.
#[derive(Default)]
struct Slot {
    cache: Option<Cache>,
}

/// The session as the model sees it, kept between turns so that a turn never re-reads or
/// re-counts the whole history. Rebuilt from the store whenever it is missing.
struct Cache {
    session: Session,
    history: Vec<Message>,
    ledger: TokenLedger,
    /// (tokens the provider reported for the last request, our estimate of that request):
    /// corrects our estimate when the provider counts more than we do.
    calibration: Option<(u64, u64)>,
}

impl Cache {
    fn push(&mut self, counter: &dyn TokenCounter, message: Message) {
        self.ledger.push(counter, &summary_as_context(&message));
        self.history.push(message);
    }
}

/// Counts each message as it is sent (a summary with its preface).
fn shown_ledger(counter: &dyn TokenCounter, history: &[Message]) -> TokenLedger {
    let mut ledger = TokenLedger::new();
    for message in history {
        ledger.push(counter, &summary_as_context(message));
    }
    ledger
}

impl SessionAgent {
    /// An agent over `store` with `models` and the compaction `options` of `phosphor.json`.
    pub fn new(store: Arc<dyn SessionStore>, models: Models, options: Options) -> SessionAgent {
        SessionAgent {
            store,
            models,
            options,
            tools: Tools::default(),
            system_prompt: String::new(),
            profiles: Profiles::with_roots(None, None),
            counter: Arc::new(ApproxCounter),
            settings: AgentSettings::default(),
            slots: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Sets the system prompt sent first in every request.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> SessionAgent {
        self.system_prompt = prompt.into();
        self
    }

    /// Registers a tool.
    pub fn with_tool(mut self, tool: Arc<dyn Tool>) -> SessionAgent {
        self.tools.register(tool);
        self
    }

    /// Where summary prompt templates are looked up.
    pub fn with_profiles(mut self, profiles: Profiles) -> SessionAgent {
        self.profiles = profiles;
        self
    }

    /// The token counter for estimates (default: the spec's approximate count).
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> SessionAgent {
        self.counter = counter;
        self
    }

    /// Other tunables.
    pub fn with_settings(mut self, settings: AgentSettings) -> SessionAgent {
        self.settings = settings;
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// The options in force.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The session's main model.
    pub fn large_model(&self) -> &Arc<dyn ChatModel> {
        &self.models.large
    }

    /// Creates and stores a new session.
    pub async fn create_session(&self, title: impl Into<String>) -> Result<Session> {
        let session = Session::new(new_id(), title, now_ms());
        self.store.create_session(&session).await?;
        Ok(session)
    }

    /// Estimated tokens of the request the next turn would send (system prompt, tool schemas,
    /// history since the summary), with the window and threshold in force.
    pub async fn token_status(&self, session_id: &str) -> Result<TokenStatus> {
        let slot = self.slot(session_id);
        let mut guard = slot.lock().await;
        let cache = match guard.cache.take() {
            Some(cache) => cache,
            None => self.load(session_id).await?,
        };
        let status = TokenStatus {
            estimated_tokens: self.estimate(&cache),
            current_tokens: cache.session.current_tokens,
            context_window: self.models.large.info().context_window,
            threshold: self.options.summarize_threshold,
        };
        guard.cache = Some(cache);
        Ok(status)
    }

    /// Runs one turn: stores `prompt`, compacts if needed, asks the large model, runs its tool
    /// calls until it answers, and stores everything. Events go to `events` as they happen.
    ///
    /// If another turn or compaction of the session is running, this one waits for it (a
    /// [`AgentEvent::Queued`] event says so) and then runs; prompts run in arrival order.
    /// Dropping the future cancels the turn; what was stored stays stored and the session stays usable.
    pub async fn run_turn(
        &self,
        session_id: &str,
        prompt: impl Into<String>,
        events: Option<&EventSender>,
    ) -> Result<TurnOutcome> {
        let prompt = prompt.into();
        let mut guard = self.lock_session(session_id, events).await;
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = "invoke_agent phosphor",
            gen_ai.operation.name = "invoke_agent",
            gen_ai.conversation.id = %session_id,
        );
        async move {
            let mut cache = match guard.cache.take() {
                Some(cache) => cache,
                None => self.load(session_id).await?,
            };
            let result = self.turn(&mut cache, prompt, events).await;
            if let Err(err) = &result {
                emit(events, AgentEvent::Error { message: err.to_string() });
            }
            // A store failure may have left the cache ahead of the store: rebuild it next time.
            if !matches!(result, Err(AgentError::Store(_))) {
                guard.cache = Some(cache);
            }
            result
        }
        .instrument(span)
        .await
    }

    /// Compacts the session now (`/compact [instructions]`), waiting for a running turn first.
    pub async fn compact(
        &self,
        session_id: &str,
        instructions: Option<&str>,
        events: Option<&EventSender>,
    ) -> Result<CompactionReport> {
        let mut guard = self.lock_session(session_id, events).await;
        let mut cache = match guard.cache.take() {
            Some(cache) => cache,
            None => self.load(session_id).await?,
        };
        let cut = cache.history.len();
        let result = self.summarize(&mut cache, CompactionReason::Manual, instructions, cut, events).await;
        if !matches!(result, Err(AgentError::Store(_))) {
            guard.cache = Some(cache);
        }
        result
    }

    /// Waits for the session's turn (saying so with a `Queued` event when it has to wait).
    async fn lock_session(
        &self,
        session_id: &str,
        events: Option<&EventSender>,
    ) -> tokio::sync::OwnedMutexGuard<Slot> {
        let slot = self.slot(session_id);
        match slot.clone().try_lock_owned() {
            Ok(guard) => guard,
            Err(_) => {
                emit(events, AgentEvent::Queued { session_id: session_id.to_owned() });
                slot.lock_owned().await
            }
        }
    }

    fn slot(&self, session_id: &str) -> Arc<tokio::sync::Mutex<Slot>> {
        let mut slots = self.slots.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        slots.entry(session_id.to_owned()).or_default().clone()
    }

    /// Rebuilds the cache from the store. Summaries left `Streaming` by a process that died or a
    /// task that was dropped are marked `Cancelled` (they were never used as history).
    async fn load(&self, session_id: &str) -> Result<Cache> {
        let session = self
            .store
            .session(session_id)
            .await?
            .ok_or_else(|| AgentError::SessionNotFound { id: session_id.to_owned() })?;
        for message in self.store.messages(session_id).await? {
            if message.status == MessageStatus::Streaming {
                let mut message = message;
                message.status = MessageStatus::Cancelled;
                message.updated_at = now_ms();
                self.store.update_message(&message).await?;
            }
        }
        let history = self.store.history(session_id).await?;
        let ledger = shown_ledger(self.counter.as_ref(), &history);
        Ok(Cache { session, history, ledger, calibration: None })
    }

    /// Tokens every request spends besides the history: system prompt, tool schemas, framing.
    fn fixed_tokens(&self) -> u64 {
        let counter = self.counter.as_ref();
        let system = if self.system_prompt.is_empty() {
            0
        } else {
            counter.count_message(&Message::system(&self.system_prompt))
        };
        let tools: u64 = self.tools.specs().iter().map(|t| counter.count_tool(t)).sum();
        REQUEST_OVERHEAD_TOKENS + system + tools
    }

    /// Our estimate of the next request, corrected upward when the provider counted more last time.
    fn estimate(&self, cache: &Cache) -> u64 {
        let raw = self.fixed_tokens() + cache.ledger.total();
        match cache.calibration {
            Some((reported, estimated)) if reported > estimated => raw + (reported - estimated),
            _ => raw,
        }
    }

    /// Room kept for the answer: the model's max output, but never more than a quarter of the window.
    fn reserve(model: &dyn ChatModel) -> u64 {
        let info = model.info();
        info.max_output_tokens.min(info.context_window / 4)
    }

    async fn turn(
        &self,
        cache: &mut Cache,
        prompt: String,
        events: Option<&EventSender>,
    ) -> Result<TurnOutcome> {
        let large = self.models.large.clone();
        let info = large.info().clone();
        let window = info.context_window;
        let reserve = Self::reserve(large.as_ref());

        // A message that cannot fit even alone: no compaction can help. It is stored (never lost)
        // but marked failed, so it never becomes history and cannot wedge the session.
        let mut user = self.new_message(&cache.session.id, Role::User, vec![Part::Text { text: prompt }]);
        let user_tokens = self.counter.count_message(&user);
        let overhead = self.fixed_tokens() + reserve;
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

        // Post-user-message overflow check, then the pre-request threshold check (spec order).
        // At most one automatic compaction per turn: `attempted` is set by the first try, whether
        // it compacted or found nothing to fold; `warned` keeps the still-over-threshold warning to one.
        let mut compaction: Option<CompactionReport> = None;
        let mut attempted = false;
        let mut warned = false;
        let estimate = self.estimate(cache);
        let keep_from = cache.history.len() - 1; // the new user message stays verbatim after the summary
        if let Some(reason) = self.trigger(estimate, reserve, window) {
            attempted = true;
            compaction = self.auto_compact(cache, reason, keep_from, events).await?;
            self.after_compaction(cache, reserve, window, &mut warned, events)?;
        }

        let mut model_calls = 0u32;
        let mut rejected_once = false;
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
            // Before every later request of the turn (tool results grow the history).
            if model_calls > 0 {
                let estimate = self.estimate(cache);
                if let Some(reason) = self.trigger(estimate, reserve, window) {
                    if !attempted {
                        attempted = true;
                        let cut = keep_after_last_user(&cache.history);
                        compaction = self.auto_compact(cache, reason, cut, events).await?;
                    }
                    self.after_compaction(cache, reserve, window, &mut warned, events)?;
                }
            }

            let request = self.build_request(cache);
            let estimated_request = self.counter.count_request(&request);
            model_calls += 1;
            let completion = match self.call_model(large.as_ref(), request, events).await {
                Ok(completion) => completion,
                Err(err) if err.is_context_overflow() && !rejected_once => {
                    // The model counts more than we estimated: compact once, retry once.
                    rejected_once = true;
                    emit(
                        events,
                        AgentEvent::Warning { message: format!("{err}; compacting and retrying once") },
                    );
                    if !attempted {
                        attempted = true;
                        let cut = keep_after_last_user(&cache.history);
                        if let Some(report) =
                            self.auto_compact(cache, CompactionReason::Rejected, cut, events).await?
                        {
                            compaction = Some(report);
                            continue;
                        }
                    }
                    return Err(AgentError::StillOverflowing {
                        tokens: self.estimate(cache),
                        window,
                        model: info.model.clone(),
                    });
                }
                Err(err) if err.is_context_overflow() => {
                    return Err(AgentError::StillOverflowing {
                        tokens: self.estimate(cache),
                        window,
                        model: info.model,
                    });
                }
                Err(err) => return Err(err.into()),
            };

            let usage = completion.usage;
            let calls = completion.tool_calls.clone();
            let mut assistant = completion.into_message(Some(info.model.clone()));
            assistant.id = new_id();
            assistant.session_id = cache.session.id.clone();
            assistant.created_at = now_ms();
            assistant.updated_at = assistant.created_at;
            self.store.append_message(&assistant).await?;
            cache.push(self.counter.as_ref(), assistant.clone());

            // Token fields after a normal call: from the provider's usage.
            let session = &mut cache.session;
            if let Some(usage) = usage {
                session.prompt_tokens = usage.input_tokens;
                session.completion_tokens = usage.output_tokens;
                session.current_tokens = usage.input_tokens + usage.output_tokens;
                cache.calibration = Some((usage.input_tokens, estimated_request));
            } else {
                session.current_tokens = self.fixed_tokens() + cache.ledger.total();
            }
            cache.session.updated_at = now_ms();
            self.store.update_session(&cache.session).await?;

            if calls.is_empty() {
                emit(events, AgentEvent::TurnFinished { message_id: assistant.id.clone(), model_calls });
                return Ok(TurnOutcome {
                    user_message_id: user_id,
                    final_message: assistant,
                    model_calls,
                    compaction,
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
        Ok(TurnOutcome { user_message_id: user_id, final_message: last, model_calls, compaction })
    }

    /// Which trigger fires for a request of `estimate` tokens, if any.
    fn trigger(&self, estimate: u64, reserve: u64, window: u64) -> Option<CompactionReason> {
        if estimate > window {
            Some(CompactionReason::Overflow)
        } else if estimate + reserve > window {
            Some(CompactionReason::OutputReserve)
        } else if !self.options.disable_auto_summarize
            && estimate as f64 / window as f64 >= self.options.summarize_threshold
        {
            Some(CompactionReason::Threshold)
        } else {
            None
        }
    }

    /// The turn's one automatic compaction; `None` when there was nothing to fold.
    async fn auto_compact(
        &self,
        cache: &mut Cache,
        reason: CompactionReason,
        keep_from: usize,
        events: Option<&EventSender>,
    ) -> Result<Option<CompactionReport>> {
        match self.summarize(cache, reason, None, keep_from, events).await {
            Ok(report) => Ok(Some(report)),
            Err(AgentError::NothingToCompact) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// After the turn's one compaction: go on (warning once) if the request fits, stop otherwise.
    fn after_compaction(
        &self,
        cache: &Cache,
        reserve: u64,
        window: u64,
        warned: &mut bool,
        events: Option<&EventSender>,
    ) -> Result<()> {
        let estimate = self.estimate(cache);
        if estimate + reserve > window {
            let model = self.models.large.info().model.clone();
            return Err(AgentError::StillOverflowing { tokens: estimate, window, model });
        }
        let fraction = estimate as f64 / window as f64;
        if fraction >= self.options.summarize_threshold && !*warned {
            *warned = true;
            emit(
                events,
                AgentEvent::Warning {
                    message: format!(
                        "the session is still at {:.0}% of the window after compaction ({estimate} of {window} \
                         tokens); continuing without compacting again this turn",
                        fraction * 100.0
                    ),
                },
            );
        }
        Ok(())
    }

    /// The request for the large model: system prompt, history since the summary (tool pairing
    /// repaired), tools.
    fn build_request(&self, cache: &Cache) -> ChatRequest {
        let mut messages: Vec<Cow<'_, Message>> = Vec::with_capacity(cache.history.len() + 1);
        if !self.system_prompt.is_empty() {
            messages.push(Cow::Owned(Message::system(&self.system_prompt)));
        }
        messages.extend(cache.history.iter().map(summary_as_context));
        let messages =
            phosphor_prune::repair_tool_pairing(messages).into_iter().map(Cow::into_owned).collect();
        ChatRequest {
            messages,
            tools: self.tools.specs(),
            // Never ask for more than fits: the reserve check may have used a capped reserve.
            max_output_tokens: Some(
                self.models
                    .large
                    .info()
                    .max_output_tokens
                    .min(self.models.large.info().context_window.saturating_sub(self.estimate(cache)).max(1)),
            ),
            temperature: None,
            conversation_id: Some(cache.session.id.clone()),
        }
    }

    /// Streams one model call, forwarding deltas. The backend records the call's `chat {model}`
    /// client span (gen_ai attributes and usage); the agent's turn and compaction spans enclose it.
    async fn call_model(
        &self,
        model: &dyn ChatModel,
        request: ChatRequest,
        events: Option<&EventSender>,
    ) -> phosphor_core::Result<Completion> {
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

    fn summarizer(&self) -> Result<Arc<dyn ChatModel>> {
        match self.options.summarize_model {
            SummarizeModel::Main | SummarizeModel::Large => Ok(self.models.large.clone()),
            SummarizeModel::Small => self.models.small.clone().ok_or(AgentError::ModelNotConfigured {
                choice: "small",
                hint: "add models.small to phosphor.json",
            }),
            SummarizeModel::Embedded => self.models.embedded.clone().ok_or(AgentError::ModelNotConfigured {
                choice: "embedded",
                hint: "enable embedded_models.inference in phosphor.json and build with an embedded engine",
            }),
        }
    }

    /// The spec's `Summarize()`: folds `cache.history[..keep_from]` (minus the turns kept by
    /// `summarize_keep_recent_tokens`) into a new summary message.
    async fn summarize(
        &self,
        cache: &mut Cache,
        reason: CompactionReason,
        instructions: Option<&str>,
        keep_from: usize,
        events: Option<&EventSender>,
    ) -> Result<CompactionReport> {
        let started = Instant::now();
        let summarizer = self.summarizer()?;
        let info = summarizer.info().clone();
        let tokens_before = self.estimate(cache);
        let span = tracing::info_span!(
            "compaction",
            otel.name = "compaction",
            gen_ai.conversation.id = %cache.session.id,
            gen_ai.conversation.compacted = true,
            phosphor.compaction.reason = ?reason,
            phosphor.compaction.tokens_before = tokens_before,
            phosphor.compaction.tokens_after = field::Empty,
        );
        let result = self
            .summarize_inner(cache, reason, instructions, keep_from, summarizer.as_ref(), events)
            .instrument(span.clone())
            .await;
        match result {
            Ok((summary_id, shed_level)) => {
                let tokens_after = self.estimate(cache);
                span.record("phosphor.compaction.tokens_after", tokens_after);
                let duration = started.elapsed();
                emit(
                    events,
                    AgentEvent::CompactionFinished {
                        summary_message_id: summary_id.clone(),
                        model: info.model.clone(),
                        tokens_before,
                        tokens_after,
                        duration_ms: duration.as_millis() as u64,
                        shed_level,
                    },
                );
                Ok(CompactionReport {
                    summary_message_id: summary_id,
                    reason,
                    model: info.model,
                    tokens_before,
                    tokens_after,
                    shed_level,
                    duration,
                })
            }
            Err(AgentError::NothingToCompact) => Err(AgentError::NothingToCompact),
            Err(err) => {
                emit(events, AgentEvent::CompactionFailed { error: err.to_string() });
                Err(err)
            }
        }
    }

    async fn summarize_inner(
        &self,
        cache: &mut Cache,
        reason: CompactionReason,
        instructions: Option<&str>,
        keep_from: usize,
        summarizer: &dyn ChatModel,
        events: Option<&EventSender>,
    ) -> Result<(String, u32)> {
        let counter = self.counter.as_ref();
        let info = summarizer.info().clone();

        // Step 1: the history since the previous summary, and where the kept tail starts.
        let previous = cache.history.first().filter(|m| m.is_summary).cloned();
        let first = usize::from(previous.is_some());
        let keep_from = keep_from.clamp(first, cache.history.len());
        // Recent turns are kept verbatim only as far as they leave room, after the compaction, for
        // the summary, what must stay after it anyway, and the answer: a kept tail that overflows
        // would defeat the compaction.
        let large = self.models.large.as_ref();
        let pending: u64 = cache.ledger.counts()[keep_from..].iter().sum();
        let room = large
            .info()
            .context_window
            .saturating_sub(self.fixed_tokens() + Self::reserve(large) + pending + Self::reserve(summarizer));
        let recent = first
            + phosphor_prune::keep_recent_split(
                &cache.history[first..keep_from],
                self.options.summarize_keep_recent_tokens.min(room),
                counter,
            );
        let fold = &cache.history[first..recent];
        let Some(last_folded) = fold.last() else { return Err(AgentError::NothingToCompact) };
        let last_folded_id = last_folded.id.clone();

        // The deterministic artifact trail: the previous summary's, plus what the folded messages show.
        let mut trail =
            previous.as_ref().map(|p| ArtifactTrail::parse(&p.text_content())).unwrap_or_default();
        trail.merge(ArtifactTrail::collect(fold));

        // Step 2: standard pruning of tool outputs (the ladder below prunes harder when needed).
        let mut ladder = Ladder::new(fold, &self.options, counter);

        // Step 3: the prompt, with the previous summary for iterative compaction.
        let previous_text = previous.as_ref().map(|p| strip_trail(&p.text_content()).to_owned());
        let mut tools_used: Vec<String> =
            fold.iter().flat_map(|m| m.tool_calls().map(|c| c.name.clone())).collect::<Vec<_>>();
        tools_used.sort();
        tools_used.dedup();
        let context = SummaryContext {
            previous_summary: previous_text,
            custom_instructions: instructions.map(str::to_owned),
            session_id: cache.session.id.clone(),
            session_title: cache.session.title.clone(),
            message_count: fold.len(),
            tokens_before: self.estimate(cache),
            context_window: self.models.large.info().context_window,
            model: self.models.large.info().model.clone(),
            workspace: self.settings.workspace.clone(),
            files: trail.files(),
            tools_used,
            date: today(),
        };
        let rendered = self.profiles.render(&self.options.profile, &context)?;
        for warning in &rendered.warnings {
            emit(events, AgentEvent::Warning { message: warning.clone() });
        }

        // Step 4: the summary message exists in the store from now on, marked as streaming.
        let mut summary = self.new_message(&cache.session.id, Role::Assistant, Vec::new());
        summary.is_summary = true;
        summary.status = MessageStatus::Streaming;
        summary.summarized_until = Some(last_folded_id);
        summary.model = Some(info.model.clone());
        self.store.append_message(&summary).await?;
        let mut guard = SummaryGuard { store: self.store.clone(), message: Some(summary.clone()) };
        emit(
            events,
            AgentEvent::CompactionStarted {
                reason,
                model: info.model.clone(),
                tokens_before: self.estimate(cache),
            },
        );

        // Steps 2 and 5, with overflow recovery: walk the shedding ladder until the input fits and
        // the summarizer accepts it.
        let reserve = Self::reserve(summarizer).min(self.settings.summary_max_output_tokens);
        let outcome = loop {
            let Some((level, input)) = ladder.next_input() else {
                break Err(AgentError::NothingToShed {
                    tokens: ladder.smallest_tokens,
                    window: info.context_window,
                    model: info.model.clone(),
                });
            };
            let request = summary_request(&rendered.text, input, reserve, &cache.session.id);
            let estimate = counter.count_request(&request);
            if estimate >= ladder.smallest_tokens {
                continue; // no smaller than an input already tried
            }
            ladder.smallest_tokens = estimate;
            if estimate + reserve > info.context_window {
                continue; // known not to fit: do not even send it (protects servers that truncate silently)
            }
            match self.stream_summary(summarizer, request, &mut summary, events).await {
                Ok(usage) => break Ok((level, usage)),
                Err(AgentError::Model(err)) if err.is_context_overflow() => {
                    emit(
                        events,
                        AgentEvent::Warning {
                            message: format!(
                                "the summarizer rejected the input as too long ({err}); shedding more"
                            ),
                        },
                    );
                    summary.parts.clear();
                    continue;
                }
                Err(err) => break Err(err),
            }
        };
        let (level, usage) = match outcome {
            Ok(done) => done,
            Err(err) => {
                summary.status = MessageStatus::Failed;
                summary.updated_at = now_ms();
                guard.message = None;
                // Marking the failure is best effort: an unfinished summary is never history anyway.
                if let Err(mark) = self.store.update_message(&summary).await {
                    tracing::warn!(error = %mark, "could not mark the failed summary");
                }
                return Err(err);
            }
        };

        // Step 7: the summary is whole; append the artifact trail, then move the pointer and the
        // token fields in one transaction.
        let text = summary.text_content();
        summary.parts = vec![
            Part::Text { text: text.trim_end().to_owned() },
            Part::Text { text: format!("\n\n{}", trail.render()) },
        ];
        summary.status = MessageStatus::Complete;
        summary.usage = Some(usage);
        summary.updated_at = now_ms();
        let mut history = Vec::with_capacity(1 + cache.history.len() - recent);
        history.push(summary.clone());
        history.extend(cache.history[recent..].iter().cloned());
        let ledger = shown_ledger(counter, &history);
        let mut session = cache.session.clone();
        session.summary_message_id = Some(summary.id.clone());
        // Spec step 7: recalculated from the summary content (as a model is shown it).
        session.current_tokens = ledger.counts().first().copied().unwrap_or(0);
        session.completion_tokens = usage.output_tokens;
        session.prompt_tokens = 0;
        session.updated_at = now_ms();
        self.store.complete_summary(&session, &summary).await?;
        guard.message = None;
        cache.session = session;
        cache.history = history;
        cache.ledger = ledger;
        cache.calibration = None;
        Ok((summary.id, level))
    }

    /// Step 6: streams the summary into `summary`, persisting it in batches.
    async fn stream_summary(
        &self,
        model: &dyn ChatModel,
        request: ChatRequest,
        summary: &mut Message,
        events: Option<&EventSender>,
    ) -> Result<Usage> {
        let input_estimate = self.counter.count_request(&request);
        let mut stream = model.stream(request);
        let mut text = String::new();
        let mut reported: Option<Usage> = None;
        let mut finish: Option<FinishReason> = None;
        let mut last_persist = Instant::now();
        let mut persisted_len = 0;
        while let Some(event) = stream.next().await {
            match event? {
                StreamEvent::TextDelta { text: delta } => {
                    emit(events, AgentEvent::CompactionDelta { text: delta.clone() });
                    text.push_str(&delta);
                    if last_persist.elapsed() >= self.settings.persist_interval && text.len() > persisted_len
                    {
                        summary.parts = vec![Part::Text { text: text.clone() }];
                        summary.updated_at = now_ms();
                        self.store.update_message(summary).await?;
                        last_persist = Instant::now();
                        persisted_len = text.len();
                    }
                }
                StreamEvent::Usage(usage) => reported = Some(usage),
                StreamEvent::Finish { reason } => finish = Some(reason),
                StreamEvent::ReasoningDelta { .. } | StreamEvent::ToolCall(_) => {}
            }
        }
        summary.parts = vec![Part::Text { text: text.clone() }];
        // A summary that did not really finish must never replace the history.
        let incomplete = |reason: String| Err(AgentError::SummaryIncomplete { reason });
        match &finish {
            Some(FinishReason::Cancelled) => return incomplete("cancelled".into()),
            Some(FinishReason::ContentFilter) => return incomplete("stopped by the content filter".into()),
            Some(FinishReason::Error(error)) => return incomplete(format!("the model failed: {error}")),
            Some(FinishReason::Length) => emit(
                events,
                AgentEvent::Warning {
                    message: "the summary reached the output limit and may be cut short".into(),
                },
            ),
            _ => {}
        }
        if text.trim().is_empty() {
            return incomplete("the summarizer returned no text".into());
        }
        let usage = reported.unwrap_or(Usage {
            input_tokens: input_estimate,
            output_tokens: self.counter.count_text(&text),
            ..Usage::default()
        });
        emit(events, AgentEvent::Usage { model: model.info().model.clone(), usage });
        Ok(usage)
    }

    fn new_message(&self, session_id: &str, role: Role, parts: Vec<Part>) -> Message {
        let now = now_ms();
        let mut message = Message::new(role, parts);
        message.id = new_id();
        message.session_id = session_id.to_owned();
        message.created_at = now;
        message.updated_at = now;
        message
    }
}

/// Tokens of a session as `/tokens` shows them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenStatus {
    /// Our estimate of the next request.
    pub estimated_tokens: u64,
    /// The session's `current_tokens` field.
    pub current_tokens: u64,
    /// The large model's window.
    pub context_window: u64,
    /// `summarize_threshold`.
    pub threshold: f64,
}

/// Marks a summary `Cancelled` if the compaction is dropped before it finished.
struct SummaryGuard {
    store: Arc<dyn SessionStore>,
    message: Option<Message>,
}

impl Drop for SummaryGuard {
    fn drop(&mut self) {
        let Some(message) = self.message.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let store = self.store.clone();
        runtime.spawn(async move {
            // Re-read the row so that the deltas already persisted stay. Best effort: a summary
            // left `Streaming` is marked cancelled on the next load anyway.
            let marked = async {
                let Some(mut stored) = store.message(&message.id).await? else { return Ok(()) };
                if stored.status == MessageStatus::Streaming {
                    stored.status = MessageStatus::Cancelled;
                    stored.updated_at = now_ms();
                    store.update_message(&stored).await?;
                }
                Ok::<(), phosphor_store::StoreError>(())
            };
            if let Err(err) = marked.await {
                tracing::warn!(error = %err, "could not mark the cancelled summary");
            }
        });
    }
}

/// The ladder of ever smaller summarizer inputs (spec "Overflow recovery", then further):
/// 0 standard pruning; 1 aggressive pruning; 2 every tool output omitted; 3.. the oldest turns
/// dropped one at a time (never the previous summary, which is in the prompt, nor the latest turn).
struct Ladder<'a> {
    fold: &'a [Message],
    options: &'a Options,
    counter: &'a dyn TokenCounter,
    level: u32,
    smallest_tokens: u64,
}

impl<'a> Ladder<'a> {
    fn new(fold: &'a [Message], options: &'a Options, counter: &'a dyn TokenCounter) -> Ladder<'a> {
        Ladder { fold, options, counter, level: 0, smallest_tokens: u64::MAX }
    }

    fn next_input(&mut self) -> Option<(u32, Vec<Cow<'a, Message>>)> {
        let level = self.level;
        self.level += 1;
        let chars = if level == 0 {
            self.options.summarize_tool_output_chars
        } else {
            self.options.summarize_tool_output_aggressive_chars
        };
        let mut input = phosphor_prune::prune(self.fold, chars, self.counter).messages;
        if level >= 2 {
            phosphor_prune::omit_oldest_tool_outputs(&mut input, usize::MAX);
        }
        if level >= 3 {
            let turns = (level - 2) as usize;
            let dropped = phosphor_prune::drop_oldest_turns(&mut input, turns);
            let available = phosphor_prune::turn_starts(self.fold).len().saturating_sub(1);
            if dropped == 0 || turns > available {
                return None;
            }
        }
        Some((level, input))
    }
}

/// The summarizer's request: the rendered instructions, the pruned history, and a closing ask.
fn summary_request(
    prompt: &str,
    input: Vec<Cow<'_, Message>>,
    reserve: u64,
    session_id: &str,
) -> ChatRequest {
    let mut messages = Vec::with_capacity(input.len() + 2);
    messages.push(Message::system(prompt));
    let repaired = phosphor_prune::repair_tool_pairing(input);
    messages.extend(repaired.iter().map(|m| summary_as_context(m).into_owned()));
    messages.push(Message::user(
        "Write the summary of the conversation above now, following the instructions in the system message. \
         Output only the summary.",
    ));
    ChatRequest {
        messages,
        tools: Vec::new(),
        max_output_tokens: Some(reserve),
        temperature: Some(0.0),
        conversation_id: Some(session_id.to_owned()),
    }
}

/// What precedes a summary when it is shown to a model.
pub const SUMMARY_PREFIX: &str = "This conversation continues from an earlier part that was compacted. \
Summary of everything before this point:\n\n";

/// A summary as the model sees it: a user message with [`SUMMARY_PREFIX`] (the summary flag cannot be
/// expressed on the wire, and a model reads a summary best as context it was given). Others unchanged.
fn summary_as_context(message: &Message) -> Cow<'_, Message> {
    if !message.is_summary {
        return Cow::Borrowed(message);
    }
    let mut shown = Message::user(format!("{SUMMARY_PREFIX}{}", message.text_content()));
    shown.id = message.id.clone();
    shown.session_id = message.session_id.clone();
    Cow::Owned(shown)
}

/// The summary text without the artifact trail (the trail is merged separately).
fn strip_trail(text: &str) -> &str {
    match text.rfind(TRAIL_HEADING) {
        Some(at) => text[..at].trim_end(),
        None => text,
    }
}

/// A session title from its first prompt: the first line, at most 60 characters.
fn title_from(prompt: &str) -> String {
    let line = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    match line.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// Mid-turn compaction keeps the turn in progress: everything from the last user message on.
fn keep_after_last_user(history: &[Message]) -> usize {
    history.iter().rposition(|m| m.role == Role::User && !m.is_summary).unwrap_or(history.len())
}

/// Today's date (UTC) as `YYYY-MM-DD`, for the summary prompt.
fn today() -> String {
    phosphor_core::time::UtcMinute::from_unix_ms(now_ms()).date()
}

fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
