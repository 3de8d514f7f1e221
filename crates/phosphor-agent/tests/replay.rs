//! Replays of real recorded sessions through the agent: what survives compaction, and what
//! observation masking saves, measured instead of assumed.
//!
//! The recording is aider's own chat history (`tests/fixtures/chat-history.md` in the `aider-chat`
//! source distribution on PyPI: 1,134 real sessions; `cargo xtask fetch-test-model aider-history`
//! fetches it and `PHOSPHOR_REPLAY_AIDER` names it). Aider writes edits as SEARCH/REPLACE blocks
//! in its answers; the replay turns each block into an `edit_file` tool call (path, old and new
//! text), so the session has the shape of a tool-calling agent's, with the bulk in tool inputs as
//! in real coding sessions. A scripted model answers with the recorded text and calls, a tool
//! returns aider's recorded output for each edit, and the summarizer writes nothing useful
//! ("Summary."), so only what Phosphor itself keeps can survive.
//!
//! The conversion rules are `phosphor_agent::eval::aider`'s.
//!
//! The second recording is two real Claude Code sessions (session logs in the test data of
//! `sniffly`'s source distribution on PyPI; `cargo xtask fetch-test-model claude-code-sessions`
//! fetches them and `PHOSPHOR_REPLAY_CLAUDE_CODE` names the file), converted by
//! `phosphor_agent::eval::claude_code` and replayed the same way with every recorded call and result.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use phosphor_agent::eval::aider::{self, Turn};
use phosphor_agent::{FileOp, Models, SessionAgent, SessionState, Tool, ToolOutput};
use phosphor_base::config::{Options, SummarizeModel};
use phosphor_base::{
    ApproxCounter, ChatRequest, FinishReason, Message, ModelInfo, Part, Role, StreamEvent, TokenCounter,
    ToolCall, ToolSpec,
};
use phosphor_store::{SessionStore, SqliteStore};
use phosphor_testkit::{Script, ScriptedModel, text_turn};

/// The recorded answer of `turn` as scripts (one, or two around the edits), and the recorded
/// result of each edit, in call order.
fn scripts_of(index: usize, turn: &Turn) -> (Vec<Script>, Vec<String>) {
    if turn.edits.is_empty() {
        return (vec![text_turn(turn.first_answer(), None)], Vec::new());
    }
    let mut first: Script = Vec::new();
    if !turn.before.is_empty() {
        first.push(Ok(StreamEvent::TextDelta { text: turn.before.clone() }));
    }
    for (k, edit) in turn.edits.iter().enumerate() {
        first.push(Ok(StreamEvent::ToolCall(ToolCall {
            id: Turn::call_id(index, k),
            name: aider::EDIT_TOOL.into(),
            arguments: edit.arguments(),
        })));
    }
    first.push(Ok(StreamEvent::Finish { reason: FinishReason::ToolCalls }));
    (vec![first, text_turn(turn.last_answer(), None)], turn.edit_results())
}

/// `edit_file`, returning aider's recorded output for each call in order.
struct RecordedEdits {
    results: Mutex<VecDeque<String>>,
}

#[async_trait]
impl Tool for RecordedEdits {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "edit_file".into(),
            description: "Replace old_string with new_string in the file at path".into(),
            parameters: serde_json::json!({"type": "object", "properties": {
                "path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}
            }}),
        }
    }

    async fn call(&self, _arguments: serde_json::Value) -> ToolOutput {
        ToolOutput::ok(self.results.lock().unwrap().pop_front().expect("a recorded result for every call"))
    }
}

/// What one replay measured.
#[derive(Debug, Default)]
struct Figures {
    transcript_tokens: u64,
    summaries: usize,
    tokens_sent: u64,
    uncached_tokens: u64,
    peak_request: u64,
    peak_summary_request: u64,
    requests: usize,
    requests_verbatim: usize,
    requests_present: usize,
    files: usize,
    files_kept: usize,
}

fn info(model: &str, window: u64) -> ModelInfo {
    ModelInfo {
        provider: "replay".into(),
        model: model.into(),
        context_window: window,
        max_output_tokens: 1_000,
    }
}

/// Every request the session model was sent fits the window and pairs each tool call with its result.
fn check_requests(requests: &[ChatRequest], window: u64) {
    for (i, request) in requests.iter().enumerate() {
        let tokens = ApproxCounter.count_request(request);
        assert!(tokens <= window, "request #{i}: {tokens} tokens over the {window}-token window");
        phosphor_prune::check_tool_pairing(&request.messages)
            .unwrap_or_else(|v| panic!("request #{i}: {v:?}"));
    }
}

