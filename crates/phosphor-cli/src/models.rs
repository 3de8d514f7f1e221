//! The models a command uses, built from `phosphor.json`: remote endpoints through `phosphor-llm`
//! (chat completions, Anthropic Messages or OpenAI Responses, as each provider's `api` says), and the local (embedded) model through `phosphor-embedded`: the default when no
//! remote model is configured, `--model-path FILE`, or `summarize_model: "embedded"`.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use phosphor_agent::Models;
use phosphor_base::ChatModel;
use phosphor_base::config::{Config, Engine, InferenceConfig, ModelConfig, SummarizeModel};
use phosphor_embedded::{HubSettings, SHORT_NAMES, default_model};

/// A minimal `phosphor.json` with a remote model, shown in errors about configuration.
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
///
/// The session's model is, in order: `--model-path` (a local GGUF), `models.large`, the small
/// model when compacting with it alone, and otherwise the embedded model (the configured one, or
/// the default model, downloaded on first use).
pub async fn build(config: &Config, purpose: Purpose, model_path: Option<&Path>) -> Result<Models> {
    let summarize = config.options.summarize_model;
    if summarize == SummarizeModel::Small && config.models.small.is_none() {
        bail!(
            "options.summarize_model is \"small\", but models.small is not configured; add models.small to \
             phosphor.json or set options.summarize_model to \"main\""
        );
    }
    let inference = local_inference(config, model_path);
    let small = config.models.small.as_ref().map(|model| remote(config, model)).transpose()?;
    let mut embedded: Option<Arc<dyn ChatModel>> = None;
    let large = match (&config.models.large, purpose, &small) {
        (Some(model), _, _) if model_path.is_none() => remote(config, model)?,
        // Compacting a transcript with the small model needs no large one: the small one's window stands in.
        (None, Purpose::Compact, Some(small))
            if summarize == SummarizeModel::Small && model_path.is_none() =>
        {
            small.clone()
        }
        _ => {
            let local = load_local(&inference).await?;
            embedded = Some(local.clone());
            local
        }
    };
    if summarize == SummarizeModel::Embedded && embedded.is_none() {
        embedded = Some(load_local(&inference).await?);
    }
    // `--model-path` replaced the configured large model as the session's: `summarize_model:
    // "large"` still means the configured one ("main" means the session's).
    let configured_large = match (&config.models.large, model_path) {
        (Some(model), Some(_)) if summarize == SummarizeModel::Large => Some(remote(config, model)?),
        _ => None,
    };
    Ok(Models { large, small, embedded, configured_large })
}

/// The local model to use: `--model-path`, else `embedded_models.inference` when it names a model,
/// else the default model.
fn local_inference(config: &Config, model_path: Option<&Path>) -> InferenceConfig {
    let configured = &config.embedded_models.inference;
    match model_path {
        Some(path) => InferenceConfig {
            enabled: true,
            model_path: Some(path.to_owned()),
            model_repo: None,
            gpu: configured.gpu,
            engine: configured.engine,
        },
        None if configured.enabled
            && (configured.model_path.is_some() || configured.model_repo.is_some()) =>
        {
            configured.clone()
        }
        None => InferenceConfig {
            enabled: true,
            model_path: None,
            model_repo: Some(default_model().name.to_owned()),
            gpu: configured.gpu,
            engine: configured.engine,
        },
    }
}

async fn load_local(inference: &InferenceConfig) -> Result<Arc<dyn ChatModel>> {
    let model = phosphor_embedded::load(inference).await.map_err(|err| {
        anyhow!(
            "{err}; to use a remote model instead, configure one in phosphor.json, for example: {MINIMAL_CONFIG}"
        )
    })?;
    Ok(model)
}

fn remote(config: &Config, model: &ModelConfig) -> Result<Arc<dyn ChatModel>> {
    let provider = config.providers.get(&model.provider).ok_or_else(|| {
        anyhow!(
            "model {} names the provider {:?}, which is not configured in providers",
            model.model,
            model.provider
        )
    })?;
    phosphor_llm::connect(&model.provider, provider, model)
        .map_err(|err| anyhow!("model {}: {err}", model.model))
}

