//! Agent behaviour against an in-process scripted model: every compaction step and trigger, failure,
//! cancellation, queueing and repeated compaction. (the top-level tests/http.rs drives the same loop over HTTP.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::ReadFile;
use phosphor_agent::{
    AgentError, AgentEvent, AgentSettings, CompactionReason, FileOp, Models, SUMMARY_PREFIX, SessionAgent,
    SessionState, Tool, ToolOutput,
};
use phosphor_base::config::{Options, SummarizeModel};
use phosphor_base::{
    ApproxCounter, ChatRequest, Error, FinishReason, Message, MessageStatus, ModelInfo, Part, Role,
    StreamEvent, TokenCounter, ToolSpec, Usage,
};
use phosphor_store::{SessionStore, SqliteStore};
use phosphor_testkit::{ScriptedModel, text_turn, tool_calls_turn};
use pretty_assertions::assert_eq;

fn info(window: u64, max_output: u64) -> ModelInfo {
    ModelInfo {
        provider: "scripted".into(),
        model: "test-model".into(),
        context_window: window,
        max_output_tokens: max_output,
    }
}

fn usage(input: u64, output: u64) -> Option<Usage> {
    Some(Usage { input_tokens: input, output_tokens: output, ..Usage::default() })
}

struct Harness {
    agent: SessionAgent,
    store: Arc<SqliteStore>,
    model: Arc<ScriptedModel>,
    session: String,
}

async fn harness(model: ScriptedModel, options: Options) -> Harness {
    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    let model = Arc::new(model);
    let agent = SessionAgent::new(store.clone(), Models::new(model.clone()), options)
        .with_system_prompt("You are a test agent.")
        .with_tool(Arc::new(ReadFile { line: "line of code\n", times: 100 }));
    let session = agent.create_session("").await.unwrap().id;
    Harness { agent, store, model, session }
}

fn collect(rx: &mut tokio::sync::mpsc::UnboundedReceiver<AgentEvent>) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    events
}

/// The invariants every request must satisfy.
fn check_requests(requests: &[ChatRequest]) {
    for (i, request) in requests.iter().enumerate() {
        if let Err(violation) = phosphor_prune::check_tool_pairing(&request.messages) {
            panic!("request #{i} breaks tool pairing: {violation:?}");
        }
    }
}

fn long(text: &str, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes);
    while out.len() < bytes {
        out.push_str(text);
        out.push(' ');
    }
    out
}

