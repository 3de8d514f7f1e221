//! The `phosphor` binary end to end: a temporary database, workspace and configuration, and a loopback
//! OpenAI-compatible server (phosphor-testkit's `MockServer`) standing in for the model.

// The helpers below are test code too: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use phosphor_base::config::Api;
use phosphor_base::tokens::REQUEST_OVERHEAD_TOKENS;
use phosphor_base::{ApproxCounter, Message, Role};
use phosphor_testkit::{
    MockResponse, MockServer, RecordedRequest, sse_text, sse_tool_calls, wire_text, wire_thinking_tool_calls,
};
use phosphor_wire::chat::parse_transcript;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const KEY_VAR: &str = "PHOSPHOR_TEST_API_KEY";
const KEY: &str = "sk-test-123";

/// A temporary home, workspace, database and configuration for one test.
struct Env {
    dir: tempfile::TempDir,
    /// `--db` when it is not the SQLite file in `dir`.
    db: Option<String>,
}

impl Env {
    fn new() -> Env {
        let env = Env { dir: tempfile::tempdir().unwrap(), db: None };
        fs::create_dir_all(env.workspace()).unwrap();
        fs::create_dir_all(env.home()).unwrap();
        env
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    fn db(&self) -> PathBuf {
        self.db.as_ref().map_or_else(|| self.dir.path().join("sessions.db"), PathBuf::from)
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("test-config.json")
    }

    /// A configuration with the mock server as the only provider and a large model with `window` tokens.
    fn mock_config(&self, server: &MockServer, window: u64, options: Value) {
        self.mock_config_speaking(server, Api::Chat, window, options);
    }

    /// [`Env::mock_config`] with a provider that speaks `api`.
    fn mock_config_speaking(&self, server: &MockServer, api: Api, window: u64, options: Value) {
        self.mock_config_named(server, api, "mock-large", window, options);
    }

    /// [`Env::mock_config_speaking`] with the large model's id `model` (the one a proxied client
    /// names).
    fn mock_config_named(&self, server: &MockServer, api: Api, model: &str, window: u64, options: Value) {
        let config = json!({
            "options": options,
            "providers": { "mock": { "base_url": server.base_url(), "api_key_env": KEY_VAR, "api": api.as_str() } },
            "models": { "large": { "provider": "mock", "model": model, "context_window": window, "max_output_tokens": 100 } }
        });
        fs::write(self.config_path(), config.to_string()).unwrap();
    }

    /// `phosphor --db <db> --config <config> <args>` in the workspace, with a private home.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_phosphor"));
        command
            .current_dir(self.workspace())
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            .env("XDG_DATA_HOME", self.home().join(".local/share"))
            .env(KEY_VAR, KEY)
            // Hugging Face is never contacted by the tests: a model that is not local fails at once.
            .env("HF_HUB_OFFLINE", "1")
            .env("HF_HOME", self.home().join(".cache/huggingface"))
            .env_remove("RUST_LOG")
            .arg("--db")
            .arg(self.db());
        if self.config_path().exists() {
            command.arg("--config").arg(self.config_path());
        }
        command.args(args);
        command
    }

    /// Runs `phosphor <args>` with `stdin`, on a blocking thread so the mock server keeps serving.
    async fn run(&self, args: &[&str], stdin: &str) -> Output {
        let mut command = self.command(args);
        let stdin = stdin.to_owned();
        tokio::task::spawn_blocking(move || {
            let mut child =
                command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
            let mut input = child.stdin.take().unwrap();
            std::io::Write::write_all(&mut input, stdin.as_bytes()).unwrap();
            drop(input);
            child.wait_with_output().unwrap()
        })
        .await
        .unwrap()
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

#[track_caller]
fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        stdout(output),
        stderr(output)
    );
}

/// The `(role, content)` of each message a request sent.
fn sent(request: &RecordedRequest) -> Vec<(String, String)> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap_or("").to_owned()))
        .collect()
}

