//! A compaction (docs/ARCHITECTURE.md, "Bird's eye view", and docs/DECISIONS.md), with the shedding ladder, the streamed and persisted
//! summary, and the session-state trail.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use phosphor_base::config::{Options, SummarizeModel};
use phosphor_base::outline::Outline;
use phosphor_base::{
    ChatModel, ChatRequest, FinishReason, Message, MessageStatus, Part, Role, StreamEvent, TokenCounter,
    Usage,
};
use phosphor_prompt::SummaryContext;
use phosphor_store::SessionStore;
use tracing::{Instrument, field};

use crate::agent::{Cache, SessionAgent, now_ms};
use crate::error::{AgentError, Result};
use crate::events::{AgentEvent, CompactionReason, EventSender, emit};
use crate::policy::{self, KeepBudget};
use crate::repetition;
use crate::shown::{SUMMARY_PREFIX, TRANSCRIPT_INTRO, masked_len, shown_ledger, transcript};
use crate::state::{self, SessionState};

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
    /// Wall time: how long the session waited for it.
    pub duration: Duration,
    /// Whether the summary was prepared in the background (`options.summarize_prepare_at`);
    /// `duration` is then only the wait for what was left of it.
    pub prepared: bool,
}

impl SessionAgent {
    /// The model `summarize_model` names (`eval` reports it).
    pub(crate) fn summarizer(&self) -> Result<Arc<dyn ChatModel>> {
        self.models.choose(self.options.summarize_model)
    }

    /// The summarizer of a session: `summarize_model: "main"` is the model that answers it
    /// ([`SessionAgent::model_of`]), the others are the configured slots.
    pub(crate) fn summarizer_of(&self, cache: &Cache) -> Result<Arc<dyn ChatModel>> {
        match self.options.summarize_model {
            SummarizeModel::Main => Ok(self.model_of(cache).clone()),
            _ => self.summarizer(),
        }
    }

    /// One compaction: folds the history where [`policy::cut`] says into a new summary
    /// message. `turn` is the index of the user message of the turn in progress (`None` for a
    /// manual compaction).
    pub(crate) async fn summarize(
        &self,
        cache: &mut Cache,
        reason: CompactionReason,
        instructions: Option<&str>,
        turn: Option<usize>,
        events: Option<&EventSender>,
    ) -> Result<CompactionReport> {
        let started = Instant::now();
        // A summary prepared for this history no longer applies once another one is installed.
        self.discard(cache, "a compaction ran inline", events);
        let summarizer = self.summarizer_of(cache)?;
        let info = summarizer.info().clone();
        let tokens_before = self.estimate(cache);
        let span = compaction_span(&cache.session.id, reason, tokens_before, false);
        let result = self
            .summarize_inner(cache, reason, instructions, turn, &summarizer, events)
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
                        prepared: false,
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
                    prepared: false,
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
        turn: Option<usize>,
        summarizer: &Arc<dyn ChatModel>,
        events: Option<&EventSender>,
    ) -> Result<(String, u32)> {
        let plan = self.plan(cache, instructions, turn, summarizer.clone(), events)?;

        // Step 4: the summary message exists in the store from now on, marked as streaming.
        let mut summary = self.new_summary(&plan);
        self.store.append_message(&summary).await?;
        let mut guard = SummaryGuard { store: self.store.clone(), message: Some(summary.clone()) };
        emit(
            events,
            AgentEvent::CompactionStarted {
                reason,
                model: plan.summarizer.info().model.clone(),
                tokens_before: self.estimate(cache),
            },
        );
        let persist = Persist { store: self.store.as_ref(), interval: self.settings.persist_interval };
        let outcome = write_summary(&plan, &self.options, &mut summary, Some(persist), events).await;
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
        let id = self.install(cache, &plan, summary, usage).await?;
        guard.message = None;
        Ok((id, level))
    }

