//! Measures what a compaction keeps: [probes] derived from a transcript, checked against the
//! context each [`Strategy`] leaves, strategy against strategy on the same transcripts
//! (`phosphor eval`).
//!
//! Each strategy turns a transcript into the context a model would be shown next, at one window
//! (the session model's `context_window`):
//!
//! - `original`: the transcript as it is (the upper bound; it may not fit the window);
//! - `truncate`: the oldest turns dropped until the request fits the window with the answer's
//!   reserve (the lower bound; the last turn always stays);
//! - `mask`: observation masking as the agent does it (tool outputs older than the newest
//!   `mask_keep_recent_tokens` replaced by placeholders; the latest tool round stays whole);
//! - `summary`: the agent's compaction (`/compact`), with the summary as the model wrote it;
//! - `summary+state-trail`: the same compaction with Phosphor's session-state trail, as the agent
//!   really stores it;
//! - `prepared`: the compaction a summary prepared ahead makes (`summarize_prepare_at`): cut when
//!   the session held all but its newest `(summarize_threshold - summarize_prepare_at) x window`
//!   tokens (with preparation off, [`EVAL_PREPARE_AT`]), those kept verbatim after it, and folded
//!   by a second summary on top when they do not fit; with the state trail.
//!
//! The two summary strategies come from one compaction: `summary` is its summary with the trail
//! cut off. The deterministic score of a probe is the share of its key strings the context holds
//! (compared [normalised](probes::normalize)); a kind's score is the mean over its probes, the
//! overall score the mean of the kinds that have probes. Scores are shares, 0 to 1.

pub mod aider;
pub mod claude_code;
pub mod judge;
pub mod probes;
pub mod report;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use phosphor_base::{ChatModel, ChatRequest, ChatStream, Message, ModelInfo, Role, TokenCounter};
use phosphor_store::{SessionStore, SqliteStore};

use crate::agent::SessionAgent;
use crate::error::{AgentError, Result};
use crate::policy;
use crate::shown::summary_as_context;
use crate::state;
pub use judge::{Judge, Verdict};
pub use probes::{Probe, ProbeKind};

/// A way to make a history fit (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Strategy {
    /// The history as it is.
    Original,
    /// Oldest turns dropped.
    Truncate,
    /// Old tool outputs masked.
    Mask,
    /// The model's summary alone.
    Summary,
    /// The model's summary and Phosphor's session-state trail.
    SummaryStateTrail,
    /// A summary prepared ahead, with the state trail, and what came after its cut.
    Prepared,
}

/// The `summarize_prepare_at` the `prepared` strategy assumes when the options turn preparation off.
pub const EVAL_PREPARE_AT: f64 = 0.6;

impl Strategy {
    /// Every strategy, in report order.
    pub const ALL: [Strategy; 6] = [
        Strategy::Original,
        Strategy::Truncate,
        Strategy::Mask,
        Strategy::Summary,
        Strategy::SummaryStateTrail,
        Strategy::Prepared,
    ];

    /// The strategy's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Original => "original",
            Strategy::Truncate => "truncate",
            Strategy::Mask => "mask",
            Strategy::Summary => "summary",
            Strategy::SummaryStateTrail => "summary+state-trail",
            Strategy::Prepared => "prepared",
        }
    }

    /// The strategy named `name`, or an error that lists the names.
    pub fn parse(name: &str) -> std::result::Result<Strategy, String> {
        Strategy::ALL.into_iter().find(|s| s.name() == name).ok_or_else(|| {
            let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
            format!("unknown strategy {name:?}: expected one of {}", names.join(", "))
        })
    }

    fn summarizes(self) -> bool {
        matches!(self, Strategy::Summary | Strategy::SummaryStateTrail | Strategy::Prepared)
    }
}

/// One transcript to evaluate.
#[derive(Debug, Clone)]
pub struct EvalTranscript {
    /// Where it came from (a file name), for reports.
    pub source: String,
    /// Its leading system messages' text (the agent's system prompt).
    pub system_prompt: String,
    /// The rest of its messages.
    pub messages: Vec<Message>,
}

/// Builds the agent that compacts one transcript, on the given store, with the given system prompt.
pub type AgentBuilder = Box<dyn Fn(Arc<dyn SessionStore>, &str) -> SessionAgent + Send + Sync>;