/// Tokens of `requests`, sent in order to one model, that a provider's prompt cache could not
/// serve: each request's messages after the longest run of leading messages it shares with the
/// request before it (and the tools and framing when it shares none). A summary or a masking step
/// changes the start of the history, so the request after it is paid for again from there. An
/// ideal cache: providers cache in blocks and for minutes, so real bills are somewhat higher.
fn uncached_tokens(requests: &[ChatRequest]) -> u64 {
    let mut previous: &[Message] = &[];
    let mut total = 0;
    for request in requests {
        let shared = request.messages.iter().zip(previous).take_while(|(a, b)| a == b).count();
        let fresh: u64 = request.messages[shared..].iter().map(|m| ApproxCounter.count_message(m)).sum();
        let messages: u64 = request.messages.iter().map(|m| ApproxCounter.count_message(m)).sum();
        let overhead = ApproxCounter.count_request(request) - messages;
        total += fresh + if shared == 0 { overhead } else { 0 };
        previous = &request.messages;
    }
    total
}

/// What a replayed session ends with: every stored message, the history a model is shown, and the
/// session-state trail of its summary (empty without one).
async fn session_end(store: &SqliteStore, session: &str) -> (Vec<Message>, Vec<Message>, SessionState) {
    let stored = store.messages(session).await.unwrap();
    let history = store.history(session).await.unwrap();
    let state = history.first().filter(|m| m.is_summary).map(|m| SessionState::parse(&m.text_content()));
    (stored, history, state.unwrap_or_default())
}

/// Replays `turns` on a `window`-token model with `options`; with `compact_at_end`, also compacts
/// the whole session once at the end (as `phosphor compact` would).
async fn replay(turns: &[Turn], window: u64, options: Options, compact_at_end: bool) -> Figures {
    let mut scripts = Vec::new();
    let mut results = VecDeque::new();
    for (index, turn) in turns.iter().enumerate() {
        let (turn_scripts, turn_results) = scripts_of(index, turn);
        scripts.extend(turn_scripts);
        results.extend(turn_results);
    }
    let large = Arc::new(ScriptedModel::new(scripts).with_info(info("large", window)));
    let useless = (0..turns.len() * 4 + 4).map(|_| text_turn("Summary.", None)).collect();
    let small = Arc::new(ScriptedModel::new(useless).with_info(info("small", window)));
    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    let models =
        Models { large: large.clone(), small: Some(small.clone()), embedded: None, configured_large: None };
    let options = Options { summarize_model: SummarizeModel::Small, ..options };
    let agent = SessionAgent::new(store.clone(), models, options)
        .with_system_prompt("You are an AI pair programmer. Edit files with edit_file.")
        .with_tool(Arc::new(RecordedEdits { results: Mutex::new(results) }));
    let session = agent.create_session("replay").await.unwrap().id;
    for (index, turn) in turns.iter().enumerate() {
        agent
            .run_turn(&session, turn.user.clone(), None)
            .await
            .unwrap_or_else(|e| panic!("turn {index}: {e}"));
    }
    if compact_at_end {
        agent.compact(&session, None, None).await.unwrap();
    }

    let requests: Vec<ChatRequest> = large.requests();
    let summary_requests: Vec<ChatRequest> = small.requests();
    check_requests(&requests, window);
    let (stored, history, state) = session_end(&store, &session).await;

    let user_texts: Vec<String> = turns.iter().map(|t| t.user.clone()).collect();
    let in_history = |text: &str| {
        history.iter().any(|m| m.role == Role::User && !m.is_summary && m.text_content() == text)
    };
    let verbatim: Vec<bool> =
        user_texts.iter().map(|u| in_history(u) || state.requests.contains(u)).collect();
    let present: Vec<bool> = user_texts
        .iter()
        .zip(&verbatim)
        .map(|(u, &v)| {
            v || state.requests.iter().any(|r| {
                r.strip_suffix(phosphor_prune::TRUNCATION_MARKER).is_some_and(|body| u.starts_with(body))
            })
        })
        .collect();
    // What the budget keeps is always the newest: no request is present after an older one is gone.
    let first_present = present.iter().position(|&p| p).unwrap_or(present.len());
    assert!(present[first_present..].iter().all(|&p| p), "a newer request is missing: {present:?}");

    let mut files: Vec<&str> = turns.iter().flat_map(|t| t.edits.iter().map(|e| e.path.as_str())).collect();
    files.sort_unstable();
    files.dedup();
    let in_calls = |path: &str| {
        history
            .iter()
            .flat_map(Message::tool_calls)
            .any(|c| c.arguments.contains(&format!("\"path\":{}", serde_json::json!(path))))
    };
    let files_kept = files.iter().filter(|f| in_calls(f) || state.file_op(f).is_some()).count();

    Figures {
        transcript_tokens: stored
            .iter()
            .filter(|m| !m.is_summary)
            .map(|m| ApproxCounter.count_message(m))
            .sum(),
        summaries: stored.iter().filter(|m| m.is_summary).count(),
        tokens_sent: requests.iter().chain(&summary_requests).map(|r| ApproxCounter.count_request(r)).sum(),
        uncached_tokens: uncached_tokens(&requests) + uncached_tokens(&summary_requests),
        peak_request: requests.iter().map(|r| ApproxCounter.count_request(r)).max().unwrap_or(0),
        peak_summary_request: summary_requests
            .iter()
            .map(|r| ApproxCounter.count_request(r))
            .max()
            .unwrap_or(0),
        requests: user_texts.len(),
        requests_verbatim: verbatim.iter().filter(|&&v| v).count(),
        requests_present: present.iter().filter(|&&p| p).count(),
        files: files.len(),
        files_kept,
    }
}