#[tokio::test]
async fn a_turn_stores_every_message_and_token_fields_come_from_usage() {
    let model = ScriptedModel::new(vec![
        tool_calls_turn(&[("call_1", "read_file", r#"{"path":"src/lib.rs"}"#)], usage(120, 10)),
        text_turn("The file defines the parser.", usage(400, 8)),
    ]);
    let h = harness(model, Options::default()).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let outcome = h.agent.run_turn(&h.session, "What is in src/lib.rs?", Some(&tx)).await.unwrap();
    assert_eq!(outcome.final_message.text_content(), "The file defines the parser.");
    assert_eq!(outcome.model_calls, 2);
    assert!(outcome.compactions.is_empty());

    let stored = h.store.messages(&h.session).await.unwrap();
    let roles: Vec<Role> = stored.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::Assistant]);
    assert!(stored[2].tool_results().next().unwrap().content.starts_with("contents of src/lib.rs"));
    let session = h.store.session(&h.session).await.unwrap().unwrap();
    assert_eq!((session.prompt_tokens, session.completion_tokens, session.current_tokens), (400, 8, 408));
    assert_eq!(session.title, "What is in src/lib.rs?");

    let requests = h.model.requests();
    check_requests(&requests);
    assert_eq!(requests[0].tools.len(), 1);
    assert_eq!(requests[1].messages.last().unwrap().role, Role::Tool);
    let events = collect(&mut rx);
    assert!(matches!(events.first(), Some(AgentEvent::TurnStarted { .. })));
    assert!(events.iter().any(|e| matches!(e, AgentEvent::ToolCall(c) if c.name == "read_file")));
    assert!(events.iter().any(|e| matches!(e, AgentEvent::ToolResult(r) if r.call_id == "call_1")));
    assert!(matches!(events.last(), Some(AgentEvent::TurnFinished { model_calls: 2, .. })));
}

/// The tool outputs a summary request shows, in order: the `[NAME result] ...` paragraphs of its
/// transcript (the user message after the instructions).
fn summarized_outputs(request: &ChatRequest) -> Vec<String> {
    let transcript = request.messages[1].text_content();
    transcript
        .split("\n\n[")
        .filter_map(|paragraph| paragraph.split_once(" result] "))
        .filter(|(name, _)| !name.contains(' '))
        .map(|(_, output)| output.to_owned())
        .collect()
}

/// Fills a session with `turns` turns, each reading a file (so that tool outputs are large).
async fn fill(h: &Harness, turns: usize) {
    for i in 0..turns {
        h.agent.run_turn(&h.session, format!("Please read file number {i}"), None).await.unwrap();
    }
}

fn fill_scripts(turns: usize) -> Vec<phosphor_testkit::Script> {
    let mut scripts = Vec::new();
    for i in 0..turns {
        let args = format!(r#"{{"path":"src/file{i}.rs"}}"#);
        scripts.push(tool_calls_turn(&[(&format!("call_{i}"), "read_file", &args)], None));
        scripts.push(text_turn(&format!("File {i} holds code."), None));
    }
    scripts
}

#[tokio::test]
async fn threshold_trigger_follows_the_spec_steps_and_keeps_the_new_prompt_verbatim() {
    // Each filled turn is ~400 tokens; a 4000-token window at threshold 0.5 trips after ~5 turns.
    let mut scripts = fill_scripts(4);
    scripts.push(text_turn("## Goal\nRead the files.\n## Next steps\nNone.", usage(900, 20)));
    scripts.push(text_turn("Answer after compaction.", usage(300, 5)));
    // Masking off: this test follows the summary steps alone (masking is tested in `long_turns.rs`).
    let options = Options { summarize_threshold: 0.5, mask_threshold: 0.0, ..Options::default() };
    let h = harness(ScriptedModel::new(scripts).with_info(info(4000, 256)), options).await;
    fill(&h, 4).await;
    let before = h.store.session(&h.session).await.unwrap().unwrap();
    assert!(before.summary_message_id.is_none());

    // Four filled turns are ~1,530 tokens; this ~600-token prompt crosses 2,000 (0.5 x 4,000).
    let prompt = format!("Now summarize what you learned. {}", long("Context for the question.", 2400));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let outcome = h.agent.run_turn(&h.session, prompt.clone(), Some(&tx)).await.unwrap();
    let report = outcome.compactions.into_iter().next().expect("the threshold must trigger a compaction");
    assert_eq!(report.reason, CompactionReason::Threshold);
    assert!(report.tokens_after < report.tokens_before, "{report:?}");
    assert_eq!(outcome.final_message.text_content(), "Answer after compaction.");

    // Steps 1-2, 5: the summarizer got the pruned history, without the new prompt.
    let requests = h.model.requests();
    check_requests(&requests);
    let summarize = &requests[requests.len() - 2];
    let tool_outputs = summarized_outputs(summarize);
    assert_eq!(tool_outputs.len(), 4);
    for output in tool_outputs {
        assert!(output.ends_with("\n... [truncated]"), "{output}");
        assert_eq!(output.chars().count(), 200 + "\n... [truncated]".len());
    }
    assert!(!summarize.messages.iter().any(|m| m.text_content().contains("Now summarize what you learned")));
    // Step 3: the prompt comes from the default profile.
    assert!(
        summarize.messages[0].text_content().contains("src/file3.rs"),
        "files must be listed in the prompt"
    );

    // Steps 4, 6, 7: the summary message, the pointer, the token fields.
    let session = h.store.session(&h.session).await.unwrap().unwrap();
    let summary = h.store.message(session.summary_message_id.as_deref().unwrap()).await.unwrap().unwrap();
    assert!(summary.is_summary);
    assert_eq!(summary.status, MessageStatus::Complete);
    assert!(summary.text_content().starts_with("## Goal\nRead the files."));
    let trail = SessionState::parse(&summary.text_content());
    assert_eq!(trail.files.iter().filter(|(_, op)| *op == FileOp::Read).count(), 4, "{trail:?}");
    // The answer the new prompt follows was folded, and the trail kept it, whatever the model wrote.
    assert_eq!(trail.last_answer, "File 3 holds code.");
    assert_eq!(summary.usage, usage(900, 20));
    // After the summary the next turn's usage overwrote the fields; the summary's own values are
    // checked in `token_fields_right_after_a_summary`.
    assert_eq!((session.prompt_tokens, session.completion_tokens), (300, 5));

    // The request after compaction starts at the summary and keeps the prompt verbatim.
    let answer = requests.last().unwrap();
    assert_eq!(answer.messages[0].role, Role::System);
    assert!(answer.messages[1].text_content().starts_with(SUMMARY_PREFIX));
    assert!(answer.messages[1].text_content().contains("Last answer:\n> File 3 holds code.\n"));
    assert_eq!(answer.messages[2].text_content(), prompt);
    assert_eq!(answer.messages.len(), 3);

    // Nothing stored was deleted.
    assert_eq!(h.store.messages(&h.session).await.unwrap().len(), 4 * 4 + 1 + 1 + 1);
    let events = collect(&mut rx);
    let started = events.iter().position(|e| matches!(e, AgentEvent::CompactionStarted { .. })).unwrap();
    let delta = events.iter().position(|e| matches!(e, AgentEvent::CompactionDelta { .. })).unwrap();
    let finished = events.iter().position(|e| matches!(e, AgentEvent::CompactionFinished { .. })).unwrap();
    assert!(started < delta && delta < finished);
}

#[tokio::test]
async fn token_fields_right_after_a_summary() {
    let mut scripts = fill_scripts(2);
    scripts.push(text_turn("The summary.", usage(700, 33)));
    let h = harness(ScriptedModel::new(scripts), Options::default()).await;
    fill(&h, 2).await;
    let report = h.agent.compact(&h.session, None, None).await.unwrap();
    let session = h.store.session(&h.session).await.unwrap().unwrap();
    let summary = h.store.message(&report.summary_message_id).await.unwrap().unwrap();
    assert_eq!(session.summary_message_id.as_deref(), Some(report.summary_message_id.as_str()));
    assert_eq!(session.prompt_tokens, 0);
    assert_eq!(session.completion_tokens, 33);
    // Step 7: from the summary content, counted as a model is shown it.
    let shown = Message::user(format!("{SUMMARY_PREFIX}{}", summary.text_content()));
    assert_eq!(session.current_tokens, ApproxCounter.count_message(&shown));
}

#[tokio::test]
async fn overflow_forces_compaction_even_with_auto_summarize_disabled() {
    let mut scripts = fill_scripts(3);
    scripts.push(text_turn("Summary of three reads.", None));
    scripts.push(text_turn("Done.", None));
    // Masking off: it would clear the old reads and make the compaction unneeded.
    let options = Options { disable_auto_summarize: true, mask_threshold: 0.0, ..Options::default() };
    let h = harness(ScriptedModel::new(scripts).with_info(info(3000, 200)), options).await;
    fill(&h, 3).await; // ~1,200 tokens with the system prompt and the tool: well inside the window
    assert!(h.store.session(&h.session).await.unwrap().unwrap().summary_message_id.is_none());
    // A ~2,200-token prompt: with the reads the request passes the 3,000-token window itself (a prompt about
    // 400 tokens smaller would only cut into the 200-token answer reserve: `OutputReserve`), and alone it still
    // fits, with that reserve, once the reads are summarized.
    let outcome = h.agent.run_turn(&h.session, long("big prompt", 8800), None).await.unwrap();
    assert_eq!(outcome.compactions.first().map(|c| c.reason), Some(CompactionReason::Overflow));
    check_requests(&h.model.requests());
}

#[tokio::test]
async fn disabled_auto_summarize_does_not_compact_at_the_threshold() {
    let mut scripts = fill_scripts(3);
    scripts.push(text_turn("Fine.", None));
    let options = Options { disable_auto_summarize: true, summarize_threshold: 0.1, ..Options::default() };
    let h = harness(ScriptedModel::new(scripts).with_info(info(8000, 200)), options).await;
    fill(&h, 3).await;
    let outcome = h.agent.run_turn(&h.session, "hi", None).await.unwrap();
    assert!(outcome.compactions.is_empty());
    assert_eq!(h.model.remaining(), 0);
}

#[tokio::test]
async fn a_message_too_large_for_the_window_is_refused_and_stays_stored() {
    let h = harness(ScriptedModel::new(vec![]).with_info(info(1000, 100)), Options::default()).await;
    let err = h.agent.run_turn(&h.session, long("huge", 8000), None).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, AgentError::MessageTooLarge { window: 1000, .. }), "{err:?}");
    assert!(text.contains("1000-token context window"), "{text}");
    let stored = h.store.messages(&h.session).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].role, Role::User);
    assert!(h.model.requests().is_empty());
}