/// What the agent's models and options are for an evaluation.
pub struct EvalSetup {
    /// The agent of each transcript; its session model's window is the evaluation's window.
    pub agent: AgentBuilder,
    /// The strategies, in report order.
    pub strategies: Vec<Strategy>,
    /// With a judge, every probe is also answered from each context and graded 0 to 5.
    pub judge: Option<Judge>,
}

/// A model with another context window: the evaluation's window, whatever the model's own.
pub struct Windowed {
    inner: Arc<dyn ChatModel>,
    info: ModelInfo,
}

impl Windowed {
    /// `model`, said to have a `window`-token context window (its output limit capped to a quarter
    /// of it, as [`policy::reserve`] would).
    pub fn wrap(model: Arc<dyn ChatModel>, window: u64) -> Arc<dyn ChatModel> {
        let mut info = model.info().clone();
        info.context_window = window;
        Arc::new(Windowed { inner: model, info })
    }
}

impl ChatModel for Windowed {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn stream(&self, request: ChatRequest) -> ChatStream {
        self.inner.stream(request)
    }

    fn counter(&self) -> Arc<dyn TokenCounter> {
        self.inner.counter()
    }

    fn parameters(&self) -> Option<u64> {
        self.inner.parameters()
    }
}

/// One strategy's result on one transcript.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The strategy.
    pub strategy: Strategy,
    /// The context it leaves, as a model is shown it.
    pub context: Vec<Message>,
    /// Request tokens before (the transcript) and after (the context), with the system prompt.
    pub tokens_before: u64,
    /// See `tokens_before`.
    pub tokens_after: u64,
    /// Seconds it took (the compaction's, for the summary strategies).
    pub seconds: f64,
}

/// Scores of one strategy: the deterministic ones are shares from 0 to 1, the judged ones grades
/// from 0 to 5 (`None`: no probe of that kind).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Scores {
    /// Files and commands.
    pub artifact: Option<f64>,
    /// Facts.
    pub recall: Option<f64>,
    /// Requests and constraints.
    pub intent: Option<f64>,
    /// Task state at the end.
    pub continuation: Option<f64>,
    /// The mean of the kinds above that have probes.
    pub overall: Option<f64>,
}

impl Scores {
    /// The means of the probes' scores `kept` (each probe's kind and score).
    pub fn of(kept: impl IntoIterator<Item = (ProbeKind, f64)>) -> Scores {
        let mut sums: BTreeMap<&'static str, (f64, usize)> = BTreeMap::new();
        for (kind, share) in kept {
            let entry = sums.entry(kind.as_str()).or_default();
            entry.0 += share;
            entry.1 += 1;
        }
        let mean = |kind: ProbeKind| sums.get(kind.as_str()).map(|(sum, n)| sum / *n as f64);
        let kinds: Vec<f64> = ProbeKind::ALL.into_iter().filter_map(mean).collect();
        Scores {
            artifact: mean(ProbeKind::Artifact),
            recall: mean(ProbeKind::Recall),
            intent: mean(ProbeKind::Intent),
            continuation: mean(ProbeKind::Continuation),
            overall: (!kinds.is_empty()).then(|| kinds.iter().sum::<f64>() / kinds.len() as f64),
        }
    }

    /// The score of `kind`.
    pub fn get(&self, kind: ProbeKind) -> Option<f64> {
        match kind {
            ProbeKind::Artifact => self.artifact,
            ProbeKind::Recall => self.recall,
            ProbeKind::Intent => self.intent,
            ProbeKind::Continuation => self.continuation,
        }
    }
}

/// One strategy over every transcript.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StrategyResult {
    /// The strategy's name.
    pub name: &'static str,
    /// Request tokens of the transcripts, summed.
    pub tokens_before: u64,
    /// Request tokens of the contexts the strategy left, summed.
    pub tokens_after: u64,
    /// `tokens_before / tokens_after`.
    pub compression: f64,
    /// Whether every context fits the window with the answer's reserve.
    pub fits_window: bool,
    /// Seconds, summed.
    pub seconds: f64,
    /// Deterministic scores over every probe of every transcript.
    pub scores: Scores,
    /// What the judge made of this strategy's contexts (with a judge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judged: Option<Judged>,
}