fn summaries_only() -> Options {
    Options { mask_threshold: 0.0, ..Options::default() }
}

#[tokio::test]
async fn real_aider_sessions_keep_every_request_and_file_and_masking_is_measured() {
    let Some(path) = phosphor_base::testing::test_model("PHOSPHOR_REPLAY_AIDER") else { return };
    let text = std::fs::read_to_string(&path).unwrap();
    let mut sessions = aider::sessions(&text);
    assert!(sessions.len() > 600, "{} sessions with a turn in {}", sessions.len(), path.display());
    // The three sessions with the most turns that edit files at least ten times.
    sessions.retain(|s| s.iter().map(|t| t.edits.len()).sum::<usize>() >= 10);
    sessions.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut written = [0, 0];
    for (n, turns) in sessions.iter().take(3).enumerate() {
        let edits: usize = turns.iter().map(|t| t.edits.len()).sum();
        // One compaction of the whole session, as `phosphor compact` would on a large window.
        let whole = replay(turns, 200_000, summaries_only(), true).await;
        let ratio = whole.peak_summary_request as f64 / whole.transcript_tokens as f64;
        eprintln!(
            "session {n}: {} turns, {edits} edits, {} tokens; one compaction at 200k: summary request {} tokens \
             ({ratio:.2} of the transcript), requests kept verbatim {}/{}, files kept {}/{}",
            turns.len(),
            whole.transcript_tokens,
            whole.peak_summary_request,
            whole.requests_verbatim,
            whole.requests,
            whole.files_kept,
            whole.files
        );
        assert_eq!(whole.requests_verbatim, whole.requests, "every request within the default budget");
        assert_eq!(whole.files_kept, whole.files);
        // Within a third (`policy::SUMMARY_INPUT_SHARE`): the oldest turns read as headlines, and in
        // session 1 (6,587 tokens, a fifth of which its instructions, requests and framing fill)
        // most of them as outlines (docs/BENCHMARKS.md).
        let most = phosphor_agent::policy::SUMMARY_INPUT_SHARE;
        assert!(ratio < most, "the summary request is {ratio:.3} of the transcript");
        let (mut sent, mut summaries) = (Vec::new(), Vec::new());
        for (name, options) in
            [("summaries only", summaries_only()), ("masking + summaries", Options::default())]
        {
            let run = replay(turns, 8_000, options, false).await;
            sent.push(run.tokens_sent);
            summaries.push(run.summaries);
            eprintln!(
                "session {n}, 8k window, {name}: {} summaries, {} tokens sent ({} not in a prompt cache), \
                 peak request {}, requests present {}/{} ({} verbatim), files kept {}/{}",
                run.summaries,
                run.tokens_sent,
                run.uncached_tokens,
                run.peak_request,
                run.requests_present,
                run.requests,
                run.requests_verbatim,
                run.files_kept,
                run.files
            );
            assert_eq!(run.files_kept, run.files, "{name}");
            assert!(run.requests_present > 0, "{name}");
        }
        // Masking never writes more summaries, and sends fewer tokens in all. A summary it avoids
        // leaves every later request larger than the summary would have, so a masked call keeps
        // little of its arguments (`MASKED_ARGUMENT_CHARS`): at 200 characters, session 2 sent 1.05x
        // the tokens of summaries only (docs/BENCHMARKS.md).
        assert!(
            summaries[1] <= summaries[0],
            "masking wrote {} summaries, summaries only {}",
            summaries[1],
            summaries[0]
        );
        assert!(sent[1] < sent[0], "masking sent {} tokens, summaries only {}", sent[1], sent[0]);
        written[0] += summaries[0];
        written[1] += summaries[1];
    }
    assert!(
        written[1] < written[0],
        "masking wrote {} summaries in all, summaries only {}",
        written[1],
        written[0]
    );
}