#[tokio::test]
async fn a_failed_summary_leaves_the_session_as_it_was() {
    let mut scripts = fill_scripts(2);
    scripts.push(vec![
        Ok(StreamEvent::TextDelta { text: "partial summ".into() }),
        Err(Error::Transient { status: Some(502), message: "bad gateway".into() }),
    ]);
    scripts.push(text_turn("Still here.", None));
    let h = harness(ScriptedModel::new(scripts), Options::default()).await;
    fill(&h, 2).await;
    let before = h.store.session(&h.session).await.unwrap().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let err = h.agent.compact(&h.session, None, Some(&tx)).await.unwrap_err();
    assert!(matches!(err, AgentError::Model(Error::Transient { .. })), "{err:?}");
    assert!(collect(&mut rx).iter().any(|e| matches!(e, AgentEvent::CompactionFailed { .. })));
    let after = h.store.session(&h.session).await.unwrap().unwrap();
    assert_eq!(after, before);
    let stored = h.store.messages(&h.session).await.unwrap();
    let failed = stored.iter().find(|m| m.is_summary).unwrap();
    assert_eq!(failed.status, MessageStatus::Failed);
    // The next turn sees the full history, not the failed summary.
    h.agent.run_turn(&h.session, "Are you there?", None).await.unwrap();
    let last = h.model.requests().pop().unwrap();
    assert!(!last.messages.iter().any(|m| m.text_content().contains("partial summ")));
    assert_eq!(last.messages.len(), 1 + 2 * 4 + 1);
}

#[tokio::test]
async fn summarizer_overflow_retries_with_aggressive_pruning() {
    let mut scripts = fill_scripts(2);
    scripts.push(vec![Err(Error::ContextOverflow {
        message: "maximum context length".into(),
        requested_tokens: None,
        limit_tokens: None,
    })]);
    scripts.push(text_turn("Summary after aggressive pruning.", None));
    let h = harness(ScriptedModel::new(scripts), Options::default()).await;
    fill(&h, 2).await;
    let report = h.agent.compact(&h.session, None, None).await.unwrap();
    assert_eq!(report.shed_level, 1);
    let requests = h.model.requests();
    let aggressive = requests.last().unwrap();
    let outputs = summarized_outputs(aggressive);
    assert_eq!(outputs.len(), 2);
    for output in outputs {
        assert_eq!(output.chars().count(), 50 + "\n... [truncated]".len(), "{output}");
    }
    check_requests(&requests);
}

#[tokio::test]
async fn the_ladder_sheds_down_to_old_turns_and_then_gives_up_cleanly() {
    let overflow = || {
        vec![Err(Error::ContextOverflow {
            message: "too long".into(),
            requested_tokens: None,
            limit_tokens: None,
        })]
    };
    let mut scripts = fill_scripts(3);
    scripts.extend((0..10).map(|_| overflow()));
    let h = harness(ScriptedModel::new(scripts), Options::default()).await;
    fill(&h, 3).await;
    let before = h.store.session(&h.session).await.unwrap().unwrap();
    let err = h.agent.compact(&h.session, None, None).await.unwrap_err();
    assert!(matches!(err, AgentError::NothingToShed { .. }), "{err:?}");
    assert_eq!(h.store.session(&h.session).await.unwrap().unwrap(), before);
    // standard, aggressive, outputs omitted, every older turn an outline (its outputs cut to their
    // marker, shorter than the omission's text), then 2 of 3 turns dropped (the latest is never
    // dropped); every older turn read as a headline is skipped: these turns' texts are short, so it
    // is no smaller.
    let summarizer_calls = &h.model.requests()[6..];
    assert_eq!(summarizer_calls.len(), 6);
    let last = summarizer_calls.last().unwrap();
    let transcript = last.messages[1].text_content();
    assert!(transcript.contains("[user] Please read file number 2\n"), "{transcript}");
    assert!(!transcript.contains("[user] Please read file number 0"), "{transcript}");
}

