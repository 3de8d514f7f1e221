//! Telemetry: a span per turn, a `{operation} {model}` span per model call with the gen_ai
//! attributes and usage, a compaction span with tokens before and after, and no API key anywhere.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use phosphor_agent::{Models, SessionAgent};
use phosphor_core::Usage;
use phosphor_core::config::Options;
use phosphor_store::SqliteStore;
use phosphor_testkit::{ScriptedModel, text_turn};
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
    let usage = |i, o| Some(Usage { input_tokens: i, output_tokens: o, ..Usage::default() });
    let model = Arc::new(ScriptedModel::new(vec![
        text_turn("Hello.", usage(42, 3)),
        text_turn("Summary.", usage(60, 7)),
    ]));
    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    let agent = SessionAgent::new(store, Models::new(model), Options::default());
    let session = agent.create_session("t").await.unwrap().id;
    agent.run_turn(&session, "Hi", None).await.unwrap();
    agent.compact(&session, None, None).await.unwrap();

    let spans = spans.0.lock().unwrap().clone();
    let find = |otel_name: &str| {
        spans
            .iter()
            .find(|(_, _, f)| f.get("otel.name").map(String::as_str) == Some(otel_name))
            .unwrap_or_else(|| panic!("no span {otel_name:?} in {spans:#?}"))
            .2
            .clone()
    };
    let turn = find("invoke_agent phosphor");
    assert_eq!(turn["gen_ai.conversation.id"], session);
    let chat = find("chat scripted-model");
    assert_eq!(chat["gen_ai.operation.name"], "chat");
    assert_eq!(chat["gen_ai.provider.name"], "scripted");
    assert_eq!(chat["gen_ai.request.model"], "scripted-model");
    assert_eq!(chat["gen_ai.conversation.id"], session);
    assert_eq!(chat["gen_ai.usage.input_tokens"], "42");
    assert_eq!(chat["gen_ai.usage.output_tokens"], "3");
    let summarize = find("summarize scripted-model");
    assert_eq!(summarize["gen_ai.usage.output_tokens"], "7");
    let compaction = find("compaction");
    assert_eq!(compaction["gen_ai.conversation.compacted"], "true");
    let before: u64 = compaction["phosphor.compaction.tokens_before"].parse().unwrap();
    let after: u64 = compaction["phosphor.compaction.tokens_after"].parse().unwrap();
    assert!(before > 0 && after > 0, "{compaction:?}");
}