/// A coding session in Claude Code's shape, where tool inputs and outputs are the bulk: six
/// requests, `TodoWrite` plans, whole files written (`Write`) and edited (`Edit`), files read
/// (`Read`), and shell commands (`Bash`), some failing. Written here with Claude Code's tool names
/// and argument shapes, at the density of the real Claude Code sessions issue #13 measured (309 KB
/// for 58 tool calls, 5.3 KB a call, 46% of it tool inputs): files of 8 KB read, 8 to 15 KB
/// written, edits of 0.9 and 2 KB, test runs of 1 KB. It needs no download, and its facts are known
/// by construction; the recorded sessions themselves are replayed by
/// `real_claude_code_sessions_keep_requests_plan_files_and_commands_and_masking_is_measured`.
fn claude_code_session() -> (Vec<Message>, ClaudeCodeFacts) {
    let mut rng = phosphor_prune::synthetic::XorShift::new(13);
    let mut code = |lines: usize| -> String {
        (0..lines)
            .map(|i| format!("    let value_{i} = compute_{}(input, {});\n", rng.below(50), rng.below(1_000)))
            .collect()
    };
    let mut messages =
        vec![Message::system("You are Claude Code, an interactive CLI tool for software engineering.")];
    let mut facts = ClaudeCodeFacts::default();
    let mut call_n = 0;
    let mut call = |messages: &mut Vec<Message>,
                    name: &str,
                    arguments: serde_json::Value,
                    result: String,
                    error: bool| {
        call_n += 1;
        let id = format!("toolu_{call_n:04}");
        let text = Part::Text { text: format!("Running {name}.") };
        let call = ToolCall { id: id.clone(), name: name.into(), arguments: arguments.to_string() };
        messages.push(Message::new(Role::Assistant, vec![text, Part::ToolCall(call)]));
        messages.push(Message::tool_result(&id, name, result, error));
    };
    let requests = [
        "Add a retry with exponential backoff to the HTTP client in src/client.rs, and cover it with tests.",
        "The tests fail on CI with a timeout; find out why and fix it.",
        "Now make the backoff configurable from config.toml (max retries, base delay).",
        "Write the docs for the new settings in docs/config.md.",
        "Rename RetryPolicy to Backoff everywhere.",
        "Run the whole test suite and fix whatever is still red.",
    ];
    for (turn, request) in requests.iter().enumerate() {
        messages.push(Message::user(*request));
        facts.requests.push((*request).to_owned());
        let todos: Vec<serde_json::Value> = (0..4)
            .map(|i| {
                let status = if i < turn % 4 {
                    "completed"
                } else if i == turn % 4 {
                    "in_progress"
                } else {
                    "pending"
                };
                serde_json::json!({"content": format!("Step {i} of request {turn}"), "status": status,
                                   "activeForm": format!("Working on step {i}")})
            })
            .collect();
        facts.plan = todos
            .iter()
            .map(|t| (t["status"].as_str().unwrap().to_owned(), t["content"].as_str().unwrap().to_owned()))
            .collect();
        call(
            &mut messages,
            "TodoWrite",
            serde_json::json!({"todos": todos}),
            "Todos have been modified successfully.".into(),
            false,
        );
        for file in 0..2 {
            let path = format!("/repo/src/module_{turn}_{file}.rs");
            call(&mut messages, "Read", serde_json::json!({"file_path": path}), code(180), false);
            facts.files.push((path, FileOp::Read));
        }
        let written = format!("/repo/src/new_{turn}.rs");
        call(
            &mut messages,
            "Write",
            serde_json::json!({"file_path": written, "content": code(180 + 30 * turn)}),
            format!("File created successfully at: {written}"),
            false,
        );
        facts.files.push((written, FileOp::Written));
        let edited = format!("/repo/src/module_{turn}_0.rs");
        call(
            &mut messages,
            "Edit",
            serde_json::json!({"file_path": edited, "old_string": code(20), "new_string": code(45)}),
            format!("The file {edited} has been updated."),
            false,
        );
        facts.files.retain(|(p, _)| p != &edited);
        facts.files.push((edited, FileOp::Edited));
        let command = format!("cargo test -p client --test retry_{turn}");
        let failing = turn % 2 == 1;
        let output = if failing {
            format!(
                "running 41 tests\n{}test retry_{turn}::times_out ... FAILED\nerror: test failed, to rerun pass `--test retry_{turn}`",
                "test retry::case ... ok\n".repeat(40)
            )
        } else {
            format!(
                "running 41 tests\n{}test result: ok. 41 passed; 0 failed",
                "test retry::case ... ok\n".repeat(41)
            )
        };
        call(
            &mut messages,
            "Bash",
            serde_json::json!({"command": command, "description": "Run the tests"}),
            output,
            failing,
        );
        facts.commands.push(command);
        messages.push(Message::assistant(format!("Done with request {turn}: the change is in place.")));
    }
    (messages, facts)
}