fn sessions_json(env: &Env) -> Value {
    let output = env.command(&["sessions", "list", "--json"]).output().unwrap();
    assert_success(&output);
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn run_answers_on_stdout_and_stores_the_turn() {
    let env = Env::new();
    let server = MockServer::start(vec![sse_text(&["Hello", " there."], Some((120, 3)))]).await;
    env.mock_config(&server, 100_000, json!({}));

    let output = env.run(&["run", "Say hello"], "").await;
    assert_success(&output);
    assert_eq!(stdout(&output), "Hello there.\n");

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(requests[0].body["model"], "mock-large");
    let messages = sent(&requests[0]);
    assert_eq!(messages[0].0, "system");
    assert!(messages[0].1.contains(&env.workspace().canonicalize().unwrap().display().to_string()));
    assert_eq!(messages[1..], [("user".to_owned(), "Say hello".to_owned())]);
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read_file", "list_dir", "search_text"]);

    let sessions = sessions_json(&env);
    assert_eq!(sessions.as_array().unwrap().len(), 1);
    assert_eq!(
        (sessions[0]["title"].as_str(), sessions[0]["message_count"].as_u64()),
        (Some("Say hello"), Some(2))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn run_continue_adds_to_the_latest_session_and_the_prompt_can_come_from_stdin() {
    let env = Env::new();
    let server = MockServer::start(vec![
        sse_text(&["Paris."], Some((50, 2))),
        sse_text(&["About 2.1 million."], Some((70, 5))),
        MockResponse::json(400, r#"{"error":{"message":"Invalid request.","type":"invalid_request_error"}}"#),
    ])
    .await;
    env.mock_config(&server, 100_000, json!({}));

    assert_success(&env.run(&["run", "Capital of France?"], "").await);
    let output = env.run(&["run", "--continue"], "And its population?\n").await;
    assert_success(&output);
    assert_eq!(stdout(&output), "About 2.1 million.\n");

    let second = sent(&server.requests()[1]);
    assert_eq!(
        second[1..],
        [
            ("user".to_owned(), "Capital of France?".to_owned()),
            ("assistant".to_owned(), "Paris.".to_owned()),
            ("user".to_owned(), "And its population?".to_owned()),
        ]
    );
    let sessions = sessions_json(&env);
    assert_eq!(sessions.as_array().unwrap().len(), 1);
    assert_eq!(sessions[0]["message_count"], 4);

    // --session with an id prefix reaches the same session.
    let id = sessions[0]["id"].as_str().unwrap();
    let output = env.run(&["run", "--session", &id[..12], "x"], "").await;
    // The server refuses this one: the turn fails with one error line, but the prompt was stored.
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).starts_with("error: "), "{}", stderr(&output));
    assert_eq!(stderr(&output).lines().count(), 1, "{}", stderr(&output));
    assert_eq!(sessions_json(&env)[0]["message_count"], 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn run_json_prints_every_event_as_a_json_line() {
    let env = Env::new();
    let server = MockServer::start(vec![sse_text(&["Hi", "!"], Some((40, 2)))]).await;
    env.mock_config(&server, 100_000, json!({}));

    let output = env.run(&["run", "--json", "hello"], "").await;
    assert_success(&output);
    let events: Vec<Value> =
        stdout(&output).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["turn_started", "text_delta", "text_delta", "usage", "turn_finished"]);
    assert_eq!(events[1]["text"], "Hi");
    assert_eq!(events[3]["usage"], json!({ "input_tokens": 40, "output_tokens": 2 }));
    assert_eq!(events[0]["session_id"], sessions_json(&env)[0]["id"]);
}

/// A prompt of about `tokens` tokens (four bytes each).
fn long_prompt(label: &str, tokens: usize) -> String {
    let mut text = format!("{label}: ");
    while text.len() < tokens * 4 {
        text.push_str("lorem ipsum dolor sit amet ");
    }
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_crosses_the_threshold_compacts_and_show_marks_the_summary() {
    let env = Env::new();
    let server = MockServer::start(vec![
        sse_text(&["First answer."], None),
        sse_text(&["## Goal\nThe user is sending long texts."], None),
        sse_text(&["Second answer."], None),
    ])
    .await;
    // The system prompt and the three tool definitions take about 400 tokens of the 2,500; the
    // threshold is 2,000. One 900-token prompt stays under it; the second crosses it.
    env.mock_config(&server, 2_500, json!({}));

    let first = long_prompt("FIRST", 900);
    let output = env.run(&["run", "--json", &first], "").await;
    assert_success(&output);
    assert!(!stdout(&output).contains("compaction"), "{}", stdout(&output));

    let second = long_prompt("SECOND", 900);
    let output = env.run(&["run", "--json", "--continue", &second], "").await;
    assert_success(&output);
    let events: Vec<Value> =
        stdout(&output).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let finished = events.iter().find(|e| e["type"] == "compaction_finished").expect("a compaction");
    assert!(events.iter().any(|e| e["type"] == "compaction_started" && e["reason"] == "threshold"));
    assert!(finished["tokens_before"].as_u64().unwrap() >= 2_000, "{finished}");
    assert!(finished["tokens_after"].as_u64().unwrap() < finished["tokens_before"].as_u64().unwrap());

    // The summarizer was asked with the first exchange only; the answer request starts at the summary.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let summarize = sent(&requests[1]);
    assert!(summarize.iter().any(|(_, content)| content.contains("[user] FIRST")));
    assert!(!summarize.iter().any(|(_, content)| content.contains("SECOND")));
    let answer = sent(&requests[2]);
    assert!(!answer.iter().any(|(_, content)| content.starts_with("FIRST")));
    assert!(answer[1].1.contains("## Goal\nThe user is sending long texts."), "{:?}", answer[1]);
    assert_eq!(answer.last().unwrap(), &("user".to_owned(), second.clone()));

    let id = sessions_json(&env)[0]["id"].as_str().unwrap().to_owned();
    let output = env.command(&["sessions", "show", &id]).output().unwrap();
    assert_success(&output);
    let shown = stdout(&output);
    let after_header: Vec<&str> = shown.lines().skip(1).collect();
    assert_eq!(after_header[0], "── summary ──");
    assert_eq!(after_header[1], "## Goal");
    // The first prompt is folded: it is no longer a message of the history, only the first of the
    // user requests the summary's session-state trail quotes verbatim.
    assert!(!shown.contains("── user ──\nFIRST"), "{shown}");
    assert!(shown.contains("## Session state\nUser requests (newest first):\n1. FIRST"), "{shown}");
    assert!(shown.contains(&format!("── user ──\n{}", second.trim_end())), "{shown}");
    assert!(shown.ends_with("── assistant · mock-large ──\nSecond answer.\n"), "{shown}");

    let output = env.command(&["sessions", "show", "--full", &id]).output().unwrap();
    assert_success(&output);
    let full = stdout(&output);
    assert!(full.contains(&format!("── user (compacted) ──\n{}", first.trim_end())), "{full}");
    assert!(full.contains("── summary ──\n## Goal"), "{full}");

    // Export has every stored message, the summary flagged.
    let output = env.command(&["sessions", "export", "--jsonl", &id]).output().unwrap();
    assert_success(&output);
    let exported: Vec<Value> = stdout(&output).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(exported.len(), 5);
    assert_eq!(exported.iter().filter(|m| m["is_summary"] == true).count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_with_fourteen_tool_rounds_compacts_inside_the_turn_and_finishes() {
    let env = Env::new();
    // A 7 KB file: read_file shows it with line numbers, about 1,950 tokens a read, 14 reads are
    // about three and a half 8,000-token windows.
    let line = "let value = compute(input, offset); // a line of code that is read again\n";
    fs::write(env.workspace().join("big.rs"), line.repeat(7_000 / line.len())).unwrap();
    let prompt = "Read big.rs fourteen times and tell me when you are done.";
    let mut answers: Vec<MockResponse> = (0..14)
        .map(|i| sse_tool_calls(&[(&format!("call_{i}"), "read_file", r#"{"path":"big.rs"}"#)], None))
        .collect();
    answers.push(sse_text(&["Read it fourteen times."], None));
    let large = MockServer::start(answers).await;
    let small = MockServer::start(
        (0..14).map(|i| sse_text(&[&format!("## Goal\nRead big.rs. Pass {i}.")], None)).collect(),
    )
    .await;
    let model = |name: &str| json!({ "provider": name, "model": format!("mock-{name}"), "context_window": 8_000, "max_output_tokens": 1_000 });
    let config = json!({
        // Summaries only: masking is measured by the agent's long-turn tests.
        "options": { "summarize_model": "small", "mask_threshold": 0 },
        "providers": {
            "large": { "base_url": large.base_url(), "api_key_env": KEY_VAR },
            "small": { "base_url": small.base_url(), "api_key_env": KEY_VAR }
        },
        "models": { "large": model("large"), "small": model("small") }
    });
    fs::write(env.config_path(), config.to_string()).unwrap();

    let output = env.run(&["run", "--json", prompt], "").await;
    assert_success(&output);
    let events: Vec<Value> =
        stdout(&output).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let compactions = events.iter().filter(|e| e["type"] == "compaction_finished").count();
    assert!(compactions >= 2, "{compactions} compactions");
    assert!(events.iter().any(|e| e["type"] == "text_delta" && e["text"] == "Read it fourteen times."));

    let requests = large.requests();
    assert_eq!(requests.len(), 15);
    assert_eq!(small.requests().len(), compactions);
    for (i, request) in requests.iter().enumerate() {
        let messages =
            phosphor_wire::chat::from_openai(request.body["messages"].as_array().unwrap()).unwrap();
        phosphor_prune::check_tool_pairing(&messages).unwrap_or_else(|v| panic!("request #{i}: {v:?}"));
        assert!(
            messages.iter().any(|m| m.role == phosphor_base::Role::User && m.text_content() == prompt),
            "request #{i} lost the turn's request"
        );
        // A lower bound of the agent's own estimate: a quarter of the text and arguments.
        let bytes: usize = messages
            .iter()
            .flat_map(|m| &m.parts)
            .map(|part| match part {
                phosphor_base::Part::Text { text } => text.len(),
                phosphor_base::Part::ToolCall(call) => call.arguments.len(),
                phosphor_base::Part::ToolResult(result) => result.content.len(),
                _ => 0,
            })
            .sum();
        assert!(bytes / 4 + 1_000 <= 8_000, "request #{i} holds {bytes} bytes");
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

fn example_transcript() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/transcript.json").canonicalize().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn compact_dry_run_prints_the_numbers_without_calling_a_model() {
    let env = Env::new();
    let server = MockServer::start(vec![]).await;
    env.mock_config(&server, 1_047_576, json!({}));
    let path = example_transcript();
    let output = env.run(&["compact", "--dry-run", "--input", path.to_str().unwrap()], "").await;
    assert_success(&output);

    let messages: Vec<Message> = parse_transcript(&fs::read_to_string(&path).unwrap()).unwrap();
    let standard = phosphor_prune::prune(&messages, 200, &ApproxCounter);
    let aggressive = phosphor_prune::prune(&messages, 50, &ApproxCounter);
    let [before, after_standard, after_aggressive] =
        [standard.tokens_before, standard.tokens_after, aggressive.tokens_after]
            .map(|t| t + REQUEST_OVERHEAD_TOKENS);
    let report = stdout(&output);
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(
        lines[0],
        format!("{}: 34 messages (1 system), 14 tool results, 0 tool schemas, a JSON array", path.display())
    );
    let numbers = |line: &str| {
        line.split_whitespace()
            .map(|w| w.replace(',', ""))
            .filter_map(|w| w.parse::<u64>().ok())
            .collect::<Vec<_>>()
    };
    assert!(lines[2].trim_start().starts_with("as read"));
    assert_eq!(numbers(lines[2]), [before]);
    assert!(lines[3].trim_start().starts_with("standard pruning (200 chars per tool output)"));
    assert!(numbers(lines[3]).contains(&after_standard), "{}", lines[3]);
    assert!(lines[4].trim_start().starts_with("aggressive pruning (50 chars per tool output)"));
    assert!(numbers(lines[4]).contains(&after_aggressive), "{}", lines[4]);
    assert!(before > 5_000 && after_standard < before / 2, "{before} {after_standard}");
    // The history as the summarizer reads it: one transcript, older turns in brief.
    assert!(lines[5].trim_start().starts_with("summarizer input (instructions aside)"), "{}", lines[5]);
    let input = numbers(lines[5])[0];
    assert!(input < after_standard, "{}", lines[5]);
    // Within a third of what it folds: the oldest of the earlier turns read as a headline.
    let share = input as f64 / before as f64;
    assert!(share < 0.34, "{}", lines[5]);
    assert!(
        lines[5].ends_with(&format!("({share:.2} of as read; the oldest 1 of 3 earlier turns as headlines)")),
        "{}",
        lines[5]
    );
    assert_eq!(
        lines[6],
        "window: 1,047,576 tokens (models.large, mock-large); threshold 0.8 = 838,061 tokens; 100 reserved for the answer"
    );
    let percent = before as f64 * 100.0 / 1_047_576.0;
    assert_eq!(
        lines[7],
        format!(
            "compaction: would not trigger: {percent:.1}% of the window, below the 80% threshold ({} tokens to go)",
            thousands(838_061 - before)
        )
    );
    assert!(server.requests().is_empty());

    // With a small window it would.
    let output = env
        .run(&["compact", "--dry-run", "--context-window", "6000", "-i", path.to_str().unwrap()], "")
        .await;
    assert_success(&output);
    assert!(stdout(&output).contains("compaction: would trigger: "), "{}", stdout(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn compact_writes_the_summary_in_place_of_the_history() {
    let env = Env::new();
    let summary =
        "## Goal\nFix the failing unicode tests in tally.\n\n## Done\nU+00A0 added to is_unicode_space.";
    let server = MockServer::start(vec![
        sse_text(&[&summary[..20], &summary[20..]], Some((3_000, 40))),
        sse_text(&["## Goal\nAgain."], None),
    ])
    .await;
    env.mock_config(&server, 1_047_576, json!({}));
    let path = example_transcript();
    let out_file = env.dir.path().join("compacted.json");
    let output = env
        .run(&["compact", "--input", path.to_str().unwrap(), "--output", out_file.to_str().unwrap()], "")
        .await;
    assert_success(&output);
    assert!(stderr(&output).starts_with("⟳ compacted "), "{}", stderr(&output));
    assert!(stderr(&output).contains(" tokens with mock-large in "), "{}", stderr(&output));

    let written: Value = serde_json::from_str(&fs::read_to_string(&out_file).unwrap()).unwrap();
    let original: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    let written = written.as_array().unwrap();
    assert_eq!(written.len(), 2);
    // The system prompt is the agent's, kept as it was; the summary comes first after it.
    assert_eq!(written[0], original[0]);
    assert_eq!(written[1]["role"], "user");
    let text = written[1]["content"].as_str().unwrap();
    assert!(text.starts_with(phosphor_agent::SUMMARY_PREFIX), "{text}");
    assert!(text.contains(summary), "{text}");
    assert!(written[1].get("is_summary").is_none());

    // The summarizer got the pruned history: the long test output was cut, the system prompt was not sent.
    let request = &server.requests()[0];
    let messages = sent(request);
    assert!(messages.iter().any(|(_, c)| c.contains("\n... [truncated]\n\n")));
    assert!(!messages.iter().any(|(_, c)| c.contains("test count::tests::tabs_separate_words ... ok")));
    assert!(request.body.get("tools").is_none_or(|t| t.as_array().is_some_and(Vec::is_empty)));

    // JSON lines in, JSON lines out, and a flagged summary is continued from on the next pass.
    let jsonl = format!(
        "{}\n{}\n",
        json!({ "role": "user", "content": format!("{}## Goal\nOld.", phosphor_agent::SUMMARY_PREFIX), "is_summary": true }),
        json!({ "role": "user", "content": "Now the docs, please." })
    );
    let output = env.run(&["compact", "--summary-flag", "-i", "-"], &jsonl).await;
    assert_success(&output);
    let lines: Vec<Value> = stdout(&output).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["is_summary"], true);
    let second = sent(&server.requests()[1]);
    assert!(second[0].1.contains("## Goal\nOld."), "the previous summary is in the prompt: {:?}", second[0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_cannot_read_outside_the_workspace() {
    let env = Env::new();
    fs::write(env.workspace().join("notes.txt"), "remember the milk\n").unwrap();
    fs::write(env.dir.path().join("secret.txt"), "hunter2\n").unwrap();
    let server = MockServer::start(vec![
        sse_tool_calls(
            &[
                ("c1", "read_file", r#"{"path":"../secret.txt"}"#),
                ("c2", "read_file", r#"{"path":"notes.txt"}"#),
                ("c3", "search_text", r#"{"pattern":"hunter2","path":".."}"#),
            ],
            None,
        ),
        sse_text(&["The notes say to remember the milk."], None),
    ])
    .await;
    env.mock_config(&server, 100_000, json!({}));

    let output = env.run(&["run", "What do my files say?"], "").await;
    assert_success(&output);
    assert_eq!(stdout(&output), "The notes say to remember the milk.\n");
    let progress = stderr(&output);
    let lines: Vec<&str> = progress.lines().collect();
    assert_eq!(
        lines[..3],
        ["→ read_file ../secret.txt", "→ read_file notes.txt", "→ search_text \"hunter2\" in .."]
    );
    assert!(lines[3].starts_with("← error: ../secret.txt leaves the workspace"), "{progress}");
    assert_eq!(lines[4], "← 1 line");
    assert!(lines[5].starts_with("← error: .. leaves the workspace"), "{progress}");
    assert_eq!(lines.len(), 6, "{progress}");
    let requests = server.requests();
    let results: Vec<(String, String)> =
        sent(&requests[1]).into_iter().filter(|(role, _)| role == "tool").collect();
    assert_eq!(results.len(), 3);
    assert!(results[0].1.starts_with("error: ../secret.txt leaves the workspace"), "{:?}", results[0]);
    assert_eq!(results[1].1, "     1\tremember the milk");
    assert!(results[2].1.starts_with("error: .. leaves the workspace"), "{:?}", results[2]);
    assert!(!requests.iter().any(|r| r.body.to_string().contains("hunter2\\n")));
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_reads_lines_and_slash_commands_from_stdin() {
    let env = Env::new();
    let server = MockServer::start(vec![
        sse_text(&["Hi! How can I help?"], None),
        sse_text(&["## Goal\nGreeting."], None),
    ])
    .await;
    env.mock_config(&server, 10_000, json!({}));

    let output = env
        .run(
            &["chat"],
            "hello\n/tokens\n/summary\n/compact focus on greetings\n/summary\n/nope\n/exit\nnot sent\n",
        )
        .await;
    assert_success(&output);
    let text = stdout(&output);
    assert!(
        text.starts_with("phosphor chat · mock-large · 10,000-token window · compaction at 80%"),
        "{text}"
    );
    assert!(text.contains("\nHi! How can I help?\n"), "{text}");
    assert!(text.contains("\nnext request ≈ "), "{text}");
    assert!(text.contains("\nno summary yet: this session has not been compacted\n"), "{text}");
    assert!(text.contains("\n⟳ compacted "), "{text}");
    assert!(text.contains("\n── summary ──\n## Goal\nGreeting."), "{text}");
    assert!(text.contains("\nunknown command /nope; /help lists the commands\n"), "{text}");
    assert_eq!(server.requests().len(), 2);
    let instructions = sent(&server.requests()[1]);
    assert!(instructions[0].1.contains("focus on greetings"), "{:?}", instructions[0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn config_check_names_origins_and_reports_bad_values() {
    let env = Env::new();
    fs::write(env.workspace().join("phosphor.json"), r#"{ "options": { "summarize_threshold": 0.5 } }"#)
        .unwrap();
    let workspace_file = env.workspace().join("phosphor.json").display().to_string();
    let output = env.run(&["config", "check"], "").await;
    assert_success(&output);
    let report = stdout(&output);
    let line = |key: &str| {
        report.lines().find(|l| l.trim_start().starts_with(&format!("{key} = "))).unwrap().to_owned()
    };
    assert!(line("options.summarize_threshold").ends_with(&format!("<- {workspace_file}")), "{report}");
    assert!(line("options.summarize_model").ends_with("<- default"), "{report}");
    assert!(report.contains("models.large is not set"), "{report}");

    fs::write(env.config_path(), r#"{ "options": { "summarize_threshold": 1.5 } }"#).unwrap();
    let output = env.run(&["config", "check"], "").await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        format!(
            "error: {}: options.summarize_threshold: 1.5 is out of range; allowed: a number > 0 and <= 1\n",
            env.config_path().display()
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_model_the_error_says_how_to_configure_one() {
    let env = Env::new();
    let output = env.run(&["run", "hi"], "").await;
    assert_eq!(output.status.code(), Some(1));
    let error = stderr(&output);
    // No remote model: the default embedded model is used, and offline it cannot be downloaded.
    assert_eq!(error.lines().count(), 1, "{error}");
    assert!(error.starts_with("error: "), "{error}");
    assert!(error.contains("Qwen3-0.6B") && error.contains("model_path"), "{error}");
    assert!(error.contains(r#""models": {"large": {"provider": "openai""#), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_errors_exit_with_2() {
    let env = Env::new();
    let output = env.run(&["run", "   "], "").await;
    assert_eq!(
        (output.status.code(), stderr(&output)),
        (Some(2), "error: the prompt is empty; give it as an argument or on stdin\n".to_owned())
    );
    let output = env.run(&["run", "--bogus"], "").await;
    assert_eq!(output.status.code(), Some(2));
    let output = env.run(&["sessions", "show", "nope"], "").await;
    assert_eq!(
        (output.status.code(), stderr(&output)),
        (
            Some(1),
            "error: no session with id nope; list the sessions with `phosphor sessions list`\n".to_owned()
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn profiles_list_and_check() {
    let env = Env::new();
    let dir = env.workspace().join(".phosphor/profiles/terse");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("summarization.md.tpl"),
        "Summarize {{ message_count }} messages tersely.\n{% if previous_summary %}{{ previous_summary }}{% endif %}\n",
    )
    .unwrap();
    let output = env.run(&["profiles", "list"], "").await;
    assert_success(&output);
    let listed = stdout(&output);
    assert!(listed.lines().nth(1).unwrap().starts_with("terse    workspace  "), "{listed}");
    let output = env.run(&["profiles", "check"], "").await;
    assert_success(&output);
    assert_eq!(stdout(&output), "terse: ok\ncompact: ok\ndefault: ok\n");

    fs::write(dir.join("summarization.md.tpl"), "{{ no_such_variable }}\n").unwrap();
    let output = env.run(&["profiles", "check", "terse"], "").await;
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(stdout(&output).starts_with("terse: workspace template "), "{}", stdout(&output));
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_cancels_a_turn_and_leaves_the_session_usable() {
    let env = Env::new();
    let server = MockServer::start(vec![
        sse_text(&["Too late."], None).delayed(std::time::Duration::from_secs(60)),
        sse_text(&["Recovered."], None),
    ])
    .await;
    env.mock_config(&server, 100_000, json!({}));

    let mut command = env.command(&["run", "Take your time"]);
    let child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // Interrupt once the request is out, i.e. while the turn waits for the model.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while server.requests().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the request never arrived");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let status = Command::new("kill").arg("-INT").arg(child.id().to_string()).status().unwrap();
    assert!(status.success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    assert_eq!((output.status.code(), stderr(&output)), (Some(130), "interrupted\n".to_owned()));

    // The prompt was stored; the next turn continues the same session.
    let output = env.run(&["run", "--continue", "Still there?"], "").await;
    assert_success(&output);
    assert_eq!(stdout(&output), "Recovered.\n");
    let second = sent(&server.requests()[1]);
    assert_eq!(
        second[1..],
        [("user".to_owned(), "Take your time".to_owned()), ("user".to_owned(), "Still there?".to_owned())]
    );
}

/// Held by the tests that run the test model: two models sharing the 2 cores of a CI machine slow each
/// other down many times over (each engine's threads wait for cores the other holds).
static MODEL_RUNS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The README's first command, for real: the test model compacts the example transcript, and what
/// a continuing agent needs is in the result whatever the small model wrote.
#[tokio::test(flavor = "multi_thread")]
async fn the_readme_first_command_compacts_the_example_with_the_test_model() {
    let Some(model) = phosphor_base::testing::test_model("PHOSPHOR_TEST_MODEL") else { return };
    let _one_model_at_a_time = MODEL_RUNS.lock().await;
    let env = Env::new();
    let transcript = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/transcript.json");
    let model = model.to_str().unwrap().to_owned();
    let output = env.run(&["--model-path", &model, "compact", "--input", transcript], "").await;
    assert_success(&output);
    assert!(stderr(&output).contains("⟳ compacted"), "{}", stderr(&output));
    let compacted: Vec<Value> = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(compacted[0]["role"], "system");
    let summary = compacted[1]["content"].as_str().unwrap();
    assert!(
        summary.starts_with("This conversation continues from an earlier part that was compacted."),
        "{summary}"
    );
    let original: Vec<Value> = serde_json::from_str(&fs::read_to_string(transcript).unwrap()).unwrap();
    for request in original.iter().filter(|m| m["role"] == "user") {
        let text = request["content"].as_str().unwrap();
        let verbatim = compacted.iter().skip(2).any(|m| m["content"] == text) || summary.contains(text);
        assert!(verbatim, "request {text:?} is lost:\n{summary}");
    }
    // Each with the names its edits touched (`- src/config.rs (edited: defaults, ...)`).
    for file in ["src/segment.rs", "src/config.rs"] {
        assert!(summary.contains(&format!("- {file} (edited: ")), "{file}:\n{summary}");
    }
}

/// `cargo xtask demo`, the README's first command: Qwen2.5-Coder 0.5B (`PHOSPHOR_TEST_QWEN`) writes a summary of
/// the example transcript a reader can use: the compact profile's four sections (the outline it is constrained
/// to), naming the files the session changed, before the session-state trail.
#[tokio::test(flavor = "multi_thread")]
async fn the_demo_model_writes_a_summary_in_the_compact_profile_s_sections() {
    let Some(model) = phosphor_base::testing::test_model("PHOSPHOR_TEST_QWEN") else { return };
    let _one_model_at_a_time = MODEL_RUNS.lock().await;
    let env = Env::new();
    let model = model.to_str().unwrap().to_owned();
    let transcript = example_transcript();
    let output =
        env.run(&["--model-path", &model, "compact", "--input", transcript.to_str().unwrap()], "").await;
    assert_success(&output);
    assert!(!stderr(&output).contains("repeating itself"), "{}", stderr(&output));
    let compacted: Vec<Value> = serde_json::from_str(&stdout(&output)).unwrap();
    let summary = compacted[1]["content"].as_str().unwrap();
    let written = summary
        .split_once("Summary of everything before this point:\n\n")
        .and_then(|(_, rest)| rest.split_once("\n\n## Session state"))
        .map(|(written, _)| format!("{written}\n"))
        .unwrap_or_else(|| panic!("no model-written part:\n{summary}"));
    assert!(phosphor_prompt::compact_outline().accepts(&written), "{written}");
    assert!(written.contains("config.rs") || written.contains("segment.rs"), "{written}");
    assert!(!written.contains("in the user's words") && !written.contains("Under Goal"), "{written}");
}

#[tokio::test]
async fn eval_scores_every_strategy_with_the_test_model_and_writes_the_report() {
    let Some(model) = phosphor_base::testing::test_model("PHOSPHOR_TEST_MODEL") else { return };
    let _one_model_at_a_time = MODEL_RUNS.lock().await;
    let env = Env::new();
    let report = env.home().join("report.html");
    let model = model.to_str().unwrap().to_owned();
    let output = env
        .run(
            &[
                "--model-path",
                &model,
                "eval",
                "--input",
                example_transcript().to_str().unwrap(),
                "--context-window",
                "2048",
                "--json",
                "--report",
                report.to_str().unwrap(),
            ],
            "",
        )
        .await;
    assert_success(&output);
    assert!(stderr(&output).contains("compacting with SmolLM2"), "{}", stderr(&output));
    let json: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let names: Vec<&str> =
        json["strategies"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["original", "truncate", "mask", "summary", "summary+state-trail", "prepared"]);
    let by_name =
        |name: &str| json["strategies"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap();
    assert_eq!(by_name("original")["scores"]["overall"], 1.0);
    for strategy in json["strategies"].as_array().unwrap() {
        for key in ["tokens_before", "tokens_after", "seconds"] {
            assert!(strategy[key].is_number(), "{key}: {strategy}");
        }
        for key in ["artifact", "recall", "intent", "continuation", "overall"] {
            let score = strategy["scores"][key].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&score), "{key}: {strategy}");
        }
    }
    // The trail keeps every request and file whatever the model wrote.
    let trail = &by_name("summary+state-trail")["scores"];
    assert_eq!(trail["intent"], 1.0, "{trail}");
    assert!(by_name("summary+state-trail")["seconds"].as_f64().unwrap() > 0.0);
    assert!(by_name("truncate")["fits_window"].as_bool().unwrap());

    let html = scraper::Html::parse_document(&fs::read_to_string(&report).unwrap());
    assert!(html.errors.is_empty(), "{:?}", html.errors);
    let select = |css: &str| scraper::Selector::parse(css).unwrap();
    assert_eq!(html.select(&select("svg#chart g.point")).count(), 6);
    for name in names {
        let row = format!("table#strategies tr[data-strategy=\"{name}\"]");
        assert_eq!(html.select(&select(&row)).count(), 1, "{name}");
    }
}

#[tokio::test]
async fn eval_rejects_an_unknown_strategy_with_the_choices() {
    let env = Env::new();
    let output = env.run(&["eval", "--input", "x.json", "--strategy", "summarise"], "").await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output)
            .contains("expected one of original, truncate, mask, summary, summary+state-trail, prepared"),
        "{}",
        stderr(&output)
    );
}

/// The judged mode end to end against a local OpenAI-compatible server: the session model answers
/// each probe from each context, the judge (here the same server) grades it.
#[tokio::test]
async fn eval_with_a_judge_asks_every_probe_and_reports_the_grades() {
    let env = Env::new();
    let transcript = example_transcript();
    let transcript = transcript.to_str().unwrap();
    let strategies = ["--strategy", "original", "--strategy", "truncate"];
    // How many probes: a run without a judge calls no model.
    let quiet = MockServer::start(vec![]).await;
    env.mock_config(&quiet, 200_000, json!({}));
    let plain = env
        .run(
            &[&["eval", "--input", transcript, "--context-window", "2048", "--json"], &strategies[..]]
                .concat(),
            "",
        )
        .await;
    assert_success(&plain);
    let probes = serde_json::from_str::<Value>(&stdout(&plain)).unwrap()["probes"].as_array().unwrap().len();
    assert!(quiet.requests().is_empty());

    // For each probe and strategy: an answer, then a grade (4, then 2, alternating by strategy);
    // the judge's last reply holds no grade.
    let mut responses = Vec::new();
    for probe in 0..probes {
        responses.push(sse_text(&["It was edited, then tested."], None));
        responses.push(sse_text(&["Grade: 4"], None));
        responses.push(sse_text(&["unknown"], None));
        responses.push(sse_text(&[if probe + 1 == probes { "An excellent answer." } else { "2" }], None));
    }
    assert!(probes > 1);
    let server = MockServer::start(responses).await;
    env.mock_config(&server, 200_000, json!({}));
    let report = env.home().join("judged.html");
    let args = [
        &["eval", "--input", transcript, "--context-window", "2048", "--json", "--judge", "main"],
        &strategies[..],
        &["--report", report.to_str().unwrap()],
    ]
    .concat();
    let output = env.run(&args, "").await;
    assert_success(&output);
    let json: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let strategies = json["strategies"].as_array().unwrap();
    assert_eq!(strategies[0]["judged"]["scores"]["overall"], 4.0, "{}", strategies[0]);
    assert_eq!(strategies[1]["judged"]["scores"]["overall"], 2.0, "{}", strategies[1]);
    assert_eq!(strategies[0]["judged"]["graded"], probes, "{}", strategies[0]);
    assert_eq!(strategies[1]["judged"]["graded"], probes - 1, "{}", strategies[1]);
    assert_eq!(strategies[1]["judged"]["no_grade"], 1, "{}", strategies[1]);
    let last = &json["probes"][probes - 1]["judged"]["truncate"];
    assert_eq!(last["no_grade"], "An excellent answer.", "{last}");
    assert!(stderr(&output).contains("the judge gave no grade"), "{}", stderr(&output));
    assert_eq!(json["probes"][0]["judged"]["original"]["grade"], 4);
    let requests = server.requests();
    assert_eq!(requests.len(), probes * 4);
    // The answer request ends with the probe's question; the grade request holds the expected answer.
    let first = &json["probes"][0];
    let answer = sent(&requests[0]);
    assert_eq!(answer.last().unwrap(), &("user".to_owned(), first["question"].as_str().unwrap().to_owned()));
    assert!(answer[0].1.starts_with("You are continuing the work"), "{answer:?}");
    let grade = sent(&requests[1]);
    assert!(grade[0].1.contains(first["answer"].as_str().unwrap()), "{grade:?}");
    assert!(grade[0].1.contains("It was edited, then tested."), "{grade:?}");
    let html = fs::read_to_string(&report).unwrap();
    assert!(html.contains("judged (0-5)") && html.contains("4.00/5"), "{html}");
    assert!(html.contains("2.00/5 (1 without a grade)"), "{html}");

    // A template that does not render fails before any model is asked, naming the file and line.
    let template = env.home().join("rubric.tpl");
    fs::write(&template, "Grade {{ answr }}").unwrap();
    let broken = MockServer::start(vec![]).await;
    env.mock_config(&broken, 200_000, json!({}));
    let output = env
        .run(
            &[
                "eval",
                "--input",
                transcript,
                "--strategy",
                "original",
                "--judge",
                "main",
                "--judge-template",
                template.to_str().unwrap(),
            ],
            "",
        )
        .await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("rubric.tpl line 1"), "{}", stderr(&output));
    assert!(broken.requests().is_empty());
}

/// A running `phosphor serve`, killed when dropped.
struct Served {
    child: std::process::Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Env {
    /// Starts `phosphor serve --listen 127.0.0.1:0 <args>` and waits for the address it prints.
    fn serve(&self, args: &[&str]) -> Served {
        let mut child = self
            .command(&[&["serve", "--listen", "127.0.0.1:0"], args].concat())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line)
            .unwrap();
        let url =
            line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("serve printed {line:?}"));
        Served { url: url.to_owned(), child }
    }
}

/// POSTs `body` to the proxy's chat completions: (status, response headers, body text).
async fn post_chat(
    url: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

/// The text of a streamed answer (its `data:` events), and whether it ended with `[DONE]`.
fn streamed_text(body: &str) -> (String, bool) {
    let mut text = String::new();
    let mut done = false;
    for data in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let chunk: Value = serde_json::from_str(data).unwrap();
        assert_eq!(chunk["object"], "chat.completion.chunk", "{chunk}");
        if let Some(content) = chunk["choices"][0]["delta"]["content"].as_str() {
            text.push_str(content);
        }
    }
    (text, done)
}

/// A client that resends its whole history every time, as OpenAI clients do: the proxy finds the
/// session each request continues, compacts when the window fills, and forwards the summary and
/// the rest; every message stays stored, and a client that rewinds starts a branch.
#[tokio::test(flavor = "multi_thread")]
async fn serve_keeps_a_stateless_clients_conversation_in_one_compacted_session() {
    let env = Env::new();
    let server =
        MockServer::start((0..40).map(|i| sse_text(&[&format!("answer {i}")], Some((10, 3)))).collect())
            .await;
    env.mock_config(&server, 1_500, json!({}));
    let served = env.serve(&[]);

    let mut history = vec![json!({"role": "system", "content": "Be brief."})];
    for turn in 0..8 {
        let words: String = (0..80).map(|w| format!("topic{turn}word{w} ")).collect();
        history.push(json!({"role": "user", "content": format!("request {turn}: {words}")}));
        let stream = turn % 2 == 1;
        let body = json!({"model": "mock-large", "messages": history, "stream": stream});
        let (status, headers, text) = post_chat(&served.url, &body, &[]).await;
        assert_eq!(status, 200, "{text}");
        assert!(headers.get("x-phosphor-session-id").unwrap().to_str().unwrap().starts_with('~'));
        let answer = if stream {
            let (answer, done) = streamed_text(&text);
            assert!(done, "{text}");
            answer
        } else {
            let value: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(value["object"], "chat.completion");
            assert_eq!(value["model"], "mock-large");
            assert_eq!(value["choices"][0]["finish_reason"], "stop");
            value["choices"][0]["message"]["content"].as_str().unwrap().to_owned()
        };
        assert!(answer.starts_with("answer"), "{answer}");
        history.push(json!({"role": "assistant", "content": answer}));
    }

    let requests = server.requests();
    let summaries: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| sent(r).iter().any(|(_, text)| text.contains("You are summarizing the conversation")))
        .collect();
    assert!(!summaries.is_empty(), "no compaction in {} requests", requests.len());
    // The last answer request: the client's system prompt, the summary instead of the first requests,
    // and the latest request verbatim.
    let last = sent(requests.last().unwrap());
    assert_eq!(last[0], ("system".to_owned(), "Be brief.".to_owned()));
    assert!(last.iter().all(|(_, text)| !text.starts_with("request 0:")), "{last:?}");
    assert!(last.last().unwrap().1.starts_with("request 7:"), "{last:?}");
    for request in &requests {
        let tokens: u64 = phosphor_base::TokenCounter::count_request(
            &ApproxCounter,
            &phosphor_base::ChatRequest {
                messages: phosphor_wire::chat::from_openai(request.body["messages"].as_array().unwrap())
                    .unwrap(),
                ..Default::default()
            },
        );
        assert!(tokens <= 1_500, "a request of {tokens} tokens went upstream");
    }

    // One session holds the whole conversation: 8 requests and 8 answers, and the summaries.
    let sessions = sessions_json(&env);
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
    let id = sessions[0]["id"].as_str().unwrap().to_owned();
    let output = env.command(&["sessions", "export", "--jsonl", &id]).output().unwrap();
    assert_success(&output);
    let exported: Vec<Value> = stdout(&output).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let plain = exported.iter().filter(|m| m["is_summary"] != true).count();
    assert_eq!(plain, 16, "{exported:?}");

    // A client that rewinds to its first answer and asks something else starts a branch.
    let rewound = json!({"messages": [history[0], history[1], history[2], {"role": "user", "content": "instead, this"}]});
    let (status, headers, text) = post_chat(&served.url, &rewound, &[]).await;
    assert_eq!(status, 200, "{text}");
    assert_ne!(headers.get("x-phosphor-session-id").unwrap().to_str().unwrap(), id);
    assert_eq!(sessions_json(&env).as_array().unwrap().len(), 2);

    // A named session is created under its name and continued by it.
    let named = json!({"messages": [{"role": "user", "content": "hello"}]});
    let (status, headers, _) = post_chat(&served.url, &named, &[("x-phosphor-session", "proj-a")]).await;
    assert_eq!(status, 200);
    assert_eq!(headers.get("x-phosphor-session-id").unwrap(), "proj-a");
}

/// Tool calls pass through (the client runs its tools), and every bad request gets an
/// OpenAI-shaped error with a status that says what was wrong.
#[tokio::test(flavor = "multi_thread")]
async fn serve_passes_tool_calls_through_and_answers_errors_in_openai_shape() {
    let env = Env::new();
    let server = MockServer::start(vec![
        sse_tool_calls(&[("call_1", "read_file", r#"{"path":"src/a.rs"}"#)], None),
        sse_text(&["It prints hello."], None),
        MockResponse::json(422, r#"{"error": {"message": "the tool schema is not supported"}}"#),
    ])
    .await;
    env.mock_config(&server, 8_000, json!({}));
    let served = env.serve(&["--max-body-bytes", "100000"]);
    let tools = json!([{"type": "function", "function": {"name": "read_file", "description": "Reads a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]);
    let mut messages = vec![json!({"role": "user", "content": "What does src/a.rs do?"})];
    let (status, _, text) = post_chat(&served.url, &json!({"messages": messages, "tools": tools}), &[]).await;
    assert_eq!(status, 200, "{text}");
    let value: Value = serde_json::from_str(&text).unwrap();
    let message = &value["choices"][0]["message"];
    assert_eq!(value["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(message["content"], Value::Null);
    assert_eq!(message["tool_calls"][0]["function"]["name"], "read_file");
    assert_eq!(server.requests()[0].body["tools"][0]["function"]["name"], "read_file");
    messages.push(message.clone());
    messages.push(
        json!({"role": "tool", "tool_call_id": "call_1", "content": "fn main() { println!(\"hello\") }"}),
    );
    let (status, _, text) =
        post_chat(&served.url, &json!({"messages": messages, "tools": tools, "stream": true}), &[]).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(streamed_text(&text).0, "It prints hello.");
    let second = sent(&server.requests()[1]);
    assert_eq!(
        second.iter().map(|(role, _)| role.as_str()).collect::<Vec<_>>(),
        ["user", "assistant", "tool"]
    );
    assert_eq!(sessions_json(&env).as_array().unwrap().len(), 1);

    // An upstream error the llm client does not retry keeps its status and says where it came from.
    messages.push(json!({"role": "assistant", "content": "It prints hello."}));
    messages.push(json!({"role": "user", "content": "Thanks"}));
    let (status, _, text) = post_chat(&served.url, &json!({"messages": messages}), &[]).await;
    assert_eq!(status, 422, "{text}");
    let error: Value = serde_json::from_str(&text).unwrap();
    let words = error["error"]["message"].as_str().unwrap();
    assert!(words.contains("upstream") && words.contains("the tool schema is not supported"), "{error}");

    let cases: [(&str, Value, u16, &str); 5] = [
        ("not json", Value::Null, 400, "not valid JSON"),
        (
            "",
            json!({"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_gone", "content": "x"}]}),
            400,
            "tool result for \"call_gone\" in message 1 answers no tool call",
        ),
        ("", json!({"model": "x"}), 400, "`messages` is missing"),
        ("", json!({"messages": [{"role": "wizard", "content": "hi"}]}), 400, "messages"),
        (
            "",
            json!({"messages": [{"role": "user", "content": "x".repeat(200_000)}]}),
            413,
            "over 100000 bytes",
        ),
    ];
    for (raw, body, expected, words) in cases {
        let body = if raw.is_empty() { body.to_string() } else { raw.to_owned() };
        let response = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", served.url))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), expected);
        let error: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert!(error["error"]["message"].as_str().unwrap().contains(words), "{error}");
        assert!(error["error"]["type"].is_string(), "{error}");
    }
    let (status, _, text) =
        post_chat(&served.url, &json!({"messages": []}), &[("x-phosphor-session", "a b")]).await;
    assert_eq!(status, 400, "{text}");
    let response = reqwest::get(format!("{}/v2/nothing", served.url)).await.unwrap();
    assert_eq!(response.status().as_u16(), 404);
    let models: Value = serde_json::from_str(
        &reqwest::get(format!("{}/v1/models", served.url)).await.unwrap().text().await.unwrap(),
    )
    .unwrap();
    assert_eq!(models["data"][0]["id"], "mock-large");
    drop(served);

    // With a key, requests without it get 401; beyond loopback, a key is required.
    let keyed = env.serve(&["--api-key-env", KEY_VAR]);
    let (status, _, text) =
        post_chat(&keyed.url, &json!({"messages": [{"role": "user", "content": "hi"}]}), &[]).await;
    assert_eq!(status, 401, "{text}");
    let (status, _, _) =
        post_chat(&keyed.url, &json!({"messages": []}), &[("authorization", &format!("Bearer {KEY}"))]).await;
    assert_eq!(status, 400);
    drop(keyed);
    let output = env.run(&["serve", "--listen", "0.0.0.0:0"], "").await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("--api-key-env"), "{}", stderr(&output));
}

/// OpenAI's Python SDK, the client many agents are built on, holds a whole conversation through the proxy:
/// a tool call, a streamed answer, a streamed tool call its stream helper assembles, the SDK's own exceptions
/// for a bad request and a wrong key, and the model list.
#[tokio::test]
async fn serve_answers_the_openai_python_sdk() {
    let Some(site) = phosphor_base::testing::test_dir("PHOSPHOR_TEST_OPENAI_PYTHON") else { return };
    let env = Env::new();
    let server = MockServer::start(vec![
        sse_tool_calls(&[("call_1", "read_file", r#"{"path":"src/a.rs"}"#)], None),
        sse_text(&["It prints ", "hello."], None),
        sse_tool_calls(&[("call_2", "read_file", r#"{"path":"src/b.rs"}"#)], None),
    ])
    .await;
    env.mock_config(&server, 8_000, json!({}));
    let served = env.serve(&["--api-key-env", KEY_VAR]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/openai_sdk.py");
    let output = tokio::process::Command::new("python3")
        .args([script, &served.url, KEY])
        .env("PYTHONPATH", &site)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the SDK script failed:\n{stderr}");
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    let session = seen["session"].as_str().unwrap();
    assert_eq!(seen["first"]["finish_reason"], "tool_calls", "{seen}");
    assert_eq!(seen["first"]["tool"], "read_file");
    assert_eq!(seen["first"]["arguments"], json!({"path": "src/a.rs"}));
    assert!(seen["first"]["usage_total"].as_u64().unwrap() > 0, "{seen}");
    assert_eq!(seen["second"], json!({"text": "It prints hello.", "finish_reason": "stop"}));
    assert_eq!(seen["third"]["finish_reason"], "tool_calls", "{seen}");
    assert_eq!(seen["third"]["arguments"], json!({"path": "src/b.rs"}));
    assert_eq!(seen["bad_request"]["status"], 400, "{seen}");
    assert!(seen["bad_request"]["message"].as_str().unwrap().contains("messages"), "{seen}");
    assert_eq!(seen["wrong_key"]["status"], 401, "{seen}");
    assert_eq!(seen["models"], json!(["mock-large"]));

    // The upstream got the tools and the whole conversation, which is one stored session.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2].body["tools"][0]["function"]["name"], "read_file");
    let third = sent(&requests[2]);
    assert_eq!(third.last().unwrap(), &("user".to_owned(), "And src/b.rs?".to_owned()));
    let sessions = sessions_json(&env);
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
    assert_eq!(sessions[0]["id"], session, "{sessions}");
}

/// `--db postgres://...`: a turn is stored in Postgres and listed from there, and `phosphor serve`
/// keeps a client's conversation there too (on the server `cargo xtask ci` starts).
#[tokio::test(flavor = "multi_thread")]
async fn sessions_live_in_postgres_when_db_is_a_postgres_url() {
    let Some(url) = phosphor_base::testing::test_url("PHOSPHOR_TEST_POSTGRES") else { return };
    let env = Env { db: Some(url), ..Env::new() };
    let server = MockServer::start(vec![
        sse_text(&["Stored in Postgres."], None),
        sse_text(&["Served from Postgres."], None),
        sse_text(&["Still the same session."], None),
    ])
    .await;
    env.mock_config(&server, 100_000, json!({}));
    let output = env.run(&["run", "Where is this kept?"], "").await;
    assert_success(&output);
    assert_eq!(stdout(&output).trim(), "Stored in Postgres.");
    let sessions = sessions_json(&env);
    let stored = sessions.as_array().unwrap().iter().find(|s| s["title"] == "Where is this kept?");
    let stored = stored.unwrap_or_else(|| panic!("the turn's session is not listed: {sessions}"));
    assert_eq!(stored["message_count"], 2);

    let served = env.serve(&[]);
    let mut messages = vec![json!({"role": "user", "content": "A question for the proxy"})];
    let (status, headers, text) = post_chat(&served.url, &json!({"messages": messages}), &[]).await;
    assert_eq!(status, 200, "{text}");
    let session = headers["x-phosphor-session-id"].to_str().unwrap().to_owned();
    messages.push(json!({"role": "assistant", "content": "Served from Postgres."}));
    messages.push(json!({"role": "user", "content": "And again"}));
    let (status, headers, text) = post_chat(&served.url, &json!({"messages": messages}), &[]).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(headers["x-phosphor-session-id"].to_str().unwrap(), session);
    drop(served);
    let output = env.command(&["sessions", "show", &session]).output().unwrap();
    assert_success(&output);
    assert!(stdout(&output).contains("And again"), "{}", stdout(&output));

    // A server that is not there: the error names it, without the password.
    let nowhere = Env { db: Some("postgres://nobody:secret@127.0.0.1:1/none".to_owned()), ..Env::new() };
    let output = nowhere.run(&["sessions", "list"], "").await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("postgres://nobody:***@127.0.0.1:1/none"), "{}", stderr(&output));
    assert!(!stderr(&output).contains("secret"), "{}", stderr(&output));
}

/// The messages of a stored session, as `sessions export --jsonl` writes them.
fn exported(env: &Env, session: &str) -> Vec<Value> {
    let output = env.command(&["sessions", "export", "--jsonl", session]).output().unwrap();
    assert_success(&output);
    stdout(&output).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The text of an exported message.
fn exported_text(message: &Value) -> String {
    message["content"].as_str().unwrap_or_default().to_owned()
}

/// A namespace no other run of the tests uses (the Postgres server is shared by every test).
fn unique_namespace(what: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{what}-{}-{nanos}", std::process::id())
}

/// Two `phosphor serve` processes on one Postgres: a client whose requests alternate between them
/// stays in one session, compacted, with every message stored once.
#[tokio::test(flavor = "multi_thread")]
async fn two_serve_processes_on_one_postgres_share_the_session() {
    let Some(url) = phosphor_base::testing::test_url("PHOSPHOR_TEST_POSTGRES") else { return };
    let env = Env { db: Some(url), ..Env::new() };
    let server =
        MockServer::start((0..40).map(|i| sse_text(&[&format!("answer {i}")], Some((10, 3)))).collect())
            .await;
    env.mock_config(&server, 1_500, json!({}));
    let proxies = [env.serve(&[]), env.serve(&[])];
    let name = unique_namespace("two-proxies");

    let mut history = Vec::new();
    for turn in 0..8 {
        let words: String = (0..80).map(|w| format!("topic{turn}word{w} ")).collect();
        history.push(json!({"role": "user", "content": format!("request {turn}: {words}")}));
        let proxy = &proxies[turn % 2];
        let body = json!({"messages": history, "stream": turn % 4 == 3});
        let (status, headers, text) = post_chat(&proxy.url, &body, &[("x-phosphor-session", &name)]).await;
        assert_eq!(status, 200, "turn {turn}: {text}");
        assert_eq!(headers["x-phosphor-session-id"].to_str().unwrap(), name, "turn {turn} branched");
        let answer = if turn % 4 == 3 {
            streamed_text(&text).0
        } else {
            serde_json::from_str::<Value>(&text).unwrap()["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        history.push(json!({"role": "assistant", "content": answer}));
    }
    let stored = exported(&env, &name);
    let plain: Vec<&Value> = stored.iter().filter(|m| m["is_summary"] != true).collect();
    assert_eq!(plain.len(), 16, "every request and answer once: {stored:?}");
    for (message, sent) in plain.iter().zip(&history) {
        assert_eq!(exported_text(message), sent["content"].as_str().unwrap());
    }
    assert!(stored.iter().any(|m| m["is_summary"] == true), "no compaction");
    let summaries = server
        .requests()
        .iter()
        .filter(|r| sent(r).iter().any(|(_, text)| text.contains("You are summarizing the conversation")))
        .count();
    assert_eq!(
        summaries,
        stored.iter().filter(|m| m["is_summary"] == true).count(),
        "each summary asked for once"
    );
}

/// A proxy killed (SIGKILL) while it waits for a summary: the other proxy on the same Postgres
/// takes the session over at once (the dead one's claim and lock went with its connections),
/// nothing half-written is shown, and no message is stored twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_killed_mid_compaction_leaves_the_session_whole_for_the_other() {
    let Some(url) = phosphor_base::testing::test_url("PHOSPHOR_TEST_POSTGRES") else { return };
    let env = Env { db: Some(url), ..Env::new() };
    let answers = (0..40)
        .map(|i| sse_text(&[&format!("answer {i}")], Some((10, 3))).delayed(Duration::from_millis(300)));
    let server = MockServer::start(answers.collect()).await;
    env.mock_config(&server, 1_500, json!({}));
    let mut doomed = Some(env.serve(&[]));
    let survivor = env.serve(&[]);
    let name = unique_namespace("killed");
    let is_summary =
        |r: &RecordedRequest| sent(r).iter().any(|(_, text)| text.contains("You are summarizing"));

    let mut history = Vec::new();
    let mut killed_at = None;
    for turn in 0..8 {
        let words: String = (0..80).map(|w| format!("topic{turn}word{w} ")).collect();
        history.push(json!({"role": "user", "content": format!("request {turn}: {words}")}));
        let body = json!({"messages": history});
        let answer = loop {
            let url = doomed.as_ref().map_or(survivor.url.clone(), |d| d.url.clone());
            let header = name.clone();
            let body = body.to_string();
            let request = tokio::spawn(async move {
                let response = reqwest::Client::new()
                    .post(format!("{url}/v1/chat/completions"))
                    .header("x-phosphor-session", header)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await;
                match response {
                    Ok(response) => Some((response.status().as_u16(), response.text().await.ok()?)),
                    Err(_) => None,
                }
            });
            let summaries_before = server.requests().iter().filter(|r| is_summary(r)).count();
            // Kill the first proxy as soon as its first summary request reaches the model.
            while doomed.is_some() && !request.is_finished() {
                if server.requests().iter().filter(|r| is_summary(r)).count() > summaries_before {
                    drop(doomed.take());
                    killed_at = Some(turn);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            match request.await.unwrap() {
                Some((200, text)) => {
                    let value: Value = serde_json::from_str(&text).unwrap();
                    break value["choices"][0]["message"]["content"].as_str().unwrap().to_owned();
                }
                // The killed proxy's request: the client sends it again, to the other proxy.
                other => assert!(killed_at == Some(turn), "turn {turn}: {other:?}"),
            }
        };
        history.push(json!({"role": "assistant", "content": answer}));
    }
    let killed_at = killed_at.expect("no compaction happened while the first proxy served");
    assert!(killed_at < 7, "killed at the last turn: nothing left to check");

    let stored = exported(&env, &name);
    let plain: Vec<&Value> = stored.iter().filter(|m| m["is_summary"] != true).collect();
    assert_eq!(plain.len(), 16, "every request and answer once, in order: {stored:?}");
    for (message, sent) in plain.iter().zip(&history) {
        assert_eq!(exported_text(message), sent["content"].as_str().unwrap());
    }
    // The summary the killed proxy was writing is marked cancelled, never shown; a later one is.
    let output = env.command(&["sessions", "show", "--full", &name]).output().unwrap();
    assert_success(&output);
    let full = stdout(&output);
    assert!(full.contains("compacted"), "{full}");
    assert!(full.contains("cancelled"), "{full}");
    assert!(!full.contains("streaming"), "{full}");
}

/// A proxy killed (SIGKILL) while it prepares a summary in the background
/// (`summarize_prepare_at`): nothing of that summary is stored, every message is, and a proxy
/// started again on the same database carries the session on and compacts it.
#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_killed_while_it_prepares_a_summary_leaves_the_session_whole() {
    let env = Env::new();
    let is_summary =
        |r: &RecordedRequest| sent(r).iter().any(|(_, text)| text.contains("You are summarizing"));
    // The first summary never arrives in time (its proxy dies meanwhile); later ones come at once.
    let summaries = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = summaries.clone();
    let server = MockServer::start_responding(std::sync::Arc::new(move |request: &RecordedRequest| {
        if is_summary(request) {
            let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let summary = sse_text(&["Summary: the user sent numbered requests."], Some((10, 5)));
            return if n == 0 { summary.delayed(Duration::from_secs(30)) } else { summary };
        }
        sse_text(&["Noted."], Some((10, 3)))
    }))
    .await;
    env.mock_config(&server, 2_000, json!({ "summarize_prepare_at": 0.5, "mask_threshold": 0 }));
    let name = unique_namespace("preparing");
    let mut proxy = Some(env.serve(&[]));
    let mut killed_at = None;
    let mut history = Vec::new();
    for turn in 0..10 {
        let url = proxy.as_ref().unwrap().url.clone();
        let words: String = (0..60).map(|w| format!("topic{turn}word{w} ")).collect();
        history.push(json!({"role": "user", "content": format!("request {turn}: {words}")}));
        let (status, _, text) =
            post_chat(&url, &json!({"messages": history}), &[("x-phosphor-session", &name)]).await;
        assert_eq!(status, 200, "turn {turn}: {text}");
        let answer: Value = serde_json::from_str(&text).unwrap();
        history.push(json!({"role": "assistant", "content": answer["choices"][0]["message"]["content"]}));
        if killed_at.is_none() {
            // Kill the proxy as soon as its preparation has asked for the summary.
            for _ in 0..50 {
                if summaries.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                    drop(proxy.take()); // SIGKILL
                    proxy = Some(env.serve(&[]));
                    killed_at = Some(turn);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    let killed_at = killed_at.expect("no preparation started");
    assert!(killed_at < 6, "killed at turn {killed_at}: too late to see the session compacted after");
    drop(proxy);

    let stored = exported(&env, &name);
    let plain: Vec<&Value> = stored.iter().filter(|m| m["is_summary"] != true).collect();
    assert_eq!(plain.len(), 20, "every request and answer once, in order: {stored:?}");
    for (message, sent) in plain.iter().zip(&history) {
        assert_eq!(exported_text(message), sent["content"].as_str().unwrap());
    }
    // The killed preparation left no row at all; the restarted proxy compacted.
    let output = env.command(&["sessions", "show", "--full", &name]).output().unwrap();
    assert_success(&output);
    let full = stdout(&output);
    assert!(full.contains("compacted"), "{full}");
    assert!(!full.contains("cancelled") && !full.contains("streaming"), "{full}");
    assert!(summaries.load(std::sync::atomic::Ordering::SeqCst) >= 2, "the restarted proxy wrote its own");
}

/// POSTs `body` to `path` of the proxy: (status, response headers, body text).
async fn post(
    url: &str,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

/// Like [`post`], with a JSON string body sent as its raw text (a body that is not JSON).
async fn post_raw(
    url: &str,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut request =
        reqwest::Client::new().post(format!("{url}{path}")).header("content-type", "application/json");
    request = match body {
        Value::String(raw) => request.body(raw.clone()),
        body => request.body(body.to_string()),
    };
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

/// The events of a server-sent stream with event names: (name, data).
fn named_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| {
            let event =
                frame.lines().find_map(|l| l.strip_prefix("event: ")).unwrap_or_else(|| panic!("{frame}"));
            let data =
                frame.lines().find_map(|l| l.strip_prefix("data: ")).unwrap_or_else(|| panic!("{frame}"));
            (event.to_owned(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

/// Claude Code's requests as it sends them (logged from Claude Code 2.1.328): Anthropic Messages,
/// streamed, with its session header, cache breakpoints on system blocks, `thinking`, and tools
/// with `input_schema`. A tool round trip through the proxy, whole and streamed, reaches a
/// chat-completions upstream translated; count_tokens answers the request Phosphor would send;
/// errors come in Anthropic's shape.
#[tokio::test(flavor = "multi_thread")]
async fn serve_answers_anthropic_messages_as_claude_code_sends_them() {
    let env = Env::new();
    let server = MockServer::start(vec![
        sse_tool_calls(&[("call_1", "Read", r#"{"file_path":"src/a.rs"}"#)], Some((40, 5))),
        sse_text(&["It prints ", "hello."], Some((60, 4))),
    ])
    .await;
    env.mock_config_named(&server, Api::Chat, "claude-sonnet-4-5", 8_000, json!({}));
    let served = env.serve(&["--api-key-env", KEY_VAR]);
    let session = "5c1b3f5e-7d43-4c55-9a6e-2f0c4d9a1e11";
    let headers = [
        ("x-api-key", KEY),
        ("anthropic-version", "2023-06-01"),
        ("anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14"),
        ("x-claude-code-session-id", session),
    ];
    let system = json!([
        {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
        {"type": "text", "text": "Answer in one sentence.", "cache_control": {"type": "ephemeral"}},
    ]);
    let tools = json!([{"name": "Read", "description": "Reads a file.", "input_schema": {
        "type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}]);
    let mut messages = vec![json!({"role": "user", "content": [
        {"type": "text", "text": "What does src/a.rs do?", "cache_control": {"type": "ephemeral"}}]})];
    let body = |messages: &[Value], stream: bool| {
        json!({"model": "claude-sonnet-4-5", "system": system, "messages": messages, "tools": tools,
               "max_tokens": 32000, "thinking": {"type": "enabled", "budget_tokens": 31999},
               "metadata": {"user_id": "user_abc"}, "context_management": {"edits": []}, "stream": stream})
    };

    let (status, response_headers, text) =
        post(&served.url, "/v1/messages?beta=true", &body(&messages, true), &headers).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(response_headers.get("x-phosphor-session-id").unwrap(), session);
    let events = named_events(&text);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ],
        "{text}"
    );
    assert_eq!(events[1].1["content_block"]["type"], "tool_use");
    assert_eq!(events[1].1["content_block"]["name"], "Read");
    let call_id = events[1].1["content_block"]["id"].as_str().unwrap().to_owned();
    assert_eq!(events[2].1["delta"]["partial_json"], r#"{"file_path":"src/a.rs"}"#);
    assert_eq!(events[4].1["delta"]["stop_reason"], "tool_use");
    assert_eq!(events[4].1["usage"]["input_tokens"], 40);
    // Upstream got the system blocks joined, the tool as a function, the user's words.
    let first = &server.requests()[0].body;
    assert_eq!(first["model"], "claude-sonnet-4-5");
    assert_eq!(first["tools"][0]["function"]["name"], "Read");
    assert_eq!(first["tools"][0]["function"]["parameters"]["required"][0], "file_path");
    assert_eq!(
        sent(&server.requests()[0]),
        [
            (
                "system".to_owned(),
                "You are Claude Code, Anthropic's official CLI for Claude.\n\nAnswer in one sentence."
                    .to_owned()
            ),
            ("user".to_owned(), "What does src/a.rs do?".to_owned()),
        ]
    );

    messages.push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": "src/a.rs"}}]}));
    messages.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id, "content": [{"type": "text", "text": "fn main() { println!(\"hello\") }"}]}]}));
    let (status, _, counted) =
        post(&served.url, "/v1/messages/count_tokens?beta=true", &body(&messages, false), &headers).await;
    assert_eq!(status, 200, "{counted}");
    let counted: Value = serde_json::from_str(&counted).unwrap();
    let tokens = counted["input_tokens"].as_u64().unwrap();
    assert!((40..2_000).contains(&tokens), "{counted}");
    assert_eq!(server.requests().len(), 1, "count_tokens asked the model");

    let (status, _, text) =
        post(&served.url, "/v1/messages?beta=true", &body(&messages, false), &headers).await;
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["type"], "message");
    assert_eq!(answer["role"], "assistant");
    assert_eq!(answer["content"], json!([{"type": "text", "text": "It prints hello."}]));
    assert_eq!(answer["stop_reason"], "end_turn");
    assert_eq!(answer["usage"]["input_tokens"], 60);
    assert_eq!(answer["usage"]["output_tokens"], 4);
    let second = &server.requests()[1].body["messages"];
    assert_eq!(second[2]["tool_calls"][0]["id"], call_id.as_str());
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], call_id.as_str());
    assert_eq!(second[3]["content"], "fn main() { println!(\"hello\") }");
    // One session, named by Claude Code's own key, holds the conversation.
    let sessions = sessions_json(&env);
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
    assert_eq!(sessions[0]["id"], session);

    // Errors in Anthropic's shape, saying where and what is allowed.
    let video = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [{"type": "video"}]}]});
    let orphan = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "x"}]}]});
    let huge = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x".repeat(50 << 20)}]});
    let wrong_type =
        json!({"model": "m", "max_tokens": "ten", "messages": [{"role": "user", "content": "hi"}]});
    let cases = [
        (video, &headers[..], 400, "invalid_request_error", "messages[0].content[0].type"),
        (json!({"max_tokens": 10}), &headers[..], 400, "invalid_request_error", "`messages` is missing"),
        (wrong_type, &headers[..], 400, "invalid_request_error", "`max_tokens` is the string \"ten\""),
        (
            orphan,
            &headers[..],
            400,
            "invalid_request_error",
            "`messages[0].content[0].tool_use_id` is \"toolu_gone\", but no earlier",
        ),
        (huge, &headers[..], 413, "request_too_large", "over 33554432 bytes"),
        (Value::String("{not json".into()), &headers[..], 400, "invalid_request_error", "not valid JSON"),
        (body(&messages, false), &headers[1..], 401, "authentication_error", "x-api-key"),
    ];
    for (body, headers, expected, kind, words) in cases {
        let (status, _, text) = post_raw(&served.url, "/v1/messages", &body, headers).await;
        assert_eq!(status, expected, "{text}");
        let error: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(error["type"], "error", "{error}");
        assert_eq!(error["error"]["type"], kind, "{error}");
        assert!(error["error"]["message"].as_str().unwrap().contains(words), "{error}");
    }
    let (status, _, text) = post(&served.url, "/v1/messages/batches", &json!({}), &headers).await;
    assert_eq!(status, 404, "{text}");
    let error: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(error["error"]["type"], "not_found_error", "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("POST /v1/responses"), "{error}");
    assert_eq!(server.requests().len(), 2);
}

/// Codex CLI's requests as it sends them (logged from Codex CLI 0.169.0): OpenAI Responses,
/// streamed, stateless (`store: false`, the whole input every time), `developer` instructions,
/// function tools beside hosted ones, `prompt_cache_key` = its session. A tool round trip through
/// the proxy: the event sequence OpenAI sends, `function_call` items paired by `call_id`, usage.
#[tokio::test(flavor = "multi_thread")]
async fn serve_answers_the_responses_api_as_codex_sends_it() {
    let env = Env::new();
    let server = MockServer::start(vec![
        sse_tool_calls(&[("call_9", "exec_command", r#"{"cmd":"cat src/a.rs"}"#)], Some((50, 6))),
        sse_text(&["It prints ", "hello."], Some((70, 4))),
    ])
    .await;
    env.mock_config_named(&server, Api::Chat, "gpt-5.1-codex", 8_000, json!({}));
    let served = env.serve(&[]);
    let session = "019ad5b2-8c11-7e00-9a1b-3c4d5e6f7a8b";
    let headers =
        [("authorization", "Bearer sk-codex"), ("session-id", session), ("originator", "codex_exec")];
    let tools = json!([
        {"type": "function", "name": "exec_command", "description": "Runs a command.", "strict": false,
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
        {"type": "web_search", "external_web_access": false},
    ]);
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What does src/a.rs do?"}]}),
    ];
    let body = |input: &[Value], stream: bool| {
        json!({"model": "gpt-5.1-codex", "instructions": "Be brief.", "input": input, "tools": tools,
               "tool_choice": "auto", "parallel_tool_calls": false, "reasoning": {"effort": "medium"},
               "store": false, "stream": stream, "include": ["reasoning.encrypted_content"],
               "prompt_cache_key": session})
    };

    let (status, response_headers, text) =
        post(&served.url, "/v1/responses", &body(&input, true), &headers).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(response_headers.get("x-phosphor-session-id").unwrap(), session);
    let events = named_events(&text);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ],
        "{text}"
    );
    for (index, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], name.as_str());
        assert_eq!(data["sequence_number"], index as u64);
    }
    let item = &events[5].1["item"];
    assert_eq!(item["type"], "function_call");
    assert_eq!(item["call_id"], "call_9");
    assert_eq!(item["name"], "exec_command");
    assert!(item["id"].as_str().unwrap().starts_with("fc_"), "{item}");
    let completed = &events[6].1["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["output"][0]["call_id"], "call_9");
    assert_eq!(completed["usage"]["input_tokens"], 50);
    assert_eq!(completed["usage"]["output_tokens"], 6);
    let first = &server.requests()[0].body;
    assert_eq!(first["tools"].as_array().unwrap().len(), 1, "the hosted tool went upstream: {first}");
    assert_eq!(
        sent(&server.requests()[0])[0],
        ("system".to_owned(), "Be brief.\n\nYou are Codex.".to_owned())
    );

    input.push(item.clone());
    input.push(json!({"type": "function_call_output", "call_id": "call_9", "output": "fn main() { println!(\"hello\") }"}));
    let (status, _, text) = post(&served.url, "/v1/responses", &body(&input, false), &headers).await;
    assert_eq!(status, 200, "{text}");
    let response: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(response["object"], "response");
    assert_eq!(response["status"], "completed");
    assert_eq!(response["output"][0]["type"], "message");
    assert_eq!(response["output"][0]["content"][0]["type"], "output_text");
    assert_eq!(response["output"][0]["content"][0]["text"], "It prints hello.");
    assert_eq!(response["usage"]["input_tokens"], 70);
    let second = &server.requests()[1].body["messages"];
    assert_eq!(second[2]["tool_calls"][0]["id"], "call_9");
    assert_eq!(second[3]["tool_call_id"], "call_9");
    assert_eq!(sessions_json(&env).as_array().unwrap().len(), 1);

    // Stateful requests cannot be served by a proxy that holds no responses: a clear 400.
    let mut stateful = body(&input, false);
    stateful["previous_response_id"] = json!("resp_123");
    let (status, _, text) = post(&served.url, "/v1/responses", &stateful, &headers).await;
    assert_eq!(status, 400, "{text}");
    let error: Value = serde_json::from_str(&text).unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("previous_response_id"), "{error}");
    let orphan = json!({"model": "m", "input": [{"type": "function_call_output", "call_id": "call_gone", "output": "x"}]});
    let huge = json!({"model": "m", "input": "x".repeat(50 << 20)});
    let cases = [
        (Value::String("[1,".into()), 400, "not valid JSON"),
        (json!({"model": "m", "input": 7}), 400, "`input` is the number 7"),
        (json!({"model": "m", "input": "hi", "stream": "yes"}), 400, "`stream` is the string \"yes\""),
        (orphan, 400, "`input[0].call_id` is \"call_gone\", but no earlier function_call"),
        (huge, 413, "over 33554432 bytes"),
    ];
    for (body, expected, words) in cases {
        let (status, _, text) = post_raw(&served.url, "/v1/responses", &body, &headers).await;
        assert_eq!(status, expected, "{text}");
        let error: Value = serde_json::from_str(&text).unwrap();
        assert!(error["error"]["message"].as_str().unwrap().contains(words), "{error}");
        assert!(error["error"]["type"].is_string(), "{error}");
    }
    // Nothing a rejected request held was stored, and the session stands as it was.
    assert_eq!(sessions_json(&env).as_array().unwrap().len(), 1);
    assert_eq!(server.requests().len(), 2);
}

/// A conversation that reaches the proxy already longer than the window (a client resumed through
/// it, a proxy started mid-session): its first request compacts, as many rungs as it takes, and is
/// answered, in each format; no request upstream is over the window.
#[tokio::test(flavor = "multi_thread")]
async fn serve_compacts_a_session_that_arrives_over_the_window() {
    let env = Env::new();
    let responses =
        (0..30).map(|i| sse_text(&[&format!("Summary {i}: the user asked about many topics.")], None));
    let server = MockServer::start(responses.collect()).await;
    env.mock_config(&server, 4_000, json!({}));
    let served = env.serve(&[]);
    let words = |turn: usize| (0..120).map(|w| format!("topic{turn}word{w} ")).collect::<String>();
    let mut chat = Vec::new();
    let mut anthropic = Vec::new();
    let mut responses = Vec::new();
    for turn in 0..40 {
        let user = format!("request {turn}: {}", words(turn));
        let assistant = format!("answer {turn}");
        chat.push(json!({"role": "user", "content": user}));
        chat.push(json!({"role": "assistant", "content": assistant}));
        anthropic.push(json!({"role": "user", "content": user}));
        anthropic.push(json!({"role": "assistant", "content": [{"type": "text", "text": assistant}]}));
        responses.push(
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": user}]}),
        );
        responses.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": assistant}]}));
    }
    let last = "request 40: what was the first thing I asked?";
    chat.push(json!({"role": "user", "content": last}));
    anthropic.push(json!({"role": "user", "content": last}));
    responses
        .push(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": last}]}));
    let requests = [
        ("/v1/chat/completions", json!({"messages": chat}), "s-chat"),
        (
            "/v1/messages",
            json!({"model": "mock-large", "max_tokens": 100, "messages": anthropic}),
            "s-anthropic",
        ),
        ("/v1/responses", json!({"model": "mock-large", "input": responses, "store": false}), "s-responses"),
    ];
    for (path, body, name) in requests {
        let before = server.requests().len();
        let (status, _, text) = post(&served.url, path, &body, &[("x-phosphor-session", name)]).await;
        assert_eq!(status, 200, "{path}: {text}");
        let made = &server.requests()[before..];
        assert!(made.len() >= 2, "{path}: no compaction before the answer");
        let answered = sent(made.last().unwrap());
        assert_eq!(answered.last().unwrap().1, last, "{path}");
        assert!(answered.iter().all(|(_, text)| !text.starts_with("request 0:")), "{path}: {answered:?}");
    }
    for request in server.requests() {
        let tokens: u64 = phosphor_base::TokenCounter::count_request(
            &ApproxCounter,
            &phosphor_base::ChatRequest {
                messages: phosphor_wire::chat::from_openai(request.body["messages"].as_array().unwrap())
                    .unwrap(),
                ..Default::default()
            },
        );
        assert!(tokens <= 4_000, "a request of {tokens} tokens went upstream");
    }
}

/// The request's `model` is what goes upstream, with the window the configuration or the built-in
/// table gives it; a model no table knows is refused, naming the setting. Requests for another
/// model than the session model pass through as sent while they fit, and are compacted when they
/// do not. The client's own key goes upstream to a provider with none; it is stored nowhere.
#[tokio::test(flavor = "multi_thread")]
async fn serve_sends_each_request_to_the_model_it_names_with_the_client_s_key() {
    let env = Env::new();
    let server = MockServer::start_responding(std::sync::Arc::new(|request: &RecordedRequest| {
        let summary = request.body.to_string().contains("You are summarizing the conversation");
        wire_text(Api::Chat, if summary { "The user asked about topics." } else { "Answered." })
    }))
    .await;
    let config = json!({
        "providers": { "keyless": { "base_url": server.base_url() } },
        "models": {
            "large": { "provider": "keyless", "model": "claude-sonnet-4-5", "context_window": 8_000, "max_output_tokens": 100 },
            "windows": { "local-*": { "context_window": 4_000, "max_output_tokens": 100 } }
        }
    });
    fs::write(env.config_path(), config.to_string()).unwrap();
    let served = env.serve(&[]);
    let client_key = "sk-ant-client-secret-7731";
    let headers = [("x-api-key", client_key), ("anthropic-version", "2023-06-01")];
    let ask = |model: &str, text: &str| json!({"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": text}]});

    // The session model: a session, the client's key sent upstream as the provider's bearer.
    let (status, answer_headers, text) =
        post(&served.url, "/v1/messages", &ask("claude-sonnet-4-5", "What is in src?"), &headers).await;
    assert_eq!(status, 200, "{text}");
    assert!(answer_headers.get("x-phosphor-session-id").is_some());
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["model"], "claude-sonnet-4-5");
    let first = &server.requests()[0];
    assert_eq!(first.body["model"], "claude-sonnet-4-5");
    assert_eq!(first.header("authorization"), Some(format!("Bearer {client_key}").as_str()));
    assert_eq!(sessions_json(&env).as_array().unwrap().len(), 1);

    // Claude Code's small model, on a short request: passed through, nothing stored.
    let haiku = "claude-haiku-4-5-20251001";
    let (status, answer_headers, text) =
        post(&served.url, "/v1/messages", &ask(haiku, "Write a 3-word title for: fix the parser"), &headers)
            .await;
    assert_eq!(status, 200, "{text}");
    assert!(answer_headers.get("x-phosphor-session-id").is_none());
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["model"], haiku);
    assert_eq!(upstream_model(server.requests().last().unwrap()), haiku);
    assert_eq!(sessions_json(&env).as_array().unwrap().len(), 1);

    // A model no table knows: Anthropic's error shape, naming the setting to add.
    let (status, _, text) = post(&served.url, "/v1/messages", &ask("llama3:8b", "hi"), &headers).await;
    assert_eq!(status, 400, "{text}");
    let error: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error", "{text}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains(r#""models": {"windows": {"llama3:8b""#), "{message}");

    // A configured pattern's model, on a history over its 4,000-token window: compacted before
    // it goes, and then a session like any other.
    let before = server.requests().len();
    let mut messages = Vec::new();
    for turn in 0..12 {
        let words: String = (0..120).map(|w| format!("topic{turn}word{w} ")).collect();
        messages.push(json!({"role": "user", "content": format!("request {turn}: {words}")}));
        messages.push(json!({"role": "assistant", "content": format!("answer {turn}")}));
    }
    messages.push(json!({"role": "user", "content": "what was the first request about?"}));
    let body = json!({"model": "local-7b", "max_tokens": 50, "messages": messages});
    let (status, answer_headers, text) = post(&served.url, "/v1/messages", &body, &headers).await;
    assert_eq!(status, 200, "{text}");
    assert!(answer_headers.get("x-phosphor-session-id").is_some());
    let made = &server.requests()[before..];
    assert!(made.len() >= 2, "no compaction: {} requests", made.len());
    for request in made {
        assert_eq!(upstream_model(request), "local-7b");
        let messages =
            phosphor_wire::chat::from_openai(request.body["messages"].as_array().unwrap()).unwrap();
        let tokens = phosphor_base::TokenCounter::count_request(
            &ApproxCounter,
            &phosphor_base::ChatRequest { messages, ..Default::default() },
        );
        assert!(tokens <= 4_000, "a request of {tokens} tokens went to a 4,000-token model");
    }
    assert_eq!(sessions_json(&env).as_array().unwrap().len(), 2);

    // The key reached the upstream and nothing else: not the database.
    drop(served);
    for entry in fs::read_dir(env.db().parent().unwrap()).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with("sessions.db") {
            let bytes = fs::read(&path).unwrap();
            assert!(
                !bytes.windows(client_key.len()).any(|w| w == client_key.as_bytes()),
                "{} holds the client's key",
                path.display()
            );
        }
    }
}

/// The folder where `cargo xtask ci` installs the pinned agent clients from npm
/// (`@anthropic-ai/claude-code`, `@openai/codex`): it holds their `node_modules`.
const AGENT_CLIENTS: &str = "PHOSPHOR_TEST_AGENT_CLIENTS";
/// The task every client is given: it needs every file, and the files together are over the window.
const LONG_TASK: &str =
    "Read the files part-0.txt to part-11.txt in this folder, one at a time, then say DONE.";
const LONG_TASK_FILES: usize = 12;

/// What an upstream request holds, whichever API it speaks: the conversation (the system prompt
/// first), the tools it offers, and the array whose prefix a prompt cache keys on (`messages`, or
/// the Responses `input`; Anthropic's `cache_control` marks left out, since they are not content).
struct Upstream {
    messages: Vec<Message>,
    tools: Vec<String>,
    sequence: Value,
}

fn upstream_view(request: &RecordedRequest) -> Upstream {
    let path = request.path.split('?').next().unwrap_or_default();
    let body = request.body.to_string();
    let read = |inbound: phosphor_wire::Inbound| {
        let mut messages = Vec::new();
        if !inbound.system_prompt.is_empty() {
            messages.push(Message::system(inbound.system_prompt.clone()));
        }
        messages.extend(inbound.messages);
        (messages, inbound.tools.into_iter().map(|t| t.name).collect())
    };
    let (messages, tools, mut sequence) = if path.ends_with("/messages") {
        let (messages, tools) = read(phosphor_wire::anthropic::read_request(body.as_bytes()).unwrap());
        (messages, tools, request.body["messages"].clone())
    } else if path.ends_with("/responses") {
        let (messages, tools) = read(phosphor_wire::responses::read_request(body.as_bytes()).unwrap());
        (messages, tools, request.body["input"].clone())
    } else {
        let messages =
            phosphor_wire::chat::from_openai(request.body["messages"].as_array().unwrap()).unwrap();
        let tools = request.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
            .collect();
        (messages, tools, request.body["messages"].clone())
    };
    fn strip_cache_marks(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("cache_control");
                map.values_mut().for_each(strip_cache_marks);
            }
            Value::Array(items) => items.iter_mut().for_each(strip_cache_marks),
            _ => {}
        }
    }
    strip_cache_marks(&mut sequence);
    Upstream { messages, tools, sequence }
}

/// An upstream that plays the model of an agent on [`LONG_TASK`], speaking `api`: it calls `tool`
/// once per file (`arguments(i)`), one call per answer, then says DONE; it answers a summarization
/// request with a summary, and a request without the tool (a client's side request: a title, a
/// topic) with a few words.
fn long_task_upstream(
    api: Api,
    tool: &'static str,
    arguments: fn(usize) -> String,
) -> phosphor_testkit::Responder {
    let calls = std::sync::atomic::AtomicUsize::new(0);
    std::sync::Arc::new(move |request: &RecordedRequest| {
        if request.body.to_string().contains("You are summarizing the conversation") {
            return wire_text(
                api,
                "The user asked to read part-0.txt to part-11.txt one at a time, then say DONE. Some are read.",
            );
        }
        if !upstream_view(request).tools.iter().any(|t| t == tool) {
            return wire_text(api, "Reading files");
        }
        let step = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if step < LONG_TASK_FILES {
            // Asked to think (Anthropic's `thinking`, or Responses' encrypted reasoning), it
            // reasons first, sealed; the seal must come back.
            let encrypted = request.body["include"]
                .as_array()
                .is_some_and(|include| include.iter().any(|i| i == "reasoning.encrypted_content"));
            let thinks = request.body["thinking"]["type"] == "enabled"
                || request.body["thinking"]["type"] == "adaptive"
                || encrypted;
            let thinking = format!("part-{step}.txt is next.");
            let call = [(format!("call_{step}"), arguments(step))];
            let calls: Vec<(&str, &str, &str)> =
                call.iter().map(|(id, a)| (id.as_str(), tool, a.as_str())).collect();
            wire_thinking_tool_calls(api, thinks.then_some(thinking.as_str()), &calls)
        } else {
            wire_text(api, "DONE")
        }
    })
}

/// Writes the task's files into `dir`: each about 2,300 tokens of words no summary would repeat.
fn write_long_task_files(dir: &Path) {
    for file in 0..LONG_TASK_FILES {
        let words: String = (0..1_250).map(|w| format!("f{file}w{w} ")).collect();
        fs::write(dir.join(format!("part-{file}.txt")), words).unwrap();
    }
}

/// What every upstream request of an agent's turn must keep: under the window, each tool result
/// after its call (the mock server refuses any other, in each API's rules), and the task verbatim.
fn check_long_task_requests(requests: &[RecordedRequest], window: u64, tool: &str) {
    let views: Vec<Upstream> = requests.iter().map(upstream_view).collect();
    let offers = |view: &Upstream| view.tools.iter().any(|t| t == tool);
    let turns = views.iter().filter(|v| offers(v)).count();
    assert!(turns > LONG_TASK_FILES, "{turns} requests of the turn");
    let mut largest = 0;
    for (request, view) in requests.iter().zip(&views) {
        let tokens = phosphor_base::TokenCounter::count_request(
            &ApproxCounter,
            &phosphor_base::ChatRequest { messages: view.messages.clone(), ..Default::default() },
        );
        largest = largest.max(tokens);
        assert!(tokens <= window, "a request of {tokens} tokens went upstream (window {window})");
        phosphor_prune::check_tool_pairing(&view.messages).unwrap();
        if offers(view) {
            let text = request.body.to_string();
            assert!(text.contains(LONG_TASK), "a request lost the task: {text:.2000}");
        }
    }
    let summaries = requests
        .iter()
        .filter(|r| r.body.to_string().contains("You are summarizing the conversation"))
        .count();
    eprintln!(
        "{} upstream requests ({}): {turns} of the turn, {summaries} summaries; the largest {largest} tokens of the \
         messages (window {window})",
        requests.len(),
        requests[0].path,
    );
    assert!(summaries > 0, "no compaction ran");
    // Between two compactions what goes upstream only grows at its end: each request of the turn
    // starts with the messages of the one before, the same bytes, so a provider's prompt cache
    // holds. The share of each request that is the previous one's prefix is printed.
    let mut shares = Vec::new();
    for (before, after) in views.iter().zip(views.iter().skip(1)) {
        if !offers(before) || !offers(after) {
            continue;
        }
        let (Some(before), Some(after)) = (before.sequence.as_array(), after.sequence.as_array()) else {
            continue;
        };
        let shared = before.iter().zip(after).take_while(|(a, b)| a == b).count();
        let shared_bytes: usize = after[..shared].iter().map(|m| m.to_string().len()).sum();
        let all_bytes: usize = after.iter().map(|m| m.to_string().len()).sum();
        shares.push(shared_bytes as f64 / all_bytes as f64);
        assert_eq!(
            shared,
            before.len(),
            "a request between two compactions changed what the one before sent"
        );
    }
    eprintln!(
        "unchanged prefix of the previous request: {:?} (requests of the turn with no compaction between)",
        shares.iter().map(|s| format!("{:.2}", s)).collect::<Vec<_>>()
    );
}

/// Runs `program args` in `dir` with `envs`, within `seconds`; returns its output.
async fn run_client(
    program: &Path,
    args: &[&str],
    dir: &Path,
    envs: &[(&str, &str)],
    seconds: u64,
) -> Output {
    let mut command = tokio::process::Command::new(program);
    command.args(args).current_dir(dir).stdin(Stdio::null()).kill_on_drop(true);
    for (name, value) in envs {
        command.env(name, value);
    }
    match tokio::time::timeout(Duration::from_secs(seconds), command.output()).await {
        Ok(output) => output.unwrap(),
        Err(_) => panic!("{} did not finish within {seconds} s", program.display()),
    }
}

/// Claude Code from npm, pointed at `phosphor serve` (`ANTHROPIC_BASE_URL`), on a task whose files
/// are together over the window, with an upstream speaking `api`: it finishes, and every request
/// upstream fits with its tool pairs whole and the task in it.
async fn claude_code_finishes_a_long_task(api: Api) {
    let Some(clients) = phosphor_base::testing::test_dir(AGENT_CLIENTS) else { return };
    let env = Env::new();
    write_long_task_files(&env.workspace());
    let workspace = env.workspace().to_path_buf();
    let read = |i: usize| json!({"file_path": format!("part-{i}.txt")}).to_string();
    let server = MockServer::start_responding(long_task_upstream(api, "Read", read)).await;
    let window = 30_000;
    // Masking off: the turn must be summarized, not only have its old outputs masked.
    env.mock_config_named(&server, api, "claude-sonnet-4-5", window, json!({"mask_threshold": 0}));
    if api == Api::Anthropic {
        // Answers of up to 4,096 tokens: room for a thinking budget (Anthropic's least is 1,024).
        let mut config: Value =
            serde_json::from_str(&fs::read_to_string(env.config_path()).unwrap()).unwrap();
        config["models"]["large"]["max_output_tokens"] = json!(4_096);
        fs::write(env.config_path(), config.to_string()).unwrap();
    }
    let served = env.serve(&[]);
    let home = env.home().join("claude");
    fs::create_dir_all(&home).unwrap();
    let output = run_client(
        Path::new("node"),
        &[
            clients.join("node_modules/@anthropic-ai/claude-code/cli-wrapper.cjs").to_str().unwrap(),
            "-p",
            LONG_TASK,
            "--output-format",
            "json",
            "--model",
            "claude-sonnet-4-5",
            "--allowedTools",
            "Read",
        ],
        &workspace,
        &[
            ("ANTHROPIC_BASE_URL", served.url.as_str()),
            ("ANTHROPIC_API_KEY", "sk-ant-test"),
            ("HOME", home.to_str().unwrap()),
            ("DISABLE_AUTOUPDATER", "1"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ],
        600,
    )
    .await;
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "claude: {out}\n{}", String::from_utf8_lossy(&output.stderr));
    let result: Value = serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("claude printed {out}"));
    assert_eq!(result["is_error"], false, "{result}");
    assert!(result["result"].as_str().unwrap().contains("DONE"), "{result}");
    let requests = server.requests();
    check_long_task_requests(&requests, window, "Read");
    // Every request for the session model was a session; Claude Code's calls to its small model
    // (titles, topic checks), if it made any, passed through as sent and stored nothing.
    let models: std::collections::BTreeSet<String> = requests.iter().map(upstream_model).collect();
    eprintln!("models asked upstream: {models:?}");
    let sessions = sessions_json(&env);
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
    if api == Api::Anthropic {
        // Its own API on both sides: what Claude Code sends for Anthropic reaches it (its
        // `metadata`, its `anthropic-beta` header); the summaries are Phosphor's own requests.
        for request in &requests {
            let turn = upstream_view(request).tools.iter().any(|t| t == "Read");
            assert_eq!(request.body.get("metadata").is_some(), turn, "{:.300}", request.body.to_string());
            assert_eq!(request.header("anthropic-beta").is_some(), turn, "{:?}", request.headers);
        }
        // Its thinking too: every request of the turn asks for it, and each tool loop goes on
        // with its signed thinking (the mock checks each signature, as Anthropic does).
        let turn: Vec<&RecordedRequest> =
            requests.iter().filter(|r| upstream_view(r).tools.iter().any(|t| t == "Read")).collect();
        let thinking = turn.iter().filter(|r| r.body.get("thinking").is_some()).count();
        assert_eq!(thinking, turn.len(), "Claude Code's thinking did not reach every request of the turn");
        check_sealed_reasoning_returns(&turn, Api::Anthropic);
    }
}

/// The model an upstream request asked for, in any of the three APIs.
fn upstream_model(request: &RecordedRequest) -> String {
    request.body["model"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_finishes_a_long_task_through_serve() {
    claude_code_finishes_a_long_task(Api::Chat).await;
}

/// The same, with an upstream that speaks Claude Code's own API.
#[tokio::test(flavor = "multi_thread")]
async fn claude_code_finishes_a_long_task_through_serve_to_an_anthropic_upstream() {
    claude_code_finishes_a_long_task(Api::Anthropic).await;
}

/// Codex CLI from npm, pointed at `phosphor serve` as a Responses provider, on the same task, with
/// an upstream speaking `api`.
async fn codex_finishes_a_long_task(api: Api) {
    let Some(clients) = phosphor_base::testing::test_dir(AGENT_CLIENTS) else { return };
    let env = Env::new();
    write_long_task_files(&env.workspace());
    let workspace = env.workspace().to_path_buf();
    let exec = |i: usize| json!({"cmd": format!("cat part-{i}.txt")}).to_string();
    let server = MockServer::start_responding(long_task_upstream(api, "exec_command", exec)).await;
    let window = 24_000;
    env.mock_config_speaking(&server, api, window, json!({"mask_threshold": 0}));
    let served = env.serve(&[]);
    let codex_home = env.home().join("codex");
    fs::create_dir_all(&codex_home).unwrap();
    let config = format!(
        "model = \"mock-large\"\nmodel_provider = \"phosphor\"\n\n[model_providers.phosphor]\nname = \"phosphor\"\n\
         base_url = \"{}/v1\"\nenv_key = \"PHOSPHOR_CLIENT_KEY\"\nwire_api = \"responses\"\n",
        served.url
    );
    fs::write(codex_home.join("config.toml"), config).unwrap();
    let output = run_client(
        &clients.join("node_modules/.bin/codex"),
        &["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", LONG_TASK],
        &workspace,
        &[
            ("CODEX_HOME", codex_home.to_str().unwrap()),
            ("PHOSPHOR_CLIENT_KEY", "sk-codex-test"),
            ("HOME", env.home().to_str().unwrap()),
        ],
        600,
    )
    .await;
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "codex: {out}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(out.contains("DONE"), "codex printed {out}");
    let requests = server.requests();
    check_long_task_requests(&requests, window, "exec_command");
    if api == Api::Responses {
        // Its own API on both sides: Codex's reasoning settings and includes reach the upstream.
        for request in requests.iter().filter(|r| upstream_view(r).tools.iter().any(|t| t == "exec_command"))
        {
            assert!(request.body.get("include").is_some(), "{:.300}", request.body.to_string());
            assert!(request.body.get("reasoning").is_some(), "{:.300}", request.body.to_string());
        }
        // The encrypted reasoning of each tool loop goes back with it.
        let turn: Vec<&RecordedRequest> =
            requests.iter().filter(|r| upstream_view(r).tools.iter().any(|t| t == "exec_command")).collect();
        check_sealed_reasoning_returns(&turn, Api::Responses);
    }
}

/// Each request of `turn` that continues a tool loop (it ends with the results of its last
/// assistant message; after a compaction that folded the loop it ends with the summary instead)
/// sends that assistant message's reasoning back with the seal `api`'s upstream gave it; there
/// is at least one such request.
fn check_sealed_reasoning_returns(turn: &[&RecordedRequest], api: Api) {
    let mut loops = 0;
    for request in turn {
        let messages = upstream_view(request).messages;
        let Some(last) = messages.iter().rposition(|m| m.role == Role::Assistant) else { continue };
        if !messages[last + 1..].iter().all(|m| m.role == Role::Tool) {
            continue;
        }
        loops += 1;
        assert!(
            messages[last].parts.iter().any(|part| part.seal_for(api).is_some()),
            "a tool loop went on without its sealed reasoning: {:.1000}",
            request.body.to_string()
        );
    }
    eprintln!(
        "requests of the turn: {}, continuing a tool loop with its sealed reasoning: {loops}",
        turn.len()
    );
    assert!(loops > 0, "no request continued a tool loop");
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_finishes_a_long_task_through_serve() {
    codex_finishes_a_long_task(Api::Chat).await;
}

/// The same, with an upstream that speaks Codex's own API.
#[tokio::test(flavor = "multi_thread")]
async fn codex_finishes_a_long_task_through_serve_to_a_responses_upstream() {
    codex_finishes_a_long_task(Api::Responses).await;
}

/// Anthropic's and OpenAI's Python SDKs through the Messages and Responses fronts: tool calls the
/// SDKs parse, their stream helpers assembling a streamed answer, count_tokens, and the SDKs' own
/// exceptions for a bad request and a wrong key.
#[tokio::test]
async fn serve_answers_the_anthropic_and_openai_sdks_on_their_own_apis() {
    let Some(anthropic_site) = phosphor_base::testing::test_dir("PHOSPHOR_TEST_ANTHROPIC_PYTHON") else {
        return;
    };
    let Some(openai_site) = phosphor_base::testing::test_dir("PHOSPHOR_TEST_OPENAI_PYTHON") else { return };
    let env = Env::new();
    let server = MockServer::start(vec![
        sse_tool_calls(&[("call_1", "read_file", r#"{"path":"src/a.rs"}"#)], Some((30, 5))),
        sse_text(&["It prints ", "nothing."], None),
        sse_tool_calls(&[("call_2", "read_file", r#"{"path":"src/b.rs"}"#)], Some((31, 5))),
        sse_text(&["It is ", "empty."], None),
    ])
    .await;
    env.mock_config_named(&server, Api::Chat, "claude-sonnet-4-5", 8_000, json!({}));
    let served = env.serve(&["--api-key-env", KEY_VAR]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/fronts_sdk.py");
    let path = std::env::join_paths([&anthropic_site, &openai_site]).unwrap();
    let output = tokio::process::Command::new("python3")
        .args([script, &served.url, KEY])
        .env("PYTHONPATH", &path)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the SDK script failed:\n{stderr}");
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        seen["anthropic_first"],
        json!({"stop_reason": "tool_use", "tool": "read_file", "input": {"path": "src/a.rs"}, "input_tokens": 30})
    );
    assert!(seen["anthropic_count"].as_u64().unwrap() > 0, "{seen}");
    assert_eq!(
        seen["anthropic_second"],
        json!({"text": "It prints nothing.", "stop_reason": "end_turn", "final_text": "It prints nothing."})
    );
    assert_eq!(seen["anthropic_bad_request"]["status"], 400, "{seen}");
    assert!(seen["anthropic_bad_request"]["message"].as_str().unwrap().contains("content[0].type"), "{seen}");
    assert_eq!(seen["anthropic_wrong_key"]["status"], 401, "{seen}");
    assert_eq!(
        seen["responses_first"],
        json!({"status": "completed", "tool": "read_file", "arguments": {"path": "src/b.rs"}, "call_id": "call_2",
               "input_tokens": 31})
    );
    assert_eq!(
        seen["responses_second"],
        json!({"text": "It is empty.", "output_text": "It is empty.", "status": "completed"})
    );
    assert_eq!(seen["responses_bad_request"]["status"], 400, "{seen}");
    assert!(
        seen["responses_bad_request"]["message"].as_str().unwrap().contains("previous_response_id"),
        "{seen}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[1].body["messages"][3]["role"], "tool");
    assert_eq!(requests[3].body["messages"][3]["tool_call_id"], "call_2");
    // The Anthropic conversation, with the session model, is a session; the Responses one asked
    // for another model (gpt-5, 400,000 tokens by the built-in table) and passed through as sent.
    assert_eq!(
        requests.iter().map(upstream_model).collect::<Vec<_>>(),
        ["claude-sonnet-4-5", "claude-sonnet-4-5", "gpt-5", "gpt-5"]
    );
    assert_eq!(sessions_json(&env).as_array().unwrap().len(), 1);
}
