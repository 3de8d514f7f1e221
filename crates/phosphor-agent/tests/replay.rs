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
//! The conversion rules: `#### ` lines are the user's message; the lines after them, up to aider's
//! own `> ` output, are the answer; the answer's SEARCH/REPLACE blocks become one assistant message
//! with the text before the first block and one call per block, followed by a second assistant
//! message with the text after the last block (or "(the recorded answer ended with its edits)");
//! each call's result is the `> ` lines that name its file (or "(no output was recorded for this
//! edit)"), the last call's also every other `> ` line. `> ` lines after an answer without edits,
//! and those before an answer, were never shown to the model and are dropped. An empty answer is
//! "(no answer was recorded)".

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use phosphor_agent::{Models, SessionAgent, SessionState, Tool, ToolOutput};
use phosphor_core::config::{Options, SummarizeModel};
use phosphor_core::{
    ApproxCounter, ChatRequest, FinishReason, Message, ModelInfo, Role, StreamEvent, TokenCounter, ToolCall,
    ToolSpec,
};
use phosphor_store::{SessionStore, SqliteStore};
use phosphor_testkit::{Script, ScriptedModel, text_turn};

/// One SEARCH/REPLACE block.
#[derive(Debug, Clone, PartialEq)]
struct Edit {
    path: String,
    search: String,
    replace: String,
}

/// One recorded exchange.
#[derive(Debug, Clone, PartialEq, Default)]
struct Turn {
    user: String,
    before: String,
    edits: Vec<Edit>,
    after: String,
    output: Vec<String>,
}

/// The sessions of an aider chat history, each a list of turns (sessions without one are dropped).
fn aider_sessions(text: &str) -> Vec<Vec<Turn>> {
    let mut sessions = Vec::new();
    for session in text.split("\n# aider chat started at ") {
        let turns = aider_turns(session);
        if !turns.is_empty() {
            sessions.push(turns);
        }
    }
    sessions
}

