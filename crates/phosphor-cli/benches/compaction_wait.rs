//! How long the turn that reaches `summarize_threshold` waits, with the summary written at the
//! trigger (inline, `summarize_prepare_at: 0`) and prepared in the background
//! (`summarize_prepare_at: 0.4` and `0.5`). A 40-turn session on an 8,000-token window, every turn about
//! 430 tokens, a session model that answers in 1 s and a summarizer (`summarize_model: "small"`)
//! that takes 5 s per summary; several compactions. Run two ways: in the agent (the in-process
//! `SessionAgent` on scripted models, as `phosphor run` and `chat` use it) and through `phosphor
//! serve` (a stateless client sending its whole history, loopback upstreams that answer after
//! the same delays). Prints each compaction turn's latency as a multiple of an ordinary turn's
//! (the median of the turns without one); the target is at most 1.2x when prepared.
//!
//! `cargo xtask bench compaction_wait` (or `cargo bench -p phosphor-cli --bench compaction_wait`).
//! It sleeps more than it computes: about 6 minutes, whatever the machine.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot set up has nothing to measure

use std::sync::Arc;
use std::time::{Duration, Instant};

use phosphor_agent::{Models, SessionAgent};
use phosphor_base::config::{Options, SummarizeModel};
use phosphor_base::{ModelInfo, Usage};
use phosphor_store::SqliteStore;
use phosphor_testkit::{MockServer, RecordedRequest, ScriptedModel, sse_text, text_turn};
use serde_json::json;

mod common;
use common::percentile;

const TURNS: usize = 40;
const WINDOW: u64 = 8_000;
/// How long the session model takes to answer, and the summarizer to write a summary.
const ANSWER: Duration = Duration::from_secs(1);
const SUMMARY: Duration = Duration::from_secs(5);
/// `summarize_prepare_at` of the prepared runs: 0.5 leaves the summary the 30% of the window
/// between it and the threshold (about 5.5 turns here, more than one summary takes), and the
/// session after the swap (the kept 30% and the summary with its trail, about 16%) under it; 0.4
/// leaves the session over it after the swap, so the next preparation starts late.
const PREPARE_AT: [f64; 2] = [0.4, 0.5];
/// The most a compaction turn may take, as a multiple of an ordinary turn, when prepared.
const TARGET: f64 = 1.2;

fn main() {
    if common::selected("compaction_wait") {
        common::runtime().block_on(run());
    }
}

/// A request of about 430 tokens that names its turn.
fn prompt(turn: usize) -> String {
    format!("Task {turn}: {}", "please look at this part of the code again. ".repeat(38))
}

/// What one run of the session came to.
struct Run {
    /// Seconds of each turn.
    turns: Vec<f64>,
    /// The turns that compacted.
    compacted: Vec<usize>,
    /// Summaries prepared, used and discarded.
    prepared: (u64, u64, u64),
}

impl Run {
    /// The median of the turns that did not compact.
    fn ordinary(&self) -> f64 {
        let mut ordinary: Vec<f64> = self
            .turns
            .iter()
            .enumerate()
            .filter(|(turn, _)| !self.compacted.contains(turn))
            .map(|(_, seconds)| *seconds)
            .collect();
        ordinary.sort_by(f64::total_cmp);
        percentile(&ordinary, 0.5)
    }
}

fn options(prepare_at: f64) -> Options {
    Options {
        summarize_prepare_at: prepare_at,
        summarize_model: SummarizeModel::Small,
        mask_threshold: 0.0,
        ..Options::default()
    }
}

/// The session in the agent, on scripted models: the answer's two events and the summary's are
/// spaced so that each takes `ANSWER` and `SUMMARY`.
async fn in_agent(prepare_at: f64) -> Run {
    let info = |model: &str, window| ModelInfo {
        provider: "scripted".into(),
        model: model.into(),
        context_window: window,
        max_output_tokens: 400,
    };
    let usage = Some(Usage { input_tokens: 100, output_tokens: 5, ..Usage::default() });
    let main = Arc::new(
        ScriptedModel::new((0..TURNS).map(|i| text_turn(&format!("Answer {i}."), usage)).collect())
            .with_info(info("session-model", WINDOW))
            .with_event_delay(ANSWER / 2),
    );
    let summary = |i: usize| text_turn(&format!("Summary {i}: the user asked for tasks."), usage);
    let small = Arc::new(
        ScriptedModel::new((0..TURNS).map(summary).collect())
            .with_info(info("summarizer", 128_000))
            .with_event_delay(SUMMARY / 2),
    );
    let store = Arc::new(SqliteStore::in_memory().await.expect("store"));
    let models = Models { large: main.clone(), small: Some(small), embedded: None, configured_large: None };
    let agent = SessionAgent::new(store, models, options(prepare_at)).with_system_prompt("Be brief.");
    let session = agent.create_session("").await.expect("session").id;
    let mut run = Run { turns: Vec::new(), compacted: Vec::new(), prepared: (0, 0, 0) };
    for turn in 0..TURNS {
        let started = Instant::now();
        let outcome = agent.run_turn(&session, prompt(turn), None).await.expect("turn");
        run.turns.push(started.elapsed().as_secs_f64());
        if !outcome.compactions.is_empty() {
            run.compacted.push(turn);
        }
    }
    for request in main.requests() {
        let tokens = phosphor_base::TokenCounter::count_request(&phosphor_base::ApproxCounter, &request);
        assert!(tokens <= WINDOW, "a request of {tokens} tokens");
    }
    let counts = agent.preparations();
    run.prepared = (counts.started, counts.used, counts.discarded);
    run
}

