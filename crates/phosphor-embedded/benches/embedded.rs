//! Embedded model throughput on each engine, side by side on the same GGUF file: load time, prompt (prefill) and
//! generation tokens per second, and peak memory, then the ratio llama.cpp / mistral.rs.
//!
//! `PHOSPHOR_TEST_MODEL=<file.gguf> cargo bench -p phosphor-embedded --bench embedded`
//! (`cargo xtask fetch-test-model` prints the path). `PHOSPHOR_BENCH_RUNS` sets the number of measured runs (3).
//! Prefill speed is the prompt's tokens over the time to the first text; generation speed is the remaining tokens
//! over the time after it. Each engine runs in a child process of its own (this program, with
//! `PHOSPHOR_BENCH_ENGINE` set), so that its peak resident memory (`VmHWM`) is its own.
//! `PHOSPHOR_BENCH_ENGINES=llamacpp` (or `mistralrs`) measures one engine only. With `PHOSPHOR_BENCH_OUT=<file>`,
//! each engine's figures are also appended to that file, one line each (engine, load s, prefill and generation
//! tok/s, peak MiB, prompt tokens, tokens generated), for `cargo xtask bench-target-cpu` and for the comparison
//! with llama-bench in `cargo xtask bench`.
//! Like criterion, it takes a filter argument: it runs when the filter is part of the name `embedded`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt;
use phosphor_base::config::{Engine, InferenceConfig};
use phosphor_base::message::Message;
use phosphor_base::model::{ChatModel, ChatRequest, StreamEvent};
use phosphor_embedded::{EngineKind, HubSettings, load_with};

/// Tokens generated per run.
const GENERATE: u64 = 128;

struct Run {
    prompt_tokens: u64,
    output_tokens: u64,
    first_token: Duration,
    total: Duration,
}

impl Run {
    fn prefill_per_sec(&self) -> f64 {
        self.prompt_tokens as f64 / self.first_token.as_secs_f64()
    }

    fn generate_per_sec(&self) -> f64 {
        self.output_tokens.saturating_sub(1) as f64 / (self.total - self.first_token).as_secs_f64()
    }
}

