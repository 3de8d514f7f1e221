//! A model only llama.cpp runs: Gemma 3 270M (Q4_K_M) from `PHOSPHOR_TEST_GEMMA`
//! (`cargo xtask fetch-test-model gemma3`). Skipped, saying so, when the variable is unset, and failed instead
//! under `cargo xtask ci` (see `phosphor_base::testing::test_model`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use phosphor_base::config::{Engine, InferenceConfig};
use phosphor_base::message::{FinishReason, Message};
use phosphor_base::model::{ChatModel, ChatRequest};
use phosphor_embedded::{EmbeddedError, EngineKind, HubSettings, load_with};
use pretty_assertions::assert_eq;

/// Gemma 3 270M's `gemma3.context_length`.
const GEMMA3_CONTEXT: u64 = 32768;

fn gemma() -> Option<PathBuf> {
    phosphor_base::testing::test_model("PHOSPHOR_TEST_GEMMA")
}

fn config(path: PathBuf, engine: Engine) -> InferenceConfig {
    InferenceConfig { enabled: true, model_path: Some(path), engine, ..Default::default() }
}

fn offline() -> HubSettings {
    HubSettings {
        cache_dir: PathBuf::from("/nonexistent/phosphor-test-hub"),
        endpoint: "http://127.0.0.1:9".into(),
        offline: true,
        token: None,
        progress: false,
    }
}

#[tokio::test]
async fn auto_routes_gemma3_to_llama_cpp_which_summarizes() {
    let Some(path) = gemma() else { return };
    let model = load_with(&config(path, Engine::Auto), offline()).await.unwrap();
    assert_eq!(
        (model.engine(), model.architecture(), model.device(), model.info().context_window),
        (EngineKind::LlamaCpp, "gemma3", "cpu", GEMMA3_CONTEXT)
    );
    assert_eq!(model.parameters(), Some(268_098_176));
    let request = ChatRequest {
        messages: vec![
            Message::system("You summarize conversations in one short paragraph."),
            Message::user("The build fails because `serde_json` keys come out in a different order."),
            Message::assistant(
                "I enabled `preserve_order` for every crate, so the order is the same everywhere.",
            ),
            Message::user("Summarize what we did."),
        ],
        max_output_tokens: Some(64),
        ..ChatRequest::default()
    };
    let completion = model.complete(request).await.unwrap();
    assert!(completion.text.trim().len() > 10, "{completion:?}");
    // Gemma's turn markers are control tokens: they end the answer and never show in it.
    assert!(!completion.text.contains("<end_of_turn>") && !completion.text.contains("<start_of_turn>"));
    // The file has no chat template: the prompt is in Gemma's turns, so ChatML's markers, which Gemma
    // answered a ChatML prompt with, never show either.
    assert!(
        !completion.text.contains("<|im_start|>") && !completion.text.contains("<|im_end|>"),
        "{completion:?}"
    );
    assert!(matches!(completion.finish_reason, Some(FinishReason::Stop | FinishReason::Length)));
    let usage = completion.usage.unwrap();
    assert!(usage.input_tokens > 40 && usage.output_tokens > 0 && usage.output_tokens <= 64, "{usage:?}");
}

#[tokio::test]
async fn mistral_rs_refuses_gemma3_naming_what_works() {
    let Some(path) = gemma() else { return };
    let err = load_with(&config(path.clone(), Engine::Mistralrs), offline()).await.unwrap_err();
    assert!(matches!(err, EmbeddedError::EngineUnavailable { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "`embedded_models.inference.engine` is \"mistralrs\", but {} is a `gemma3` model and mistral.rs cannot \
             load `gemma3` models from GGUF; set it to `auto` or `llamacpp`",
            path.display()
        )
    );
}
