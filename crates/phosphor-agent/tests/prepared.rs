//! Summaries prepared in the background (`options.summarize_prepare_at`): installed at the
//! trigger, thrown away when the session changed under them or they failed, never half-written,
//! and with preparation off nothing of it happens.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use phosphor_agent::{AgentEvent, Models, Preparations, SessionAgent};
use phosphor_base::config::{Options, SummarizeModel};
use phosphor_base::{ChatRequest, Error, MessageStatus, ModelInfo, Role, TokenCounter, Usage};
use phosphor_store::{SessionStore, SqliteStore};
use phosphor_testkit::{ScriptedModel, text_turn};

const WINDOW: u64 = 8_000;

fn info(model: &str, window: u64, max_output: u64) -> ModelInfo {
    ModelInfo {
        provider: "scripted".into(),
        model: model.into(),
        context_window: window,
        max_output_tokens: max_output,
    }
}

fn usage(input: u64, output: u64) -> Option<Usage> {
    Some(Usage { input_tokens: input, output_tokens: output, ..Usage::default() })
}

/// A session model on an 8,000-token window answering each turn after `answer_delay`, and a
/// summarizer (`summarize_model: "small"`) writing each summary in about `summary_delay`.
struct Setup {
    agent: SessionAgent,
    store: Arc<SqliteStore>,
    main: Arc<ScriptedModel>,
    small: Arc<ScriptedModel>,
    session: String,
}

async fn setup(prepare_at: f64, summaries: Vec<phosphor_testkit::Script>, summary_delay: Duration) -> Setup {
    let main = Arc::new(
        ScriptedModel::new((0..60).map(|i| text_turn(&format!("Answer {i}."), usage(100, 5))).collect())
            .with_info(info("session-model", WINDOW, 400))
            .with_event_delay(Duration::from_millis(10)),
    );
    let small = Arc::new(
        ScriptedModel::new(summaries)
            .with_info(info("summarizer", 128_000, 400))
            .with_event_delay(summary_delay),
    );
    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    let options = Options {
        summarize_prepare_at: prepare_at,
        summarize_model: SummarizeModel::Small,
        mask_threshold: 0.0,
        ..Options::default()
    };
    let models =
        Models { large: main.clone(), small: Some(small.clone()), embedded: None, configured_large: None };
    let agent = SessionAgent::new(store.clone(), models, options).with_system_prompt("You are a test agent.");
    let session = agent.create_session("").await.unwrap().id;
    Setup { agent, store, main, small, session }
}

fn summaries(count: usize) -> Vec<phosphor_testkit::Script> {
    (0..count)
        .map(|i| text_turn(&format!("Summary {i}: the user asked for tasks."), usage(1_000, 20)))
        .collect()
}

/// A prompt of about 400 tokens that names its turn.
fn prompt(turn: usize) -> String {
    format!("Task {turn}: {}", "please look at this part of the code again. ".repeat(36))
}

fn collect(rx: &mut tokio::sync::mpsc::UnboundedReceiver<AgentEvent>) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    events
}

/// Every request the session model got: within the window, its turn's prompt verbatim.
fn check_requests(requests: &[ChatRequest], prompts: &[String]) {
    assert_eq!(requests.len(), prompts.len());
    for (request, prompt) in requests.iter().zip(prompts) {
        let tokens = phosphor_base::ApproxCounter.count_request(request);
        assert!(tokens <= WINDOW, "a request of {tokens} tokens on a {WINDOW}-token window");
        assert!(
            request.messages.iter().any(|m| m.role == Role::User && m.text_content() == *prompt),
            "the turn's prompt is sent verbatim"
        );
    }
}