#[tokio::test]
async fn a_rejected_main_request_compacts_once_and_retries_once() {
    let mut scripts = fill_scripts(2);
    scripts.push(vec![Err(Error::ContextOverflow {
        message: "too long".into(),
        requested_tokens: None,
        limit_tokens: None,
    })]);
    scripts.push(text_turn("Summary.", None));
    scripts.push(text_turn("Answer.", None));
    let h = harness(ScriptedModel::new(scripts), Options::default()).await;
    fill(&h, 2).await;
    let outcome = h.agent.run_turn(&h.session, "Go on.", None).await.unwrap();
    assert_eq!(outcome.compactions[0].reason, CompactionReason::Rejected);
    assert_eq!(outcome.final_message.text_content(), "Answer.");
    let last = h.model.requests().pop().unwrap();
    assert_eq!(last.messages.last().unwrap().text_content(), "Go on.");

    // A second rejection in the same turn stops with an error instead of looping.
    let mut scripts = fill_scripts(1);
    scripts.push(vec![Err(Error::ContextOverflow {
        message: "too long".into(),
        requested_tokens: None,
        limit_tokens: None,
    })]);
    scripts.push(text_turn("Summary.", None));
    scripts.push(vec![Err(Error::ContextOverflow {
        message: "too long".into(),
        requested_tokens: None,
        limit_tokens: None,
    })]);
    let h = harness(ScriptedModel::new(scripts), Options::default()).await;
    fill(&h, 1).await;
    let err = h.agent.run_turn(&h.session, "Go on.", None).await.unwrap_err();
    assert!(matches!(err, AgentError::StillOverflowing { .. }), "{err:?}");
    assert_eq!(h.model.remaining(), 0);
}