/// What a continuing agent needs from [`claude_code_session`].
#[derive(Default)]
struct ClaudeCodeFacts {
    requests: Vec<String>,
    /// The latest plan: (status, text).
    plan: Vec<(String, String)>,
    files: Vec<(String, FileOp)>,
    commands: Vec<String>,
}

/// One compaction of a whole recorded session (`messages`, a system prompt first), as
/// `phosphor compact` would on a 200k window, with the "Summary." summarizer: the session's tokens,
/// the summary request's, and the session-state trail of the summary. Prints what of `facts`
/// survived under `name`.
async fn compact_whole(
    name: &str,
    messages: &[Message],
    facts: &ClaudeCodeFacts,
) -> (u64, u64, SessionState) {
    let summarizer =
        Arc::new(ScriptedModel::new(vec![text_turn("Summary.", None)]).with_info(info("small", 200_000)));
    let large = Arc::new(ScriptedModel::new(Vec::new()).with_info(info("large", 200_000)));
    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    let models = Models { large, small: Some(summarizer.clone()), embedded: None, configured_large: None };
    let options = Options { summarize_model: SummarizeModel::Small, ..Options::default() };
    let agent = SessionAgent::new(store.clone(), models, options);
    let session = agent.create_session("claude code").await.unwrap();
    let (system, rest, _) = phosphor_agent::eval::split_system(messages);
    assert!(!system.is_empty());
    agent.import_messages(&session, rest).await.unwrap();
    agent.compact(&session.id, None, None).await.unwrap();

    let transcript: u64 = rest.iter().map(|m| ApproxCounter.count_message(m)).sum();
    let requests = summarizer.requests();
    let request = ApproxCounter.count_request(&requests[0]);
    let history = store.history(&session.id).await.unwrap();
    let state = SessionState::parse(&history[0].text_content());
    eprintln!(
        "{name}: {} messages, {transcript} tokens; summary request {request} tokens ({:.3} of the transcript); \
         requests {}/{}, plan items {}/{}, files {}/{}, commands {}/{}",
        rest.len(),
        request as f64 / transcript as f64,
        facts.requests.iter().filter(|r| state.requests.contains(r)).count(),
        facts.requests.len(),
        facts.plan.iter().filter(|(s, t)| state.plan.iter().any(|p| &p.status == s && &p.text == t)).count(),
        facts.plan.len(),
        facts.files.iter().filter(|(p, op)| state.file_op(p) == Some(*op)).count(),
        facts.files.len(),
        facts.commands.iter().filter(|c| state.has_command(c)).count(),
        facts.commands.len(),
    );
    (transcript, request, state)
}

