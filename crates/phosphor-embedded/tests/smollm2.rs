//! The embedded backend on a real model: SmolLM2-135M-Instruct from `PHOSPHOR_TEST_MODEL`
//! (`cargo xtask fetch-test-model`), on each engine compiled in. Every test is skipped, saying so, when the
//! variable is unset, and fails instead under `cargo xtask ci` (see `phosphor_base::testing::test_model`).
//!
//! All tests share one process, so they share one engine per kind (the process-wide cache is part of what is
//! tested).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use phosphor_base::config::{Engine, InferenceConfig};
use phosphor_base::message::{FinishReason, Message};
use phosphor_base::model::{ChatModel, ChatRequest, ModelInfo, StreamEvent};
use phosphor_base::outline::{Outline, Section};
use phosphor_embedded::{EmbeddedModel, EngineKind, HubSettings, ModelSource, load_with, resolve};
use pretty_assertions::assert_eq;
use tracing_subscriber::layer::SubscriberExt;

/// SmolLM2's `llama.context_length`.
const SMOLLM2_CONTEXT: u64 = 8192;
/// Short answers: debug builds run the engine's own code unoptimised.
const MAX_TOKENS: u64 = 48;

fn test_model() -> Option<PathBuf> {
    phosphor_base::testing::test_model("PHOSPHOR_TEST_MODEL")
}

/// Settings that would fail any network use: offline, in an empty cache.
fn no_network() -> HubSettings {
    HubSettings {
        cache_dir: PathBuf::from("/nonexistent/phosphor-test-hub"),
        endpoint: "http://127.0.0.1:9".into(),
        offline: true,
        token: None,
        progress: false,
    }
}

fn local(path: &Path, engine: Engine) -> InferenceConfig {
    InferenceConfig { enabled: true, model_path: Some(path.to_owned()), engine, ..Default::default() }
}

async fn smollm2(path: &Path, engine: Engine) -> Arc<EmbeddedModel> {
    match load_with(&local(path, engine), no_network()).await {
        Ok(model) => model,
        Err(e) => panic!("the test model does not load on {engine:?}: {e}"),
    }
}

/// The engine an explicit `engine` setting loads.
fn kind(engine: Engine) -> EngineKind {
    match engine {
        Engine::Mistralrs => EngineKind::MistralRs,
        _ => EngineKind::LlamaCpp,
    }
}

/// Each test below, once per engine, in a module named after it.
macro_rules! per_engine {
    ($($test:ident),* $(,)?) => {
        mod mistralrs {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test(phosphor_base::config::Engine::Mistralrs).await;
                }
            )*
        }
        mod llamacpp {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test(phosphor_base::config::Engine::Llamacpp).await;
                }
            )*
        }
    };
}

per_engine!(
    reports_the_window_from_the_gguf,
    summarizes_a_conversation_as_a_stream,
    complete_collects_the_answer,
    a_second_load_reuses_the_engine,
    a_prompt_longer_than_the_window_is_a_context_overflow,
    gpu_without_a_gpu_falls_back_to_the_cpu,
    the_call_span_records_usage,
    a_model_without_a_chat_template_gets_chatml,
    the_answer_follows_the_outline,
);

#[tokio::test]
async fn llamacpp_stops_between_tokens_when_the_stream_is_dropped() {
    dropping_the_stream_cancels_the_answer(Engine::Llamacpp).await;
}