#[tokio::test]
async fn prepared_summaries_are_installed_at_the_trigger_and_nothing_is_lost() {
    let s = setup(0.5, summaries(10), Duration::from_millis(60)).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut prompts = Vec::new();
    let mut compactions = Vec::new();
    for turn in 0..40 {
        prompts.push(prompt(turn));
        let outcome = s.agent.run_turn(&s.session, prompts[turn].clone(), Some(&tx)).await.unwrap();
        compactions.extend(outcome.compactions);
        // Give a preparation started in this turn the time a user takes to read the answer.
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let events = collect(&mut rx);
    assert!(compactions.len() >= 3, "several compactions in 40 turns: {}", compactions.len());
    for report in &compactions {
        assert!(report.prepared, "every compaction used a prepared summary: {report:?}");
        assert!(report.duration < Duration::from_millis(100), "nothing left to wait for: {report:?}");
    }
    let Preparations { started, used, discarded } = s.agent.preparations();
    eprintln!(
        "{} compactions, waits {:?}; preparations: {started} started, {used} used, {discarded} discarded",
        compactions.len(),
        compactions.iter().map(|c| c.duration).collect::<Vec<_>>()
    );
    assert_eq!(used, compactions.len() as u64);
    assert_eq!(discarded, 0, "no summary wasted");
    assert!(started <= used + 1, "at most one in progress beyond those used: {started} started");
    assert_eq!(s.small.requests().len() as u64, started, "each preparation is one summary request");
    let preparing = events.iter().filter(|e| matches!(e, AgentEvent::SummaryPreparing { .. })).count();
    assert_eq!(preparing as u64, started);
    check_requests(&s.main.requests(), &prompts);

    // Every message stored, each summary complete and the pointer on the newest.
    let stored = s.store.messages(&s.session).await.unwrap();
    let users = stored.iter().filter(|m| m.role == Role::User).count();
    assert_eq!(users, 40);
    let summaries: Vec<_> = stored.iter().filter(|m| m.is_summary).collect();
    assert_eq!(summaries.len(), compactions.len());
    assert!(summaries.iter().all(|m| m.status == MessageStatus::Complete));
    let session = s.store.session(&s.session).await.unwrap().unwrap();
    assert_eq!(session.summary_message_id.as_deref(), Some(summaries.last().unwrap().id.as_str()));
    // The summary of a later compaction builds on the earlier one (iterative), as inline.
    let second = &s.small.requests()[1];
    assert!(second.messages.iter().any(|m| m.text_content().contains("Summary 0")));
}

#[tokio::test]
async fn the_trigger_waits_for_a_preparation_still_running() {
    // The summary takes longer than the turns between prepare_at and the threshold.
    let s = setup(0.75, summaries(10), Duration::from_millis(400)).await;
    let mut compactions = Vec::new();
    for turn in 0..18 {
        let outcome = s.agent.run_turn(&s.session, prompt(turn), None).await.unwrap();
        compactions.extend(outcome.compactions);
    }
    let first = compactions.first().expect("a compaction ran");
    assert!(first.prepared);
    assert!(first.duration > Duration::ZERO);
    assert_eq!(s.agent.preparations().discarded, 0);
}

#[tokio::test]
async fn with_preparation_off_every_summary_is_written_at_the_trigger() {
    let s = setup(0.0, summaries(10), Duration::from_millis(1)).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut compactions = Vec::new();
    for turn in 0..20 {
        let outcome = s.agent.run_turn(&s.session, prompt(turn), Some(&tx)).await.unwrap();
        compactions.extend(outcome.compactions);
    }
    assert!(!compactions.is_empty());
    assert!(compactions.iter().all(|c| !c.prepared));
    assert_eq!(s.agent.preparations(), Preparations::default());
    let events = collect(&mut rx);
    assert!(!events.iter().any(|e| matches!(
        e,
        AgentEvent::SummaryPreparing { .. } | AgentEvent::PreparedSummaryDiscarded { .. }
    )));
}

#[tokio::test]
async fn a_preparation_the_session_outran_is_discarded_and_never_stored() {
    // A manual compaction while a summary is being prepared: the prepared one no longer applies.
    let s = setup(0.5, summaries(10), Duration::from_millis(300)).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut turn = 0;
    while s.agent.preparations().started == 0 {
        s.agent.run_turn(&s.session, prompt(turn), Some(&tx)).await.unwrap();
        turn += 1;
        assert!(turn < 15, "a preparation starts before the threshold");
    }
    let report = s.agent.compact(&s.session, None, Some(&tx)).await.unwrap();
    assert!(!report.prepared);
    assert_eq!(s.agent.preparations().discarded, 1);
    let events = collect(&mut rx);
    assert!(events.iter().any(|e| matches!(e, AgentEvent::PreparedSummaryDiscarded { .. })));
    // The aborted preparation wrote nothing: the only summary stored is the manual one.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let stored = s.store.messages(&s.session).await.unwrap();
    let summaries: Vec<_> = stored.iter().filter(|m| m.is_summary).collect();
    assert_eq!(summaries.len(), 1);
    assert_eq!(summaries[0].id, report.summary_message_id);
    assert_eq!(summaries[0].status, MessageStatus::Complete);
}

#[tokio::test]
async fn a_failed_preparation_leaves_the_trigger_to_compact_inline() {
    let mut scripts = vec![vec![Err(Error::Model("the summarizer is down".into()))]];
    scripts.extend(summaries(10));
    let s = setup(0.5, scripts, Duration::from_millis(1)).await;
    let mut compactions = Vec::new();
    for turn in 0..18 {
        let outcome = s.agent.run_turn(&s.session, prompt(turn), None).await.unwrap();
        compactions.extend(outcome.compactions);
    }
    let first = compactions.first().expect("a compaction ran");
    assert!(!first.prepared, "the failed preparation was replaced by an inline summary");
    let Preparations { discarded, .. } = s.agent.preparations();
    assert_eq!(discarded, 1);
    let stored = s.store.messages(&s.session).await.unwrap();
    assert_eq!(stored.iter().filter(|m| m.role == Role::User).count(), 18);
    assert!(stored.iter().filter(|m| m.is_summary).all(|m| m.status == MessageStatus::Complete));
}

#[tokio::test]
async fn dropping_the_agent_stops_the_preparation_and_the_session_stays_whole() {
    let s = setup(0.5, summaries(10), Duration::from_millis(500)).await;
    let mut turn = 0;
    while s.agent.preparations().started == 0 {
        s.agent.run_turn(&s.session, prompt(turn), None).await.unwrap();
        turn += 1;
    }
    let Setup { agent, store, small, session, .. } = s;
    drop(agent);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(small.requests().len(), 1, "the summary request was made");
    let stored = store.messages(&session).await.unwrap();
    assert!(stored.iter().all(|m| !m.is_summary), "nothing of it was stored");
    assert_eq!(stored.iter().filter(|m| m.role == Role::User).count(), turn);
}