/// Every request verbatim, the latest plan item by item, every file with its last operation and
/// every command in the trail.
fn check_facts(name: &str, state: &SessionState, facts: &ClaudeCodeFacts) {
    assert_eq!(state.requests, facts.requests, "{name}: every request, verbatim");
    let plan: Vec<(String, String)> = state.plan.iter().map(|p| (p.status.clone(), p.text.clone())).collect();
    assert_eq!(plan, facts.plan, "{name}: the latest plan, item by item");
    for (path, op) in &facts.files {
        assert_eq!(state.file_op(path), Some(*op), "{name}: {path}");
    }
    for command in &facts.commands {
        assert!(state.has_command(command), "{name}: {command} lost");
    }
}

#[tokio::test]
async fn a_claude_code_style_session_keeps_requests_plan_files_and_commands_in_a_tenth() {
    let (messages, facts) = claude_code_session();
    let (transcript, request, state) = compact_whole("Claude Code-style session", &messages, &facts).await;
    let ratio = request as f64 / transcript as f64;
    assert!(ratio < 0.1, "the summary request is {ratio:.3} of the transcript");
    check_facts("Claude Code-style session", &state, &facts);
    for (i, command) in facts.commands.iter().enumerate() {
        let run =
            state.commands.iter().find(|r| &r.command == command).unwrap_or_else(|| panic!("{command} lost"));
        if i % 2 == 1 {
            assert!(
                run.outcome.starts_with("failed") || run.outcome.starts_with("exit"),
                "{command}: {}",
                run.outcome
            );
        } else {
            assert!(!run.outcome.is_empty(), "{command}: no outcome");
        }
    }
}

/// What a continuing agent needs from a real Claude Code session, read off the recording by
/// Claude Code's own tool names: the user's requests (a repeated one once), the last `TodoWrite` list, each file's last
/// operation (a change, else a read: `Write` written, `Edit`, `MultiEdit` and `NotebookEdit`
/// edited, `Read` read), and every `Bash` command.
fn facts_of(messages: &[Message]) -> ClaudeCodeFacts {
    let mut facts = ClaudeCodeFacts::default();
    for message in messages {
        if message.role == Role::User {
            // A request asked again is listed once, where it was last asked.
            let text = message.text_content();
            facts.requests.retain(|r| *r != text);
            facts.requests.push(text);
        }
        for call in message.tool_calls() {
            let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
            let text = |key: &str| args[key].as_str().map(str::to_owned);
            let op = match call.name.as_str() {
                "Write" => Some(FileOp::Written),
                "Edit" | "MultiEdit" | "NotebookEdit" => Some(FileOp::Edited),
                "Read" => Some(FileOp::Read),
                _ => None,
            };
            if let Some((op, path)) = op.zip(text("file_path").or_else(|| text("notebook_path"))) {
                let previous =
                    facts.files.iter().position(|(p, _)| *p == path).map(|at| facts.files.remove(at).1);
                let op = match previous {
                    Some(changed) if op == FileOp::Read && changed != FileOp::Read => changed,
                    _ => op,
                };
                facts.files.push((path, op));
            }
            match call.name.as_str() {
                "Bash" => facts.commands.extend(text("command")),
                "TodoWrite" => {
                    facts.plan = args["todos"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|t| {
                            (
                                t["status"].as_str().unwrap().to_owned(),
                                t["content"].as_str().unwrap().to_owned(),
                            )
                        })
                        .collect();
                }
                _ => {}
            }
        }
    }
    facts
}

/// The real Claude Code sessions of `PHOSPHOR_REPLAY_CLAUDE_CODE` (`cargo xtask fetch-test-model
/// claude-code-sessions`), each with a system prompt first (the log does not record Claude Code's).
fn real_claude_code_sessions() -> Option<Vec<Vec<Message>>> {
    let path = phosphor_base::testing::test_model("PHOSPHOR_REPLAY_CLAUDE_CODE")?;
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(phosphor_agent::eval::claude_code::is_session_log(&text), "{}", path.display());
    let sessions = phosphor_agent::eval::claude_code::sessions(&text).unwrap();
    Some(
        sessions
            .into_iter()
            .map(|s| {
                let system =
                    Message::system("You are Claude Code, an interactive CLI tool for software engineering.");
                std::iter::once(system).chain(s.messages).collect()
            })
            .collect(),
    )
}

