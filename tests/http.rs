//! The agent over real HTTP: phosphor-llm's OpenAI-compatible backend against a loopback server
//! that speaks chat-completions streaming byte for byte. Every request the server receives is
//! checked: tool calls and results pair up, and after a compaction the history starts at the summary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../crates/phosphor-agent/tests/common/mod.rs"]
mod common;

use std::sync::Arc;

use common::ReadFile;
use phosphor_agent::{CompactionReason, Models, SUMMARY_PREFIX, SessionAgent};
use phosphor_base::Role;
use phosphor_base::config::{ModelConfig, Options, ProviderConfig};
use phosphor_llm::{OpenAiModel, RetryPolicy};
use phosphor_store::{SessionStore, SqliteStore};
use phosphor_testkit::{MockResponse, MockServer, RecordedRequest, sse_text, sse_tool_calls};

fn model(server: &MockServer, window: u64) -> Arc<OpenAiModel> {
    let provider = ProviderConfig { base_url: server.base_url(), ..ProviderConfig::default() };
    let config = ModelConfig {
        provider: "mock".into(),
        model: "gpt-test".into(),
        context_window: window,
        max_output_tokens: 256,
    };
    Arc::new(OpenAiModel::new("mock", &provider, &config).unwrap().with_retry_policy(RetryPolicy::none()))
}

/// Checks what the server received: pairing on every request, and the summary first after compaction.
fn check(requests: &[RecordedRequest]) -> Vec<Vec<phosphor_base::Message>> {
    requests
        .iter()
        .enumerate()
        .map(|(i, request)| {
            let messages = request.body["messages"].as_array().expect("messages array");
            let parsed =
                phosphor_wire::chat::from_openai(messages).expect("the request is valid OpenAI JSON");
            if let Err(violation) = phosphor_prune::check_tool_pairing(&parsed) {
                panic!("request #{i} breaks tool pairing: {violation:?}\n{:#}", request.body);
            }
            parsed
        })
        .collect()
}

fn read_turn(i: usize) -> [MockResponse; 2] {
    let args = format!(r#"{{"path":"src/mod{i}.rs"}}"#);
    [
        sse_tool_calls(&[(&format!("call_{i}"), "read_file", &args)], Some((100, 12))),
        sse_text(&["Module ", &format!("{i} "), "is read."], Some((500, 6))),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_over_http_compacts_and_continues_from_the_summary() {
    let mut script: Vec<MockResponse> = (0..4).flat_map(read_turn).collect();
    // The fifth prompt crosses the threshold: the summary streams, then the answer.
    script.push(sse_text(
        &["## Goal\n", "Read the modules.\n", "## Next steps\n", "Report."],
        Some((1500, 40)),
    ));
    script.push(sse_text(&["Here is the report."], Some((700, 9))));
    // The next turn is rejected as too long by the server: compact once, retry once.
    script.push(phosphor_testkit::error_fixture("openai_context_length_exceeded").response());
    script.push(sse_text(&["Second summary."], Some((800, 20))));
    script.push(sse_text(&["Done after retry."], Some((600, 4))));
    let server = MockServer::start(script).await;

    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    // Masking off: this test follows the summary path (masking is tested in phosphor-agent).
    let options = Options { summarize_threshold: 0.5, mask_threshold: 0.0, ..Options::default() };
    let agent = SessionAgent::new(store.clone(), Models::new(model(&server, 4000)), options)
        .with_system_prompt("You are a test agent.")
        .with_tool(Arc::new(ReadFile { line: "fn main() {}\n", times: 100 }));
    let session = agent.create_session("").await.unwrap().id;
    for i in 0..4 {
        let outcome = agent.run_turn(&session, format!("Read module {i}"), None).await.unwrap();
        assert_eq!(outcome.final_message.text_content(), format!("Module {i} is read."));
        assert!(outcome.compactions.is_empty());
    }
    let prompt = format!("Write the report. {}", "Background detail. ".repeat(130));
    let outcome = agent.run_turn(&session, prompt.clone(), None).await.unwrap();
    assert_eq!(outcome.compactions.first().map(|c| c.reason), Some(CompactionReason::Threshold));
    assert_eq!(outcome.final_message.text_content(), "Here is the report.");

    let outcome = agent.run_turn(&session, "One more thing.", None).await.unwrap();
    assert_eq!(outcome.compactions.first().map(|c| c.reason), Some(CompactionReason::Rejected));
    assert_eq!(outcome.final_message.text_content(), "Done after retry.");

    let requests = server.requests();
    assert_eq!(requests.len(), 13);
    let parsed = check(&requests);
    // Usage was asked for on every request, and the summarizer got no tools.
    for request in &requests {
        assert_eq!(request.body["stream"], true);
        assert_eq!(request.body["stream_options"]["include_usage"], true);
    }
    let summarizer = &requests[8];
    assert!(summarizer.body.get("tools").is_none_or(|t| t.as_array().is_some_and(Vec::is_empty)));
    // The answer after the summary: system, the summary (shown as context), the prompt verbatim.
    let after = &parsed[9];
    assert_eq!(after.len(), 3);
    assert!(after[1].text_content().starts_with(SUMMARY_PREFIX));
    assert!(after[1].text_content().contains("Read the modules."));
    assert!(after[1].text_content().contains("src/mod3.rs"), "the artifact trail lists every file");
    assert_eq!(after[2].text_content(), prompt);
    // The retry after the rejection starts at the second summary and ends with the new prompt.
    let retry = parsed.last().unwrap();
    assert!(retry[1].text_content().contains("Second summary."));
    assert_eq!(retry.last().unwrap().text_content(), "One more thing.");
    assert_eq!(retry.last().unwrap().role, Role::User);

    // The store holds every message ever sent, and the session points at the second summary.
    let stored = store.messages(&session).await.unwrap();
    assert_eq!(stored.iter().filter(|m| m.is_summary).count(), 2);
    assert_eq!(stored.iter().filter(|m| m.role == Role::Tool).count(), 4);
    let state = store.session(&session).await.unwrap().unwrap();
    assert_eq!((state.prompt_tokens, state.completion_tokens), (600, 4));
    let history = store.history(&session).await.unwrap();
    assert_eq!(history.first().map(|m| m.is_summary), Some(true));
    assert_eq!(history.first().map(|m| m.id.clone()), state.summary_message_id);
}