/// The judged mode's result for one strategy.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Judged {
    /// Mean grades, 0 to 5, over the probes the judge graded.
    pub scores: Scores,
    /// Probes graded.
    pub graded: usize,
    /// Probes not asked: the context does not fit the answering model's window.
    pub unfit: usize,
    /// Probes the judge replied to without a grade.
    pub no_grade: usize,
}

impl Judged {
    fn of(verdicts: &[(ProbeKind, Verdict)]) -> Judged {
        let count = |f: fn(&Verdict) -> bool| verdicts.iter().filter(|(_, v)| f(v)).count();
        Judged {
            scores: Scores::of(verdicts.iter().filter_map(|(kind, v)| match v {
                Verdict::Grade(g) => Some((*kind, f64::from(*g))),
                _ => None,
            })),
            graded: count(|v| matches!(v, Verdict::Grade(_))),
            unfit: count(|v| matches!(v, Verdict::Unfit)),
            no_grade: count(|v| matches!(v, Verdict::NoGrade(_))),
        }
    }
}

/// One transcript as evaluated.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TranscriptResult {
    /// Where it came from.
    pub source: String,
    /// Its messages (without the system prompt).
    pub messages: usize,
    /// Its request tokens.
    pub tokens: u64,
    /// Its probes.
    pub probes: usize,
}

/// One probe and what each strategy kept of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProbeResult {
    /// The index of its transcript in [`Evaluation::transcripts`].
    pub transcript: usize,
    /// The probe.
    #[serde(flatten)]
    pub probe: Probe,
    /// Strategy name → the share of the probe's keys its context holds.
    pub kept: BTreeMap<&'static str, f64>,
    /// Strategy name → the judge's verdict; empty without a judge.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub judged: BTreeMap<&'static str, Verdict>,
}

/// An evaluation: every strategy on every transcript.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Evaluation {
    /// The window every strategy fits to.
    pub window: u64,
    /// The summarizer the summary strategies used.
    pub summarizer: String,
    /// The transcripts.
    pub transcripts: Vec<TranscriptResult>,
    /// The strategies, in the order asked for.
    pub strategies: Vec<StrategyResult>,
    /// Every probe with what each strategy kept.
    pub probes: Vec<ProbeResult>,
}