#[tokio::test]
async fn real_claude_code_sessions_keep_requests_plan_files_and_commands_and_masking_is_measured() {
    let Some(sessions) = real_claude_code_sessions() else { return };
    assert_eq!(sessions.len(), 2);
    for (n, messages) in sessions.iter().enumerate() {
        let facts = facts_of(messages);
        let name = format!("real Claude Code session {n}");
        assert!(facts.requests.len() >= 5 && !facts.plan.is_empty() && facts.files.len() >= 3, "{name}");
        let (transcript, request, state) = compact_whole(&name, messages, &facts).await;
        check_facts(&name, &state, &facts);
        let ratio = request as f64 / transcript as f64;
        // Issue #13: under a tenth where tool inputs dominate (session 1, 124 messages, 68k tokens:
        // 0.096, against 0.62 before tool inputs were pruned), under a third otherwise (session 0,
        // 8.8k tokens, of which the summarizer's instructions and the requests are 0.10 before any
        // message is cut: 0.324). docs/BENCHMARKS.md.
        let bound = if transcript > 30_000 { 0.1 } else { 1.0 / 3.0 };
        assert!(ratio < bound, "{name}: the summary request is {ratio:.3} of the transcript");

        let [alone, masked] = replay_both_ways(&name, messages, &facts, REAL_WINDOW).await;
        assert!(masked.summaries <= alone.summaries, "{name}: masking {masked:?}, summaries only {alone:?}");
        assert!(
            masked.tokens_sent < alone.tokens_sent,
            "{name}: masking {masked:?}, summaries only {alone:?}"
        );
    }
}

/// The window of the turn-by-turn replays of the real Claude Code sessions.
const REAL_WINDOW: u64 = 16_000;

/// Every tool of a recorded session under one name: each call gets the next recorded result, in
/// call order, whichever tool is called (the agent runs a turn's calls one after another).
struct RecordedTool {
    name: String,
    results: Arc<Mutex<VecDeque<(String, bool)>>>,
}

#[async_trait]
impl Tool for RecordedTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: "Replays the recorded result".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    async fn call(&self, _arguments: serde_json::Value) -> ToolOutput {
        let (content, error) =
            self.results.lock().unwrap().pop_front().expect("a recorded result for every call");
        if error { ToolOutput::error(content) } else { ToolOutput::ok(content) }
    }
}

/// What a turn-by-turn replay of [`claude_code_session`] measured.
#[derive(Debug)]
struct SessionRun {
    summaries: usize,
    tokens_sent: u64,
    uncached_tokens: u64,
    peak_request: u64,
    requests_present: usize,
    plan_items: usize,
    files_kept: usize,
}