/// Each engine counts tokens with the model's own vocabulary: llama.cpp's tokenizer, and for
/// mistral.rs the GGUF vocabulary rebuilt as a Hugging Face tokenizer. Two independent
/// implementations of the same vocabulary must agree, and neither is the bytes/4 approximation.
#[tokio::test]
async fn both_engines_count_with_the_model_s_own_vocabulary() {
    let Some(path) = test_model() else { return };
    let llama = smollm2(&path, Engine::Llamacpp).await.counter();
    let mistral = smollm2(&path, Engine::Mistralrs).await.counter();
    assert_eq!(llama.name(), "llama.cpp:SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(mistral.name().starts_with("hf:"), "{}", mistral.name());
    let conversation = conversation();
    let texts = conversation.iter().map(Message::text_content).chain([
        "fn main() { println!(\"naïve café, 日本語 👍\"); }\n\tlet x = 42;".to_owned(),
        "<|im_start|>user\nHi<|im_end|>".to_owned(),
        String::new(),
    ]);
    for text in texts {
        assert_eq!(llama.count_text(&text), mistral.count_text(&text), "{text:?}");
    }
    // "hello world" is two tokens of SmolLM2's vocabulary; the approximation would say three.
    assert_eq!(llama.count_text("hello world"), 2);
}

/// A short agent session to summarize.
fn conversation() -> Vec<Message> {
    vec![
        Message::system("You summarize conversations. Answer with one short paragraph."),
        Message::user("Our CI fails: the test `parses_config` panics on an empty file."),
        Message::assistant(
            "The parser calls unwrap on the first line. I changed it to return an error instead.",
        ),
        Message::user("Good, the test passes now. Summarize what we did."),
    ]
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest { messages, max_output_tokens: Some(MAX_TOKENS), ..ChatRequest::default() }
}

async fn reports_the_window_from_the_gguf(engine: Engine) {
    let Some(path) = test_model() else { return };
    let model = smollm2(&path, engine).await;
    assert_eq!(
        model.info(),
        &ModelInfo {
            provider: "embedded".into(),
            model: "SmolLM2-135M-Instruct.Q4_1.gguf".into(),
            context_window: SMOLLM2_CONTEXT,
            max_output_tokens: 4096,
        }
    );
    assert_eq!((model.architecture(), model.device(), model.engine()), ("llama", "cpu", kind(engine)));
    // Counted from the file's tensor descriptions: small enough for the compact summary prompt.
    assert_eq!(model.parameters(), Some(134_515_008));
}

async fn summarizes_a_conversation_as_a_stream(engine: Engine) {
    let Some(path) = test_model() else { return };
    let model = smollm2(&path, engine).await;
    let events: Vec<StreamEvent> =
        model.stream(request(conversation())).map(|e| e.unwrap()).collect::<Vec<_>>().await;

    // Text deltas, then usage, then the finish, and nothing else.
    let deltas: Vec<&str> = events
        .iter()
        .map_while(|e| match e {
            StreamEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(!deltas.is_empty(), "no text: {events:?}");
    assert!(deltas.iter().all(|d| !d.is_empty()), "an empty delta: {deltas:?}");
    let rest = &events[deltas.len()..];
    let [StreamEvent::Usage(usage), StreamEvent::Finish { reason }] = rest else {
        panic!("expected usage then finish after the text, got {rest:?}");
    };
    assert!(matches!(reason, FinishReason::Stop | FinishReason::Length), "{reason:?}");
    assert!(usage.input_tokens > 40, "{usage:?}");
    assert!(usage.output_tokens > 0 && usage.output_tokens <= MAX_TOKENS, "{usage:?}");
    if *reason == FinishReason::Length {
        assert_eq!(usage.output_tokens, MAX_TOKENS);
    }
    // Deltas arrive in order: together they make the whole answer, which is about the conversation.
    let text = deltas.concat();
    assert!(text.trim().len() > 10, "{text:?}");
}

/// With an outline the engine writes its headings and bounded bullet lines and nothing else, greedy or
/// sampled: llama.cpp through its grammar sampler, mistral.rs through its regex constraint.
async fn the_answer_follows_the_outline(engine: Engine) {
    let Some(path) = test_model() else { return };
    let model = smollm2(&path, engine).await;
    let outline = Outline::new(vec![Section::new("Goal", 1), Section::new("Next", 1)]);
    for temperature in [None, Some(0.7)] {
        let request = ChatRequest {
            outline: Some(outline.clone()),
            temperature,
            max_output_tokens: Some(200),
            ..request(conversation())
        };
        let completion = model.complete(request).await.unwrap();
        let text = completion.text;
        assert!(text.starts_with("## Goal\n- "), "{temperature:?}: {text:?}");
        if completion.finish_reason == Some(FinishReason::Stop) {
            assert!(outline.accepts(&text), "{temperature:?}: {text:?}");
        } else {
            assert!(!text.contains("\n\n") && !text.contains("## Goal\n- #"), "{temperature:?}: {text:?}");
        }
    }
}

async fn complete_collects_the_answer(engine: Engine) {
    let Some(path) = test_model() else { return };
    let model = smollm2(&path, engine).await;
    let completion = model
        .complete(request(vec![Message::user("What is the capital of France? One word.")]))
        .await
        .unwrap();
    assert!(completion.text.contains("Paris"), "{completion:?}");
    assert_eq!(completion.finish_reason, Some(FinishReason::Stop));
    let usage = completion.usage.unwrap();
    assert!(usage.input_tokens > 5 && usage.output_tokens > 0, "{usage:?}");
}

async fn a_second_load_reuses_the_engine(engine: Engine) {
    let Some(path) = test_model() else { return };
    let first = smollm2(&path, engine).await;
    let second = smollm2(&path, engine).await;
    assert!(Arc::ptr_eq(&first, &second));

    // The same file reached through a Hugging Face cache link is the same engine too.
    let home = tempfile::tempdir().unwrap();
    let repo = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF";
    let snapshot =
        home.path().join(format!("models--{}", repo.replace('/', "--"))).join("snapshots").join("abc");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(snapshot.parent().unwrap().parent().unwrap().join("refs")).unwrap();
    std::fs::write(snapshot.parent().unwrap().parent().unwrap().join("refs").join("main"), "abc").unwrap();
    std::os::unix::fs::symlink(std::fs::canonicalize(&path).unwrap(), snapshot.join("model.gguf")).unwrap();
    let hub = HubSettings { cache_dir: home.path().to_owned(), ..no_network() };
    let config = InferenceConfig { model_path: None, model_repo: Some(repo.into()), ..local(&path, engine) };
    let resolved = resolve(&config, &hub).unwrap();
    assert_eq!(resolved.source, ModelSource::Cached { repo: repo.into(), file: "model.gguf".into() });
    let third = load_with(&config, hub).await.unwrap();
    assert!(Arc::ptr_eq(&first, &third));
}

async fn a_prompt_longer_than_the_window_is_a_context_overflow(engine: Engine) {
    let Some(path) = test_model() else { return };
    let model = smollm2(&path, engine).await;
    let long = "lorem ipsum dolor sit amet ".repeat(3000);
    let err = model.complete(request(vec![Message::user(long)])).await.unwrap_err();
    assert!(
        matches!(err, phosphor_base::Error::ContextOverflow { limit_tokens: Some(SMOLLM2_CONTEXT), .. }),
        "{err:?}"
    );
}

async fn gpu_without_a_gpu_falls_back_to_the_cpu(engine: Engine) {
    let Some(path) = test_model() else { return };
    if std::env::var_os("PHOSPHOR_TEST_EXPECT_GPU").is_some() {
        eprintln!("skipped: PHOSPHOR_TEST_EXPECT_GPU says this machine has a GPU");
        return;
    }
    let model =
        load_with(&InferenceConfig { gpu: true, ..local(&path, engine) }, no_network()).await.unwrap();
    assert_eq!(model.device(), "cpu");
    // It is the CPU engine, not a second one.
    assert!(Arc::ptr_eq(&model, &smollm2(&path, engine).await));
}

async fn the_call_span_records_usage(engine: Engine) {
    let Some(path) = test_model() else { return };
    let model = smollm2(&path, engine).await;
    let recorded = Arc::new(Mutex::new(HashMap::new()));
    let subscriber = tracing_subscriber::registry().with(SpanFields(recorded.clone()));
    let usage = {
        let _guard = tracing::subscriber::set_default(subscriber);
        let completion = model.complete(request(vec![Message::user("Say hi.")])).await.unwrap();
        completion.usage.unwrap()
    };
    let recorded = recorded.lock().unwrap().clone();
    let field = |name: &str| recorded.get(name).cloned();
    assert_eq!(
        (
            field("gen_ai.usage.input_tokens"),
            field("gen_ai.usage.output_tokens"),
            field("gen_ai.provider.name"),
            field("gen_ai.request.model")
        ),
        (
            Some(usage.input_tokens.to_string()),
            Some(usage.output_tokens.to_string()),
            Some("embedded".to_owned()),
            Some("SmolLM2-135M-Instruct.Q4_1.gguf".to_owned())
        )
    );
}

/// Collects the fields of `chat` spans, as they are created and recorded.
struct SpanFields(Arc<Mutex<HashMap<String, String>>>);

impl SpanFields {
    fn collect(&self, values: &dyn Fn(&mut dyn tracing::field::Visit)) {
        struct Visitor<'a>(&'a mut HashMap<String, String>);
        impl tracing::field::Visit for Visitor<'_> {
            fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
                self.0.insert(field.name().to_owned(), value.to_string());
            }
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                self.0.insert(field.name().to_owned(), value.to_owned());
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.insert(field.name().to_owned(), format!("{value:?}"));
            }
        }
        let mut map = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        values(&mut Visitor(&mut map));
    }
}

