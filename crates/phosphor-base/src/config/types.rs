//! What `phosphor.json` holds: every key, its default and its schema.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::windows::Window;

/// The whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
#[schemars(transform = allow_schema_key)]
pub struct Config {
    /// Compaction behaviour (the `options` key).
    pub options: Options,
    /// Local GGUF models (the `embedded_models` key).
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
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 1))]
    pub summarize_threshold: f64,
    /// Summaries prepared ahead: at this fraction of the context window (below
    /// `summarize_threshold`), the summary the next compaction needs is written in the background
    /// while turns go on, and swapped in when the threshold is reached, so that the turn that
    /// reaches it does not wait for the summarizer. 0 (the default) turns it off: every summary is
    /// written when the threshold is reached, and the turn waits for it.
    #[schemars(range(min = 0, max = 1))]
    pub summarize_prepare_at: f64,
    /// Which model writes summaries.
    pub summarize_model: SummarizeModel,
    /// Characters kept of each tool output in standard pruning (> 0).
    #[schemars(range(min = 1))]
    pub summarize_tool_output_chars: usize,
    /// Characters kept of each tool output in overflow-recovery pruning, and in every summary request
    /// of each long argument value of the calls before the newest folded turn and of the outputs of
    /// their file changes that went through (> 0, at most the standard limit).
    #[schemars(range(min = 1))]
    pub summarize_tool_output_aggressive_chars: usize,
    /// Characters kept of the text of each assistant answer the summarizer reads, except the answers
    /// of the newest turn it folds, which it reads whole (> 0).
    #[schemars(range(min = 1))]
    pub summarize_assistant_text_chars: usize,
    /// Tokens of the most recent turns kept verbatim after a summary (0 keeps none).
    pub summarize_keep_recent_tokens: u64,
    /// The most automatic compactions one turn may run (a backstop: the progress rule, one
    /// compaction per model response at most, already makes loops impossible). At least 1.
    #[schemars(range(min = 1))]
    pub summarize_max_per_turn: u32,
    /// Tokens the session-state trail appended to every summary may take (the user's requests,
    /// the plan, the last answer, files with the names their changes touched, commands); at most
    /// an eighth of the session model's window is used. At least [`MIN_STATE_TOKENS`].
    #[schemars(range(min = 256))]
    pub summarize_state_max_tokens: u64,
    /// The repetition penalty of summary requests to local models (llama.cpp, mistral.rs). 1.0
    /// (the default) turns it off; at most 2.0. Off by default: on SmolLM2 135M a penalty of 1.1
    /// turned a loop the repetition guard stops early into a run to the output limit. Remote
    /// servers do not get it; the chat path never does.
    #[schemars(range(min = 1.0, max = 2.0))]
    pub summarize_repeat_penalty: f64,
    /// Observation masking: at this fraction of the context window, the oldest tool outputs in
    /// the request are replaced by one-line placeholders and long values in their calls' arguments
    /// are cut short (the store keeps both whole), before any summary is written. 0 turns it off.
    /// Below `summarize_threshold` it saves summaries; at or above it, it runs just before a
    /// summary and may make it unneeded.
    #[schemars(range(min = 0, max = 1))]
    pub mask_threshold: f64,
    /// Tokens of the newest tool calls and outputs that masking leaves whole (at most an eighth of
    /// the window is used).
    pub mask_keep_recent_tokens: u64,
    /// The prompt profile (`.phosphor/profiles/<profile>/summarization.md.tpl`). With `default`, a local
    /// summarizer under 500 million parameters writes with the built-in `compact` profile instead,
    /// unless a `default` template of yours exists.
    // The pattern states the rule of `check_profile_name`.
    #[schemars(pattern(r"^(?!\.\.?$)[A-Za-z0-9._-]{1,64}$"))]
    pub profile: String,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            disable_auto_summarize: false,
            summarize_threshold: 0.8,
            summarize_prepare_at: 0.0,
            summarize_model: SummarizeModel::Main,
            summarize_tool_output_chars: 200,
            summarize_tool_output_aggressive_chars: 50,
            summarize_assistant_text_chars: 600,
            summarize_keep_recent_tokens: 0,
            summarize_max_per_turn: 8,
            summarize_state_max_tokens: 8_000,
            summarize_repeat_penalty: 1.0,
            mask_threshold: 0.4,
            mask_keep_recent_tokens: 8_000,
            profile: "default".to_owned(),
        }
    }
}

