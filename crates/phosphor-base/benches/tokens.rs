//! Token counting throughput: the approximate `ceil(bytes/4)` count and each exact tokenizer, over the
//! text of a synthetic agent transcript (code, logs, prose, multi-byte text). The GGUF tokenizer
//! is SmolLM2's, read from `PHOSPHOR_TEST_MODEL` when it is set.

#![allow(clippy::expect_used)] // a benchmark that cannot set up has nothing to measure

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use phosphor_base::exact::{HfCounter, TiktokenCounter};
use phosphor_base::gguf::GgufMetadata;
use phosphor_base::{ApproxCounter, TokenCounter};

/// About 1 MB of transcript-like text, deterministic.
fn corpus() -> String {
    let pieces = [
        "fn parse_config(text: &str) -> Result<Config, Error> {\n    let value = serde_json::from_str(text)?;\n",
        "error[E0308]: mismatched types\n  --> src/main.rs:42:17\n   |\n42 |     let x: u32 = \"4\";\n",
        "The user wants the failing test fixed without changing the public API of the parser. ",
        "2026-12-02T10:20:15Z INFO request finished status=200 latency_ms=87 path=/v1/chat/completions\n",
        "Grüße aus München — 日本語のテキスト — emoji 🚀✨ and numbers 3.14159 2718281828\n",
    ];
    let mut text = String::with_capacity(1 << 20);
    let mut i = 0usize;
    while text.len() < 1 << 20 {
        text.push_str(pieces[i % pieces.len()]);
        i = i.wrapping_mul(31).wrapping_add(7);
    }
    text
}

fn counting(c: &mut Criterion) {
    let text = corpus();
    let mut counters: Vec<Box<dyn TokenCounter>> = vec![
        Box::new(ApproxCounter),
        Box::new(TiktokenCounter::o200k()),
        Box::new(TiktokenCounter::cl100k()),
    ];
    if let Some(path) = std::env::var_os("PHOSPHOR_TEST_MODEL") {
        let file = std::fs::File::open(path).expect("the test model opens");
        let metadata = GgufMetadata::read(std::io::BufReader::new(file)).expect("GGUF metadata");
        counters.push(Box::new(HfCounter::from_gguf(&metadata).expect("the GGUF tokenizer builds")));
    } else {
        eprintln!("the GGUF tokenizer is skipped: PHOSPHOR_TEST_MODEL is not set");
    }
    let mut group = c.benchmark_group("count_tokens");
    group.throughput(Throughput::Bytes(text.len() as u64)).sample_size(10);
    for counter in &counters {
        group.bench_function(counter.name().to_owned(), |b| b.iter(|| counter.count_text(&text)));
    }
    group.finish();
}

criterion_group!(benches, counting);
criterion_main!(benches);