fn aider_turns(session: &str) -> Vec<Turn> {
    enum Line<'a> {
        User(&'a str),
        Output(&'a str),
        Answer(&'a str),
    }
    fn classify(line: &str) -> Line<'_> {
        let marked = line.strip_suffix("  ").unwrap_or(line);
        if let Some(text) = marked.strip_prefix("#### ").or((marked == "####").then_some("")) {
            Line::User(text)
        } else if let Some(text) = marked.strip_prefix("> ").or((marked == ">").then_some("")) {
            Line::Output(text)
        } else {
            Line::Answer(line)
        }
    }
    let mut turns = Vec::new();
    // (user lines, answer lines, output lines) of the turn being read.
    let mut current: Option<(Vec<&str>, Vec<&str>, Vec<&str>)> = None;
    for line in session.lines() {
        match classify(line) {
            Line::User(text) => match &mut current {
                Some((user, answer, output)) if answer.is_empty() && output.is_empty() => user.push(text),
                _ => {
                    turns.extend(current.take().map(|(u, a, o)| build_turn(&u, &a, &o)));
                    current = Some((vec![text], Vec::new(), Vec::new()));
                }
            },
            Line::Answer(text) => {
                if let Some((_, answer, output)) = &mut current
                    && output.is_empty()
                {
                    answer.push(text);
                }
            }
            Line::Output(text) => {
                if let Some((_, answer, output)) = &mut current
                    && answer.iter().any(|l| !l.trim().is_empty())
                {
                    output.push(text);
                }
            }
        }
    }
    turns.extend(current.map(|(u, a, o)| build_turn(&u, &a, &o)));
    turns.retain(|t| !t.user.is_empty());
    turns
}

fn build_turn(user: &[&str], answer: &[&str], output: &[&str]) -> Turn {
    let mut turn = Turn {
        user: user.join("\n").trim().to_owned(),
        output: output.iter().map(|l| l.trim()).filter(|l| !l.is_empty()).map(str::to_owned).collect(),
        ..Turn::default()
    };
    let mut prose: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < answer.len() {
        if answer[i].trim_end() != "<<<<<<< SEARCH" {
            prose.push(answer[i]);
            i += 1;
            continue;
        }
        // The path is on the line before the opening fence (or right before the marker).
        if prose.last().is_some_and(|l| l.starts_with("```")) {
            prose.pop();
        }
        let path = prose.pop().unwrap_or("").trim().to_owned();
        let mut search = Vec::new();
        let mut replace = Vec::new();
        i += 1;
        while i < answer.len() && answer[i].trim_end() != "=======" {
            search.push(answer[i]);
            i += 1;
        }
        i += 1;
        while i < answer.len() && answer[i].trim_end() != ">>>>>>> REPLACE" {
            replace.push(answer[i]);
            i += 1;
        }
        i += 1;
        if i < answer.len() && answer[i].starts_with("```") {
            i += 1;
        }
        if turn.edits.is_empty() {
            turn.before = prose.join("\n").trim().to_owned();
            prose.clear();
        }
        turn.edits.push(Edit { path, search: search.join("\n"), replace: replace.join("\n") });
    }
    let rest = prose.join("\n").trim().to_owned();
    if turn.edits.is_empty() {
        turn.before = rest;
    } else {
        turn.after = rest;
    }
    turn
}

/// The recorded answer of `turn` as scripts (one, or two around the edits), and the recorded
/// result of each edit, in call order.
fn scripts_of(index: usize, turn: &Turn) -> (Vec<Script>, Vec<String>) {
    if turn.edits.is_empty() {
        let text = if turn.before.is_empty() { "(no answer was recorded)" } else { &turn.before };
        return (vec![text_turn(text, None)], Vec::new());
    }
    let mut first: Script = Vec::new();
    if !turn.before.is_empty() {
        first.push(Ok(StreamEvent::TextDelta { text: turn.before.clone() }));
    }
    let mut results = Vec::new();
    let mut unclaimed: Vec<&str> = turn.output.iter().map(String::as_str).collect();
    for (k, edit) in turn.edits.iter().enumerate() {
        let arguments =
            serde_json::json!({ "path": edit.path, "old_string": edit.search, "new_string": edit.replace });
        first.push(Ok(StreamEvent::ToolCall(ToolCall {
            id: format!("t{index}_e{k}"),
            name: "edit_file".into(),
            arguments: arguments.to_string(),
        })));
        let (mine, others): (Vec<&str>, Vec<&str>) =
            unclaimed.iter().partition(|line| !edit.path.is_empty() && line.contains(edit.path.as_str()));
        unclaimed = others;
        results.push(if mine.is_empty() {
            "(no output was recorded for this edit)".to_owned()
        } else {
            mine.join("\n")
        });
    }
    if let Some(last) = results.last_mut()
        && !unclaimed.is_empty()
    {
        last.push('\n');
        last.push_str(&unclaimed.join("\n"));
    }
    first.push(Ok(StreamEvent::Finish { reason: FinishReason::ToolCalls }));
    let after =
        if turn.after.is_empty() { "(the recorded answer ended with its edits)" } else { &turn.after };
    (vec![first, text_turn(after, None)], results)
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
    for (i, request) in requests.iter().enumerate() {
        let tokens = ApproxCounter.count_request(request);
        assert!(tokens <= window, "request #{i}: {tokens} tokens over the {window}-token window");
        phosphor_prune::check_tool_pairing(&request.messages)
            .unwrap_or_else(|v| panic!("request #{i}: {v:?}"));
    }
    let stored = store.messages(&session).await.unwrap();
    let history = store.history(&session).await.unwrap();
    let state = history.first().filter(|m| m.is_summary).map(|m| SessionState::parse(&m.text_content()));
    let state = state.unwrap_or_default();

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

#[test]
fn aider_format_is_read_into_turns_with_edits_and_outputs() {
    let text = "\
> Aider v0.50.1  \n> Added a.py to the chat.  \n\n\
#### fix the bug  \n####   \n#### in a.py  \n\n\
Here is the fix:\n\na.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n\n\
b.py\n```python\n<<<<<<< SEARCH\n=======\nnew file\n>>>>>>> REPLACE\n```\n\nThat should do it.\n\n\
> Applied edit to a.py  \n> Applied edit to b.py  \n> Commit 1234 fix  \n\n\
#### thanks  \n\nYou're welcome.\n\n> Tokens: 1k  \n\n\
# aider chat started at 2024-08-01\n\n#### only a question  \n";
    let sessions = aider_sessions(text);
    assert_eq!(sessions.len(), 2);
    let turns = &sessions[0];
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0].user, "fix the bug\n\nin a.py");
    assert_eq!(turns[0].before, "Here is the fix:");
    assert_eq!(
        turns[0].edits,
        vec![
            Edit { path: "a.py".into(), search: "x = 1".into(), replace: "x = 2".into() },
            Edit { path: "b.py".into(), search: String::new(), replace: "new file".into() },
        ]
    );
    assert_eq!(turns[0].after, "That should do it.");
    let (scripts, results) = scripts_of(0, &turns[0]);
    assert_eq!(scripts.len(), 2);
    assert_eq!(
        results,
        vec!["Applied edit to a.py".to_owned(), "Applied edit to b.py\nCommit 1234 fix".to_owned()]
    );
    assert_eq!(turns[1].before, "You're welcome.");
    assert!(scripts_of(1, &turns[1]).1.is_empty());
    assert_eq!(sessions[1][0].user, "only a question");
}

#[tokio::test]
async fn real_aider_sessions_keep_every_request_and_file_and_masking_is_measured() {
    let Some(path) = phosphor_core::testing::test_model("PHOSPHOR_REPLAY_AIDER") else { return };
    let text = std::fs::read_to_string(&path).unwrap();
    let mut sessions = aider_sessions(&text);
    assert!(sessions.len() > 600, "{} sessions with a turn in {}", sessions.len(), path.display());
    // The three sessions with the most turns that edit files at least ten times.
    sessions.retain(|s| s.iter().map(|t| t.edits.len()).sum::<usize>() >= 10);
    sessions.sort_by_key(|s| std::cmp::Reverse(s.len()));
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
        // Measured 0.40 to 0.73 on these sessions (docs/BENCHMARKS.md): aider's answers are long prose,
        // which is never pruned. A guard against regressions, not the issue's target of a third.
        assert!(ratio < 0.75, "the summary request is {ratio:.2} of the transcript");
        let mut sent = Vec::new();
        for (name, options) in
            [("summaries only", summaries_only()), ("masking + summaries", Options::default())]
        {
            let run = replay(turns, 8_000, options, false).await;
            sent.push(run.tokens_sent);
            eprintln!(
                "session {n}, 8k window, {name}: {} summaries, {} tokens sent, peak request {}, \
                 requests present {}/{} ({} verbatim), files kept {}/{}",
                run.summaries,
                run.tokens_sent,
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
        // Masking steps that clear little are not taken (`policy::mask_min_gain`): masking never costs
        // more than it saves here, where tool outputs are small.
        assert!(sent[1] <= sent[0], "masking sent {} tokens, summaries only {}", sent[1], sent[0]);
    }
}