#[tokio::test]
async fn nothing_left_to_fold_means_no_second_compaction_and_one_warning() {
    // After compacting, the kept ~1,200-token prompt alone is still above the threshold (1,200),
    // and a tool result then grows the request again; the turn's request and its one round are
    // all that is left, so nothing more can be folded: still one compaction, and one warning.
    let mut scripts = fill_scripts(2);
    scripts.push(text_turn("S.", None));
    scripts.push(tool_calls_turn(&[("c9", "read_file", r#"{"path":"a"}"#)], None));
    scripts.push(text_turn("Done.", None));
    let options = Options { summarize_threshold: 0.3, ..Options::default() };
    let h = harness(ScriptedModel::new(scripts).with_info(info(4000, 100)), options).await;
    fill(&h, 2).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let outcome = h.agent.run_turn(&h.session, long("a long question", 4800), Some(&tx)).await.unwrap();
    assert_eq!(outcome.final_message.text_content(), "Done.");
    assert!(!outcome.compactions.is_empty());
    let events = collect(&mut rx);
    let compactions = events.iter().filter(|e| matches!(e, AgentEvent::CompactionStarted { .. })).count();
    assert_eq!(compactions, 1);
    let warnings: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Warning { message } if message.contains("still at") => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("1 compaction ran in this turn"), "{warnings:?}");
}

#[tokio::test]
async fn prompts_sent_while_a_summary_streams_are_all_answered_in_order() {
    let mut scripts = fill_scripts(2);
    let slow_summary: Vec<_> =
        (0..10).map(|i| Ok(StreamEvent::TextDelta { text: format!("part {i}. ") })).collect();
    scripts.push(slow_summary);
    for answer in ["first", "second", "third"] {
        scripts.push(text_turn(answer, None));
    }
    let model = ScriptedModel::new(scripts).with_event_delay(Duration::from_millis(10));
    let h = harness(model, Options::default()).await;
    fill(&h, 2).await;
    let h = Arc::new(h);
    // The summary streams slowly (10 deltas, 10 ms apart); the prompts arrive while it does.
    let compacting = {
        let h = h.clone();
        tokio::spawn(async move { h.agent.compact(&h.session, Some("focus on files"), None).await })
    };
    tokio::time::sleep(Duration::from_millis(5)).await;
    let mut turns = Vec::new();
    let mut receivers = Vec::new();
    for prompt in ["one", "two", "three"] {
        let h = h.clone();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        receivers.push(rx);
        turns.push(tokio::spawn(async move { h.agent.run_turn(&h.session, prompt, Some(&tx)).await }));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!compacting.is_finished(), "the prompts must arrive while the summary streams");
    compacting.await.unwrap().unwrap();
    let answers: Vec<String> = futures::future::join_all(turns)
        .await
        .into_iter()
        .map(|r| r.unwrap().unwrap().final_message.text_content())
        .collect();
    assert_eq!(answers, ["first", "second", "third"]);
    for mut rx in receivers {
        assert!(matches!(collect(&mut rx).first(), Some(AgentEvent::Queued { .. })));
    }
    let stored = h.store.messages(&h.session).await.unwrap();
    let users: Vec<String> =
        stored.iter().filter(|m| m.role == Role::User).map(Message::text_content).skip(2).collect();
    assert_eq!(users, ["one", "two", "three"]);
}

#[tokio::test]
async fn a_summary_dropped_half_way_leaves_the_session_usable() {
    let mut scripts = fill_scripts(2);
    scripts.push((0..50).map(|i| Ok(StreamEvent::TextDelta { text: format!("chunk {i} ") })).collect());
    scripts.push(text_turn("Back.", None));
    let model = Arc::new(ScriptedModel::new(scripts).with_event_delay(Duration::from_millis(20)));
    // A file database: the cut may land in the middle of a write, which closes the connection, and an
    // in-memory database lives only as long as its one connection.
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("sessions.db")).await.unwrap());
    // Every delta is written as it arrives (the default interval is longer than the summary lives), so the
    // store holds what streamed before the cut.
    let settings = AgentSettings { persist_interval: Duration::ZERO, ..AgentSettings::default() };
    let agent = SessionAgent::new(store.clone(), Models::new(model.clone()), Options::default())
        .with_system_prompt("You are a test agent.")
        .with_tool(Arc::new(ReadFile { line: "line of code\n", times: 100 }))
        .with_settings(settings);
    let session = agent.create_session("").await.unwrap().id;
    let h = Harness { agent, store, model, session };
    // Fill without delay-sensitive assertions (the delay applies to every call).
    fill(&h, 2).await;
    let before = h.store.session(&h.session).await.unwrap().unwrap();
    let compaction = h.agent.compact(&h.session, None, None);
    // 300 ms: the first delta has long been stored, the fiftieth (after 980 ms) is far away.
    assert!(tokio::time::timeout(Duration::from_millis(300), compaction).await.is_err(), "must be cut off");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(h.store.session(&h.session).await.unwrap().unwrap(), before);
    let outcome = h.agent.run_turn(&h.session, "Still there?", None).await.unwrap();
    assert_eq!(outcome.final_message.text_content(), "Back.");
    let stored = h.store.messages(&h.session).await.unwrap();
    let summary = stored.iter().find(|m| m.is_summary).unwrap();
    assert_eq!(summary.status, MessageStatus::Cancelled);
    // The partial text stays: the chunks streamed before the cut (the first arrives at once), in order.
    let text = summary.text_content();
    let streamed = text.matches("chunk ").count();
    assert!((1..50).contains(&streamed), "{text:?}");
    assert_eq!(text, (0..streamed).map(|i| format!("chunk {i} ")).collect::<String>());
    let last = h.model.requests().pop().unwrap();
    check_requests(std::slice::from_ref(&last));
    assert!(!last.messages.iter().any(|m| m.text_content().contains("chunk")));
}

#[tokio::test]
async fn a_template_without_previous_summary_still_hands_the_model_the_previous_summary() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("terse")).unwrap();
    std::fs::write(dir.path().join("terse/summarization.md.tpl"), "Summarize tersely.\n").unwrap();
    let mut scripts = fill_scripts(1);
    scripts.push(text_turn("Summary number 0.", None));
    scripts.extend(fill_scripts(1));
    scripts.push(text_turn("Summary number 1.", None));
    let options = Options { profile: "terse".into(), summarize_repeat_penalty: 1.1, ..Options::default() };
    let h = harness(ScriptedModel::new(scripts), options).await;
    let h = Harness {
        agent: h
            .agent
            .with_profiles(phosphor_prompt::Profiles::with_roots(Some(dir.path().to_owned()), None)),
        ..h
    };
    for _ in 0..2 {
        fill(&h, 1).await;
        h.agent.compact(&h.session, None, None).await.unwrap();
    }
    let requests = h.model.requests();
    let prompts: Vec<ChatRequest> = requests.iter().filter(|r| r.tools.is_empty()).cloned().collect();
    assert_eq!(prompts.len(), 2);
    // Summaries ask a local model not to repeat itself; the chat path never does.
    assert!(prompts.iter().all(|r| r.repeat_penalty == Some(1.1)));
    assert!(requests.iter().filter(|r| !r.tools.is_empty()).all(|r| r.repeat_penalty.is_none()));
    assert_eq!(prompts[0].messages[0].text_content(), "Summarize tersely.");
    assert!(!prompts[0].messages.iter().any(|m| m.text_content().starts_with(SUMMARY_PREFIX)));
    // The second summary request: the template, then the first summary as context and the history.
    assert_eq!(prompts[1].messages[0].text_content(), "Summarize tersely.");
    assert_eq!(prompts[1].messages.len(), 2);
    assert_eq!(prompts[1].messages[1].role, Role::User);
    let input = prompts[1].messages[1].text_content();
    assert!(input.starts_with(&format!("{SUMMARY_PREFIX}Summary number 0.\n\n")), "{input}");
}

