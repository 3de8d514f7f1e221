//! Long agentic turns: one user message followed by many tool rounds compacts inside the turn as
//! often as it helps, keeps the turn's request verbatim, keeps every call paired with its result,
//! and never sends a request over the window.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use phosphor_agent::{AgentError, Models, SessionAgent, Tool, ToolOutput, TurnOutcome};
use phosphor_base::config::{Options, SummarizeModel};
use phosphor_base::{
    ApproxCounter, ChatModel, ChatRequest, ChatStream, ModelInfo, Role, TokenCounter, ToolSpec,
};
use phosphor_store::{SessionStore, SqliteStore};
use phosphor_testkit::{ScriptedModel, text_turn, tool_calls_turn};
use proptest::prelude::*;

/// A `read_file` tool whose output is as long as the call's `bytes` argument asks.
struct SizedRead;

#[async_trait]
impl Tool for SizedRead {
    fn spec(&self) -> ToolSpec {
        common::ReadFile { line: "", times: 0 }.spec()
    }

    async fn call(&self, arguments: serde_json::Value) -> ToolOutput {
        let bytes = arguments["bytes"].as_u64().unwrap_or(100) as usize;
        let line = "let value = compute(input); // a line of code\n";
        ToolOutput::ok(line.repeat(bytes / line.len() + 1)[..bytes].to_owned())
    }
}

fn info(model: &str, window: u64, max_output: u64) -> ModelInfo {
    ModelInfo {
        provider: "scripted".into(),
        model: model.into(),
        context_window: window,
        max_output_tokens: max_output,
    }
}

struct Run {
    result: Result<TurnOutcome, AgentError>,
    requests: Vec<ChatRequest>,
    summary_requests: Vec<ChatRequest>,
    stored: usize,
}

/// One turn of `prompt` in which the model reads files of `sizes` bytes, one per round, then
/// answers; summaries come from a separate small model with the same window.
async fn long_turn(prompt: &str, sizes: &[usize], window: u64, max_output: u64, options: Options) -> Run {
    let mut scripts: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let args = format!(r#"{{"path":"src/file{i}.rs","bytes":{bytes}}}"#);
            tool_calls_turn(&[(&format!("call_{i}"), "read_file", &args)], None)
        })
        .collect();
    scripts.push(text_turn("All files read.", None));
    let large = Arc::new(ScriptedModel::new(scripts).with_info(info("large", window, max_output)));
    let summaries = (0..sizes.len() + 2)
        .map(|i| {
            text_turn(&format!("## Goal\nRead the files.\n## Progress\nPass {i}: files read so far."), None)
        })
        .collect();
    let small = Arc::new(ScriptedModel::new(summaries).with_info(info("small", window, max_output)));
    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    let models =
        Models { large: large.clone(), small: Some(small.clone()), embedded: None, configured_large: None };
    let options = Options { summarize_model: SummarizeModel::Small, ..options };
    let agent = SessionAgent::new(store.clone(), models, options)
        .with_system_prompt("You are a coding agent.")
        .with_tool(Arc::new(SizedRead));
    let session = agent.create_session("").await.unwrap().id;
    let result = agent.run_turn(&session, prompt, None).await;
    let stored = store.messages(&session).await.unwrap().len();
    Run { result, requests: large.requests(), summary_requests: small.requests(), stored }
}

/// The invariants of every request: under the window, pairing intact, the turn's prompt verbatim.
fn check_requests(requests: &[ChatRequest], prompt: &str, window: u64) {
    for (i, request) in requests.iter().enumerate() {
        let tokens = ApproxCounter.count_request(request);
        assert!(tokens <= window, "request #{i} is {tokens} tokens, over the {window}-token window");
        if let Err(violation) = phosphor_prune::check_tool_pairing(&request.messages) {
            panic!("request #{i} breaks tool pairing: {violation:?}");
        }
        assert!(
            request.messages.iter().any(|m| m.role == Role::User && m.text_content() == prompt),
            "request #{i} lost the turn's request"
        );
    }
}