/// `phosphor models list`: every short name, the engine `auto` runs it on in this build, and whether it is
/// already in the Hugging Face cache (checked without network).
pub fn list(hub: &HubSettings) -> String {
    let offline = HubSettings { offline: true, progress: false, ..hub.clone() };
    let mut out = format!(
        "{:<24} {:<10} {:>8}  {:<10} {:<11} {}\n",
        "name", "arch", "size", "engine", "status", "repo and file"
    );
    for (i, short) in SHORT_NAMES.iter().enumerate() {
        let engine = phosphor_embedded::choose_engine(Engine::Auto, short.architecture, short.name)
            .map_or("-", |kind| kind.name());
        let status = if !short.is_supported() {
            "unsupported"
        } else {
            let config = InferenceConfig {
                enabled: true,
                model_repo: Some(short.name.to_owned()),
                ..InferenceConfig::default()
            };
            if phosphor_embedded::resolve(&config, &offline).is_ok() { "downloaded" } else { "available" }
        };
        let name = if i == 0 { format!("{} (default)", short.name) } else { short.name.to_owned() };
        let _ = writeln!(
            out,
            "{name:<24} {:<10} {:>5} MB  {engine:<10} {status:<11} {}:{}",
            short.architecture, short.size_mb, short.repo, short.file
        );
    }
    let _ = writeln!(out, "\nthe cache: {}", hub.cache_dir.display());
    out
}

/// `phosphor models pull [NAME]`: resolves (downloading when needed, with progress) and prints the file.
pub async fn pull(config: &Config, name: Option<&str>) -> Result<()> {
    let inference = match name {
        Some(name) => {
            InferenceConfig { enabled: true, model_repo: Some(name.to_owned()), ..InferenceConfig::default() }
        }
        None => local_inference(config, None),
    };
    let hub = HubSettings::from_env();
    let resolved = tokio::task::spawn_blocking(move || phosphor_embedded::resolve(&inference, &hub))
        .await
        .context("the download task failed")??;
    println!("{} {}", resolved.name, resolved.path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_base::config::parse_str;
    use std::path::Path;

    fn config(json: &str) -> Config {
        parse_str(json, Path::new("phosphor.json")).unwrap().0
    }

    fn error(json: &str, purpose: Purpose) -> String {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        match runtime.block_on(build(&config(json), purpose, None)) {
            Ok(_) => panic!("expected an error for {json}"),
            Err(err) => err.to_string(),
        }
    }

    const PROVIDER: &str = r#""providers": { "local": { "base_url": "http://127.0.0.1:1/v1" } }"#;

    #[test]
    fn the_local_model_is_model_path_then_the_configured_one_then_the_default() {
        let none = local_inference(&config("{}"), None);
        assert_eq!((none.enabled, none.model_repo.as_deref()), (true, Some(default_model().name)));
        let configured = config(
            r#"{"embedded_models": {"inference": {"enabled": true, "model_repo": "Qwen3-1.7B", "gpu": true}}}"#,
        );
        assert_eq!(local_inference(&configured, None), configured.embedded_models.inference);
        let flag = local_inference(&configured, Some(Path::new("/models/x.gguf")));
        assert_eq!(
            flag,
            InferenceConfig {
                enabled: true,
                model_path: Some("/models/x.gguf".into()),
                model_repo: None,
                gpu: true,
                ..Default::default()
            }
        );
        // The snippet shown in errors is a valid configuration.
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
        // A local model that is not there: the error names the file and how to use a remote model.
        let missing = json
            .replace(r#""model_repo": "SmolLM2-135M-Instruct""#, r#""model_path": "/nonexistent/m.gguf""#);
        let message = error(&missing, Purpose::Turns);
        assert!(message.contains("/nonexistent/m.gguf") && message.ends_with(MINIMAL_CONFIG), "{message}");
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
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let models = runtime.block_on(build(&config(&json), Purpose::Compact, None)).unwrap();
        assert_eq!(models.large.info().model, "s");
        let json = format!(
            r#"{{ {PROVIDER}, "models": {{ "large": {{ "provider": "local", "model": "big", "context_window": 100 }} }} }}"#
        );
        let models = runtime.block_on(build(&config(&json), Purpose::Turns, None)).unwrap();
        assert_eq!((models.large.info().model.as_str(), models.small.is_none()), ("big", true));
    }
}