    /// Steps 1 and 3: where the history is cut, the session-state trail, the prompt, for a
    /// compaction that starts now (inline, or prepared in the background).
    pub(crate) fn plan(
        &self,
        cache: &Cache,
        instructions: Option<&str>,
        turn: Option<usize>,
        summarizer: Arc<dyn ChatModel>,
        events: Option<&EventSender>,
    ) -> Result<Plan> {
        // The summarizer's input is counted with the summarizer's counter, the history the session
        // model is shown afterwards with the session model's.
        let summary_counter = summarizer.counter();
        let counter = summary_counter.as_ref();
        let info = summarizer.info().clone();

        // Step 1: the history since the previous summary, and where it is cut. What stays verbatim
        // must leave room, after the compaction, for the summary and the answer: a kept tail that
        // overflows would defeat the compaction.
        let previous = cache.history.first().filter(|m| m.is_summary);
        let summary_budget = policy::reserve(&info).min(self.settings.summary_max_output_tokens);
        let large = self.model_of(cache).info();
        let state_budget = policy::state_budget(&self.options, large.context_window);
        let room = large.context_window.saturating_sub(
            self.fixed_tokens(cache) + policy::reserve(large) + summary_budget + state_budget,
        );
        let budget = KeepBudget { room, keep_recent: self.options.summarize_keep_recent_tokens };
        let Some(cut) = policy::cut(&cache.history, cache.ledger.counts(), turn, budget) else {
            return Err(AgentError::NothingToCompact);
        };
        let fold = &cache.history[cut.fold.clone()];
        if fold.is_empty() {
            return Err(AgentError::NothingToCompact);
        }

        // The session-state trail: the previous summary's, plus what the folded messages show.
        let mut trail = previous.map(|p| SessionState::parse(&p.text_content())).unwrap_or_default();
        trail.merge(SessionState::collect(fold));

        // Step 3: the prompt, with the previous summary for iterative compaction.
        let previous_text = previous.map(|p| state::strip(&p.text_content()).to_owned());
        let previous_tokens =
            previous_text.as_deref().map_or(0, |p| counter.count_message(&Message::user(p)));
        let mut tools_used: Vec<String> =
            fold.iter().flat_map(|m| m.tool_calls().map(|c| c.name.clone())).collect::<Vec<_>>();
        tools_used.sort();
        tools_used.dedup();
        let tokens_before = self.estimate(cache);
        let context = SummaryContext {
            previous_summary: previous_text,
            custom_instructions: instructions.map(str::to_owned),
            session_id: cache.session.id.clone(),
            session_title: cache.session.title.clone(),
            message_count: fold.len(),
            tokens_before,
            context_window: large.context_window,
            model: large.model.clone(),
            workspace: self.settings.workspace.clone(),
            files: trail.file_paths(),
            tools_used,
            date: today(),
        };
        // A small local model gets the compact prompt where the default one is configured.
        let profile = self.profiles.for_model(&self.options.profile, summarizer.parameters());
        tracing::Span::current().record("phosphor.compaction.profile", profile);
        let rendered = self.profiles.render(profile, &context)?;
        for warning in &rendered.warnings {
            emit(events, AgentEvent::Warning { message: warning.clone() });
        }
        // A template that does not use `previous_summary` would drop it: the model gets it as the
        // first message of the history instead, so what it knew carries over whatever the template says.
        let carried = previous
            .filter(|_| !rendered.uses_previous_summary)
            .map(|p| state::strip(&p.text_content()).to_owned());

        // The summary may be as long as what it summarizes calls for. (Step 2, the pruning, is the
        // ladder's.) The summarizer reads at most a share of what the compaction folds as stored
        // (not as masked), the previous summary's text included: it is folded again, and sent
        // with the instructions.
        let fold_tokens: u64 = cache.ledger.counts()[cut.fold.clone()].iter().sum();
        let reserve = policy::summary_budget(fold_tokens, summary_budget);
        let folded: u64 = fold.iter().map(|m| counter.count_message(m)).sum();
        let instruction_tokens = counter.count_message(&Message::system(rendered.text.as_str()))
            + carried.as_deref().map_or(0, |c| counter.count_message(&Message::user(c)));
        Ok(Plan {
            prefix: cache.history[..cut.fold.end].to_vec(),
            first: cut.fold.start,
            pinned: cut.pinned,
            trail,
            prompt: rendered.text,
            outline: rendered.outline,
            carried,
            reserve,
            target: policy::summary_input_target(folded + previous_tokens, instruction_tokens),
            state_budget,
            summarizer,
            session_id: cache.session.id.clone(),
        })
    }

    /// The summary message of `plan`, not yet written: streaming, pointing at what it folds.
    pub(crate) fn new_summary(&self, plan: &Plan) -> Message {
        let mut summary = self.new_message(&plan.session_id, Role::Assistant, Vec::new());
        summary.is_summary = true;
        summary.status = MessageStatus::Streaming;
        summary.summarized_until = plan.prefix.last().map(|m| m.id.clone());
        summary.pinned_message = plan.pinned.map(|at| plan.prefix[at].id.clone());
        summary.model = Some(plan.summarizer.info().model.clone());
        summary
    }