/// Runs every strategy of `setup` on every transcript; `progress` hears what is happening (one
/// line at a time, for stderr).
pub async fn evaluate(
    setup: &EvalSetup,
    transcripts: &[EvalTranscript],
    progress: &mut (dyn FnMut(String) + Send),
) -> Result<Evaluation> {
    let store = SqliteStore::in_memory().await?;
    let shared: Arc<dyn SessionStore> = Arc::new(store.clone());
    let mut evaluation = Evaluation {
        window: 0,
        summarizer: String::new(),
        transcripts: Vec::new(),
        strategies: setup
            .strategies
            .iter()
            .map(|s| StrategyResult {
                name: s.name(),
                tokens_before: 0,
                tokens_after: 0,
                compression: 1.0,
                fits_window: true,
                seconds: 0.0,
                scores: Scores::default(),
                judged: None,
            })
            .collect(),
        probes: Vec::new(),
    };
    let mut kept: Vec<Vec<(ProbeKind, f64)>> = vec![Vec::new(); setup.strategies.len()];
    let mut graded: Vec<Vec<(ProbeKind, Verdict)>> = vec![Vec::new(); setup.strategies.len()];
    if let Some(judge) = &setup.judge {
        judge.check()?;
    }
    let result = async {
        for (index, transcript) in transcripts.iter().enumerate() {
            let agent = (setup.agent)(shared.clone(), &transcript.system_prompt);
            evaluation.window = agent.models.large.info().context_window;
            evaluation.summarizer = agent.summarizer()?.info().model.clone();
            let probes = probes::derive(&transcript.messages);
            let outcomes = run_strategies(&agent, transcript, &setup.strategies, progress).await?;
            let tokens = outcomes.first().map_or(0, |o| o.tokens_before);
            evaluation.transcripts.push(TranscriptResult {
                source: transcript.source.clone(),
                messages: transcript.messages.len(),
                tokens,
                probes: probes.len(),
            });
            let contexts: Vec<String> =
                outcomes.iter().map(|o| probes::normalize(&probes::context_text(&o.context))).collect();
            let reserve = policy::reserve(agent.models.large.info());
            for (slot, outcome) in outcomes.iter().enumerate() {
                let result = &mut evaluation.strategies[slot];
                result.tokens_before += outcome.tokens_before;
                result.tokens_after += outcome.tokens_after;
                result.seconds += outcome.seconds;
                result.fits_window &= outcome.tokens_after + reserve <= evaluation.window;
            }
            // The answering model counts the contexts with its own tokenizer, at its own window.
            let answer_tokens: Vec<u64> = match &setup.judge {
                Some(judge) => {
                    let counter = judge.answerer.counter();
                    progress(format!(
                        "{}: {} answers {} probes from {} contexts, {} grades them…",
                        transcript.source,
                        judge.answerer.info().model,
                        probes.len(),
                        outcomes.len(),
                        judge.judge.info().model
                    ));
                    outcomes
                        .iter()
                        .map(|o| {
                            let tokens: u64 = o.context.iter().map(|m| counter.count_message(m)).sum();
                            policy::fixed_tokens(&transcript.system_prompt, &[], counter.as_ref()) + tokens
                        })
                        .collect()
                }
                None => Vec::new(),
            };
            for probe in probes {
                let mut shares = BTreeMap::new();
                let mut grades = BTreeMap::new();
                for (slot, outcome) in outcomes.iter().enumerate() {
                    let share = probes::kept_share(&probe, &contexts[slot]);
                    kept[slot].push((probe.kind, share));
                    shares.insert(outcome.strategy.name(), share);
                    if let Some(judge) = &setup.judge {
                        let mut context = Vec::with_capacity(outcome.context.len() + 1);
                        if !transcript.system_prompt.is_empty() {
                            context.push(Message::system(transcript.system_prompt.clone()));
                        }
                        context.extend(outcome.context.iter().cloned());
                        let verdict = judge.grade(&probe, &context, answer_tokens[slot]).await?;
                        if let Verdict::NoGrade(reply) = &verdict {
                            progress(format!(
                                "warning: {}: the judge gave no grade ({} probe, {}): {reply:?}",
                                transcript.source,
                                probe.kind.as_str(),
                                outcome.strategy.name()
                            ));
                        }
                        graded[slot].push((probe.kind, verdict.clone()));
                        grades.insert(outcome.strategy.name(), verdict);
                    }
                }
                evaluation.probes.push(ProbeResult {
                    transcript: index,
                    probe,
                    kept: shares,
                    judged: grades,
                });
            }
        }
        Ok::<(), AgentError>(())
    }
    .await;
    store.close().await;
    result?;
    for (slot, result) in evaluation.strategies.iter_mut().enumerate() {
        result.scores = Scores::of(kept[slot].iter().copied());
        result.judged = setup.judge.as_ref().map(|_| Judged::of(&graded[slot]));
        result.compression = result.tokens_before as f64 / result.tokens_after.max(1) as f64;
    }
    Ok(evaluation)
}

