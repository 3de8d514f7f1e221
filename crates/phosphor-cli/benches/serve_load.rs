//! Load on `phosphor serve`: two proxies on one Postgres database, 16 clients of 20 turns each,
//! every client sending each request to one proxy or the other in turn, against a local
//! OpenAI-compatible server (the testkit's mock, which answers at once) with a 2,000-token window,
//! so compactions run under load. The same requests are first sent straight to an upstream of
//! their own, the reference: the difference is what the proxies add (storing, recognising the
//! session, locks, compaction). Prints requests per second and latency percentiles side by side,
//! then checks the invariants and fails if one does not hold: every message stored once and in
//! order, one stored summary per summary request, every upstream request within the window, tool
//! calls and results paired.
//!
//! `cargo xtask bench serve_load` starts a throwaway Postgres (scripts/test-postgres.sh) and runs
//! it; by hand, set `PHOSPHOR_TEST_POSTGRES` to a server's URL.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot set up has nothing to measure

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use phosphor_base::{ApproxCounter, TokenCounter};
use phosphor_testkit::{MockServer, RecordedRequest, sse_text};
use serde_json::{Value, json};

mod common;
use common::{Proxy, percentile};

const CLIENTS: usize = 16;
const TURNS: usize = 20;
const WINDOW: u64 = 2_000;
/// Words of each user request (about 225 tokens): a client's history passes the window's
/// compaction threshold every six turns or so.
const WORDS: usize = 100;
const KEY_VAR: &str = "PHOSPHOR_BENCH_API_KEY";

fn main() {
    if !common::selected("serve_load") {
        return;
    }
    let Ok(url) = std::env::var("PHOSPHOR_TEST_POSTGRES") else {
        eprintln!(
            "serve_load: needs a Postgres server: run `cargo xtask bench serve_load`, which starts one, \
             or set PHOSPHOR_TEST_POSTGRES"
        );
        std::process::exit(1);
    };
    common::runtime().block_on(run(&url));
}

fn phosphor(dir: &std::path::Path, db: &str) -> Command {
    let mut command = common::phosphor_in(dir);
    command.env(KEY_VAR, "bench-key").args(["--db", db]);
    command
}

fn start_proxy(dir: &std::path::Path, db: &str) -> Proxy {
    let mut command = phosphor(dir, db);
    command.args(["serve", "--max-concurrent", "64"]);
    common::start_proxy(command)
}

/// Sends `body`; (status, body text, seconds).
async fn post(client: &reqwest::Client, url: &str, name: Option<&str>, body: &Value) -> (u16, String, f64) {
    let started = Instant::now();
    let mut request = client
        .post(format!("{url}/chat/completions"))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(name) = name {
        request = request.header("x-phosphor-session", name);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (status, text, started.elapsed().as_secs_f64())
}

fn request_text(client: usize, turn: usize) -> String {
    let words: String = (0..WORDS).map(|w| format!("c{client}t{turn}w{w} ")).collect();
    format!("client {client}, request {turn}: {words}")
}

/// The answer's text, from a JSON completion or an SSE stream.
fn answer_of(body: &str) -> String {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        return value["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_owned();
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect()
}

/// Every client's conversation against `target(client, turn)`: each client's turns in order, the
/// clients concurrently. Returns each request's latency and each client's history.
async fn drive(
    target: Arc<dyn Fn(usize, usize) -> (String, Option<String>) + Send + Sync>,
) -> (Vec<f64>, Vec<Vec<Value>>, f64) {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let target = target.clone();
        tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut history = vec![json!({"role": "system", "content": "You are a helpful assistant."})];
            let mut latencies = Vec::new();
            for turn in 0..TURNS {
                history.push(json!({"role": "user", "content": request_text(client, turn)}));
                let (url, name) = target(client, turn);
                let body = json!({"model": "mock-large", "messages": history, "stream": turn % 3 == 2});
                let (status, text, seconds) = post(&http, &url, name.as_deref(), &body).await;
                assert_eq!(status, 200, "client {client} turn {turn}: {text}");
                latencies.push(seconds);
                history.push(json!({"role": "assistant", "content": answer_of(&text)}));
            }
            (latencies, history)
        }));
    }
    let mut latencies = Vec::new();
    let mut histories = Vec::new();
    for task in tasks {
        let (l, h) = task.await.expect("client");
        latencies.extend(l);
        histories.push(h);
    }
    (latencies, histories, started.elapsed().as_secs_f64())
}

fn is_summary(request: &RecordedRequest) -> bool {
    request.body["messages"].as_array().is_some_and(|m| {
        m.iter().any(|m| {
            m["content"].as_str().is_some_and(|c| c.contains("You are summarizing the conversation"))
        })
    })
}

