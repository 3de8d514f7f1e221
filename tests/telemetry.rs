//! Telemetry: a span per turn, a `{operation} {model}` span per model call with the gen_ai
//! attributes and usage, a compaction span with tokens before and after, and no API key anywhere.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use phosphor_agent::{Models, SessionAgent};
use phosphor_base::config::{ModelConfig, Options, ProviderConfig};
use phosphor_llm::OpenAiModel;
use phosphor_store::SqliteStore;
use phosphor_testkit::{MockServer, sse_text};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One recorded span: its id, name and fields.
type SpanRecord = (u64, String, HashMap<String, String>);

#[derive(Default, Clone)]
struct Spans(Arc<Mutex<Vec<SpanRecord>>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}").trim_matches('"').to_owned());
    }
}

impl<S: tracing::Subscriber> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push((id.into_u64(), attrs.metadata().name().to_owned(), fields));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some((_, _, fields)) = spans.iter_mut().rev().find(|(i, _, _)| *i == id.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }
}

#[tokio::test]
async fn turns_model_calls_and_compactions_have_spans_with_gen_ai_attributes() {
    let spans = Spans::default();
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let server =
        MockServer::start(vec![sse_text(&["Hello."], Some((42, 3))), sse_text(&["Summary."], Some((60, 7)))])
            .await;
    let provider = ProviderConfig { base_url: server.base_url(), ..ProviderConfig::default() };
    let config = ModelConfig {
        provider: "mock".into(),
        model: "gpt-test".into(),
        context_window: 8000,
        max_output_tokens: 256,
    };
    let secret = "sk-telemetry-secret-123";
    let model = Arc::new(OpenAiModel::with_api_key("mock", &provider, &config, Some(secret)).unwrap());
    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    let agent = SessionAgent::new(store, Models::new(model), Options::default());
    let session = agent.create_session("t").await.unwrap().id;
    agent.run_turn(&session, "Hi", None).await.unwrap();
    agent.compact(&session, None, None).await.unwrap();

    let spans = spans.0.lock().unwrap().clone();
    let all = |otel_name: &str| -> Vec<HashMap<String, String>> {
        spans
            .iter()
            .filter(|(_, _, f)| f.get("otel.name").map(String::as_str) == Some(otel_name))
            .map(|(_, _, f)| f.clone())
            .collect()
    };
    let turn = all("invoke_agent phosphor");
    assert_eq!(turn.len(), 1, "{spans:#?}");
    assert_eq!(turn[0]["gen_ai.conversation.id"], session);
    // One client span per model call (the turn's and the summarizer's), from the backend.
    let calls = all("chat gpt-test");
    assert_eq!(calls.len(), 2, "{spans:#?}");
    for (call, (input, output)) in calls.iter().zip([("42", "3"), ("60", "7")]) {
        assert_eq!(call["gen_ai.operation.name"], "chat");
        assert_eq!(call["gen_ai.provider.name"], "mock");
        assert_eq!(call["gen_ai.request.model"], "gpt-test");
        assert_eq!(call["gen_ai.conversation.id"], session);
        assert_eq!(call["gen_ai.usage.input_tokens"], input);
        assert_eq!(call["gen_ai.usage.output_tokens"], output);
    }
    let compaction = all("compaction");
    assert_eq!(compaction.len(), 1);
    assert_eq!(compaction[0]["gen_ai.conversation.compacted"], "true");
    let before: u64 = compaction[0]["phosphor.compaction.tokens_before"].parse().unwrap();
    let after: u64 = compaction[0]["phosphor.compaction.tokens_after"].parse().unwrap();
    assert!(before > 0 && after > 0, "{compaction:?}");
    let recorded = format!("{spans:?}");
    assert!(!recorded.contains(secret), "the API key appears in a span");
}
