//! The models a command uses, built from `phosphor.json`: remote OpenAI-compatible endpoints through
//! `phosphor-llm`. The embedded engine is not part of this build, and no command pretends otherwise.

use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use phosphor_agent::Models;
use phosphor_core::ChatModel;
use phosphor_core::config::{Config, ModelConfig, SummarizeModel};
use phosphor_llm::OpenAiModel;

/// A minimal `phosphor.json` with a remote model, shown when none is configured.
pub const MINIMAL_CONFIG: &str = r#"{"providers": {"openai": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"}}, "models": {"large": {"provider": "openai", "model": "gpt-4.1", "context_window": 1047576}}}"#;

/// What the models are needed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Turns (`chat`, `run`): the large model answers, the configured summarizer compacts.
    Turns,
    /// `compact`: only the summarizer is called; the large model's window is the session's window.
    Compact,
}

/// The agent's models for `purpose`, or a one-line error saying what to configure.
pub fn build(config: &Config, purpose: Purpose) -> Result<Models> {
    let summarize = config.options.summarize_model;
    if summarize == SummarizeModel::Embedded {
        bail!(
            "options.summarize_model is \"embedded\", but the embedded engine is not available in this build; set \
             options.summarize_model to \"main\", \"large\" or \"small\" and configure that model"
        );
    }
    if summarize == SummarizeModel::Small && config.models.small.is_none() {
        bail!(
            "options.summarize_model is \"small\", but models.small is not configured; add models.small to \
             phosphor.json or set options.summarize_model to \"main\""
        );
    }
    let small = config.models.small.as_ref().map(|model| remote(config, model)).transpose()?;
    let large = match (&config.models.large, purpose, &small) {
        (Some(model), _, _) => remote(config, model)?,
        // Compacting a transcript with the small model needs no large one: the small one's window stands in.
        (None, Purpose::Compact, Some(small)) if summarize == SummarizeModel::Small => small.clone(),
        (None, _, _) => bail!(
            "no model is configured, and the embedded engine is not available in this build; configure a remote \
             model in phosphor.json (see `phosphor config check`), for example: {MINIMAL_CONFIG}"
        ),
    };
    Ok(Models { large, small, embedded: None })
}

fn remote(config: &Config, model: &ModelConfig) -> Result<Arc<dyn ChatModel>> {
    let provider = config.providers.get(&model.provider).ok_or_else(|| {
        anyhow!(
            "model {} names the provider {:?}, which is not configured in providers",
            model.model,
            model.provider
        )
    })?;
    let built = OpenAiModel::new(&model.provider, provider, model)
        .map_err(|err| anyhow!("model {}: {err}", model.model))?;
    Ok(Arc::new(built))
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_core::config::parse_str;
    use std::path::Path;

    fn config(json: &str) -> Config {
        parse_str(json, Path::new("phosphor.json")).unwrap().0
    }

    fn error(json: &str, purpose: Purpose) -> String {
        match build(&config(json), purpose) {
            Ok(_) => panic!("expected an error for {json}"),
            Err(err) => err.to_string(),
        }
    }

    const PROVIDER: &str = r#""providers": { "local": { "base_url": "http://127.0.0.1:1/v1" } }"#;

    #[test]
    fn no_model_is_a_clear_error_with_a_snippet() {
        let message = error("{}", Purpose::Turns);
        assert!(
            message.starts_with(
                "no model is configured, and the embedded engine is not available in this build"
            )
        );
        assert!(message.ends_with(MINIMAL_CONFIG));
        assert!(!message.contains('\n'));
        // The snippet is a valid configuration.
        let (snippet, warnings) = parse_str(MINIMAL_CONFIG, Path::new("snippet.json")).unwrap();
        assert!(snippet.models.large.is_some() && warnings.is_empty());
    }

    #[test]
    fn embedded_and_missing_small_summarizers_are_refused() {
        let json = format!(
            r#"{{ {PROVIDER}, "options": {{ "summarize_model": "embedded" }},
                 "embedded_models": {{ "inference": {{ "enabled": true, "model_repo": "SmolLM2-135M-Instruct" }} }},
                 "models": {{ "large": {{ "provider": "local", "model": "m", "context_window": 100 }} }} }}"#
        );
        assert!(error(&json, Purpose::Turns).contains("the embedded engine is not available in this build"));
        let json = format!(
            r#"{{ {PROVIDER}, "options": {{ "summarize_model": "small" }},
                 "models": {{ "large": {{ "provider": "local", "model": "m", "context_window": 100 }} }} }}"#
        );
        assert!(
            error(&json, Purpose::Turns)
                .starts_with("options.summarize_model is \"small\", but models.small")
        );
    }

    #[test]
    fn compact_can_use_the_small_model_alone() {
        let json = format!(
            r#"{{ {PROVIDER}, "options": {{ "summarize_model": "small" }},
                 "models": {{ "small": {{ "provider": "local", "model": "s", "context_window": 100 }} }} }}"#
        );
        let models = build(&config(&json), Purpose::Compact).unwrap();
        assert_eq!(models.large.info().model, "s");
        assert!(error(&json, Purpose::Turns).starts_with("no model is configured"));
        let json = format!(
            r#"{{ {PROVIDER}, "models": {{ "large": {{ "provider": "local", "model": "big", "context_window": 100 }} }} }}"#
        );
        let models = build(&config(&json), Purpose::Turns).unwrap();
        assert_eq!((models.large.info().model.as_str(), models.small.is_none()), ("big", true));
    }
}