#[tokio::test]
async fn fourteen_rounds_over_three_windows_finish_with_compactions_inside_the_turn() {
    // 14 reads of 7 KB (~1,750 tokens each, ~24,500 in all: three 8,000-token windows).
    let prompt = "Read the fourteen modules and tell me which one parses the config.";
    let sizes = [7_000; 14];
    let run = long_turn(prompt, &sizes, 8_000, 1_000, summaries_only()).await;
    let outcome = run.result.unwrap();
    assert_eq!(outcome.final_message.text_content(), "All files read.");
    assert_eq!(outcome.model_calls, 15);
    assert!(outcome.compactions.len() >= 2, "{} compactions", outcome.compactions.len());
    assert!(outcome.compactions.len() <= 8);
    check_requests(&run.requests, prompt, 8_000);
    for (i, request) in run.summary_requests.iter().enumerate() {
        let tokens = ApproxCounter.count_request(request);
        assert!(tokens + 1_000 <= 8_000, "summary request #{i} is {tokens} tokens");
    }
    // The latest round is verbatim in the request after every compaction: the last request holds
    // the 14th result whole.
    let last = run.requests.last().unwrap();
    let results: Vec<usize> =
        last.messages.iter().flat_map(|m| m.tool_results().map(|r| r.content.len())).collect();
    assert_eq!(results.last(), Some(&7_000));
    // Nothing stored was lost: 1 prompt, 15 answers, 14 results, one summary per compaction.
    assert_eq!(run.stored, 1 + 15 + 14 + outcome.compactions.len());
}

/// Options without observation masking, for the tests of compaction inside a turn.
fn summaries_only() -> Options {
    Options { mask_threshold: 0.0, ..Options::default() }
}

#[tokio::test]
async fn masking_replaces_summaries_and_sends_fewer_tokens_on_the_same_turn() {
    let prompt = "Read the fourteen modules and tell me which one parses the config.";
    let sizes = [7_000; 14];
    let summaries = long_turn(prompt, &sizes, 8_000, 1_000, summaries_only()).await;
    let masking = long_turn(prompt, &sizes, 8_000, 1_000, Options::default()).await;
    let (summarized, masked) = (summaries.result.as_ref().unwrap(), masking.result.as_ref().unwrap());
    assert_eq!(masked.final_message.text_content(), "All files read.");
    check_requests(&masking.requests, prompt, 8_000);
    let sent = |run: &Run| -> u64 {
        run.requests.iter().chain(&run.summary_requests).map(|r| ApproxCounter.count_request(r)).sum()
    };
    let peak = |run: &Run| run.requests.iter().map(|r| ApproxCounter.count_request(r)).max().unwrap_or(0);
    eprintln!(
        "14 reads of 7 KB, 8,000-token window: summaries only: {} compactions, {} tokens sent, peak {}; \
         masking + summaries: {} compactions, {} tokens sent, peak {}",
        summarized.compactions.len(),
        sent(&summaries),
        peak(&summaries),
        masked.compactions.len(),
        sent(&masking),
        peak(&masking)
    );
    assert!(
        masked.compactions.len() < summarized.compactions.len(),
        "{} compactions with masking, {} without",
        masked.compactions.len(),
        summarized.compactions.len()
    );
    assert!(
        sent(&masking) < sent(&summaries),
        "{} tokens sent with masking, {} without",
        sent(&masking),
        sent(&summaries)
    );
    // The latest read is always whole; older ones are placeholders naming the call.
    let last = masking.requests.last().unwrap();
    let results: Vec<&str> =
        last.messages.iter().flat_map(|m| m.tool_results().map(|r| r.content.as_str())).collect();
    assert_eq!(results.last().map(|r| r.len()), Some(7_000));
    assert!(results[0].starts_with(phosphor_prune::MASKED_PREFIX), "{}", results[0]);
    assert!(results[0].contains("path=src/file0.rs"), "{}", results[0]);
    // Nothing stored was lost, and the store keeps every output whole.
    assert_eq!(masking.stored, 1 + 15 + 14 + masked.compactions.len());
}

