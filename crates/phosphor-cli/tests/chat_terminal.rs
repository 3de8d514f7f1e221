//! `phosphor chat` in a real pseudo-terminal, against the testkit's mock server: typed lines, `/tokens`,
//! Ctrl-C during a slow streamed answer, and `/exit`.
//!
//! The terminal is util-linux `script`, which runs the command on a new pseudo-terminal and copies
//! its own stdin to it byte for byte: a typed `\x03` reaches the terminal's line discipline, which
//! sends SIGINT to chat, as a keyboard's Ctrl-C does. `script` is part of every Debian and Ubuntu
//! system (package `bsdutils`); when it is missing the test fails and says so.
#![cfg(unix)]
// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use phosphor_testkit::{MockResponse, MockServer, SseBuilder, sse_text};
use pretty_assertions::assert_eq;
use serde_json::json;

/// How long any one expected output may take.
const WAIT: Duration = Duration::from_secs(30);

/// A command running on a pseudo-terminal: what is typed goes to it, what it prints is collected.
struct Terminal {
    child: Child,
    keyboard: ChildStdin,
    screen: Arc<Mutex<Vec<u8>>>,
    /// How much of the screen text earlier `expect`s consumed.
    seen: usize,
}

impl Terminal {
    /// Runs `program args...` under `script` with `envs`, in `dir`.
    fn spawn(program: &Path, args: &[&str], envs: &[(&str, &str)], dir: &Path) -> Terminal {
        let available = Command::new("script").arg("--version").stdout(Stdio::null()).status();
        assert!(
            available.as_ref().is_ok_and(|status| status.success()),
            "the chat terminal test needs util-linux `script` on PATH (Debian/Ubuntu package bsdutils): {available:?}"
        );
        let quote = |word: &str| format!("'{}'", word.replace('\'', r"'\''"));
        let line: Vec<String> =
            std::iter::once(program.to_str().unwrap()).chain(args.iter().copied()).map(quote).collect();
        let mut command = Command::new("script");
        // -q: no start and end notes; -e: script exits with the command's status; -c: run this, not a shell.
        command.args(["-q", "-e", "-c", &format!("exec {}", line.join(" ")), "/dev/null"]);
        command.current_dir(dir).env("SHELL", "/bin/sh").env("TERM", "xterm").env_remove("RUST_LOG");
        for (name, value) in envs {
            command.env(name, value);
        }
        let mut child =
            command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let keyboard = child.stdin.take().unwrap();
        let screen = Arc::new(Mutex::new(Vec::new()));
        for mut pipe in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let screen = screen.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = pipe.read(&mut buf) {
                    screen.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
        }
        Terminal { child, keyboard, screen, seen: 0 }
    }

    /// Everything shown so far, with the terminal's `\r\n` line ends as `\n`.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).replace("\r\n", "\n")
    }

    /// Types `keys` (Enter is `\r`, Ctrl-C is `\x03`).
    fn type_keys(&mut self, keys: &str) {
        self.keyboard.write_all(keys.as_bytes()).unwrap();
        self.keyboard.flush().unwrap();
    }

    /// Waits until `text` appears after what earlier calls consumed; returns the screen from there up
    /// to and including `text`.
    async fn expect(&mut self, text: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if let Some(at) = screen[self.seen..].find(text) {
                let end = self.seen + at + text.len();
                let shown = screen[self.seen..end].to_owned();
                self.seen = end;
                return shown;
            }
            if Instant::now() > deadline || self.child.try_wait().unwrap().is_some() {
                panic!("{text:?} never appeared on the terminal; it shows:\n{screen}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the command to end.
    async fn exit_status(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the command did not end; the terminal shows:\n{}",
                self.screen()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An answer of `ticks` chunks `tick N `, one every `interval`.
fn paced_ticks(ticks: usize, interval: Duration) -> MockResponse {
    let mut builder = SseBuilder::new().usage_field(false).role();
    for tick in 1..=ticks {
        builder = builder.text(&format!("tick {tick} "));
    }
    MockResponse::SsePaced { events: builder.finish("stop").build(), interval }
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_in_a_terminal_streams_answers_shows_tokens_and_survives_ctrl_c() {
    let server = MockServer::start(vec![
        sse_text(&["Hello from ", "the mock terminal."], Some((120, 3))),
        paced_ticks(40, Duration::from_millis(250)),
        sse_text(&["Recovered."], None),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    fs::create_dir_all(&workspace).unwrap();
    let config = dir.path().join("config.json");
    let settings = json!({
        "providers": { "mock": { "base_url": server.base_url(), "api_key_env": "PHOSPHOR_TEST_API_KEY" } },
        "models": { "large": { "provider": "mock", "model": "mock-large", "context_window": 10_000, "max_output_tokens": 100 } }
    });
    fs::write(&config, settings.to_string()).unwrap();
    let home = dir.path().to_str().unwrap();
    let db = dir.path().join("sessions.db");
    let mut terminal = Terminal::spawn(
        Path::new(env!("CARGO_BIN_EXE_phosphor")),
        &["--db", db.to_str().unwrap(), "--config", config.to_str().unwrap(), "chat"],
        &[
            ("HOME", home),
            ("XDG_DATA_HOME", home),
            ("XDG_CONFIG_HOME", home),
            ("PHOSPHOR_TEST_API_KEY", "sk-test"),
            ("HF_HUB_OFFLINE", "1"),
        ],
        &workspace,
    );

    let banner = terminal.expect("/help lists the commands; Ctrl-D leaves\n› ").await;
    assert!(
        banner.starts_with("phosphor chat · mock-large · 10,000-token window · compaction at 80%"),
        "{banner}"
    );

    terminal.type_keys("hello\r");
    let answer = terminal.expect("› ").await;
    assert_eq!(answer, "hello\nHello from the mock terminal.\n› ");

    terminal.type_keys("/tokens\r");
    let tokens = terminal.expect("› ").await;
    let pattern = regex::Regex::new(
        r"^/tokens\nnext request ≈ (\d+) tokens of the 10,000-token window \((\d+\.\d)%\); compaction at 80% \(8,000 tokens\); session current_tokens (\d+)\n› $",
    )
    .unwrap();
    let numbers =
        pattern.captures(&tokens).unwrap_or_else(|| panic!("unexpected /tokens output: {tokens:?}"));
    let next: u64 = numbers[1].parse().unwrap();
    assert_eq!(numbers[2].to_owned(), format!("{:.1}", next as f64 * 100.0 / 10_000.0));
    assert!(next > 0 && numbers[3].parse::<u64>().unwrap() > 0, "{tokens}");

    // Ctrl-C once the slow answer is streaming: the turn stops, the prompt comes back.
    terminal.type_keys("count slowly\r");
    terminal.expect("tick 2 ").await;
    terminal.type_keys("\x03");
    let cancelled = terminal.expect("› ").await;
    // The terminal echoes `^C` where the answer stopped; chat does not print a second one.
    assert!(
        cancelled.ends_with("^C\ncancelled; the session is kept, type another message\n› "),
        "{cancelled:?}"
    );

    // The session still answers, and the cancelled answer never finished.
    terminal.type_keys("still there?\r");
    let recovered = terminal.expect("› ").await;
    assert_eq!(recovered, "still there?\nRecovered.\n› ");

    terminal.type_keys("/exit\r");
    let status = terminal.exit_status().await;
    let screen = terminal.screen();
    assert_eq!(status.code(), Some(0), "{screen}");
    assert!(!screen.contains("tick 40"), "{screen}");
    assert!(!screen.contains("error"), "{screen}");

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let users: Vec<&str> = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["hello", "count slowly", "still there?"]);
}
