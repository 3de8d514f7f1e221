//! Summaries prepared ahead (`options.summarize_prepare_at`): once a request passes that share of
//! the window, the summary the next compaction needs is written in a background task while the
//! session goes on, and installed when a trigger fires, so that the turn that reaches the
//! threshold does not wait for the summarizer.
//!
//! - The cut is fixed when the preparation starts ([`SessionAgent::plan`], the same cut an inline
//!   compaction at that point would make): the previous summary, the folded messages and the
//!   pinned request are kept in the [`Plan`]. The task writes the summary in memory only; nothing
//!   reaches the store until it is installed, so a cancelled or killed preparation leaves nothing
//!   behind.
//! - At the trigger ([`SessionAgent::use_prepared`]) a preparation applies only to a history that
//!   still starts with exactly the messages it was cut from ([`Plan::matches`]); otherwise (a
//!   rewind, an edit, a compaction ran) it is discarded. One still running is waited for: it
//!   started earlier on less, with the same summarizer, so it finishes before a new one would.
//!   What came after its cut stays verbatim; when that does not fit under the triggers, the next
//!   (iterative) summary folds it at once, in the same step.
//! - One preparation per session at a time: in this process it lives beside the session's cache,
//!   across processes sharing a store it holds the store's claim `prepare:<session id>` while it
//!   runs. Dropping the session's cache (the agent dropped, a cancelled turn) aborts it.
//! - A discarded preparation is a summary paid for and not used: [`SessionAgent::preparations`]
//!   counts them, and [`AgentEvent::PreparedSummaryDiscarded`] says why.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use phosphor_base::{Message, MessageStatus, Role, Usage};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::agent::{Cache, SessionAgent, now_ms};
use crate::compaction::{CompactionReport, Plan, compaction_span, write_summary};
use crate::error::{AgentError, Result};
use crate::events::{AgentEvent, CompactionReason, EventSender, emit};
use crate::policy;
use crate::shown::shown_ledger;

/// A summary being written, or written, in the background for the session's next compaction.
pub(crate) struct Preparation {
    plan: Arc<Plan>,
    task: AbortOnDrop,
    started: Instant,
}

/// What a preparation wrote: the summary message (streaming, not stored), with its usage.
struct Written {
    summary: Message,
    usage: Usage,
    level: u32,
}