    /// Step 7: `summary` (stored, streaming, its text whole) gets the session-state trail and
    /// replaces what `plan` folds: the pointer and the token fields move in one transaction, then
    /// the cache. `cache.history` must still start with `plan.prefix`. Returns the summary's id.
    pub(crate) async fn install(
        &self,
        cache: &mut Cache,
        plan: &Plan,
        mut summary: Message,
        usage: Usage,
    ) -> Result<String> {
        let end = plan.prefix.len();
        debug_assert!(plan.matches(&cache.history));
        let text = summary.text_content();
        let rendered_state = plan.trail.render(plan.state_budget, self.counter.as_ref());
        summary.parts = match text.trim_end() {
            "" => vec![Part::Text { text: rendered_state }],
            text => vec![
                Part::Text { text: text.to_owned() },
                Part::Text { text: format!("\n\n{rendered_state}") },
            ],
        };
        summary.status = MessageStatus::Complete;
        summary.usage = Some(usage);
        summary.updated_at = now_ms();
        let mut history = Vec::with_capacity(2 + cache.history.len() - end);
        history.push(summary.clone());
        history.extend(plan.pinned.map(|at| cache.history[at].clone()));
        history.extend(cache.history[end..].iter().cloned());
        let masked = masked_len(&history, cache.session.masked_until.as_deref());
        let ledger = shown_ledger(self.counter.as_ref(), &history, masked);
        let mut session = cache.session.clone();
        session.summary_message_id = Some(summary.id.clone());
        // The token fields after a summary (docs/DECISIONS.md, "Token fields"): recalculated from the
        // summary content (as a model is shown it).
        session.current_tokens = ledger.counts().first().copied().unwrap_or(0);
        session.completion_tokens = usage.output_tokens;
        session.prompt_tokens = 0;
        session.updated_at = now_ms();
        self.store.complete_summary(&session, &summary).await?;
        cache.session = session;
        cache.history = history;
        cache.ledger = ledger;
        cache.masked = masked;
        cache.calibration = None;
        cache.responses_since_compaction = 0;
        Ok(summary.id)
    }
}

/// What a compaction folds and how it asks for its summary, fixed when it starts
/// ([`SessionAgent::plan`]).
pub(crate) struct Plan {
    /// The history when it was cut, up to the end of what it folds: the previous summary (when
    /// there is one), then the folded messages, the pinned request among them. A prepared summary
    /// applies only to a history that still starts with exactly these messages.
    pub(crate) prefix: Vec<Message>,
    /// Where the folded messages start in `prefix` (after the previous summary).
    first: usize,
    /// The request kept verbatim after the summary, as an index into `prefix`.
    pinned: Option<usize>,
    /// The session-state trail: the previous summary's and the folded messages'.
    trail: SessionState,
    /// The rendered instructions.
    prompt: String,
    /// The outline the answer is constrained to, if the template has one.
    outline: Option<Outline>,
    /// The previous summary, sent as the history's start when the template does not use it.
    carried: Option<String>,
    /// The summary's output budget.
    reserve: u64,
    /// [`policy::summary_input_target`] of the folded messages.
    target: u64,
    /// Tokens the session-state trail may take.
    state_budget: u64,
    /// The model that writes the summary.
    pub(crate) summarizer: Arc<dyn ChatModel>,
    session_id: String,
}

impl Plan {
    /// The messages it folds.
    fn fold(&self) -> &[Message] {
        &self.prefix[self.first..]
    }

    /// Whether `history` still starts with what this plan was cut from.
    pub(crate) fn matches(&self, history: &[Message]) -> bool {
        history.get(..self.prefix.len()).is_some_and(|start| start == self.prefix.as_slice())
    }
}

/// Where a streaming summary is written in batches.
#[derive(Clone, Copy)]
pub(crate) struct Persist<'a> {
    pub(crate) store: &'a dyn SessionStore,
    pub(crate) interval: Duration,
}