#[tokio::test]
async fn three_compaction_cycles_keep_the_trail_and_each_previous_summary() {
    let mut scripts = Vec::new();
    for cycle in 0..3 {
        scripts.extend(fill_scripts(2).into_iter().map(|s| {
            s.into_iter()
                .map(|e| match e {
                    Ok(StreamEvent::ToolCall(mut call)) => {
                        call.arguments = call.arguments.replace("file", &format!("c{cycle}_file"));
                        Ok(StreamEvent::ToolCall(call))
                    }
                    other => other,
                })
                .collect()
        }));
        scripts.push(text_turn(&format!("Summary number {cycle}."), None));
    }
    let h = harness(ScriptedModel::new(scripts), Options::default()).await;
    let mut summaries = Vec::new();
    for _ in 0..3 {
        fill(&h, 2).await;
        summaries.push(h.agent.compact(&h.session, None, None).await.unwrap().summary_message_id);
    }
    let requests = h.model.requests();
    check_requests(&requests);
    // The second and third summarizer prompts carry the previous summary.
    let prompts: Vec<String> =
        requests.iter().filter(|r| r.tools.is_empty()).map(|r| r.messages[0].text_content()).collect();
    assert_eq!(prompts.len(), 3);
    assert!(prompts[1].contains("Summary number 0."));
    assert!(prompts[2].contains("Summary number 1."));
    let last = h.store.message(&summaries[2]).await.unwrap().unwrap();
    let trail = SessionState::parse(&last.text_content());
    for cycle in 0..3 {
        for file in 0..2 {
            let path = format!("src/c{cycle}_file{file}.rs");
            assert_eq!(trail.file_op(&path), Some(FileOp::Read), "{path} missing from {trail:?}");
        }
    }
    assert_eq!(h.store.messages(&h.session).await.unwrap().iter().filter(|m| m.is_summary).count(), 3);
}

#[tokio::test]
async fn recent_turns_are_kept_verbatim_after_the_summary() {
    let mut scripts = fill_scripts(3);
    scripts.push(text_turn("Older turns summarized.", None));
    scripts.push(text_turn("ok", None));
    let options = Options { summarize_keep_recent_tokens: 600, ..Options::default() };
    let h = harness(ScriptedModel::new(scripts), options).await;
    fill(&h, 3).await;
    h.agent.compact(&h.session, None, None).await.unwrap();
    let summarizer = h.model.requests().pop().unwrap();
    let transcript = summarizer.messages[1].text_content();
    assert!(transcript.contains("[user] Please read file number 1\n"), "{transcript}");
    assert!(!transcript.contains("[user] Please read file number 2"), "{transcript}");
    h.agent.run_turn(&h.session, "next", None).await.unwrap();
    let request = h.model.requests().pop().unwrap();
    check_requests(std::slice::from_ref(&request));
    assert!(request.messages[1].text_content().starts_with(SUMMARY_PREFIX));
    assert_eq!(request.messages[2].text_content(), "Please read file number 2");
    let history = h.store.history(&h.session).await.unwrap();
    assert_eq!(history.len(), 1 + 4 + 2);
}

#[tokio::test]
async fn main_is_the_session_model_and_large_the_configured_one() {
    for (choice, by_configured) in [(SummarizeModel::Main, false), (SummarizeModel::Large, true)] {
        let mut scripts = fill_scripts(1);
        scripts.push(text_turn("Summary by the session model.", None));
        let session_model = Arc::new(ScriptedModel::new(scripts));
        let configured = Arc::new(
            ScriptedModel::new(vec![text_turn("Summary by the configured model.", None)])
                .with_info(info(32_000, 1000)),
        );
        let store = Arc::new(SqliteStore::in_memory().await.unwrap());
        let models = Models {
            large: session_model.clone(),
            small: None,
            embedded: None,
            configured_large: Some(configured.clone()),
        };
        let agent = SessionAgent::new(
            store.clone(),
            models,
            Options { summarize_model: choice, ..Options::default() },
        )
        .with_tool(Arc::new(ReadFile { line: "line of code\n", times: 100 }));
        let session = agent.create_session("routing").await.unwrap().id;
        agent.run_turn(&session, "Please read file number 0", None).await.unwrap();
        let report = agent.compact(&session, None, None).await.unwrap();
        let summary = store.message(&report.summary_message_id).await.unwrap().unwrap().text_content();
        let expected =
            if by_configured { "Summary by the configured model." } else { "Summary by the session model." };
        assert!(summary.starts_with(expected), "{choice:?}: {summary}");
        assert_eq!(configured.requests().len(), usize::from(by_configured), "{choice:?}");
    }
}

#[tokio::test]
async fn manual_compaction_passes_custom_instructions_and_small_model_routing_works() {
    let large = Arc::new(ScriptedModel::new(fill_scripts(1)));
    let small =
        Arc::new(ScriptedModel::new(vec![text_turn("Small summary.", None)]).with_info(info(32_000, 1000)));
    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    let models =
        Models { large: large.clone(), small: Some(small.clone()), embedded: None, configured_large: None };
    let options = Options { summarize_model: SummarizeModel::Small, ..Options::default() };
    let agent = SessionAgent::new(store.clone(), models, options)
        .with_tool(Arc::new(ReadFile { line: "line of code\n", times: 100 }));
    let session = agent.create_session("routing").await.unwrap().id;
    agent.run_turn(&session, "Please read file number 0", None).await.unwrap();
    let report = agent.compact(&session, Some("Focus on the parser module"), None).await.unwrap();
    assert_eq!(report.model, "test-model");
    assert_eq!(large.requests().len(), 2);
    let prompt = small.requests()[0].messages[0].text_content();
    assert!(prompt.contains("Focus on the parser module"), "{prompt}");

    let embedded = Options { summarize_model: SummarizeModel::Embedded, ..Options::default() };
    let agent = SessionAgent::new(store.clone(), Models::new(large.clone()), embedded);
    let err = agent.compact(&session, None, None).await.unwrap_err();
    assert!(matches!(err, AgentError::ModelNotConfigured { choice: "embedded", .. }), "{err:?}");
}

