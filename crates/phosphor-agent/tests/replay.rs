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

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use phosphor_agent::eval::aider::{self, Turn};
use phosphor_agent::{Models, SessionAgent, SessionState, Tool, ToolOutput};
use phosphor_core::config::{Options, SummarizeModel};
use phosphor_core::{
    ApproxCounter, ChatRequest, FinishReason, Message, ModelInfo, Role, StreamEvent, TokenCounter, ToolCall,
    ToolSpec,
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

#[tokio::test]
async fn real_aider_sessions_keep_every_request_and_file_and_masking_is_measured() {
    let Some(path) = phosphor_core::testing::test_model("PHOSPHOR_REPLAY_AIDER") else { return };
    let text = std::fs::read_to_string(&path).unwrap();
    let mut sessions = aider::sessions(&text);
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
        // which is never pruned. A guard against regressions, not the target of a third.
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
