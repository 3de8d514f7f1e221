//! The agent's own cost per turn outside the model (estimate, prune, prompt, store), for sessions
//! of 100, 1,000 and 10,000 stored messages, and the cost of a compaction of a 10,000-message
//! session with an instant summarizer; each with the approximate counter and with an exact one
//! (tiktoken's o200k_base, what an OpenAI model gets), side by side.

#![allow(clippy::expect_used)] // a benchmark that cannot set up has nothing to measure

use std::sync::Arc;

use std::time::Duration;

use criterion::{BatchSize, Criterion, SamplingMode, criterion_group, criterion_main};
use futures::StreamExt;
use phosphor_agent::{Models, SessionAgent};
use phosphor_base::config::Options;
use phosphor_base::exact::TiktokenCounter;
use phosphor_base::{
    ApproxCounter, ChatModel, ChatRequest, ChatStream, FinishReason, ModelInfo, StreamEvent, TokenCounter,
};
use phosphor_store::{SessionStore, SqliteStore};

/// A model that answers at once, so that only the agent's own work is measured.
struct Instant {
    info: ModelInfo,
    counter: Arc<dyn TokenCounter>,
}

impl ChatModel for Instant {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn counter(&self) -> Arc<dyn TokenCounter> {
        self.counter.clone()
    }

    fn stream(&self, _request: ChatRequest) -> ChatStream {
        futures::stream::iter(vec![
            Ok(StreamEvent::TextDelta { text: "ok".into() }),
            Ok(StreamEvent::Finish { reason: FinishReason::Stop }),
        ])
        .boxed()
    }
}

/// The counters compared: the approximate `ceil(bytes/4)` one and an exact one.
fn counters() -> [(&'static str, Arc<dyn TokenCounter>); 2] {
    [("approx", Arc::new(ApproxCounter)), ("o200k", Arc::new(TiktokenCounter::o200k()))]
}

fn model(counter: Arc<dyn TokenCounter>) -> Arc<Instant> {
    Arc::new(Instant {
        info: ModelInfo {
            provider: "bench".into(),
            model: "instant".into(),
            context_window: 10_000_000,
            max_output_tokens: 4096,
        },
        counter,
    })
}

/// A store with one session of `count` realistic messages (the prune crate's synthetic transcript).
async fn populated(count: usize, compacted: bool, counter: Arc<dyn TokenCounter>) -> (SessionAgent, String) {
    let store = Arc::new(SqliteStore::in_memory().await.expect("in-memory store"));
    let agent = SessionAgent::new(store.clone(), Models::new(model(counter)), Options::default());
    let session = agent.create_session("bench").await.expect("session").id;
    let mut messages = phosphor_prune::synthetic::transcript(count * 600, 7);
    messages.truncate(count);
    for (i, mut message) in messages.into_iter().enumerate() {
        message.id = format!("m{i:06}");
        message.session_id = session.clone();
        store.append_message(&message).await.expect("append");
    }
    if compacted {
        agent.compact(&session, None, None).await.expect("compaction");
    }
    // Warm the agent's cache, as a running session has it.
    agent.token_status(&session).await.expect("status");
    (agent, session)
}

fn turn_cost(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let mut group = c.benchmark_group("agent_turn");
    group.sample_size(20);
    for (name, counter) in counters() {
        for count in [100, 1_000, 10_000] {
            let (agent, session) = runtime.block_on(populated(count, true, counter.clone()));
            group.bench_function(format!("{name}/{count}_messages"), |b| {
                b.to_async(&runtime).iter(|| async {
                    agent.run_turn(&session, "What next?", None).await.expect("turn");
                });
            });
        }
    }
    group.finish();
}

fn compaction_cost(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let mut group = c.benchmark_group("agent_compaction");
    group.sample_size(10).sampling_mode(SamplingMode::Flat).warm_up_time(Duration::from_millis(1));
    for (name, counter) in counters() {
        group.bench_function(format!("{name}/10000_messages"), |b| {
            b.iter_batched(
                || runtime.block_on(populated(10_000, false, counter.clone())),
                |(agent, session)| runtime.block_on(agent.compact(&session, None, None)).expect("compaction"),
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, turn_cost, compaction_cost);
criterion_main!(benches);