#[tokio::test]
async fn a_small_local_summarizer_gets_the_compact_prompt() {
    for (parameters, compact) in [(Some(134_515_008), true), (Some(4_000_000_000), false), (None, false)] {
        let large = Arc::new(ScriptedModel::new(fill_scripts(1)));
        let mut summarizer =
            ScriptedModel::new(vec![text_turn("Summary.", None)]).with_info(info(32_000, 1000));
        if let Some(parameters) = parameters {
            summarizer = summarizer.with_parameters(parameters);
        }
        let summarizer = Arc::new(summarizer);
        let store = Arc::new(SqliteStore::in_memory().await.unwrap());
        let models = Models {
            large: large.clone(),
            small: Some(summarizer.clone()),
            embedded: None,
            configured_large: None,
        };
        let options = Options { summarize_model: SummarizeModel::Small, ..Options::default() };
        let agent = SessionAgent::new(store.clone(), models, options)
            .with_tool(Arc::new(ReadFile { line: "line of code\n", times: 100 }));
        let session = agent.create_session("small").await.unwrap().id;
        agent.run_turn(&session, "Please read file number 0", None).await.unwrap();
        agent.compact(&session, None, None).await.unwrap();
        let prompt = summarizer.requests()[0].messages[0].text_content();
        assert_eq!(
            prompt.starts_with(phosphor_prompt::COMPACT_TEMPLATE.lines().next().unwrap()),
            compact,
            "{prompt}"
        );
        assert_eq!(prompt.contains("## Decisions"), !compact, "{parameters:?}: {prompt}");
    }
}

#[tokio::test]
async fn interrupted_tool_calls_get_synthetic_results_in_the_next_request() {
    // The model asks for a tool, then the turn is dropped before the tool result is stored.
    struct Slow;
    #[async_trait]
    impl Tool for Slow {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: "slow".into(),
                description: "never returns in time".into(),
                parameters: serde_json::json!({}),
            }
        }
        async fn call(&self, _: serde_json::Value) -> ToolOutput {
            tokio::time::sleep(Duration::from_secs(60)).await;
            ToolOutput::ok("late")
        }
    }
    let model = ScriptedModel::new(vec![
        tool_calls_turn(&[("c1", "slow", "{}")], None),
        text_turn("Recovered.", None),
    ]);
    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    let model = Arc::new(model);
    let agent = SessionAgent::new(store.clone(), Models::new(model.clone()), Options::default())
        .with_tool(Arc::new(Slow));
    let session = agent.create_session("t").await.unwrap().id;
    let turn = agent.run_turn(&session, "call slow", None);
    assert!(tokio::time::timeout(Duration::from_millis(200), turn).await.is_err());
    agent.run_turn(&session, "again", None).await.unwrap();
    let request = model.requests().pop().unwrap();
    check_requests(std::slice::from_ref(&request));
    let synthetic = request.messages.iter().flat_map(|m| m.tool_results()).next().unwrap();
    assert!(synthetic.is_error);
    assert_eq!(synthetic.call_id, "c1");
    // The store holds exactly what happened: no invented result.
    assert_eq!(store.messages(&session).await.unwrap().iter().filter(|m| m.role == Role::Tool).count(), 0);
    let _ = (FinishReason::Stop, Part::Text { text: String::new() });
}

#[tokio::test]
async fn a_file_database_survives_a_restart_and_the_new_agent_continues_from_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let mut scripts = fill_scripts(2);
    scripts.push(text_turn("Summary before the restart.", None));
    let session = {
        let store = Arc::new(SqliteStore::open(&path).await.unwrap());
        let agent = SessionAgent::new(
            store.clone(),
            Models::new(Arc::new(ScriptedModel::new(scripts))),
            Options::default(),
        )
        .with_tool(Arc::new(ReadFile { line: "line of code\n", times: 100 }));
        let session = agent.create_session("").await.unwrap().id;
        for i in 0..2 {
            agent.run_turn(&session, format!("Please read file number {i}"), None).await.unwrap();
        }
        agent.compact(&session, None, None).await.unwrap();
        drop(agent);
        Arc::try_unwrap(store).unwrap().close().await;
        session
    };
    let store = Arc::new(SqliteStore::open(&path).await.unwrap());
    let model = Arc::new(ScriptedModel::new(vec![text_turn("Continuing.", None)]));
    let agent = SessionAgent::new(store.clone(), Models::new(model.clone()), Options::default());
    agent.run_turn(&session, "Where were we?", None).await.unwrap();
    let request = model.requests().pop().unwrap();
    assert_eq!(request.messages.len(), 2);
    assert!(request.messages[0].text_content().contains("Summary before the restart."));
    assert_eq!(store.messages(&session).await.unwrap().len(), 2 * 4 + 1 + 2);
}

#[tokio::test]
async fn an_empty_summary_keeps_the_session_state_phosphor_recorded() {
    let mut scripts = fill_scripts(2);
    scripts.push(vec![Ok(StreamEvent::Finish { reason: FinishReason::Stop })]);
    let h = harness(ScriptedModel::new(scripts), Options::default()).await;
    fill(&h, 2).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let report = h.agent.compact(&h.session, None, Some(&tx)).await.unwrap();
    drop(tx);
    let mut warnings = Vec::new();
    while let Some(event) = rx.recv().await {
        if let AgentEvent::Warning { message } = event {
            warnings.push(message);
        }
    }
    assert!(warnings.iter().any(|w| w.contains("returned no text")), "{warnings:?}");
    let summary = h.store.message(&report.summary_message_id).await.unwrap().unwrap();
    assert_eq!(summary.status, MessageStatus::Complete);
    assert!(summary.text_content().starts_with("## Session state\n"), "{}", summary.text_content());
    let state = SessionState::parse(&summary.text_content());
    let stored = h.store.messages(&h.session).await.unwrap();
    let asked: Vec<String> =
        stored.iter().filter(|m| m.role == Role::User).map(|m| m.text_content()).collect();
    assert_eq!(state.requests, asked, "every request, verbatim");
    assert_eq!(state.files.len(), 2, "{state:?}");
}