/// Every strategy of `strategies` on one transcript, in that order.
pub async fn run_strategies(
    agent: &SessionAgent,
    transcript: &EvalTranscript,
    strategies: &[Strategy],
    progress: &mut (dyn FnMut(String) + Send),
) -> Result<Vec<Outcome>> {
    let counter = agent.counter.clone();
    let count = |messages: &[Message]| -> u64 {
        agent.own_fixed_tokens()
            + messages.iter().map(|m| counter.count_message(&summary_as_context(m))).sum::<u64>()
    };
    let messages = &transcript.messages;
    let tokens_before = count(messages);
    let info = agent.models.large.info().clone();
    let options = agent.options();
    let mut compacted: Option<(Vec<Message>, f64)> = None;
    let mut outcomes = Vec::new();
    for &strategy in strategies {
        let started = Instant::now();
        let mut seconds = None;
        let context: Vec<Message> = match strategy {
            Strategy::Original => messages.clone(),
            Strategy::Truncate => {
                let mut kept: Vec<Cow<'_, Message>> = messages.iter().map(Cow::Borrowed).collect();
                let window = info.context_window.saturating_sub(policy::reserve(&info));
                while count(&kept.iter().map(|m| m.as_ref().clone()).collect::<Vec<_>>()) > window
                    && phosphor_prune::drop_oldest_turns(&mut kept, 1) > 0
                {}
                kept.into_iter().map(Cow::into_owned).collect()
            }
            Strategy::Mask => {
                let counts: Vec<u64> = messages.iter().map(|m| counter.count_message(m)).collect();
                let keep = policy::mask_keep_budget(options, info.context_window);
                let mut shown: Vec<Cow<'_, Message>> = messages.iter().map(Cow::Borrowed).collect();
                if let Some(until) = policy::mask_point(messages, &counts, 0, keep, 0) {
                    phosphor_prune::mask_tool_traffic(&mut shown, until);
                }
                shown.into_iter().map(Cow::into_owned).collect()
            }
            Strategy::Summary | Strategy::SummaryStateTrail => {
                if compacted.is_none() {
                    progress(format!(
                        "{}: compacting with {}…",
                        transcript.source,
                        agent.summarizer()?.info().model
                    ));
                    compacted = Some(compact(agent, transcript).await?);
                }
                let (history, took) = compacted.clone().unwrap_or_default();
                seconds = Some(took);
                history
                    .iter()
                    .map(|m| {
                        let mut shown = summary_as_context(m).into_owned();
                        if m.is_summary && strategy == Strategy::Summary {
                            let text = state::strip(&m.text_content()).trim_end().to_owned();
                            shown =
                                summary_as_context(&Message { is_summary: true, ..Message::assistant(text) })
                                    .into_owned();
                        }
                        shown.is_summary = false;
                        shown
                    })
                    .collect()
            }
            Strategy::Prepared => {
                progress(format!(
                    "{}: compacting as prepared ahead with {}…",
                    transcript.source,
                    agent.summarizer()?.info().model
                ));
                let (history, took) = compact_prepared(agent, transcript).await?;
                seconds = Some(took);
                history
                    .iter()
                    .map(|m| Message { is_summary: false, ..summary_as_context(m).into_owned() })
                    .collect()
            }
        };
        let tokens_after = count(&context);
        let seconds = seconds.unwrap_or_else(|| started.elapsed().as_secs_f64());
        if !strategy.summarizes() {
            progress(format!(
                "{}: {} keeps {tokens_after} of {tokens_before} tokens",
                transcript.source,
                strategy.name()
            ));
        }
        outcomes.push(Outcome { strategy, context, tokens_before, tokens_after, seconds });
    }
    Ok(outcomes)
}

/// The agent's compaction of `transcript`: the history it leaves, and the seconds it took.
async fn compact(agent: &SessionAgent, transcript: &EvalTranscript) -> Result<(Vec<Message>, f64)> {
    let session = agent.create_session(transcript.source.clone()).await?;
    agent.import_messages(&session, &transcript.messages).await?;
    let report = agent.compact(&session.id, None, None).await?;
    let history = agent.store().history(&session.id).await?;
    Ok((history, report.duration.as_secs_f64()))
}

/// The compaction of `transcript` a summary prepared ahead makes (the `prepared` strategy): the
/// history it leaves, and the seconds it took. With nothing to fold before the newest tokens, no
/// summary would have been prepared, and the compaction at the trigger is the inline one.
async fn compact_prepared(agent: &SessionAgent, transcript: &EvalTranscript) -> Result<(Vec<Message>, f64)> {
    let options = agent.options();
    let prepare_at =
        if options.summarize_prepare_at > 0.0 { options.summarize_prepare_at } else { EVAL_PREPARE_AT };
    let window = agent.models.large.info().context_window;
    let tail = ((options.summarize_threshold - prepare_at).max(0.0) * window as f64) as u64;
    let session = agent.create_session(transcript.source.clone()).await?;
    agent.import_messages(&session, &transcript.messages).await?;
    let report = match agent.compact_prepared(&session.id, tail).await {
        Err(AgentError::NothingToCompact) => agent.compact(&session.id, None, None).await?,
        report => report?,
    };
    let history = agent.store().history(&session.id).await?;
    Ok((history, report.duration.as_secs_f64()))
}

/// Splits a transcript into its leading system messages, the rest, and the system prompt the
/// agent is given: the leading system messages' text joined by blank lines (the agent sends it as
/// one system message).
pub fn split_system(messages: &[Message]) -> (&[Message], &[Message], String) {
    let count = messages.iter().take_while(|m| m.role == Role::System).count();
    let (system, rest) = messages.split_at(count);
    let prompt = system.iter().map(Message::text_content).collect::<Vec<_>>().join("\n\n");
    (system, rest, prompt)
}