/// The prompt of run `run`: it starts differently each time, so mistral.rs's prefix cache cannot skip the prefill.
fn prompt(run: usize) -> Vec<Message> {
    let notes = (1..=40)
        .map(|i| {
            format!(
                "Step {i}: the agent read file src/module_{i}.rs and found function handler_{i} too long."
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    vec![
        Message::system(format!("Report number {run}. You write long, detailed technical reports.")),
        Message::user(format!(
            "{notes}\n\nWrite a detailed report on every step above, one paragraph per step."
        )),
    ]
}

async fn run(model: &dyn ChatModel, number: usize) -> anyhow::Result<Run> {
    let request =
        ChatRequest { messages: prompt(number), max_output_tokens: Some(GENERATE), ..ChatRequest::default() };
    let started = Instant::now();
    let mut first_token = None;
    let mut usage = None;
    let mut stream = model.stream(request);
    while let Some(event) = stream.next().await {
        match event? {
            StreamEvent::TextDelta { .. } | StreamEvent::ReasoningDelta { .. } => {
                first_token.get_or_insert_with(|| started.elapsed());
            }
            StreamEvent::Usage(u) => usage = Some(u),
            _ => {}
        }
    }
    let total = started.elapsed();
    let usage = usage.ok_or_else(|| anyhow::anyhow!("no usage reported"))?;
    Ok(Run {
        prompt_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        first_token: first_token.ok_or_else(|| anyhow::anyhow!("no text generated"))?,
        total,
    })
}

/// What one engine measured, as its child process reports it.
#[derive(Debug, Clone, Copy)]
struct Figures {
    load_s: f64,
    prefill: f64,
    generation: f64,
    peak_mib: f64,
    /// The prompt's tokens and the tokens generated, of the last run.
    prompt_tokens: f64,
    generated: f64,
}

const RESULT: &str = "RESULT";

fn main() -> anyhow::Result<()> {
    let Some(path) = std::env::var_os("PHOSPHOR_TEST_MODEL").map(PathBuf::from) else {
        eprintln!("skipped: set PHOSPHOR_TEST_MODEL to a GGUF file (cargo xtask fetch-test-model)");
        return Ok(());
    };
    if let Ok(engine) = std::env::var("PHOSPHOR_BENCH_ENGINE") {
        return measure(path, &engine);
    }
    // `cargo bench -- FILTER` hands the filter to every bench; flags such as `--bench` are not filters.
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-'))
        && !"embedded".contains(filter.as_str())
    {
        return Ok(());
    }
    let wanted = std::env::var("PHOSPHOR_BENCH_ENGINES").unwrap_or_default();
    let wanted: Vec<&str> = wanted.split(',').map(str::trim).filter(|w| !w.is_empty()).collect();
    let mut table = Vec::new();
    for kind in EngineKind::ALL
        .into_iter()
        .filter(|k| k.is_compiled_in() && (wanted.is_empty() || wanted.contains(&k.config_name())))
    {
        println!("\n== {kind} ==");
        let output = std::process::Command::new(std::env::current_exe()?)
            .env("PHOSPHOR_BENCH_ENGINE", kind.config_name())
            .stderr(std::process::Stdio::inherit())
            .output()?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut figures = None;
        for line in stdout.lines() {
            match line.strip_prefix(RESULT) {
                Some(values) => figures = parse_figures(values),
                None => println!("{line}"),
            }
        }
        if figures.is_none() {
            println!("{kind} did not finish ({})", output.status);
        }
        table.push((kind, figures));
    }
    println!("\nmodel: {}", path.display());
    println!(
        "{:<12} {:>10} {:>16} {:>18} {:>14}",
        "engine", "load s", "prefill tok/s", "generation tok/s", "peak MiB"
    );
    for (kind, figures) in &table {
        match figures {
            Some(f) => println!(
                "{:<12} {:>10.2} {:>16.1} {:>18.1} {:>14.0}",
                kind.name(),
                f.load_s,
                f.prefill,
                f.generation,
                f.peak_mib
            ),
            None => println!("{:<12} {:>10}", kind.name(), "n/a"),
        }
    }
    if let Some(out) = std::env::var_os("PHOSPHOR_BENCH_OUT") {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&out)?;
        for (kind, figures) in &table {
            if let Some(f) = figures {
                writeln!(
                    file,
                    "{} {} {} {} {} {} {}",
                    kind.config_name(),
                    f.load_s,
                    f.prefill,
                    f.generation,
                    f.peak_mib,
                    f.prompt_tokens,
                    f.generated
                )?;
            }
        }
    }
    let find = |wanted: EngineKind| table.iter().find(|(k, _)| *k == wanted).and_then(|(_, f)| *f);
    if let (Some(l), Some(m)) = (find(EngineKind::LlamaCpp), find(EngineKind::MistralRs)) {
        println!(
            "llama.cpp / mistral.rs: prefill {:.1}x, generation {:.1}x, load {:.1}x, peak memory {:.2}x",
            l.prefill / m.prefill,
            l.generation / m.generation,
            l.load_s / m.load_s,
            l.peak_mib / m.peak_mib
        );
    }
    Ok(())
}

fn parse_figures(values: &str) -> Option<Figures> {
    let numbers: Vec<f64> = values.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    match numbers[..] {
        [load_s, prefill, generation, peak_mib, prompt_tokens, generated] => {
            Some(Figures { load_s, prefill, generation, peak_mib, prompt_tokens, generated })
        }
        _ => None,
    }
}

/// This process's peak resident memory, in MiB (Linux; 0 elsewhere).
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// Measures one engine and prints its figures on a `RESULT` line for the parent.
fn measure(path: PathBuf, engine: &str) -> anyhow::Result<()> {
    let engine = match engine {
        "llamacpp" => Engine::Llamacpp,
        "mistralrs" => Engine::Mistralrs,
        other => anyhow::bail!("unknown engine {other:?}"),
    };
    let runs: usize = std::env::var("PHOSPHOR_BENCH_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let config = InferenceConfig {
            enabled: true,
            model_path: Some(path.clone()),
            engine,
            ..InferenceConfig::default()
        };
        let started = Instant::now();
        let model = load_with(&config, HubSettings::from_env()).await?;
        let load = started.elapsed();
        println!(
            "model: {} ({}, {}, {})",
            path.display(),
            model.architecture(),
            model.engine(),
            model.device()
        );
        println!("load: {:.2} s", load.as_secs_f64());
        // Warm-up: the first call pays one-time costs.
        let warm = run(model.as_ref(), 0).await?;
        println!(
            "warm-up: prompt {} tok, output {} tok, first token {:.2} s",
            warm.prompt_tokens,
            warm.output_tokens,
            warm.first_token.as_secs_f64()
        );
        let mut measured = Vec::new();
        for i in 0..runs {
            let r = run(model.as_ref(), i + 1).await?;
            println!(
                "run {}: prompt {} tok in {:.2} s = {:.1} tok/s; generated {} tok in {:.2} s = {:.1} tok/s",
                i + 1,
                r.prompt_tokens,
                r.first_token.as_secs_f64(),
                r.prefill_per_sec(),
                r.output_tokens,
                (r.total - r.first_token).as_secs_f64(),
                r.generate_per_sec()
            );
            measured.push(r);
        }
        let mean = |f: fn(&Run) -> f64| measured.iter().map(f).sum::<f64>() / measured.len().max(1) as f64;
        println!(
            "mean over {runs} runs: prefill {:.1} tok/s, generation {:.1} tok/s",
            mean(Run::prefill_per_sec),
            mean(Run::generate_per_sec)
        );
        println!(
            "{RESULT} {} {} {} {} {} {}",
            load.as_secs_f64(),
            mean(Run::prefill_per_sec),
            mean(Run::generate_per_sec),
            peak_mib(),
            measured.last().map_or(0, |r| r.prompt_tokens),
            measured.last().map_or(0, |r| r.output_tokens)
        );
        Ok(())
    })
}