#[tokio::test]
async fn the_backstop_stops_a_turn_that_would_need_more_compactions() {
    let prompt = "Read everything.";
    let options = Options { summarize_max_per_turn: 1, ..summaries_only() };
    let run = long_turn(prompt, &[7_000; 14], 8_000, 1_000, options).await;
    let err = run.result.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, AgentError::StillOverflowing { .. }), "{err:?}");
    assert!(message.contains("1 compaction ran in this turn"), "{message}");
    assert!(message.contains("options.summarize_max_per_turn (1)"), "{message}");
    assert!(message.contains("8000-token window of large"), "{message}");
    check_requests(&run.requests, prompt, 8_000);
}

/// One token per byte: a counter no backend has, so its effect on the estimate is unmistakable.
struct PerByte;

impl TokenCounter for PerByte {
    fn name(&self) -> &str {
        "per-byte"
    }

    fn count_text(&self, text: &str) -> u64 {
        text.len() as u64
    }
}

/// A scripted model that counts its tokens with [`PerByte`].
struct PerByteModel(ScriptedModel);

impl ChatModel for PerByteModel {
    fn info(&self) -> &ModelInfo {
        self.0.info()
    }

    fn stream(&self, request: ChatRequest) -> ChatStream {
        self.0.stream(request)
    }

    fn counter(&self) -> Arc<dyn TokenCounter> {
        Arc::new(PerByte)
    }
}

#[tokio::test]
async fn the_session_model_s_own_counter_makes_the_estimate() {
    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    let model = Arc::new(PerByteModel(ScriptedModel::new(vec![text_turn("ok", None)])));
    let agent = SessionAgent::new(store, Models::new(model), Options::default());
    let session = agent.create_session("").await.unwrap().id;
    let prompt = "x".repeat(4_000);
    agent.run_turn(&session, prompt.clone(), None).await.unwrap();
    let status = agent.token_status(&session).await.unwrap();
    // 4,000 bytes are 4,000 tokens by this counter (1,000 by the approximation); "ok" is 2; each
    // message adds 4 tokens of framing and the request 3.
    let per_byte = PerByte.count_message(&phosphor_base::Message::user(prompt)) + 2 + 4 + 3;
    assert_eq!(status.estimated_tokens, per_byte);
    assert_eq!(per_byte, 4_013);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random long turns: every round alone fits comfortably, so the turn must finish, with every
    /// request under the window, pairing intact, the prompt verbatim, and never more compactions
    /// than model responses.
    #[test]
    fn random_long_turns_finish_under_the_window(
        window in 3_000_u64..16_000,
        threshold in 0.5_f64..=1.0,
        max_output_quarter in 1_u64..8,
        keep_recent in prop_oneof![Just(0_u64), 0_u64..4_000],
        fractions in proptest::collection::vec(1_u64..100, 1..20),
    ) {
        // Each output is at most a fifth of the window (4 bytes a token).
        let sizes: Vec<usize> = fractions.iter().map(|f| (window * 4 / 5 * f / 100) as usize).collect();
        let max_output = window / 32 * max_output_quarter;
        let options = Options {
            summarize_threshold: threshold,
            summarize_keep_recent_tokens: keep_recent,
            summarize_max_per_turn: 64,
            ..Options::default()
        };
        let prompt = "Read the files one by one.";
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let run = runtime.block_on(long_turn(prompt, &sizes, window, max_output, options));
        let outcome = run.result.map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(outcome.final_message.text_content(), "All files read.");
        check_requests(&run.requests, prompt, window);
        let responses = outcome.model_calls as usize;
        prop_assert!(outcome.compactions.len() <= responses);
        prop_assert_eq!(run.stored, 1 + 2 * sizes.len() + 1 + outcome.compactions.len());
    }
}