/// Replays `messages` (a system prompt, then turns that each start with a user message) turn by
/// turn on a `window`-token model: a scripted model gives the recorded answers and calls, the tools
/// the recorded results, and the summarizer writes "Summary.".
async fn replay_session(
    messages: &[Message],
    facts: &ClaudeCodeFacts,
    window: u64,
    options: Options,
) -> SessionRun {
    let mut scripts: Vec<Script> = Vec::new();
    let mut results = VecDeque::new();
    let mut tools: Vec<String> = Vec::new();
    for message in messages {
        match message.role {
            Role::Assistant if message.tool_calls().next().is_some() => {
                let mut script: Script = Vec::new();
                let text = message.text_content();
                if !text.is_empty() {
                    script.push(Ok(StreamEvent::TextDelta { text }));
                }
                for call in message.tool_calls() {
                    script.push(Ok(StreamEvent::ToolCall(call.clone())));
                    if !tools.contains(&call.name) {
                        tools.push(call.name.clone());
                    }
                }
                script.push(Ok(StreamEvent::Finish { reason: FinishReason::ToolCalls }));
                scripts.push(script);
            }
            Role::Assistant => scripts.push(text_turn(&message.text_content(), None)),
            Role::Tool => {
                for part in &message.parts {
                    if let Part::ToolResult(result) = part {
                        results.push_back((result.content.clone(), result.is_error));
                    }
                }
            }
            Role::User | Role::System => {}
        }
    }
    if messages.last().is_some_and(|m| m.role == Role::Tool) {
        // The recording was cut off inside a turn: the turn still needs an answer to end.
        scripts.push(text_turn("(the recording ends here)", None));
    }
    let large = Arc::new(ScriptedModel::new(scripts).with_info(info("large", window)));
    let useless = (0..messages.len()).map(|_| text_turn("Summary.", None)).collect();
    let small = Arc::new(ScriptedModel::new(useless).with_info(info("small", window)));
    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    let models =
        Models { large: large.clone(), small: Some(small.clone()), embedded: None, configured_large: None };
    let options = Options { summarize_model: SummarizeModel::Small, ..options };
    let results = Arc::new(Mutex::new(results));
    let mut agent =
        SessionAgent::new(store.clone(), models, options).with_system_prompt(messages[0].text_content());
    for name in tools {
        agent = agent.with_tool(Arc::new(RecordedTool { name, results: results.clone() }));
    }
    let session = agent.create_session("replay").await.unwrap().id;
    for (index, user) in messages.iter().filter(|m| m.role == Role::User).enumerate() {
        agent
            .run_turn(&session, user.text_content(), None)
            .await
            .unwrap_or_else(|e| panic!("turn {index}: {e}"));
    }

    let requests: Vec<ChatRequest> = large.requests();
    check_requests(&requests, window);
    let (stored, history, state) = session_end(&store, &session).await;
    let in_history = |text: &str| {
        history.iter().any(|m| m.role == Role::User && !m.is_summary && m.text_content() == text)
    };
    let last_todo = history.iter().rev().flat_map(Message::tool_calls).find(|c| c.name == "TodoWrite");
    let plan_in_history = |text: &str, status: &str| {
        last_todo.is_some_and(|c| c.arguments.contains(text) && c.arguments.contains(status))
    };
    let file_in_history = |path: &str| {
        history.iter().flat_map(Message::tool_calls).any(|c| {
            let quoted = serde_json::json!(path);
            ["file_path", "notebook_path"]
                .iter()
                .any(|key| c.arguments.contains(&format!("\"{key}\":{quoted}")))
        })
    };
    SessionRun {
        summaries: stored.iter().filter(|m| m.is_summary).count(),
        tokens_sent: requests.iter().chain(&small.requests()).map(|r| ApproxCounter.count_request(r)).sum(),
        uncached_tokens: uncached_tokens(&requests) + uncached_tokens(&small.requests()),
        peak_request: requests.iter().map(|r| ApproxCounter.count_request(r)).max().unwrap_or(0),
        requests_present: facts
            .requests
            .iter()
            .filter(|r| in_history(r) || state.requests.contains(r))
            .count(),
        plan_items: facts
            .plan
            .iter()
            .filter(|(s, t)| {
                plan_in_history(t, s) || state.plan.iter().any(|p| &p.status == s && &p.text == t)
            })
            .count(),
        files_kept: facts
            .files
            .iter()
            .filter(|(p, _)| file_in_history(p) || state.file_op(p).is_some())
            .count(),
    }
}

#[tokio::test]
async fn masking_cuts_the_summaries_and_tokens_of_a_claude_code_style_session() {
    let (messages, facts) = claude_code_session();
    let [alone, masked] = replay_both_ways("Claude Code-style session", &messages, &facts, WINDOW).await;
    assert!(masked.summaries < alone.summaries, "masking {masked:?}, summaries only {alone:?}");
    assert!(masked.tokens_sent < alone.tokens_sent, "masking {masked:?}, summaries only {alone:?}");
}

/// [`replay_session`] with summaries only, then with masking (the defaults): prints both runs and
/// checks that each keeps every request, the latest plan and every file.
async fn replay_both_ways(
    name: &str,
    messages: &[Message],
    facts: &ClaudeCodeFacts,
    window: u64,
) -> [SessionRun; 2] {
    let mut runs = Vec::new();
    for (strategy, options) in
        [("summaries only", summaries_only()), ("masking + summaries", Options::default())]
    {
        let run = replay_session(messages, facts, window, options).await;
        eprintln!(
            "{name}, {window} window, {strategy}: {} summaries, {} tokens sent ({} not in a prompt cache), \
             peak request {}, requests {}/{}, plan items {}/{}, files {}/{}",
            run.summaries,
            run.tokens_sent,
            run.uncached_tokens,
            run.peak_request,
            run.requests_present,
            facts.requests.len(),
            run.plan_items,
            facts.plan.len(),
            run.files_kept,
            facts.files.len(),
        );
        assert_eq!(run.requests_present, facts.requests.len(), "{name}, {strategy}");
        assert_eq!(run.plan_items, facts.plan.len(), "{name}, {strategy}");
        assert_eq!(run.files_kept, facts.files.len(), "{name}, {strategy}");
        runs.push(run);
    }
    runs.try_into().unwrap()
}

/// The window of the turn-by-turn replay of [`claude_code_session`]: a third of the session's tokens.
const WINDOW: u64 = 16_000;