async fn run(db: &str) {
    let answers = |n: usize| (0..n).map(|i| sse_text(&[&format!("answer {i}")], Some((10, 3)))).collect();
    let reference = MockServer::start(answers(CLIENTS * TURNS)).await;
    let upstream = MockServer::start(answers(CLIENTS * TURNS * 3)).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = json!({
        "providers": { "mock": { "base_url": upstream.base_url(), "api_key_env": KEY_VAR } },
        "models": { "large": { "provider": "mock", "model": "mock-large", "context_window": WINDOW, "max_output_tokens": 100 } }
    });
    std::fs::write(dir.path().join("phosphor.json"), config.to_string()).expect("config");
    let proxies = [start_proxy(dir.path(), db), start_proxy(dir.path(), db)];
    let run_id = format!(
        "load-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis()
    );

    // The reference: the same conversations straight to an upstream (no compaction, no store).
    let base = reference.base_url();
    let (mut direct, _, direct_wall) = drive(Arc::new(move |_, _| (base.clone(), None))).await;
    // Through the proxies, each request to one or the other in turn.
    let urls: Vec<String> = proxies.iter().map(|p| format!("{}/v1", p.url)).collect();
    let names = run_id.clone();
    let (mut proxied, histories, proxied_wall) = drive(Arc::new(move |client, turn| {
        (urls[(client + turn) % 2].clone(), Some(format!("{names}-{client}")))
    }))
    .await;
    drop(proxies);

    direct.sort_by(f64::total_cmp);
    proxied.sort_by(f64::total_cmp);
    let requests = CLIENTS * TURNS;
    let ms = |s: f64| s * 1_000.0;
    println!(
        "serve_load: 2 proxies on one Postgres, {CLIENTS} clients x {TURNS} turns, {WINDOW}-token window, \
         {} CPUs",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("| | requests | seconds | requests/s | p50 ms | p99 ms |");
    println!("|---|---|---|---|---|---|");
    for (name, latencies, wall) in
        [("straight to the upstream", &direct, direct_wall), ("through the proxies", &proxied, proxied_wall)]
    {
        println!(
            "| {name} | {requests} | {wall:.2} | {:.0} | {:.1} | {:.1} |",
            requests as f64 / wall,
            ms(percentile(latencies, 0.5)),
            ms(percentile(latencies, 0.99))
        );
    }
    println!(
        "added by the proxies: p50 {:.1} ms, p99 {:.1} ms",
        ms(percentile(&proxied, 0.5) - percentile(&direct, 0.5)),
        ms(percentile(&proxied, 0.99) - percentile(&direct, 0.99))
    );

    // The invariants.
    let sent = upstream.requests();
    let summary_requests = sent.iter().filter(|r| is_summary(r)).count();
    let mut largest = 0;
    for (i, request) in sent.iter().enumerate() {
        let messages =
            phosphor_wire::chat::from_openai(request.body["messages"].as_array().expect("messages"))
                .expect("an upstream request's messages");
        phosphor_prune::check_tool_pairing(&messages)
            .unwrap_or_else(|v| panic!("upstream request {i}: {v:?}"));
        let tokens =
            ApproxCounter.count_request(&phosphor_base::ChatRequest { messages, ..Default::default() });
        largest = largest.max(tokens);
    }
    assert!(largest <= WINDOW, "an upstream request of {largest} tokens, over the {WINDOW}-token window");
    let mut stored_summaries = 0;
    for (client, history) in histories.iter().enumerate() {
        let output = phosphor(dir.path(), db)
            .args(["sessions", "export", "--jsonl", &format!("{run_id}-{client}")])
            .output()
            .expect("sessions export");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let stored: Vec<Value> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        stored_summaries += stored.iter().filter(|m| m["is_summary"] == true).count();
        let plain: Vec<&str> = stored
            .iter()
            .filter(|m| m["is_summary"] != true)
            .map(|m| m["content"].as_str().unwrap_or(""))
            .collect();
        let expected: Vec<&str> = history[1..].iter().map(|m| m["content"].as_str().unwrap_or("")).collect();
        assert_eq!(plain, expected, "client {client}: stored messages differ from what it sent and got");
    }
    assert_eq!(stored_summaries, summary_requests, "stored summaries against summary requests upstream");
    assert!(summary_requests > 0, "no compaction ran: the load did not reach the window");
    println!(
        "compactions: {summary_requests} (one stored summary per summary request); messages: {} stored once, in \
         order; largest upstream request: {largest} tokens of {WINDOW}; {} upstream requests paired",
        CLIENTS * TURNS * 2,
        sent.len()
    );
}
