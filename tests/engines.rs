//! Compaction through the agent with real local models as the `embedded` summarizer: SmolLM2-135M-Instruct
//! (GGUF) on each engine, from `PHOSPHOR_TEST_MODEL`, and Gemma 3 270M (which only llama.cpp runs; `auto` must
//! pick it) from `PHOSPHOR_TEST_GEMMA` (`cargo xtask fetch-test-model all`; `cargo xtask ci` always sets both).
//! Without them the tests say they were skipped (under `cargo xtask ci` they fail instead; see
//! `phosphor_base::testing::test_model`). Models this small write weak summaries, so the checks are about
//! structure, streaming, usage, session state and the artifact trail, never wording.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../crates/phosphor-agent/tests/common/mod.rs"]
mod common;

use std::sync::Arc;

use common::ReadFile;
use phosphor_agent::{AgentEvent, AgentSettings, FileOp, Models, SessionAgent, SessionState};
use phosphor_base::MessageStatus;
use phosphor_base::config::{Engine, InferenceConfig, Options, SummarizeModel};
use phosphor_embedded::EngineKind;
use phosphor_store::{SessionStore, SqliteStore};
use phosphor_testkit::{ScriptedModel, text_turn, tool_calls_turn};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smollm2_on_mistral_rs_summarizes_a_session_through_the_compaction_path() {
    summarizes_through_the_compaction_path("PHOSPHOR_TEST_MODEL", Engine::Mistralrs, EngineKind::MistralRs)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smollm2_on_llama_cpp_summarizes_a_session_through_the_compaction_path() {
    summarizes_through_the_compaction_path("PHOSPHOR_TEST_MODEL", Engine::Llamacpp, EngineKind::LlamaCpp)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemma3_on_auto_summarizes_a_session_through_the_compaction_path() {
    summarizes_through_the_compaction_path("PHOSPHOR_TEST_GEMMA", Engine::Auto, EngineKind::LlamaCpp).await;
}

/// Held while a model runs: two engines sharing 2 cores slow each other down many times over.
static MODEL_RUNS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn summarizes_through_the_compaction_path(variable: &str, engine: Engine, expected: EngineKind) {
    let Some(path) = phosphor_base::testing::test_model(variable) else { return };
    let _one_model_at_a_time = MODEL_RUNS.lock().await;
    let inference = InferenceConfig { enabled: true, model_path: Some(path), engine, ..Default::default() };
    // The session's main model is scripted; the summary comes from the real local model.
    let large = Arc::new(ScriptedModel::new(vec![
        tool_calls_turn(&[("call_1", "read_file", r#"{"path":"src/config.rs"}"#)], None),
        text_turn("parse_config panics on an empty file; I will return an error instead.", None),
        tool_calls_turn(&[("call_2", "read_file", r#"{"path":"tests/config.rs"}"#)], None),
        text_turn("The test expects Err for empty input. Next: change parse_config to return Result.", None),
    ]));
    let mut models = Models::new(large);
    let embedded = phosphor_embedded::load(&inference).await.unwrap();
    assert_eq!(embedded.engine(), expected);
    models.embedded = Some(embedded);
    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    let options = Options { summarize_model: SummarizeModel::Embedded, ..Options::default() };
    let settings = AgentSettings { summary_max_output_tokens: 48, ..AgentSettings::default() };
    let agent = SessionAgent::new(store.clone(), models, options)
        .with_tool(Arc::new(ReadFile { line: "fn parse_config(text: &str) -> Config { todo }\n", times: 8 }))
        .with_settings(settings)
        .with_system_prompt("You are a coding agent.");
    let session = agent.create_session("").await.unwrap().id;
    agent.run_turn(&session, "Why does CI fail on an empty config file?", None).await.unwrap();
    agent.run_turn(&session, "What does the test expect?", None).await.unwrap();

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let report = agent.compact(&session, None, Some(&tx)).await.unwrap();
    assert!(report.tokens_after < report.tokens_before, "{report:?}");

    let mut deltas = 0;
    let mut usage = None;
    while let Ok(event) = rx.try_recv() {
        match event {
            AgentEvent::CompactionDelta { text } => deltas += usize::from(!text.is_empty()),
            AgentEvent::Usage { usage: u, .. } => usage = Some(u),
            _ => {}
        }
    }
    assert!(deltas >= 2, "the summary must stream in pieces, got {deltas}");
    let usage = usage.expect("the summarizer reports usage");
    assert!(usage.input_tokens > 100 && usage.output_tokens > 0, "{usage:?}");

    let state = store.session(&session).await.unwrap().unwrap();
    assert_eq!(state.summary_message_id.as_deref(), Some(report.summary_message_id.as_str()));
    assert_eq!((state.prompt_tokens, state.completion_tokens), (0, usage.output_tokens));
    let summary = store.message(&report.summary_message_id).await.unwrap().unwrap();
    assert!(summary.is_summary);
    assert_eq!(summary.status, MessageStatus::Complete);
    let text = summary.text_content();
    assert!(text.split("## Session state").next().unwrap().trim().len() > 10, "{text}");
    let trail = SessionState::parse(&text);
    assert!(
        trail.file_op("src/config.rs") == Some(FileOp::Read)
            && trail.file_op("tests/config.rs") == Some(FileOp::Read),
        "{trail:?}"
    );
    let history = store.history(&session).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].id, summary.id);
}
