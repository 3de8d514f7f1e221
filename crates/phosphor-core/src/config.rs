//! `phosphor.json`: every key of the spec's configuration section, plus providers and models.
//!
//! Loading, discovery, validation and the JSON Schema live here too (see the functions below).

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Config {
    /// Compaction behaviour (the spec's `options` key).
    pub options: Options,
    /// Local GGUF models (the spec's `embedded_models` key).
    pub embedded_models: EmbeddedModels,
    /// Remote OpenAI-compatible endpoints, by name.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// The large and small models.
    pub models: Models,
}

/// Compaction options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Options {
    /// Turns off the pre-request threshold trigger. The overflow safety net stays on.
    pub disable_auto_summarize: bool,
    /// Fraction of the context window at which compaction fires, in (0, 1].
    pub summarize_threshold: f64,
    /// Which model writes summaries.
    pub summarize_model: SummarizeModel,
    /// Characters kept of each tool output in standard pruning (> 0).
    pub summarize_tool_output_chars: usize,
    /// Characters kept of each tool output in overflow-recovery pruning (> 0, at most the standard limit).
    pub summarize_tool_output_aggressive_chars: usize,
    /// Tokens of the most recent turns kept verbatim after a summary (0 keeps none, as the spec).
    pub summarize_keep_recent_tokens: u64,
    /// The prompt profile (`.phosphor/profiles/<profile>/summarization.md.tpl`).
    pub profile: String,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            disable_auto_summarize: false,
            summarize_threshold: 0.8,
            summarize_model: SummarizeModel::Main,
            summarize_tool_output_chars: 200,
            summarize_tool_output_aggressive_chars: 50,
            summarize_keep_recent_tokens: 0,
            profile: "default".to_owned(),
        }
    }
}

/// Which model handles compaction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SummarizeModel {
    /// The session's large model (alias of `large`).
    #[default]
    Main,
    /// The configured large model.
    Large,
    /// The configured small model.
    Small,
    /// The local GGUF model (needs `embedded_models.inference.enabled`).
    Embedded,
}

impl SummarizeModel {
    /// Every accepted spelling, for error messages.
    pub const ALLOWED: [&'static str; 4] = ["main", "large", "small", "embedded"];
}

/// Local models.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct EmbeddedModels {
    /// The model used for inference (summaries, and the CLI's default chat model).
    pub inference: InferenceConfig,
}

/// One local model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct InferenceConfig {
    /// Whether the local model may be used.
    pub enabled: bool,
    /// A Hugging Face repo id, or one of the documented short names, downloaded on first use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_repo: Option<String>,
    /// A local GGUF file; wins over `model_repo`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_path: Option<PathBuf>,
    /// Try the GPU backend compiled in; falls back to the CPU with a warning.
    pub gpu: bool,
}

/// A remote OpenAI-compatible endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ProviderConfig {
    /// The API base URL, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// The environment variable that holds the API key (never the key itself). None for keyless local servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Extra HTTP headers sent with every request.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// The named model slots.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Models {
    /// The main model of a session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub large: Option<ModelConfig>,
    /// A cheaper model, for summaries when `summarize_model` is `small`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub small: Option<ModelConfig>,
}

/// A remote model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelConfig {
    /// The key of its entry in `providers`.
    pub provider: String,
    /// The model id the provider knows.
    pub model: String,
    /// Its context window in tokens.
    pub context_window: u64,
    /// The most tokens one answer may have.
    #[serde(default = "default_max_output_tokens")]
    pub max_output_tokens: u64,
}

fn default_max_output_tokens() -> u64 {
    4096
}