#[tokio::test]
async fn a_looping_summary_is_stopped_and_cut_after_its_first_repeat() {
    let mut scripts = fill_scripts(2);
    let mut looping: phosphor_testkit::Script =
        vec![Ok(StreamEvent::TextDelta { text: "## Goal\nRead the files.\n## Versions\n".into() })];
    // 2,000 repeats in deltas of ten: the guard must stop it long before the end.
    looping.extend((0..200).map(|_| Ok(StreamEvent::TextDelta { text: "1.0.0:".repeat(10) })));
    looping.push(Ok(StreamEvent::Finish { reason: FinishReason::Length }));
    scripts.push(looping);
    let h = harness(ScriptedModel::new(scripts), Options::default()).await;
    fill(&h, 2).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let report = h.agent.compact(&h.session, None, Some(&tx)).await.unwrap();
    drop(tx);
    let events = collect(&mut rx);
    let deltas = events.iter().filter(|e| matches!(e, AgentEvent::CompactionDelta { .. })).count();
    assert!(deltas < 20, "the stream was read to delta {deltas}");
    let warnings: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Warning { message } => Some(message),
            _ => None,
        })
        .collect();
    assert!(warnings.iter().any(|w| w.contains("started repeating itself (a 6-byte unit")), "{warnings:?}");
    assert!(!warnings.iter().any(|w| w.contains("output limit")), "stopped before the limit: {warnings:?}");
    let summary = h.store.message(&report.summary_message_id).await.unwrap().unwrap().text_content();
    assert!(
        summary.starts_with("## Goal\nRead the files.\n## Versions\n1.0.0:\n\n## Session state\n"),
        "{summary}"
    );
}

#[tokio::test]
async fn a_summary_that_did_not_finish_never_becomes_history() {
    for broken in [
        vec![
            Ok(StreamEvent::TextDelta { text: "half a summ".into() }),
            Ok(StreamEvent::Finish { reason: FinishReason::Cancelled }),
        ],
        vec![
            Ok(StreamEvent::TextDelta { text: "filtered".into() }),
            Ok(StreamEvent::Finish { reason: FinishReason::ContentFilter }),
        ],
    ] {
        let mut scripts = fill_scripts(1);
        scripts.push(broken);
        let h = harness(ScriptedModel::new(scripts), Options::default()).await;
        fill(&h, 1).await;
        let before = h.store.session(&h.session).await.unwrap().unwrap();
        let err = h.agent.compact(&h.session, None, None).await.unwrap_err();
        assert!(matches!(err, AgentError::SummaryIncomplete { .. }), "{err:?}");
        assert_eq!(h.store.session(&h.session).await.unwrap().unwrap(), before);
        let summary = h.store.messages(&h.session).await.unwrap().into_iter().find(|m| m.is_summary).unwrap();
        assert_eq!(summary.status, MessageStatus::Failed);
        assert_eq!(h.store.history(&h.session).await.unwrap().len(), 4);
    }
}

#[tokio::test]
async fn a_refused_oversized_message_does_not_wedge_the_session() {
    let h = harness(
        ScriptedModel::new(vec![text_turn("Fine.", None)]).with_info(info(1000, 100)),
        Options::default(),
    )
    .await;
    assert!(matches!(
        h.agent.run_turn(&h.session, long("huge", 8000), None).await,
        Err(AgentError::MessageTooLarge { .. })
    ));
    let outcome = h.agent.run_turn(&h.session, "hi", None).await.unwrap();
    assert_eq!(outcome.final_message.text_content(), "Fine.");
    assert!(outcome.compactions.is_empty());
    let request = h.model.requests().pop().unwrap();
    assert!(!request.messages.iter().any(|m| m.text_content().contains("huge")));
    assert_eq!(h.store.messages(&h.session).await.unwrap().len(), 3, "the refused message stays stored");
}

#[tokio::test]
async fn no_room_for_the_answer_forces_a_compaction_below_the_threshold() {
    // Window 4,000 with a 1,000-token answer reserve: ~3,100 tokens is under 80% but leaves no room.
    let mut scripts = fill_scripts(3);
    scripts.push(text_turn("Summary.", None));
    scripts.push(text_turn("Answer.", None));
    // Masking off: it would clear the old reads and make the compaction unneeded.
    let options = Options { mask_threshold: 0.0, ..Options::default() };
    let h = harness(ScriptedModel::new(scripts).with_info(info(4000, 1000)), options).await;
    fill(&h, 3).await;
    let outcome = h.agent.run_turn(&h.session, long("question", 7400), None).await.unwrap();
    assert_eq!(outcome.compactions.first().map(|c| c.reason), Some(CompactionReason::OutputReserve));
    let last = h.model.requests().pop().unwrap();
    let estimate = ApproxCounter.count_request(&last);
    assert!(last.max_output_tokens.unwrap() <= 4000 - estimate, "the request asks for more than fits");
}
