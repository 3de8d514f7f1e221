//! Throughput of token counting, pruning and pairing checks over a 10 MB synthetic agent
//! transcript (see `phosphor_prune::synthetic`). Throughput is in bytes of transcript text.
//!
//! `cargo bench -p phosphor-prune -- --warm-up-time 1 --measurement-time 3`

use std::borrow::Cow;
use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use phosphor_base::message::Message;
use phosphor_base::tokens::{ApproxCounter, TokenCounter};
use phosphor_prune::synthetic::{transcript, transcript_bytes};
use phosphor_prune::{check_tool_pairing, keep_recent_split, prune, prune_arguments, repair_tool_pairing};

const TRANSCRIPT_BYTES: usize = 10_000_000;

fn benches(c: &mut Criterion) {
    let messages = transcript(TRANSCRIPT_BYTES, 42);
    let bytes = transcript_bytes(&messages) as u64;
    let results = messages.iter().flat_map(Message::tool_results).count();
    let calls: Vec<&str> =
        messages.iter().flat_map(Message::tool_calls).map(|c| c.arguments.as_str()).collect();
    let argument_bytes: usize = calls.iter().map(|a| a.len()).sum();
    eprintln!(
        "synthetic transcript: {} messages, {results} tool results, {} tool calls, {bytes} bytes ({argument_bytes} in \
         call arguments)",
        messages.len(),
        calls.len()
    );

    let pruned = prune(&messages, 200, &ApproxCounter);
    let arguments_after: usize =
        pruned.messages.iter().flat_map(|m| m.tool_calls()).map(|c| c.arguments.len()).sum();
    eprintln!(
        "prune_200: {} -> {} tokens ({} tool outputs and {} argument values cut; call arguments {argument_bytes} -> \
         {arguments_after} bytes)",
        pruned.tokens_before, pruned.tokens_after, pruned.truncated_results, pruned.truncated_arguments
    );

    let mut group = c.benchmark_group("transcript_10mb");
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("count_approx", |b| {
        b.iter(|| black_box(&messages).iter().map(|m| ApproxCounter.count_message(m)).sum::<u64>())
    });
    for limit in [200, 50, 8_000] {
        group.bench_function(format!("prune_{limit}"), |b| {
            b.iter(|| prune(black_box(&messages), limit, &ApproxCounter).tokens_after)
        });
    }
    // The share of `prune_200` spent on tool-call arguments (parsing and cutting the JSON).
    group.bench_function("prune_arguments_200", |b| {
        b.iter(|| black_box(&calls).iter().filter_map(|a| prune_arguments(a, 200)).count())
    });
    group.bench_function("check_pairing", |b| b.iter(|| check_tool_pairing(black_box(&messages))));
    group.bench_function("repair_pairing_valid", |b| {
        b.iter(|| repair_tool_pairing(black_box(&messages).iter().map(Cow::Borrowed).collect()).len())
    });
    group.bench_function("keep_recent_split_20k", |b| {
        b.iter(|| keep_recent_split(black_box(&messages), 20_000, &ApproxCounter))
    });
    group.finish();
}

criterion_group!(prune_benches, benches);
criterion_main!(prune_benches);
