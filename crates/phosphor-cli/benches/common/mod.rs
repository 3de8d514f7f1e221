//! What the proxy benches share: a `phosphor serve` they start and stop, and percentiles.

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Whether the bench `name` is asked for: `cargo bench -- FILTER` runs the benches whose name
/// contains each filter given.
pub fn selected(name: &str) -> bool {
    std::env::args().skip(1).filter(|a| !a.starts_with('-')).all(|filter| name.contains(filter.as_str()))
}

/// The runtime a bench runs on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime")
}

/// `phosphor --config DIR/phosphor.json` run in `dir`, with `dir` as its home (so that no file of
/// the machine's takes part); the caller adds `--db` and the command.
pub fn phosphor_in(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_phosphor"));
    command
        .current_dir(dir)
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("XDG_DATA_HOME", dir.join(".local/share"))
        .env_remove("RUST_LOG")
        .arg("--config")
        .arg(dir.join("phosphor.json"));
    command
}

/// A running `phosphor serve`, killed when dropped.
pub struct Proxy {
    child: Child,
    /// Its address, `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `command` (a `phosphor ... serve` with its arguments) listening on a free loopback port,
/// and waits for the address it prints first.
pub fn start_proxy(mut command: Command) -> Proxy {
    let mut child = command
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("phosphor serve");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("the proxy's address");
    let url = line.trim().strip_prefix("listening on ").expect("serve printed its address").to_owned();
    Proxy { child, url }
}

/// The `p` quantile (0 to 1) of `sorted`, the nearest rank.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}