/// The background task, aborted when its [`Preparation`] is dropped.
struct AbortOnDrop(JoinHandle<Result<Written>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How many summaries the agent prepared, and what became of them (a discarded one was paid for
/// and not used).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Preparations {
    /// Preparations started.
    pub started: u64,
    /// Prepared summaries installed at a trigger.
    pub used: u64,
    /// Preparations thrown away: the session changed under them, or they failed.
    pub discarded: u64,
}

/// The counters behind [`Preparations`].
#[derive(Debug, Default)]
pub(crate) struct PreparationCounters {
    started: AtomicU64,
    used: AtomicU64,
    discarded: AtomicU64,
}

impl PreparationCounters {
    pub(crate) fn get(&self) -> Preparations {
        Preparations {
            started: self.started.load(Ordering::Relaxed),
            used: self.used.load(Ordering::Relaxed),
            discarded: self.discarded.load(Ordering::Relaxed),
        }
    }
}

impl SessionAgent {
    /// How many summaries this agent prepared ahead, used and discarded.
    pub fn preparations(&self) -> Preparations {
        self.preparation_counters.get()
    }

    /// Before a request of `estimate` tokens that the triggers let go: starts preparing the next
    /// compaction's summary when [`policy::should_prepare`] says so and none is being prepared for
    /// this history. `user` is the turn's request (its index in the history). Never fails the
    /// turn: a preparation that cannot start is a warning, and the trigger writes the summary
    /// inline as it would without one.
    pub(crate) async fn prepare(
        &self,
        cache: &mut Cache,
        estimate: u64,
        user: Option<usize>,
        events: Option<&EventSender>,
    ) {
        let window = self.model_of(cache).info().context_window;
        if !policy::should_prepare(estimate, window, &self.options) {
            return;
        }
        if let Some(preparation) = &cache.preparation {
            if preparation.plan.matches(&cache.history) {
                return;
            }
            self.discard(cache, "the history it was cut from changed", events);
        }
        let claim = match self.store.try_claim(&format!("prepare:{}", cache.session.id)).await {
            Ok(Some(claim)) => claim,
            Ok(None) => return, // another process prepares this session's summary
            Err(err) => {
                emit(events, AgentEvent::Warning { message: format!("could not prepare a summary: {err}") });
                return;
            }
        };
        let summarizer = match self.summarizer_of(cache) {
            Ok(summarizer) => summarizer,
            Err(err) => {
                emit(events, AgentEvent::Warning { message: format!("could not prepare a summary: {err}") });
                return;
            }
        };
        let plan = match self.plan(cache, None, user, summarizer, events) {
            Ok(plan) => Arc::new(plan),
            Err(AgentError::NothingToCompact) => return,
            Err(err) => {
                emit(events, AgentEvent::Warning { message: format!("could not prepare a summary: {err}") });
                return;
            }
        };
        let model = plan.summarizer.info().model.clone();
        let span = tracing::info_span!(
            "prepare_summary",
            otel.name = "prepare_summary",
            gen_ai.conversation.id = %cache.session.id,
            gen_ai.request.model = %model,
            phosphor.compaction.tokens_before = estimate,
            phosphor.compaction.headlines = tracing::field::Empty,
            phosphor.compaction.outlines = tracing::field::Empty,
            phosphor.compaction.repetition_trimmed = tracing::field::Empty,
        );
        let mut summary = self.new_summary(&plan);
        let options = self.options.clone();
        let task_plan = plan.clone();
        let task = tokio::spawn(
            async move {
                // The claim is held while the summary is written, then released.
                let _claim = claim;
                let (level, usage) = write_summary(&task_plan, &options, &mut summary, None, None).await?;
                Ok(Written { summary, usage, level })
            }
            .instrument(span),
        );
        self.preparation_counters.started.fetch_add(1, Ordering::Relaxed);
        emit(
            events,
            AgentEvent::SummaryPreparing {
                model,
                tokens_before: estimate,
                messages: plan.prefix.len() as u64,
            },
        );
        cache.preparation = Some(Preparation { plan, task: AbortOnDrop(task), started: Instant::now() });
    }

    /// At a trigger: installs the session's prepared summary when it still applies to the history,
    /// waiting for it when it is still being written. `None` when there is none, or it does not
    /// apply, or it failed (the caller then compacts inline).
    pub(crate) async fn use_prepared(
        &self,
        cache: &mut Cache,
        reason: CompactionReason,
        events: Option<&EventSender>,
    ) -> Result<Option<CompactionReport>> {
        let Some(preparation) = cache.preparation.take() else { return Ok(None) };
        if !preparation.plan.matches(&cache.history) {
            cache.preparation = Some(preparation);
            self.discard(cache, "the history it was cut from changed", events);
            return Ok(None);
        }
        let waiting = Instant::now();
        let model = preparation.plan.summarizer.info().model.clone();
        let tokens_before = self.estimate(cache);
        let running = !preparation.task.0.is_finished();
        let span = compaction_span(&cache.session.id, reason, tokens_before, true);
        emit(events, AgentEvent::CompactionStarted { reason, model: model.clone(), tokens_before });
        let Preparation { plan, mut task, started } = preparation;
        let written = (&mut task.0).instrument(span.clone()).await;
        let written = match written {
            Ok(Ok(written)) => written,
            Ok(Err(err)) => {
                self.count_discarded(&format!("it failed: {err}"), events);
                return Ok(None);
            }
            Err(err) => {
                self.count_discarded(&format!("its task ended: {err}"), events);
                return Ok(None);
            }
        };
        let Written { mut summary, usage, level } = written;
        // Stored now, streaming, then installed in one transaction: a process that dies between
        // the two leaves a summary that the next load marks cancelled.
        summary.created_at = now_ms();
        summary.updated_at = summary.created_at;
        summary.status = MessageStatus::Streaming;
        self.store.append_message(&summary).await?;
        let id = self.install(cache, &plan, summary, usage).instrument(span.clone()).await?;
        self.preparation_counters.used.fetch_add(1, Ordering::Relaxed);
        let waited = waiting.elapsed();
        let tokens_after = self.estimate(cache);
        span.record("phosphor.compaction.tokens_after", tokens_after);
        span.record("phosphor.compaction.waited_ms", waited.as_millis() as u64);
        span.record("phosphor.compaction.prepared_ms", started.elapsed().as_millis() as u64);
        if running {
            tracing::debug!(parent: &span, waited_ms = waited.as_millis() as u64, "waited for the prepared summary");
        }
        emit(
            events,
            AgentEvent::CompactionFinished {
                summary_message_id: id.clone(),
                model: model.clone(),
                tokens_before,
                tokens_after,
                duration_ms: waited.as_millis() as u64,
                shed_level: level,
                prepared: true,
            },
        );
        Ok(Some(CompactionReport {
            summary_message_id: id,
            reason,
            model,
            tokens_before,
            tokens_after,
            shed_level: level,
            duration: waited,
            prepared: true,
        }))
    }

    /// A compaction of the session as a summary prepared ahead makes it (`phosphor eval`'s
    /// `prepared` strategy): planned when the session held all but its newest `tail` tokens
    /// (before the request that answered them, as [`SessionAgent::prepare`] plans it), written,
    /// and installed with what came after its cut verbatim; when that does not fit under the
    /// triggers, the next summary folds it on top, as at a trigger.
    pub(crate) async fn compact_prepared(&self, session_id: &str, tail: u64) -> Result<CompactionReport> {
        self.with_session(session_id, None, async |cache: &mut Cache| {
            let started = Instant::now();
            let first = usize::from(cache.history.first().is_some_and(|m| m.is_summary));
            // Where the session stood: before the request whose answer starts the newest `tail`
            // tokens (a request is sent after a user message or a tool round, never mid-round).
            let counts = cache.ledger.counts();
            let (mut at, mut newest) = (cache.history.len(), 0);
            while at > first && newest + counts[at - 1] <= tail {
                at -= 1;
                newest += counts[at];
            }
            while at < cache.history.len() && cache.history[at].role != Role::Assistant {
                at += 1;
            }
            let user = cache.history[..at].iter().rposition(|m| m.role == Role::User);
            let later = cache.history.split_off(at);
            let masked = cache.masked.min(at);
            let ledger = std::mem::replace(
                &mut cache.ledger,
                shown_ledger(self.counter.as_ref(), &cache.history, masked),
            );
            let planned = self
                .summarizer_of(cache)
                .and_then(|summarizer| self.plan(cache, None, user, summarizer, None));
            cache.history.extend(later);
            cache.ledger = ledger;
            let plan = planned?;
            let model = plan.summarizer.info().model.clone();
            let tokens_before = self.estimate(cache);
            let mut summary = self.new_summary(&plan);
            let (level, usage) = write_summary(&plan, &self.options, &mut summary, None, None).await?;
            self.store.append_message(&summary).await?;
            let mut id = self.install(cache, &plan, summary, usage).await?;
            let info = self.model_of(cache).info();
            let (reserve, window) = (policy::reserve(info), info.context_window);
            if let Some(reason) = policy::trigger(self.estimate(cache), reserve, window, &self.options) {
                let user = cache.history.iter().rposition(|m| m.role == Role::User);
                match self.summarize(cache, reason, None, user, None).await {
                    Ok(report) => id = report.summary_message_id,
                    Err(AgentError::NothingToCompact) => {}
                    Err(err) => return Err(err),
                }
            }
            Ok(CompactionReport {
                summary_message_id: id,
                reason: CompactionReason::Manual,
                model,
                tokens_before,
                tokens_after: self.estimate(cache),
                shed_level: level,
                duration: started.elapsed(),
                prepared: true,
            })
        })
        .await
    }

    /// Throws the session's preparation away (aborting it if it still runs), counting it.
    pub(crate) fn discard(&self, cache: &mut Cache, reason: &str, events: Option<&EventSender>) {
        if cache.preparation.take().is_some() {
            self.count_discarded(reason, events);
        }
    }

    fn count_discarded(&self, reason: &str, events: Option<&EventSender>) {
        self.preparation_counters.discarded.fetch_add(1, Ordering::Relaxed);
        tracing::info!(reason, "discarded a prepared summary");
        emit(events, AgentEvent::PreparedSummaryDiscarded { reason: reason.to_owned() });
    }
}