/// Steps 2, 5 and 6, with overflow recovery: walks the shedding ladder until the input fits and the
/// summarizer accepts it, streaming the summary into `summary` (persisted in batches when
/// `persist` says where). Returns the ladder's level and the summarizer's usage.
pub(crate) async fn write_summary(
    plan: &Plan,
    options: &Options,
    summary: &mut Message,
    persist: Option<Persist<'_>>,
    events: Option<&EventSender>,
) -> Result<(u32, Usage)> {
    let summarizer = plan.summarizer.as_ref();
    let info = summarizer.info();
    let summary_counter = summarizer.counter();
    let counter = summary_counter.as_ref();
    let measure = |input: &[Cow<'_, Message>]| counter.count_message(&summary_message(None, input.to_vec()));
    let reading = policy::Reading { target: plan.target, measure: &measure };
    let mut ladder = policy::Ladder::new(plan.fold(), options, reading);
    loop {
        let Some((level, input)) = ladder.next_input() else {
            return Err(AgentError::NothingToShed {
                tokens: ladder.smallest_tokens,
                window: info.context_window,
                model: info.model.clone(),
            });
        };
        let request = summary_request(
            &plan.prompt,
            plan.carried.as_deref(),
            input,
            plan.reserve,
            options.summarize_repeat_penalty as f32,
            plan.outline.clone(),
            &plan.session_id,
        );
        let estimate = counter.count_request(&request);
        if estimate >= ladder.smallest_tokens {
            continue; // no smaller than an input already tried
        }
        ladder.smallest_tokens = estimate;
        if estimate + plan.reserve > info.context_window {
            continue; // known not to fit: do not even send it (protects servers that truncate silently)
        }
        match stream_summary(summarizer, request, summary, persist, events).await {
            Ok(usage) => {
                let read = ladder.reading();
                let span = tracing::Span::current();
                span.record("phosphor.compaction.headlines", read.headlines);
                span.record("phosphor.compaction.outlines", read.outlines);
                return Ok((level, usage));
            }
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
            }
            Err(err) => return Err(err),
        }
    }
}

/// Step 6: streams the summary into `summary`, persisting it in batches when `persist` says where.
async fn stream_summary(
    model: &dyn ChatModel,
    request: ChatRequest,
    summary: &mut Message,
    persist: Option<Persist<'_>>,
    events: Option<&EventSender>,
) -> Result<Usage> {
    let counter = model.counter();
    let input_estimate = counter.count_request(&request);
    let mut stream = model.stream(request);
    let mut text = String::new();
    let mut reported: Option<Usage> = None;
    let mut finish: Option<FinishReason> = None;
    let mut last_persist = Instant::now();
    let mut persisted_len = 0;
    let mut guard = repetition::Guard::default();
    while let Some(event) = stream.next().await {
        match event? {
            StreamEvent::TextDelta { text: delta } => {
                emit(events, AgentEvent::CompactionDelta { text: delta.clone() });
                text.push_str(&delta);
                if let Some(found) = guard.check(&text) {
                    // A loop: stop the model (dropping the stream cancels it) and keep the text
                    // up to the loop's first unit.
                    let trimmed = text.len() - found.keep;
                    text.truncate(found.keep);
                    tracing::Span::current().record("phosphor.compaction.repetition_trimmed", trimmed as u64);
                    emit(
                        events,
                        AgentEvent::Warning {
                            message: format!(
                                "the summary started repeating itself (a {}-byte unit {} times); stopped it \
                                 and cut the {trimmed} repeated bytes",
                                found.period, found.repeats
                            ),
                        },
                    );
                    finish = Some(FinishReason::Stop);
                    break;
                }
                if let Some(persist) = persist
                    && last_persist.elapsed() >= persist.interval
                    && text.len() > persisted_len
                {
                    summary.parts = vec![Part::Text { text: text.clone() }];
                    summary.updated_at = now_ms();
                    persist.store.update_message(summary).await?;
                    last_persist = Instant::now();
                    persisted_len = text.len();
                }
            }
            StreamEvent::Usage(usage) => reported = Some(usage),
            StreamEvent::Finish { reason } => finish = Some(reason),
            StreamEvent::ReasoningDelta { .. } | StreamEvent::ReasoningSeal(_) | StreamEvent::ToolCall(_) => {
            }
        }
    }
    // A loop stopped early: the model stops generating once its stream is dropped.
    drop(stream);
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
        // Not a failure: the session-state trail carries the requests, the plan, the files and
        // the commands, which is more than the history the compaction would otherwise keep.
        emit(
            events,
            AgentEvent::Warning {
                message: "the summarizer returned no text; the summary holds only the session state \
                          Phosphor recorded"
                    .into(),
            },
        );
    }
    let usage = reported.unwrap_or(Usage {
        input_tokens: input_estimate,
        output_tokens: counter.count_text(&text),
        ..Usage::default()
    });
    emit(events, AgentEvent::Usage { model: model.info().model.clone(), usage });
    Ok(usage)
}