/// The smallest `options.summarize_state_max_tokens`: room for the newest request, cut short.
pub const MIN_STATE_TOKENS: u64 = 256;

/// Which model handles compaction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SummarizeModel {
    /// The session's model: `models.large`, or the local model the CLI's `--model-path` runs the
    /// session on.
    #[default]
    Main,
    /// `models.large`, even when the session runs on another model (`--model-path`); the
    /// session's model when `models.large` is not configured.
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

/// The engine that runs a local model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Whichever engine compiled in can run the file's architecture, llama.cpp first (it is faster on CPUs).
    #[default]
    Auto,
    /// mistral.rs.
    Mistralrs,
    /// llama.cpp.
    Llamacpp,
}

impl Engine {
    /// Every accepted spelling, for error messages.
    pub const ALLOWED: [&'static str; 3] = ["auto", "mistralrs", "llamacpp"];

    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Auto => "auto",
            Engine::Mistralrs => "mistralrs",
            Engine::Llamacpp => "llamacpp",
        }
    }
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
    /// Which engine runs the model: `auto` picks one from the GGUF file's architecture.
    pub engine: Engine,
}

/// The API a remote provider speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI chat completions (`POST {base_url}/chat/completions`): OpenAI, OpenRouter, vLLM,
    /// llama-server, Ollama, LM Studio and every other OpenAI-compatible server.
    #[default]
    Chat,
    /// Anthropic Messages (`POST {base_url}/messages`, `x-api-key`, `anthropic-version`).
    Anthropic,
    /// OpenAI Responses (`POST {base_url}/responses`), stateless (`store: false`).
    Responses,
}

impl Api {
    /// Every accepted spelling, for error messages.
    pub const ALLOWED: [&'static str; 3] = ["chat", "anthropic", "responses"];

    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Anthropic => "anthropic",
            Api::Responses => "responses",
        }
    }
}

/// A remote endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ProviderConfig {
    /// The API base URL, e.g. `https://api.openai.com/v1` or `https://api.anthropic.com/v1`.
    #[schemars(pattern(r"^https?://"))]
    pub base_url: String,
    /// The API it speaks: `chat` (the default), `anthropic` or `responses`.
    #[serde(skip_serializing_if = "is_chat")]
    pub api: Api,
    /// The environment variable that holds the API key (never the key itself). None for keyless local servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Extra HTTP headers sent with every request.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

fn is_chat(api: &Api) -> bool {
    *api == Api::Chat
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
    /// The windows of other models a client of `phosphor serve` may ask for, by id or pattern
    /// (`*` for any run of characters): `{"claude-*": {"context_window": 200000}}`. They go to the
    /// large model's provider. Looked up before a built-in table of common models
    /// ([`crate::windows`]).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub windows: BTreeMap<String, Window>,
}

/// A remote model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelConfig {
    /// The key of its entry in `providers`.
    pub provider: String,
    /// The model id the provider knows.
    pub model: String,
    /// Its context window in tokens.
    #[schemars(range(min = 1))]
    pub context_window: u64,
    /// The most tokens one answer may have.
    #[serde(default = "default_max_output_tokens")]
    #[schemars(range(min = 1))]
    pub max_output_tokens: u64,
}

/// `max_output_tokens` of a model configured without one.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 4096;

pub(crate) fn default_max_output_tokens() -> u64 {
    DEFAULT_MAX_OUTPUT_TOKENS
}

/// The configuration file's name, in every tier.
pub const FILE_NAME: &str = "phosphor.json";

/// The top-level key editors use to find the schema; accepted and ignored.
pub(super) const SCHEMA_KEY: &str = "$schema";

/// Lets the schema accept the top-level `$schema` key that editors read.
fn allow_schema_key(schema: &mut schemars::Schema) {
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.insert(
            SCHEMA_KEY.to_owned(),
            serde_json::json!({
                "description": "The JSON Schema of this file, for editors. Ignored by Phosphor.",
                "type": "string"
            }),
        );
    }
}

/// The JSON Schema of `phosphor.json`, generated from [`Config`] (checked in at `schema/phosphor.schema.json`).
pub fn json_schema() -> Value {
    sorted_keys(schemars::schema_for!(Config).to_value())
}

/// `value` with every object's keys in sorted order, so that its text does not depend on whether
/// serde_json keeps insertion order (its `preserve_order` feature, which any crate in a build may
/// switch on).
fn sorted_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted_keys(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted_keys).collect()),
        other => other,
    }
}