/// The session through `phosphor serve`: a client that sends its whole history each turn (as
/// chat-completions clients do), an upstream for the session model and one for the summarizer.
async fn through_serve(prepare_at: f64) -> Run {
    let answer = Arc::new(|_: &RecordedRequest| sse_text(&["Noted."], Some((100, 5))).delayed(ANSWER));
    let summary = Arc::new(|_: &RecordedRequest| {
        sse_text(&["Summary: the user asked for tasks."], Some((1_000, 20))).delayed(SUMMARY)
    });
    let large = MockServer::start_responding(answer).await;
    let small = MockServer::start_responding(summary).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = json!({
        "options": { "summarize_prepare_at": prepare_at, "summarize_model": "small", "mask_threshold": 0 },
        "providers": { "large": { "base_url": large.base_url() }, "small": { "base_url": small.base_url() } },
        "models": {
            "large": { "provider": "large", "model": "mock-large", "context_window": WINDOW, "max_output_tokens": 400 },
            "small": { "provider": "small", "model": "mock-small", "context_window": 128_000, "max_output_tokens": 400 }
        }
    });
    std::fs::write(dir.path().join("phosphor.json"), config.to_string()).expect("config");
    let mut command = common::phosphor_in(dir.path());
    command.arg("--db").arg(dir.path().join("sessions.db")).arg("serve");
    let proxy = common::start_proxy(command);
    let http = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", proxy.url);
    let mut history = vec![json!({"role": "system", "content": "Be brief."})];
    let mut run = Run { turns: Vec::new(), compacted: Vec::new(), prepared: (0, 0, 0) };
    let mut shown_before = 0;
    for turn in 0..TURNS {
        history.push(json!({"role": "user", "content": prompt(turn)}));
        let body = json!({"model": "mock-large", "messages": history, "stream": true});
        let started = Instant::now();
        let response = http
            .post(&url)
            .header("content-type", "application/json")
            .header("x-phosphor-session", "compaction-wait")
            .body(body.to_string())
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        run.turns.push(started.elapsed().as_secs_f64());
        assert!(status == 200 && text.contains("Noted."), "turn {turn}: {status} {text}");
        history.push(json!({"role": "assistant", "content": "Noted."}));
        // The turn's upstream request shorter than the one before: the turn compacted.
        let sent = large.requests();
        let last = &sent.last().expect("a request").body;
        let shown = last["messages"].as_array().map_or(0, Vec::len);
        if shown < shown_before {
            run.compacted.push(turn);
        }
        shown_before = shown;
    }
    for request in large.requests() {
        let messages = request.body["messages"].as_array().expect("messages");
        let bytes: usize = messages.iter().map(|m| m["content"].as_str().map_or(0, str::len)).sum();
        assert!(bytes as u64 / 4 <= WINDOW, "an upstream request of about {} tokens", bytes / 4);
    }
    run.prepared.0 = small.requests().len() as u64;
    drop(proxy);
    run
}

async fn run() {
    println!(
        "compaction_wait: {TURNS} turns of ~430 tokens, {WINDOW}-token window, answers {ANSWER:?}, summaries \
         {SUMMARY:?}; {} CPUs",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "| where | summaries | compactions (turn) | ordinary turn s | compaction turns s | worst, x ordinary |"
    );
    println!("|---|---|---|---|---|---|");
    let runs = ["agent", "serve"]
        .into_iter()
        .flat_map(|place| [0.0].into_iter().chain(PREPARE_AT).map(move |at| (place, at)));
    for (place, prepare_at) in runs {
        let run = if place == "agent" { in_agent(prepare_at).await } else { through_serve(prepare_at).await };
        let ordinary = run.ordinary();
        let waits: Vec<f64> = run.compacted.iter().map(|&turn| run.turns[turn]).collect();
        let worst = waits.iter().copied().fold(0.0, f64::max) / ordinary;
        let mode = if prepare_at > 0.0 { format!("prepared at {prepare_at}") } else { "inline".to_owned() };
        let summaries = match (place, prepare_at > 0.0) {
            ("agent", true) => {
                let (started, used, discarded) = run.prepared;
                format!("{started} prepared, {used} used, {discarded} discarded")
            }
            _ => format!("{} written", run.prepared.0.max(run.compacted.len() as u64)),
        };
        println!(
            "| {place}, {mode} | {summaries} | {} ({}) | {ordinary:.2} | {} | {worst:.2}{} |",
            run.compacted.len(),
            run.compacted.iter().map(usize::to_string).collect::<Vec<_>>().join(", "),
            waits.iter().map(|w| format!("{w:.2}")).collect::<Vec<_>>().join(", "),
            if prepare_at > 0.0 { if worst <= TARGET { " (within 1.2)" } else { " (OVER 1.2)" } } else { "" }
        );
    }
}
