//! What `phosphor serve` adds to one request: a single client, SQLite, a loopback OpenAI-compatible
//! upstream that answers at once (the testkit's mock), and a window large enough that no
//! compaction runs, so what is measured is the proxy's own work on an ordinary request: reading the
//! request, finding the session it continues, storing what is new, writing the upstream request,
//! relaying the answer, storing it. Each turn of one growing conversation (up to 200 messages) is
//! sent three ways, in turn: straight to an upstream of its own (the reference), through the proxy's
//! chat-completions front, and through its Anthropic Messages front. Prints the latency percentiles
//! side by side and what the proxy adds at the median; the target is at most 5 ms at p50.
//!
//! `cargo xtask bench serve_latency` (or `cargo bench -p phosphor-cli --bench serve_latency`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot set up has nothing to measure

use std::sync::Arc;
use std::time::Instant;

use phosphor_testkit::{MockServer, RecordedRequest, sse_text};
use serde_json::{Value, json};

mod common;
use common::{Proxy, percentile};

const TURNS: usize = 100;
/// Words of each user request (about 225 tokens): 100 turns stay far under the window.
const WORDS: usize = 100;
const WINDOW: u64 = 1_000_000;
/// What the proxy may add at the median, in milliseconds.
const TARGET_MS: f64 = 5.0;

fn main() {
    if common::selected("serve_latency") {
        common::runtime().block_on(run());
    }
}

fn start_proxy(dir: &std::path::Path) -> Proxy {
    let mut command = common::phosphor_in(dir);
    command.arg("--db").arg(dir.join("sessions.db")).arg("serve");
    common::start_proxy(command)
}

/// The mock upstream's every answer.
const ANSWER: &str = "Noted.";

/// POSTs `body` (streamed, as agents ask) to `url` in the session `name`, reads the whole stream;
/// the seconds it took.
async fn post(client: &reqwest::Client, url: &str, name: &str, body: &Value) -> f64 {
    let started = Instant::now();
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("x-phosphor-session", name)
        .body(body.to_string())
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    let seconds = started.elapsed().as_secs_f64();
    assert!(status == 200 && text.contains(ANSWER), "{url}: {status} {text}");
    seconds
}

async fn run() {
    let answer = Arc::new(|_: &RecordedRequest| sse_text(&[ANSWER], Some((10, 3))));
    let reference = MockServer::start_responding(answer.clone()).await;
    let upstream = MockServer::start_responding(answer).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = json!({
        "providers": { "mock": { "base_url": upstream.base_url() } },
        "models": { "large": { "provider": "mock", "model": "mock-large", "context_window": WINDOW, "max_output_tokens": 100 } }
    });
    std::fs::write(dir.path().join("phosphor.json"), config.to_string()).expect("config");
    let proxy = start_proxy(dir.path());
    let http = reqwest::Client::new();

    // One conversation, three ways; each turn's three requests back to back, so that whatever
    // else the machine does falls on all three alike.
    let ways = [
        ("straight to the upstream", format!("{}/chat/completions", reference.base_url()), false),
        ("through serve, chat completions", format!("{}/v1/chat/completions", proxy.url), false),
        ("through serve, Anthropic Messages", format!("{}/v1/messages", proxy.url), true),
    ];
    let mut latencies = vec![Vec::new(); ways.len()];
    let mut histories = vec![Vec::<Value>::new(); ways.len()];
    for turn in 0..TURNS {
        let words: String = (0..WORDS).map(|w| format!("t{turn}w{w} ")).collect();
        for (way, (_, url, anthropic)) in ways.iter().enumerate() {
            let history = &mut histories[way];
            history.push(json!({"role": "user", "content": format!("request {turn}: {words}")}));
            let body = if *anthropic {
                json!({"model": "mock-large", "max_tokens": 100, "system": "Be brief.", "messages": history, "stream": true})
            } else {
                let mut messages = vec![json!({"role": "system", "content": "Be brief."})];
                messages.extend(history.iter().cloned());
                json!({"model": "mock-large", "messages": messages, "stream": true})
            };
            let seconds = post(&http, url, &format!("latency-{way}"), &body).await;
            history.push(json!({"role": "assistant", "content": ANSWER}));
            // The first turns warm the connection pools and the proxy's caches.
            if turn >= 5 {
                latencies[way].push(seconds);
            }
        }
    }
    drop(proxy);

    println!(
        "serve_latency: 1 client, SQLite, loopback upstream, {TURNS} turns of one conversation (to {} messages), \
         {} CPUs",
        TURNS * 2,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("| | requests | p50 ms | p90 ms | p99 ms | p50 of the first 20 | p50 of the last 20 |");
    println!("|---|---|---|---|---|---|---|");
    let ms = |s: f64| s * 1_000.0;
    let median = |part: &[f64]| {
        let mut part = part.to_vec();
        part.sort_by(f64::total_cmp);
        ms(percentile(&part, 0.5))
    };
    for ((name, ..), latencies) in ways.iter().zip(&mut latencies) {
        let (first, last) = (median(&latencies[..20]), median(&latencies[latencies.len() - 20..]));
        latencies.sort_by(f64::total_cmp);
        println!(
            "| {name} | {} | {:.2} | {:.2} | {:.2} | {first:.2} | {last:.2} |",
            latencies.len(),
            ms(percentile(latencies, 0.5)),
            ms(percentile(latencies, 0.9)),
            ms(percentile(latencies, 0.99))
        );
    }
    let reference_p50 = percentile(&latencies[0], 0.5);
    for ((name, ..), latencies) in ways.iter().zip(&latencies).skip(1) {
        let added = ms(percentile(latencies, 0.5) - reference_p50);
        let verdict = if added <= TARGET_MS { "within" } else { "OVER" };
        println!("added at p50, {name}: {added:.2} ms ({verdict} the {TARGET_MS} ms target)");
    }

    // What the upstream got: every request of the conversation, nothing compacted.
    let sent = upstream.requests();
    assert_eq!(sent.len(), TURNS * 2, "the proxy sent {} requests for {} turns", sent.len(), TURNS * 2);
}