impl<S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>>
    tracing_subscriber::Layer<S> for SpanFields
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _id: &tracing::span::Id,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if attrs.metadata().name() == "chat" {
            self.collect(&|visitor| attrs.record(visitor));
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if ctx.span(id).is_some_and(|span| span.name() == "chat") {
            self.collect(&|visitor| values.record(visitor));
        }
    }
}

async fn a_model_without_a_chat_template_gets_chatml(engine: Engine) {
    let Some(path) = test_model() else { return };
    // A copy of the model whose template key is renamed (same length, so the file stays valid).
    let mut bytes = std::fs::read(&path).unwrap();
    let key = b"tokenizer.chat_template";
    let mut needle = (key.len() as u64).to_le_bytes().to_vec();
    needle.extend_from_slice(key);
    let at = bytes.windows(needle.len()).position(|w| w == needle.as_slice()).unwrap();
    bytes[at + needle.len() - 1] = b'X';
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("no-template.gguf");
    std::fs::write(&copy, bytes).unwrap();

    let model = load_with(&local(&copy, engine), no_network()).await.unwrap();
    let original = smollm2(&path, engine).await;
    assert!(!Arc::ptr_eq(&model, &original));
    let question = || request(vec![Message::user("What is the capital of France? One word.")]);
    let completion = model.complete(question()).await.unwrap();
    assert!(!completion.text.trim().is_empty(), "{completion:?}");
    let usage = completion.usage.unwrap();
    assert!(usage.output_tokens > 0, "{usage:?}");
    let with_template = original.complete(question()).await.unwrap().usage.unwrap();
    if engine == Engine::Mistralrs {
        // SmolLM2's own (Jinja) template adds a default system prompt when there is none; plain ChatML does not.
        assert!(usage.input_tokens + 10 < with_template.input_tokens, "{usage:?} vs {with_template:?}");
    } else {
        // llama.cpp recognises SmolLM2's template as ChatML, so the fallback renders the very same prompt.
        assert_eq!(usage.input_tokens, with_template.input_tokens);
    }
}

async fn dropping_the_stream_cancels_the_answer(engine: Engine) {
    let Some(path) = test_model() else { return };
    let model = smollm2(&path, engine).await;
    // An answer that would run to the end of the window: thousands of tokens, a minute or more.
    let endless = ChatRequest {
        max_output_tokens: Some(SMOLLM2_CONTEXT - 100),
        ..request(vec![Message::user("Write the word hello 5000 times, separated by spaces.")])
    };
    let mut stream = model.stream(endless);
    for _ in 0..3 {
        let event = stream.next().await.unwrap().unwrap();
        assert!(matches!(event, StreamEvent::TextDelta { .. }), "{event:?}");
    }
    drop(stream);
    // Answers take turns on one model: the next one starts only once the dropped one has stopped.
    let started = std::time::Instant::now();
    let completion = model.complete(request(vec![Message::user("Say hi.")])).await.unwrap();
    assert!(completion.usage.unwrap().output_tokens > 0);
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
}