/// The span of a compaction, inline or installing a prepared summary (`prepared`): every
/// attribute either may record.
pub(crate) fn compaction_span(
    session_id: &str,
    reason: CompactionReason,
    tokens_before: u64,
    prepared: bool,
) -> tracing::Span {
    tracing::info_span!(
        "compaction",
        otel.name = "compaction",
        gen_ai.conversation.id = %session_id,
        gen_ai.conversation.compacted = true,
        phosphor.compaction.reason = ?reason,
        phosphor.compaction.prepared = prepared,
        phosphor.compaction.tokens_before = tokens_before,
        phosphor.compaction.tokens_after = field::Empty,
        phosphor.compaction.repetition_trimmed = field::Empty,
        phosphor.compaction.profile = field::Empty,
        phosphor.compaction.headlines = field::Empty,
        phosphor.compaction.outlines = field::Empty,
        phosphor.compaction.waited_ms = field::Empty,
        phosphor.compaction.prepared_ms = field::Empty,
    )
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

/// What closes a summary request.
const SUMMARY_ASK: &str = "Write the summary of the conversation above now, following the instructions in the system message. \
     Output only the summary.";

/// The summarizer's request: the rendered instructions as the system message, then
/// [`summary_message`].
fn summary_request(
    prompt: &str,
    carried: Option<&str>,
    input: Vec<Cow<'_, Message>>,
    reserve: u64,
    repeat_penalty: f32,
    outline: Option<Outline>,
    session_id: &str,
) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::system(prompt), summary_message(carried, input)],
        tools: Vec::new(),
        max_output_tokens: Some(reserve),
        temperature: Some(0.0),
        conversation_id: Some(session_id.to_owned()),
        repeat_penalty: Some(repeat_penalty).filter(|p| *p != 1.0),
        outline,
        // The summarizer's own request: nothing of the client's passes.
        passthrough: None,
    }
}

/// The user message of a summary request, as a compaction of `fold` (the messages it folds, a
/// previous summary aside) sends it at the shedding ladder's first rung, after the instructions:
/// the history as the summarizer reads it, counted by `counter` against
/// [`policy::summary_input_target`] with the instructions not counted (a compaction counts them,
/// and may read a turn or two more as headlines or outlines). `phosphor compact --dry-run` counts it. `None`
/// when there is nothing to fold.
pub fn first_summary_input(
    fold: &[Message],
    options: &phosphor_base::config::Options,
    counter: &dyn TokenCounter,
) -> Option<SummaryInput> {
    if fold.is_empty() {
        return None;
    }
    let fold_tokens = fold.iter().map(|m| counter.count_message(m)).sum();
    let measure = |input: &[Cow<'_, Message>]| counter.count_message(&summary_message(None, input.to_vec()));
    let reading = policy::Reading { target: policy::summary_input_target(fold_tokens, 0), measure: &measure };
    let mut ladder = policy::Ladder::new(fold, options, reading);
    let (_, input) = ladder.next_input()?;
    Some(SummaryInput { message: summary_message(None, input), turns: ladder.reading() })
}

/// The summarizer's input as [`first_summary_input`] builds it.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryInput {
    /// The user message of the summary request.
    pub message: Message,
    /// How it reads the turns before the newest: how many of the oldest as outlines, how many
    /// after those as headlines ([`policy::Ladder`]).
    pub turns: policy::TurnsRead,
}

/// The history for the summarizer, as one user message: the previous summary when the template
/// does not carry it (`carried`), the pruned history as a transcript ([`transcript`]) and a
/// closing ask.
fn summary_message(carried: Option<&str>, input: Vec<Cow<'_, Message>>) -> Message {
    let mut head = String::new();
    if let Some(previous) = carried {
        head = format!("{SUMMARY_PREFIX}{previous}\n\n");
    }
    head.push_str(TRANSCRIPT_INTRO);
    head.push_str("\n\n");
    let repaired = phosphor_prune::repair_tool_pairing(input);
    let mut parts = vec![Part::Text { text: head }];
    for part in transcript(repaired.iter().map(|m| m.as_ref()))
        .into_iter()
        .chain([Part::Text { text: format!("\n\n{SUMMARY_ASK}") }])
    {
        match (parts.last_mut(), part) {
            (Some(Part::Text { text }), Part::Text { text: more }) => text.push_str(&more),
            (_, part) => parts.push(part),
        }
    }
    Message::new(Role::User, parts)
}

/// Today's date (UTC) as `YYYY-MM-DD`, for the summary prompt.
fn today() -> String {
    phosphor_base::time::UtcMinute::from_unix_ms(now_ms()).date()
}
