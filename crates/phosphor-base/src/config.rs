//! `phosphor.json`: every key of the configuration (README, "Configuration reference"), with providers and models.
//!
//! Loading, discovery, validation and the JSON Schema live here too:
//!
//! - [`ConfigSources::discover`] finds the files: the global `<config dir>/phosphor/phosphor.json`, the workspace's
//!   `.phosphor/phosphor.json` (or, when that is absent, `./phosphor.json`), and an explicit file on top.
//! - [`load`] merges them key by key (JSON objects merge, arrays and scalars replace; later tiers win), deserializes
//!   the result, warns about unknown keys and validates it, naming the file that set each offending value.
//! - [`json_schema`] is the JSON Schema of the file, checked in at `schema/phosphor.schema.json`.
//!
//! ```
//! use phosphor_base::config::{parse_str, SummarizeModel};
//! use std::path::Path;
//!
//! let (config, warnings) =
//!     parse_str(r#"{ "options": { "summarize_model": "small" } }"#, Path::new("phosphor.json"))?;
//! assert_eq!(config.options.summarize_model, SummarizeModel::Small);
//! assert_eq!(config.options.summarize_threshold, 0.8);
//! assert!(warnings.is_empty());
//! # Ok::<(), phosphor_base::config::ConfigError>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::windows::Window;

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
const SCHEMA_KEY: &str = "$schema";

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

/// The configuration files to read, lowest precedence first: `global`, then `workspace`, then `explicit`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigSources {
    /// `<platform config dir>/phosphor/phosphor.json`, when it exists.
    pub global: Option<PathBuf>,
    /// The workspace's `.phosphor/phosphor.json`, or `./phosphor.json` when that does not exist; when one exists.
    pub workspace: Option<PathBuf>,
    /// A file named on the command line (`--config`); it must exist.
    pub explicit: Option<PathBuf>,
}

impl ConfigSources {
    /// Finds the files for `workspace_dir`, with the global file in the platform's config directory
    /// ([`dirs::config_dir`]). `explicit` is kept as given; [`load`] fails when it does not exist.
    pub fn discover(workspace_dir: &Path, explicit: Option<&Path>) -> ConfigSources {
        ConfigSources::discover_with_global_dir(dirs::config_dir().as_deref(), workspace_dir, explicit)
    }

    /// Like [`ConfigSources::discover`], with the platform config directory given (the global file is
    /// `<global_config_dir>/phosphor/phosphor.json`). `None` means there is no global tier.
    pub fn discover_with_global_dir(
        global_config_dir: Option<&Path>,
        workspace_dir: &Path,
        explicit: Option<&Path>,
    ) -> ConfigSources {
        let global = global_config_dir.map(global_file_in).filter(|path| path.exists());
        let workspace = [workspace_dir.join(".phosphor").join(FILE_NAME), workspace_dir.join(FILE_NAME)]
            .into_iter()
            .find(|path| path.exists());
        ConfigSources { global, workspace, explicit: explicit.map(Path::to_path_buf) }
    }

    /// The files in precedence order, lowest first, each with whether it must exist.
    fn tiers(&self) -> impl Iterator<Item = (&Path, bool)> {
        [(&self.global, false), (&self.workspace, false), (&self.explicit, true)]
            .into_iter()
            .filter_map(|(path, required)| path.as_deref().map(|path| (path, required)))
    }
}

/// Where the global file lives on this platform (whether or not it exists): `<config dir>/phosphor/phosphor.json`.
pub fn global_config_path() -> Option<PathBuf> {
    dirs::config_dir().as_deref().map(global_file_in)
}

fn global_file_in(config_dir: &Path) -> PathBuf {
    config_dir.join("phosphor").join(FILE_NAME)
}

/// The merged configuration, with what the caller should tell the user.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    /// The merged, validated configuration.
    pub config: Config,
    /// Things worth telling the user that did not stop loading (unknown keys).
    pub warnings: Vec<ConfigWarning>,
    /// For every value set by a file (JSON objects are walked; arrays and scalars are values), its JSON path
    /// (`options.summarize_threshold`, `providers.openai.base_url`) and the file it came from. Paths not here
    /// hold their default.
    pub origins: BTreeMap<String, PathBuf>,
}

impl LoadedConfig {
    /// The file that set `json_path`, or `None` when it holds its default.
    pub fn origin(&self, json_path: &str) -> Option<&Path> {
        self.origins.get(json_path).map(PathBuf::as_path)
    }
}

/// Something in a configuration file that did not stop loading.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigWarning {
    /// A key Phosphor does not know (a typo, or a key of another version). It was ignored.
    UnknownKey {
        /// The file that has it.
        file: PathBuf,
        /// Its JSON path, e.g. `options.summarize_treshold`.
        json_path: String,
    },
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigWarning::UnknownKey { file, json_path } => {
                write!(f, "{}: {json_path}: unknown key, ignored", file.display())
            }
        }
    }
}

/// Why a configuration could not be loaded. Every variant names the file; none is worth retrying unchanged:
/// show the message to the user, who fixes the file (or the path given).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A file named explicitly (`--config`) does not exist. Fix the path.
    #[error("{}: the configuration file does not exist", file.display())]
    NotFound {
        /// The path given.
        file: PathBuf,
    },
    /// The file exists but could not be read (permissions, a directory). Fix the file system.
    #[error("{}: cannot read the configuration file: {source}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
    /// The file is not valid JSON. Fix it at the line and column given.
    #[error("{}:{line}:{column}: malformed JSON: {message}", file.display())]
    Syntax {
        /// The file.
        file: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the parser expected.
        message: String,
    },
    /// The file is JSON but not an object at the top level.
    #[error("{}: the top level is {found}; allowed: a JSON object", file.display())]
    NotAnObject {
        /// The file.
        file: PathBuf,
        /// What it holds instead, e.g. `an array`.
        found: &'static str,
    },
    /// A value has the wrong type, or an object lacks a required key. The message names the expected type.
    #[error("{}: {json_path}: {message}", file.display())]
    Type {
        /// The file that set the value.
        file: PathBuf,
        /// Its JSON path, e.g. `options.summarize_threshold`.
        json_path: String,
        /// Serde's words, e.g. ``invalid type: string "high", expected f64``.
        message: String,
    },
    /// A value has the right type but is not allowed (out of range, inconsistent with another key).
    #[error("{}: {json_path}: {value} {problem}; allowed: {allowed}", file.display())]
    Invalid {
        /// The file that set the value.
        file: PathBuf,
        /// Its JSON path, e.g. `options.summarize_threshold`.
        json_path: String,
        /// The value as JSON, e.g. `1.5` or `"medium"`.
        value: String,
        /// What is wrong with it, e.g. `is out of range`.
        problem: String,
        /// What would be accepted.
        allowed: String,
    },
}

/// Loads, merges and validates the files of `sources` (see the module docs). Discovered files that do not exist
/// are skipped; an explicit one that does not exist is an error. With no files, the defaults.
pub fn load(sources: &ConfigSources) -> Result<LoadedConfig, ConfigError> {
    let mut tiers = Vec::new();
    for (file, required) in sources.tiers() {
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                if required {
                    return Err(ConfigError::NotFound { file: file.to_path_buf() });
                }
                continue;
            }
            Err(source) => return Err(ConfigError::Read { file: file.to_path_buf(), source }),
        };
        tiers.push((file.to_path_buf(), parse_object(&text, file)?));
    }
    resolve(tiers)
}

/// Parses and validates one file's text; `source` is only used to name the file in errors and warnings.
pub fn parse_str(text: &str, source: &Path) -> Result<(Config, Vec<ConfigWarning>), ConfigError> {
    let loaded = resolve(vec![(source.to_path_buf(), parse_object(text, source)?)])?;
    Ok((loaded.config, loaded.warnings))
}

/// Parses a file to a JSON object, without its top-level `$schema` key.
fn parse_object(text: &str, file: &Path) -> Result<Map<String, Value>, ConfigError> {
    let value: Value = serde_json::from_str(text).map_err(|error| {
        let location = format!(" at line {} column {}", error.line(), error.column());
        let message = error.to_string();
        ConfigError::Syntax {
            file: file.to_path_buf(),
            line: error.line(),
            column: error.column(),
            message: message.strip_suffix(&location).unwrap_or(&message).to_owned(),
        }
    })?;
    let found = match value {
        Value::Object(mut object) => {
            object.remove(SCHEMA_KEY);
            return Ok(object);
        }
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
    };
    Err(ConfigError::NotAnObject { file: file.to_path_buf(), found })
}

/// Merges the tiers (lowest first), then deserializes and validates the result.
fn resolve(tiers: Vec<(PathBuf, Map<String, Value>)>) -> Result<LoadedConfig, ConfigError> {
    let mut merged = Map::new();
    let mut origins = BTreeMap::new();
    for (file, object) in &tiers {
        merge(&mut merged, object, "", file, &mut origins);
    }
    let merged = Value::Object(merged);
    let files: Vec<PathBuf> = tiers.into_iter().map(|(file, _)| file).collect();
    let blame = Blame { origins: &origins, files: &files };

    reject_arrays_for_structs(&merged, &config_struct_paths(&merged), &blame)?;
    let mut ignored = Vec::new();
    let mut on_ignored = |path: serde_ignored::Path<'_>| ignored.push(ignored_path(&path));
    let config: Config =
        serde_path_to_error::deserialize(serde_ignored::Deserializer::new(&merged, &mut on_ignored))
            .map_err(|error| type_error(&error, &merged, &blame))?;
    // Document order, whatever order serde_json's maps keep.
    ignored.sort_by(|a: &String, b: &String| a.split('.').cmp(b.split('.')));
    let warnings = ignored
        .into_iter()
        .map(|json_path| ConfigWarning::UnknownKey { file: blame.file_of(&json_path), json_path })
        .collect();

    validate(&config, &merged, &blame)?;
    Ok(LoadedConfig { config, warnings, origins })
}

/// The JSON paths that hold structs (in `merged`, which has every provider's name).
fn config_struct_paths(merged: &Value) -> Vec<String> {
    let fixed = [
        "options",
        "embedded_models",
        "embedded_models.inference",
        "providers",
        "models",
        "models.large",
        "models.small",
    ];
    let providers = merged.get("providers").and_then(Value::as_object).into_iter().flat_map(Map::keys);
    fixed.into_iter().map(str::to_owned).chain(providers.map(|name| format!("providers.{name}"))).collect()
}

/// Serde's derived structs also accept arrays (fields by position), which no one means in a config file.
fn reject_arrays_for_structs(
    merged: &Value,
    struct_paths: &[String],
    blame: &Blame<'_>,
) -> Result<(), ConfigError> {
    for json_path in struct_paths {
        if value_at(merged, json_path).is_some_and(Value::is_array) {
            return Err(ConfigError::Type {
                file: blame.file_of(json_path),
                json_path: json_path.clone(),
                message: "invalid type: sequence, expected a JSON object".to_owned(),
            });
        }
    }
    Ok(())
}

/// Merges `source` into `target` key by key: objects merge, everything else replaces. Records in `origins` the
/// file of every non-object value, and forgets the origins of what was replaced.
fn merge(
    target: &mut Map<String, Value>,
    source: &Map<String, Value>,
    prefix: &str,
    file: &Path,
    origins: &mut BTreeMap<String, PathBuf>,
) {
    for (key, value) in source {
        let path = join_path(prefix, key);
        if let Value::Object(source_object) = value {
            let slot = target.entry(key.clone()).or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
                origins.remove(&path);
            }
            if let Value::Object(target_object) = slot {
                merge(target_object, source_object, &path, file, origins);
            }
        } else {
            let below = format!("{path}.");
            origins.retain(|origin, _| !origin.starts_with(&below));
            origins.insert(path, file.to_path_buf());
            target.insert(key.clone(), value.clone());
        }
    }
}

fn join_path(prefix: &str, key: &str) -> String {
    if prefix.is_empty() { key.to_owned() } else { format!("{prefix}.{key}") }
}

fn ignored_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path as P;
    match path {
        P::Root => String::new(),
        P::Seq { parent, index } => format!("{}[{index}]", ignored_path(parent)),
        P::Map { parent, key } => join_path(&ignored_path(parent), key),
        P::Some { parent } | P::NewtypeStruct { parent } | P::NewtypeVariant { parent } => {
            ignored_path(parent)
        }
    }
}

fn tracked_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => out = join_path(&out, key),
            Segment::Enum { variant } => out = join_path(&out, variant),
            Segment::Unknown => out = join_path(&out, "?"),
        }
    }
    out
}

/// The value at a dotted JSON path of the merged configuration.
fn value_at<'v>(root: &'v Value, json_path: &str) -> Option<&'v Value> {
    json_path.split('.').try_fold(root, |value, key| value.get(key))
}

/// Finds which file to name for a value of the merged configuration.
struct Blame<'a> {
    origins: &'a BTreeMap<String, PathBuf>,
    /// The files read, lowest precedence first.
    files: &'a [PathBuf],
}

impl Blame<'_> {
    fn rank(&self, file: &Path) -> usize {
        self.files.iter().rposition(|f| f == file).unwrap_or(0)
    }

    /// The file that set `json_path`; for an object, the highest-precedence file that set anything in it.
    fn find(&self, json_path: &str) -> Option<&PathBuf> {
        if let Some(file) = self.origins.get(json_path) {
            return Some(file);
        }
        let below = if json_path.is_empty() { String::new() } else { format!("{json_path}.") };
        self.origins
            .range(below.clone()..)
            .take_while(|(origin, _)| origin.starts_with(&below))
            .map(|(_, file)| file)
            .max_by_key(|file| self.rank(file))
    }

    /// Like [`Blame::find`], falling back to the highest-precedence file (a default can only be wrong in
    /// combination with something a file set).
    fn file_of(&self, json_path: &str) -> PathBuf {
        self.find(json_path)
            .or_else(|| self.files.last())
            .cloned()
            .unwrap_or_else(|| PathBuf::from("(defaults)"))
    }

    /// Of values that conflict, the one set by the highest-precedence file (the first on a tie).
    fn culprit<'p>(&self, json_paths: &[&'p str]) -> &'p str {
        let mut best: Option<(&'p str, usize)> = None;
        for &json_path in json_paths {
            if let Some(file) = self.find(json_path) {
                let rank = self.rank(file);
                if best.is_none_or(|(_, best_rank)| rank > best_rank) {
                    best = Some((json_path, rank));
                }
            }
        }
        best.map_or(json_paths.first().copied().unwrap_or_default(), |(json_path, _)| json_path)
    }
}

fn type_error(
    error: &serde_path_to_error::Error<serde_json::Error>,
    merged: &Value,
    blame: &Blame<'_>,
) -> ConfigError {
    let json_path = tracked_path(error.path());
    let file = blame.file_of(&json_path);
    let known = match json_path.as_str() {
        "options.summarize_model" => Some(("is not a known model", SummarizeModel::ALLOWED.join(", "))),
        "embedded_models.inference.engine" => Some(("is not a known engine", Engine::ALLOWED.join(", "))),
        path if path.starts_with("providers.") && path.ends_with(".api") => {
            Some(("is not a known API", Api::ALLOWED.join(", ")))
        }
        _ => None,
    };
    if let Some((problem, allowed)) = known {
        let value = value_at(merged, &json_path).map_or_else(|| "null".to_owned(), Value::to_string);
        return ConfigError::Invalid { file, json_path, value, problem: problem.to_owned(), allowed };
    }
    let json_path = if json_path.is_empty() { "(top level)".to_owned() } else { json_path };
    ConfigError::Type { file, json_path, message: error.inner().to_string() }
}

/// The problem of a number outside what a key allows.
const OUT_OF_RANGE: &str = "is out of range";

/// Cross-field and range checks on the merged configuration.
fn validate(config: &Config, merged: &Value, blame: &Blame<'_>) -> Result<(), ConfigError> {
    let invalid = |json_path: &str, typed: Value, problem: &str, allowed: String| ConfigError::Invalid {
        file: blame.file_of(json_path),
        json_path: json_path.to_owned(),
        value: value_at(merged, json_path).unwrap_or(&typed).to_string(),
        problem: problem.to_owned(),
        allowed,
    };
    const THRESHOLD: &str = "options.summarize_threshold";
    const PREPARE_AT: &str = "options.summarize_prepare_at";
    const CHARS: &str = "options.summarize_tool_output_chars";
    const AGGRESSIVE: &str = "options.summarize_tool_output_aggressive_chars";
    const PROSE: &str = "options.summarize_assistant_text_chars";
    const PROFILE: &str = "options.profile";
    const MAX_PER_TURN: &str = "options.summarize_max_per_turn";
    const STATE_TOKENS: &str = "options.summarize_state_max_tokens";
    const MASK: &str = "options.mask_threshold";
    const PENALTY: &str = "options.summarize_repeat_penalty";
    const SUMMARIZE_MODEL: &str = "options.summarize_model";
    const ENABLED: &str = "embedded_models.inference.enabled";
    const MODEL_REPO: &str = "embedded_models.inference.model_repo";
    const MODEL_PATH: &str = "embedded_models.inference.model_path";

    let options = &config.options;
    let threshold = options.summarize_threshold;
    if !(threshold > 0.0 && threshold <= 1.0) {
        return Err(invalid(THRESHOLD, threshold.into(), OUT_OF_RANGE, "a number > 0 and <= 1".to_owned()));
    }
    let prepare_at = options.summarize_prepare_at;
    if !(prepare_at == 0.0 || (prepare_at > 0.0 && prepare_at < threshold)) {
        let culprit = if (0.0..=1.0).contains(&prepare_at) {
            blame.culprit(&[PREPARE_AT, THRESHOLD])
        } else {
            PREPARE_AT
        };
        return Err(if culprit == PREPARE_AT {
            invalid(
                PREPARE_AT,
                prepare_at.into(),
                OUT_OF_RANGE,
                format!("0 (off), or a number > 0 and < {THRESHOLD} ({threshold})"),
            )
        } else {
            invalid(
                THRESHOLD,
                threshold.into(),
                OUT_OF_RANGE,
                format!("a number > {PREPARE_AT} ({prepare_at}) and <= 1, or {PREPARE_AT} 0"),
            )
        });
    }

    let (chars, aggressive) =
        (options.summarize_tool_output_chars, options.summarize_tool_output_aggressive_chars);
    if chars == 0 {
        return Err(invalid(CHARS, chars.into(), OUT_OF_RANGE, "a whole number > 0".to_owned()));
    }
    if aggressive == 0 || aggressive > chars {
        let culprit = if aggressive == 0 { AGGRESSIVE } else { blame.culprit(&[AGGRESSIVE, CHARS]) };
        return Err(if culprit == AGGRESSIVE {
            invalid(
                AGGRESSIVE,
                aggressive.into(),
                OUT_OF_RANGE,
                format!("a whole number > 0 and <= {CHARS} ({chars})"),
            )
        } else {
            invalid(
                CHARS,
                chars.into(),
                OUT_OF_RANGE,
                format!("a whole number >= {AGGRESSIVE} ({aggressive})"),
            )
        });
    }

    if options.summarize_assistant_text_chars == 0 {
        return Err(invalid(PROSE, 0.into(), OUT_OF_RANGE, "a whole number > 0".to_owned()));
    }
    if options.summarize_max_per_turn == 0 {
        return Err(invalid(MAX_PER_TURN, 0.into(), OUT_OF_RANGE, "a whole number >= 1".to_owned()));
    }
    let penalty = options.summarize_repeat_penalty;
    if !(1.0..=2.0).contains(&penalty) {
        return Err(invalid(
            PENALTY,
            penalty.into(),
            OUT_OF_RANGE,
            "a number >= 1 (1 is off) and <= 2".to_owned(),
        ));
    }
    let mask = options.mask_threshold;
    if !(0.0..=1.0).contains(&mask) {
        return Err(invalid(MASK, mask.into(), OUT_OF_RANGE, "0 (off), or a number > 0 and <= 1".to_owned()));
    }
    if options.summarize_state_max_tokens < MIN_STATE_TOKENS {
        return Err(invalid(
            STATE_TOKENS,
            options.summarize_state_max_tokens.into(),
            OUT_OF_RANGE,
            format!("a whole number >= {MIN_STATE_TOKENS}"),
        ));
    }

    if let Err(reason) = check_profile_name(&options.profile) {
        return Err(invalid(
            PROFILE,
            options.profile.clone().into(),
            &format!("is not a valid profile name ({reason})"),
            profile_name_rule(),
        ));
    }

    let inference = &config.embedded_models.inference;
    if options.summarize_model == SummarizeModel::Embedded && !inference.enabled {
        return Err(if blame.culprit(&[SUMMARIZE_MODEL, ENABLED]) == SUMMARIZE_MODEL {
            invalid(
                SUMMARIZE_MODEL,
                "embedded".into(),
                &format!("needs {ENABLED}, which is false"),
                format!("main, large, small, or embedded once {ENABLED} is true"),
            )
        } else {
            invalid(
                ENABLED,
                false.into(),
                &format!("turns off the local model that {SUMMARIZE_MODEL} \"embedded\" needs"),
                format!("true, or false once {SUMMARIZE_MODEL} is main, large or small"),
            )
        });
    }

    let has_repo = inference.model_repo.as_deref().is_some_and(|repo| !repo.is_empty());
    let has_path = inference.model_path.as_deref().is_some_and(|path| !path.as_os_str().is_empty());
    if inference.enabled && !has_repo && !has_path {
        let culprit = blame.culprit(&[MODEL_REPO, MODEL_PATH, ENABLED]);
        let (problem, allowed) = if culprit == ENABLED {
            (
                "needs a model, and none is set",
                format!("false, or true with {MODEL_REPO} or {MODEL_PATH} set"),
            )
        } else if culprit == MODEL_REPO {
            (
                "leaves the enabled local model without a model",
                format!("a Hugging Face repo id or short name, or {MODEL_PATH} set"),
            )
        } else {
            (
                "leaves the enabled local model without a model",
                format!("a path to a GGUF file, or {MODEL_REPO} set"),
            )
        };
        let typed = if culprit == ENABLED { Value::Bool(true) } else { Value::Null };
        return Err(invalid(culprit, typed, problem, allowed));
    }

    for (name, provider) in &config.providers {
        let base_url = format!("providers.{name}.base_url");
        if !(provider.base_url.starts_with("http://") || provider.base_url.starts_with("https://")) {
            return Err(invalid(
                &base_url,
                provider.base_url.clone().into(),
                "is not an http(s) URL",
                "a URL such as https://api.openai.com/v1".to_owned(),
            ));
        }
        if provider.api_key_env.as_deref().is_some_and(str::is_empty) {
            return Err(invalid(
                &format!("providers.{name}.api_key_env"),
                "".into(),
                "is empty",
                "the name of an environment variable such as OPENAI_API_KEY, or no key for keyless servers"
                    .to_owned(),
            ));
        }
    }

    for (slot, model) in [("large", &config.models.large), ("small", &config.models.small)] {
        let Some(model) = model else { continue };
        if !config.providers.contains_key(&model.provider) {
            let allowed = if config.providers.is_empty() {
                "a key of providers (none are configured)".to_owned()
            } else {
                let names: Vec<String> = config.providers.keys().map(|name| format!("{name:?}")).collect();
                format!("a key of providers: {}", names.join(", "))
            };
            return Err(invalid(
                &format!("models.{slot}.provider"),
                model.provider.clone().into(),
                "names no entry in providers",
                allowed,
            ));
        }
        if model.model.is_empty() {
            return Err(invalid(
                &format!("models.{slot}.model"),
                "".into(),
                "is empty",
                "the model id the provider knows, such as gpt-4.1".to_owned(),
            ));
        }
        check_budget(&format!("models.{slot}"), model.context_window, model.max_output_tokens, &invalid)?;
    }
    validate_windows(config, &invalid)
}

/// Checks a model's window and output limit under `path`: each at least a token.
fn check_budget(
    path: &str,
    context_window: u64,
    max_output_tokens: u64,
    invalid: &dyn Fn(&str, Value, &str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    for (field, tokens) in [("context_window", context_window), ("max_output_tokens", max_output_tokens)] {
        if tokens == 0 {
            return Err(invalid(
                &format!("{path}.{field}"),
                tokens.into(),
                OUT_OF_RANGE,
                "a whole number of tokens > 0".to_owned(),
            ));
        }
    }
    Ok(())
}

/// Checks `models.windows`: keys that name models, windows of at least a token.
fn validate_windows(
    config: &Config,
    invalid: &dyn Fn(&str, Value, &str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    for (key, window) in &config.models.windows {
        let path = format!("models.windows.{key}");
        if let Err(problem) = crate::windows::check_key(key) {
            return Err(invalid(&path, key.clone().into(), problem, crate::windows::KEY_RULE.to_owned()));
        }
        check_budget(&path, window.context_window, window.max_output_tokens, invalid)?;
    }
    Ok(())
}

/// The longest profile name allowed, in bytes (every allowed character is ASCII).
pub const MAX_PROFILE_NAME_LEN: usize = 64;

/// What a profile name may be, in words, for error messages.
pub fn profile_name_rule() -> String {
    format!("1 to {MAX_PROFILE_NAME_LEN} ASCII letters, digits, '-', '_' or '.', and is not '.' or '..'")
}

/// Checks that `name` can name a profile folder: 1 to [`MAX_PROFILE_NAME_LEN`] ASCII letters,
/// digits, `-`, `_` or `.`, and not `.` or `..`, so it has no path separator, is never absolute and
/// never climbs out of the profile folders. The one rule for profile names: configuration loading,
/// the JSON schema's pattern, the prompt crate and `profiles check` all follow it.
///
/// # Errors
/// What is wrong with the name, in words (see [`profile_name_rule`] for what is allowed).
pub fn check_profile_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".to_owned());
    }
    if name == "." || name == ".." {
        return Err("it names the current or parent folder".to_owned());
    }
    let bytes = name.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if name.starts_with('/') || name.starts_with('\\') || drive {
        return Err("it is an absolute path".to_owned());
    }
    if let Some(sep) = name.chars().find(|c| matches!(c, '/' | '\\')) {
        return Err(format!("it contains the path separator {sep:?}"));
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
        return Err(format!("it contains the character {bad:?}"));
    }
    if name.len() > MAX_PROFILE_NAME_LEN {
        return Err(format!("it is {} characters long", name.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use std::fs;

    const FILE: &str = "/cfg/phosphor.json";

    #[test]
    fn defaults_are_the_specs() {
        let expected = json!({
            "options": {
                "disable_auto_summarize": false,
                "summarize_threshold": 0.8,
                "summarize_prepare_at": 0.0,
                "summarize_model": "main",
                "summarize_tool_output_chars": 200,
                "summarize_tool_output_aggressive_chars": 50,
                "summarize_assistant_text_chars": 600,
                "summarize_keep_recent_tokens": 0,
                "summarize_max_per_turn": 8,
                "summarize_state_max_tokens": 8000,
                "summarize_repeat_penalty": 1.0,
                "mask_threshold": 0.4,
                "mask_keep_recent_tokens": 8000,
                "profile": "default"
            },
            "embedded_models": { "inference": { "enabled": false, "gpu": false, "engine": "auto" } },
            "providers": {},
            "models": {}
        });
        assert_eq!(serde_json::to_value(Config::default()).unwrap(), expected);
        assert_eq!(parse_str("{}", Path::new(FILE)).unwrap(), (Config::default(), vec![]));
        assert_eq!(
            load(&ConfigSources::default()).unwrap(),
            LoadedConfig { config: Config::default(), warnings: vec![], origins: BTreeMap::new() }
        );
    }

    /// Parses `input` as `/cfg/phosphor.json` and expects an error with exactly the text `expected`.
    fn check_error(input: &str, expected: &str) {
        let error = parse_str(input, Path::new(FILE)).unwrap_err();
        assert_eq!(error.to_string(), expected, "input: {input}");
    }

    const OPENAI: &str = r#""providers": { "openai": { "base_url": "https://api.openai.com/v1" } }"#;

    #[test]
    fn validation_errors_name_file_path_value_and_what_is_allowed() {
        let threshold = |value: &str| format!(r#"{{ "options": {{ "summarize_threshold": {value} }} }}"#);
        for value in ["1.5", "0", "-0.25", "1.0000001"] {
            check_error(
                &threshold(value),
                &format!(
                    "/cfg/phosphor.json: options.summarize_threshold: {value} is out of range; \
                     allowed: a number > 0 and <= 1"
                ),
            );
        }
        check_error(
            r#"{ "options": { "summarize_tool_output_chars": 0 } }"#,
            "/cfg/phosphor.json: options.summarize_tool_output_chars: 0 is out of range; allowed: a whole number > 0",
        );
        check_error(
            r#"{ "options": { "summarize_assistant_text_chars": 0 } }"#,
            "/cfg/phosphor.json: options.summarize_assistant_text_chars: 0 is out of range; \
             allowed: a whole number > 0",
        );
        check_error(
            r#"{ "options": { "summarize_max_per_turn": 0 } }"#,
            "/cfg/phosphor.json: options.summarize_max_per_turn: 0 is out of range; allowed: a whole number >= 1",
        );
        check_error(
            r#"{ "options": { "summarize_repeat_penalty": 0.9 } }"#,
            "/cfg/phosphor.json: options.summarize_repeat_penalty: 0.9 is out of range; \
             allowed: a number >= 1 (1 is off) and <= 2",
        );
        for value in ["-1", "1.5"] {
            check_error(
                &format!(r#"{{ "options": {{ "mask_threshold": {value} }} }}"#),
                &format!(
                    "/cfg/phosphor.json: options.mask_threshold: {value} is out of range; \
                     allowed: 0 (off), or a number > 0 and <= 1"
                ),
            );
        }
        for value in ["-0.1", "0.8", "0.9", "1.5"] {
            check_error(
                &format!(r#"{{ "options": {{ "summarize_prepare_at": {value} }} }}"#),
                &format!(
                    "/cfg/phosphor.json: options.summarize_prepare_at: {value} is out of range; \
                     allowed: 0 (off), or a number > 0 and < options.summarize_threshold (0.8)"
                ),
            );
        }
        check_error(
            r#"{ "options": { "summarize_prepare_at": 0.6, "summarize_threshold": 0.5 } }"#,
            "/cfg/phosphor.json: options.summarize_prepare_at: 0.6 is out of range; \
             allowed: 0 (off), or a number > 0 and < options.summarize_threshold (0.5)",
        );
        check_error(
            r#"{ "options": { "summarize_state_max_tokens": 100 } }"#,
            "/cfg/phosphor.json: options.summarize_state_max_tokens: 100 is out of range; \
             allowed: a whole number >= 256",
        );
        check_error(
            r#"{ "options": { "summarize_tool_output_aggressive_chars": 0 } }"#,
            "/cfg/phosphor.json: options.summarize_tool_output_aggressive_chars: 0 is out of range; \
             allowed: a whole number > 0 and <= options.summarize_tool_output_chars (200)",
        );
        check_error(
            r#"{ "options": { "summarize_tool_output_aggressive_chars": 300 } }"#,
            "/cfg/phosphor.json: options.summarize_tool_output_aggressive_chars: 300 is out of range; \
             allowed: a whole number > 0 and <= options.summarize_tool_output_chars (200)",
        );
        check_error(
            r#"{ "options": { "summarize_tool_output_chars": 40 } }"#,
            "/cfg/phosphor.json: options.summarize_tool_output_chars: 40 is out of range; \
             allowed: a whole number >= options.summarize_tool_output_aggressive_chars (50)",
        );
        check_error(
            r#"{ "options": { "summarize_tool_output_chars": -5 } }"#,
            "/cfg/phosphor.json: options.summarize_tool_output_chars: invalid value: integer `-5`, expected usize",
        );
        check_error(
            r#"{ "options": { "summarize_threshold": "high" } }"#,
            "/cfg/phosphor.json: options.summarize_threshold: invalid type: string \"high\", expected f64",
        );
        check_error(
            r#"{ "options": [] }"#,
            "/cfg/phosphor.json: options: invalid type: sequence, expected a JSON object",
        );
        check_error(
            r#"{ "providers": { "openai": ["https://api.openai.com/v1"] } }"#,
            "/cfg/phosphor.json: providers.openai: invalid type: sequence, expected a JSON object",
        );
        check_error(
            r#"{ "models": { "large": ["openai", "gpt-4.1", 1000, 100] } }"#,
            "/cfg/phosphor.json: models.large: invalid type: sequence, expected a JSON object",
        );
        for value in [r#""medium""#, r#""Main""#, "3", "null"] {
            check_error(
                &format!(r#"{{ "options": {{ "summarize_model": {value} }} }}"#),
                &format!(
                    "/cfg/phosphor.json: options.summarize_model: {value} is not a known model; \
                     allowed: main, large, small, embedded"
                ),
            );
        }
        for value in [r#""vulkan""#, r#""llama.cpp""#, "true"] {
            check_error(
                &format!(r#"{{ "embedded_models": {{ "inference": {{ "engine": {value} }} }} }}"#),
                &format!(
                    "/cfg/phosphor.json: embedded_models.inference.engine: {value} is not a known engine; \
                     allowed: auto, mistralrs, llamacpp"
                ),
            );
        }
        check_error(
            r#"{ "providers": { "x": { "base_url": "http://127.0.0.1:1/v1", "api": "grpc" } } }"#,
            "/cfg/phosphor.json: providers.x.api: \"grpc\" is not a known API; allowed: chat, anthropic, responses",
        );
        check_error(
            r#"{ "options": { "summarize_model": "embedded" } }"#,
            "/cfg/phosphor.json: options.summarize_model: \"embedded\" needs embedded_models.inference.enabled, \
             which is false; allowed: main, large, small, or embedded once embedded_models.inference.enabled is true",
        );
        check_error(
            r#"{ "embedded_models": { "inference": { "enabled": true } } }"#,
            "/cfg/phosphor.json: embedded_models.inference.enabled: true needs a model, and none is set; \
             allowed: false, or true with embedded_models.inference.model_repo or \
             embedded_models.inference.model_path set",
        );
        for value in ["\"\"", "null"] {
            check_error(
                &format!(
                    r#"{{ "embedded_models": {{ "inference": {{ "enabled": true, "model_repo": {value} }} }} }}"#
                ),
                &format!(
                    "/cfg/phosphor.json: embedded_models.inference.model_repo: {value} leaves the enabled local \
                     model without a model; allowed: a Hugging Face repo id or short name, or \
                     embedded_models.inference.model_path set"
                ),
            );
        }
        // One rule with the prompt crate: a name it would refuse (here "my notes") is refused here.
        for (value, reason) in [
            (r#""""#, "it is empty"),
            (r#""..""#, "it names the current or parent folder"),
            (r#"".""#, "it names the current or parent folder"),
            (r#""team/a""#, "it contains the path separator '/'"),
            (r#""a\\b""#, "it contains the path separator '\\\\'"),
            (r#""a\u0000b""#, "it contains the character '\\0'"),
            (r#""my notes""#, "it contains the character ' '"),
            (r#""C:evil""#, "it is an absolute path"),
        ] {
            check_error(
                &format!(r#"{{ "options": {{ "profile": {value} }} }}"#),
                &format!(
                    "/cfg/phosphor.json: options.profile: {value} is not a valid profile name ({reason}); allowed: 1 to \
                     64 ASCII letters, digits, '-', '_' or '.', and is not '.' or '..'"
                ),
            );
        }
        let long = "a".repeat(MAX_PROFILE_NAME_LEN + 1);
        assert_eq!(check_profile_name(&long), Err("it is 65 characters long".to_owned()));
        assert_eq!(check_profile_name(&long[1..]), Ok(()));
        assert_eq!(check_profile_name("team-notes_v2.1"), Ok(()));
        check_error(
            r#"{ "providers": { "openai": { "base_url": "api.openai.com" } } }"#,
            "/cfg/phosphor.json: providers.openai.base_url: \"api.openai.com\" is not an http(s) URL; \
             allowed: a URL such as https://api.openai.com/v1",
        );
        check_error(
            r#"{ "providers": { "openai": { "base_url": "https://api.openai.com/v1", "api_key_env": "" } } }"#,
            "/cfg/phosphor.json: providers.openai.api_key_env: \"\" is empty; allowed: the name of an environment \
             variable such as OPENAI_API_KEY, or no key for keyless servers",
        );
        check_error(
            r#"{ "models": { "large": { "provider": "azure", "model": "gpt-4.1", "context_window": 1000 } } }"#,
            "/cfg/phosphor.json: models.large.provider: \"azure\" names no entry in providers; \
             allowed: a key of providers (none are configured)",
        );
        check_error(
            &format!(
                r#"{{ {OPENAI}, "models": {{ "small": {{ "provider": "azure", "model": "m", "context_window": 9 }} }} }}"#
            ),
            "/cfg/phosphor.json: models.small.provider: \"azure\" names no entry in providers; \
             allowed: a key of providers: \"openai\"",
        );
        check_error(
            &format!(
                r#"{{ {OPENAI}, "models": {{ "large": {{ "provider": "openai", "model": "gpt-4.1" }} }} }}"#
            ),
            "/cfg/phosphor.json: models.large: missing field `context_window`",
        );
        check_error(
            &format!(
                r#"{{ {OPENAI}, "models": {{ "large": {{ "provider": "openai", "model": "", "context_window": 9 }} }} }}"#
            ),
            "/cfg/phosphor.json: models.large.model: \"\" is empty; \
             allowed: the model id the provider knows, such as gpt-4.1",
        );
        check_error(
            &format!(
                r#"{{ {OPENAI}, "models": {{ "large": {{ "provider": "openai", "model": "m", "context_window": 0 }} }} }}"#
            ),
            "/cfg/phosphor.json: models.large.context_window: 0 is out of range; allowed: a whole number of tokens > 0",
        );
        check_error(
            r#"{ "models": { "windows": { "*": { "context_window": 9 } } } }"#,
            "/cfg/phosphor.json: models.windows.*: {\"context_window\":9} matches every model or none; name the models it is for; \
             allowed: a model id, or a pattern where * stands for any run of characters, such as claude-*",
        );
        check_error(
            r#"{ "models": { "windows": { "claude-*": { "context_window": 0 } } } }"#,
            "/cfg/phosphor.json: models.windows.claude-*.context_window: 0 is out of range; \
             allowed: a whole number of tokens > 0",
        );
        check_error(
            r#"[{ "options": {} }]"#,
            "/cfg/phosphor.json: the top level is an array; allowed: a JSON object",
        );
    }

    #[test]
    fn malformed_json_names_line_and_column() {
        check_error(
            "{\n  \"options\": {\n    \"summarize_threshold\": 0.5,\n  }\n}",
            "/cfg/phosphor.json:4:3: malformed JSON: trailing comma",
        );
        check_error(
            "{\n  \"options\": { \"profile\": \"x\" \"summarize_threshold\": 0.5 }\n}",
            "/cfg/phosphor.json:2:31: malformed JSON: expected `,` or `}`",
        );
        check_error("", "/cfg/phosphor.json:1:0: malformed JSON: EOF while parsing a value");
    }

    /// Parses `input` and expects it to load, with unknown-key warnings at exactly `expected` JSON paths.
    fn check_warnings(input: &str, expected: &[&str]) {
        let (_, warnings) = parse_str(input, Path::new(FILE)).unwrap();
        let expected: Vec<ConfigWarning> = expected
            .iter()
            .map(|path| ConfigWarning::UnknownKey {
                file: PathBuf::from(FILE),
                json_path: (*path).to_owned(),
            })
            .collect();
        assert_eq!(warnings, expected, "input: {input}");
    }

    #[test]
    fn unknown_keys_are_warnings_with_their_path() {
        check_warnings(r#"{ "$schema": "https://example.com/phosphor.schema.json" }"#, &[]);
        check_warnings(r#"{ "$schema": 3, "options": { "summarize_threshold": 0.5 } }"#, &[]);
        check_warnings(
            &format!(
                r#"{{
                    "option": {{ "a": 1 }},
                    "options": {{ "summarize_treshold": 0.5, "$schema": "x" }},
                    {OPENAI},
                    "models": {{ "large": {{ "provider": "openai", "model": "m", "context_window": 9, "temperature": 0 }} }}
                }}"#
            ),
            &["models.large.temperature", "option", "options.$schema", "options.summarize_treshold"],
        );
        let warning = ConfigWarning::UnknownKey { file: PathBuf::from(FILE), json_path: "option".to_owned() };
        assert_eq!(warning.to_string(), "/cfg/phosphor.json: option: unknown key, ignored");
    }

    /// A temporary global config dir and workspace, with files written in them.
    struct Layout {
        dir: tempfile::TempDir,
    }

    impl Layout {
        fn new() -> Layout {
            Layout { dir: tempfile::tempdir().unwrap() }
        }
        fn global_dir(&self) -> PathBuf {
            self.dir.path().join("config")
        }
        fn workspace_dir(&self) -> PathBuf {
            self.dir.path().join("workspace")
        }
        /// The file of a tier: `global`, `workspace` (`.phosphor/phosphor.json`), `workspace-root`
        /// (`./phosphor.json`) or `explicit`.
        fn path(&self, tier: &str) -> PathBuf {
            match tier {
                "global" => self.global_dir().join("phosphor").join(FILE_NAME),
                "workspace" => self.workspace_dir().join(".phosphor").join(FILE_NAME),
                "workspace-root" => self.workspace_dir().join(FILE_NAME),
                "explicit" => self.dir.path().join("explicit.json"),
                other => panic!("no tier {other}"),
            }
        }
        fn write(&self, tier: &str, text: &str) {
            let path = self.path(tier);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        fn sources(&self, explicit: bool) -> ConfigSources {
            let explicit = explicit.then(|| self.path("explicit"));
            ConfigSources::discover_with_global_dir(
                Some(&self.global_dir()),
                &self.workspace_dir(),
                explicit.as_deref(),
            )
        }
    }

    /// Writes `files` (tier, JSON) and loads them; expects `expected` and, for each JSON path set, its tier.
    fn check_merge(files: &[(&str, &str)], expected: Config, expected_origins: &[(&str, &str)]) {
        let layout = Layout::new();
        for (tier, text) in files {
            layout.write(tier, text);
        }
        let has_explicit = files.iter().any(|(tier, _)| *tier == "explicit");
        let loaded = load(&layout.sources(has_explicit)).unwrap();
        let origins =
            expected_origins.iter().map(|(path, tier)| ((*path).to_owned(), layout.path(tier))).collect();
        assert_eq!(loaded, LoadedConfig { config: expected, warnings: vec![], origins });
    }

    #[test]
    fn tiers_merge_key_by_key_global_then_workspace_then_explicit() {
        check_merge(
            &[
                ("global", r#"{ "options": { "summarize_threshold": 0.5, "summarize_model": "small" } }"#),
                ("workspace", r#"{ "options": { "summarize_threshold": 0.6 } }"#),
            ],
            Config {
                options: Options {
                    summarize_threshold: 0.6,
                    summarize_model: SummarizeModel::Small,
                    ..Options::default()
                },
                ..Config::default()
            },
            &[("options.summarize_model", "global"), ("options.summarize_threshold", "workspace")],
        );
        check_merge(
            &[
                (
                    "global",
                    r#"{ "options": { "summarize_threshold": 0.5, "summarize_tool_output_chars": 300 } }"#,
                ),
                ("workspace", r#"{ "options": { "summarize_threshold": 0.6, "profile": "terse" } }"#),
                ("explicit", r#"{ "$schema": "x", "options": { "summarize_threshold": 0.7 } }"#),
            ],
            Config {
                options: Options {
                    summarize_threshold: 0.7,
                    summarize_tool_output_chars: 300,
                    profile: "terse".to_owned(),
                    ..Options::default()
                },
                ..Config::default()
            },
            &[
                ("options.profile", "workspace"),
                ("options.summarize_threshold", "explicit"),
                ("options.summarize_tool_output_chars", "global"),
            ],
        );
    }

    #[test]
    fn objects_merge_and_everything_else_replaces() {
        let model = |name: &str| ModelConfig {
            provider: "openai".to_owned(),
            model: name.to_owned(),
            context_window: 1000,
            max_output_tokens: 4096,
        };
        check_merge(
            &[
                (
                    "global",
                    r#"{
                        "providers": { "openai": { "base_url": "https://a/v1", "headers": { "x-a": "1" } } },
                        "models": {
                            "large": { "provider": "openai", "model": "big", "context_window": 1000 },
                            "small": { "provider": "openai", "model": "little", "context_window": 1000 }
                        }
                    }"#,
                ),
                (
                    "workspace",
                    r#"{
                        "providers": { "openai": { "headers": { "x-b": "2" } }, "local": { "base_url": "http://l" } },
                        "models": { "large": null, "small": { "model": "tiny" } }
                    }"#,
                ),
            ],
            Config {
                providers: BTreeMap::from([
                    (
                        "local".to_owned(),
                        ProviderConfig { base_url: "http://l".to_owned(), ..Default::default() },
                    ),
                    (
                        "openai".to_owned(),
                        ProviderConfig {
                            base_url: "https://a/v1".to_owned(),
                            api_key_env: None,
                            headers: BTreeMap::from([
                                ("x-a".to_owned(), "1".to_owned()),
                                ("x-b".to_owned(), "2".to_owned()),
                            ]),
                            ..ProviderConfig::default()
                        },
                    ),
                ]),
                models: Models { large: None, small: Some(model("tiny")), ..Models::default() },
                ..Config::default()
            },
            &[
                ("models.large", "workspace"),
                ("models.small.context_window", "global"),
                ("models.small.model", "workspace"),
                ("models.small.provider", "global"),
                ("providers.local.base_url", "workspace"),
                ("providers.openai.base_url", "global"),
                ("providers.openai.headers.x-a", "global"),
                ("providers.openai.headers.x-b", "workspace"),
            ],
        );
        // An object replaces a scalar, and forgets its origin.
        check_merge(
            &[
                ("global", r#"{ "models": { "large": null } }"#),
                (
                    "workspace",
                    r#"{ "providers": { "openai": { "base_url": "https://a/v1" } },
                         "models": { "large": { "provider": "openai", "model": "big", "context_window": 1000 } } }"#,
                ),
            ],
            Config {
                providers: BTreeMap::from([(
                    "openai".to_owned(),
                    ProviderConfig { base_url: "https://a/v1".to_owned(), ..Default::default() },
                )]),
                models: Models { large: Some(model("big")), small: None, ..Models::default() },
                ..Config::default()
            },
            &[
                ("models.large.context_window", "workspace"),
                ("models.large.model", "workspace"),
                ("models.large.provider", "workspace"),
                ("providers.openai.base_url", "workspace"),
            ],
        );
    }

    /// Writes `files` (tier, JSON) and expects loading them to fail with `expected`, where `{global}`,
    /// `{workspace}` and `{explicit}` stand for the files' paths.
    fn check_merge_error(files: &[(&str, &str)], expected: &str) {
        let layout = Layout::new();
        for (tier, text) in files {
            layout.write(tier, text);
        }
        let has_explicit = files.iter().any(|(tier, _)| *tier == "explicit");
        let error = load(&layout.sources(has_explicit)).unwrap_err();
        let expected = ["global", "workspace", "explicit"].iter().fold(expected.to_owned(), |text, tier| {
            text.replace(&format!("{{{tier}}}"), &layout.path(tier).display().to_string())
        });
        assert_eq!(error.to_string(), expected);
    }

    #[test]
    fn errors_on_the_merged_config_name_the_file_that_set_the_value() {
        check_merge_error(
            &[
                (
                    "global",
                    r#"{ "options": { "summarize_tool_output_chars": 300, "summarize_tool_output_aggressive_chars": 100 } }"#,
                ),
                ("workspace", r#"{ "options": { "summarize_tool_output_chars": 80 } }"#),
            ],
            "{workspace}: options.summarize_tool_output_chars: 80 is out of range; \
             allowed: a whole number >= options.summarize_tool_output_aggressive_chars (100)",
        );
        check_merge_error(
            &[
                ("global", r#"{ "options": { "summarize_tool_output_chars": 80 } }"#),
                ("workspace", r#"{ "options": { "summarize_tool_output_aggressive_chars": 100 } }"#),
            ],
            "{workspace}: options.summarize_tool_output_aggressive_chars: 100 is out of range; \
             allowed: a whole number > 0 and <= options.summarize_tool_output_chars (80)",
        );
        check_merge_error(
            &[
                (
                    "global",
                    r#"{ "options": { "summarize_model": "embedded" },
                         "embedded_models": { "inference": { "enabled": true, "model_repo": "SmolLM2-135M-Instruct" } } }"#,
                ),
                ("explicit", r#"{ "embedded_models": { "inference": { "enabled": false } } }"#),
            ],
            "{explicit}: embedded_models.inference.enabled: false turns off the local model that \
             options.summarize_model \"embedded\" needs; allowed: true, or false once options.summarize_model is \
             main, large or small",
        );
        check_merge_error(
            &[
                (
                    "global",
                    r#"{ "providers": { "openai": { "base_url": "https://a/v1" } },
                         "models": { "large": { "provider": "openai", "model": "big", "context_window": 1000 } } }"#,
                ),
                ("workspace", r#"{ "models": { "large": { "provider": "azure" } } }"#),
            ],
            "{workspace}: models.large.provider: \"azure\" names no entry in providers; \
             allowed: a key of providers: \"openai\"",
        );
        check_merge_error(
            &[
                ("global", r#"{ "options": { "summarize_threshold": 0.5 } }"#),
                ("workspace", r#"{ "options": { "summarize_threshold": "high" } }"#),
            ],
            "{workspace}: options.summarize_threshold: invalid type: string \"high\", expected f64",
        );
        check_merge_error(
            &[
                ("global", r#"{ "providers": { "openai": { "base_url": "https://a/v1" } } }"#),
                ("workspace", r#"{ "models": { "small": { "provider": "openai", "model": "m" } } }"#),
            ],
            "{workspace}: models.small: missing field `context_window`",
        );
        check_merge_error(
            &[("global", "{}"), ("workspace", "{ \"options\": 1 ")],
            "{workspace}:1:15: malformed JSON: EOF while parsing an object",
        );
    }

    #[test]
    fn a_type_error_overridden_by_a_later_tier_is_not_an_error() {
        check_merge(
            &[
                ("global", r#"{ "options": { "summarize_threshold": "high" } }"#),
                ("workspace", r#"{ "options": { "summarize_threshold": 0.5 } }"#),
            ],
            Config {
                options: Options { summarize_threshold: 0.5, ..Options::default() },
                ..Config::default()
            },
            &[("options.summarize_threshold", "workspace")],
        );
    }

    #[test]
    fn warnings_name_the_file_with_the_unknown_key() {
        let layout = Layout::new();
        layout.write("global", r#"{ "options": { "summarize_treshold": 0.5 } }"#);
        layout.write("workspace", r#"{ "option": { "profile": "x" } }"#);
        let loaded = load(&layout.sources(false)).unwrap();
        assert_eq!(
            loaded.warnings,
            vec![
                ConfigWarning::UnknownKey { file: layout.path("workspace"), json_path: "option".to_owned() },
                ConfigWarning::UnknownKey {
                    file: layout.path("global"),
                    json_path: "options.summarize_treshold".to_owned(),
                },
            ]
        );
    }

    /// Writes the tiers named in `files` and expects discovery to find `expected` (tier names, or None).
    fn check_discovery(files: &[&str], explicit: bool, expected: [Option<&str>; 3]) {
        let layout = Layout::new();
        for tier in files {
            layout.write(tier, "{}");
        }
        let [global, workspace, explicit_tier] = expected.map(|tier| tier.map(|tier| layout.path(tier)));
        assert_eq!(layout.sources(explicit), ConfigSources { global, workspace, explicit: explicit_tier });
    }

    #[test]
    fn discovery_prefers_dot_phosphor_over_the_workspace_root() {
        check_discovery(&[], false, [None, None, None]);
        check_discovery(&["global"], false, [Some("global"), None, None]);
        check_discovery(&["workspace-root"], false, [None, Some("workspace-root"), None]);
        check_discovery(&["workspace-root", "workspace"], false, [None, Some("workspace"), None]);
        check_discovery(
            &["global", "workspace", "workspace-root"],
            true,
            [Some("global"), Some("workspace"), Some("explicit")],
        );
        check_discovery(&["global"], true, [Some("global"), None, Some("explicit")]);
    }

    #[test]
    fn the_workspace_root_file_is_used_when_there_is_no_dot_phosphor_file() {
        check_merge(
            &[
                ("global", r#"{ "options": { "profile": "g" } }"#),
                ("workspace-root", r#"{ "options": { "profile": "w" } }"#),
            ],
            Config {
                options: Options { profile: "w".to_owned(), ..Options::default() },
                ..Config::default()
            },
            &[("options.profile", "workspace-root")],
        );
    }

    #[test]
    fn missing_discovered_files_are_skipped_and_a_missing_explicit_file_is_an_error() {
        let layout = Layout::new();
        let sources = ConfigSources {
            global: Some(layout.path("global")),
            workspace: Some(layout.path("workspace")),
            explicit: None,
        };
        assert_eq!(load(&sources).unwrap().config, Config::default());
        let sources = ConfigSources { explicit: Some(layout.path("explicit")), ..sources };
        assert_eq!(
            load(&sources).unwrap_err().to_string(),
            format!("{}: the configuration file does not exist", layout.path("explicit").display())
        );
        let sources = ConfigSources { explicit: Some(layout.dir.path().to_path_buf()), ..sources };
        let error = load(&sources).unwrap_err();
        assert!(matches!(&error, ConfigError::Read { file, .. } if file == layout.dir.path()), "{error:?}");
    }

    #[test]
    fn the_example_loads_without_warnings_and_sets_every_key() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/phosphor.json"));
        let sources = ConfigSources { explicit: Some(path.to_path_buf()), ..ConfigSources::default() };
        let loaded = load(&sources).unwrap();
        assert_eq!(loaded.warnings, vec![]);
        let mut example: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
        example.as_object_mut().unwrap().remove(SCHEMA_KEY);
        assert_eq!(serde_json::to_value(&loaded.config).unwrap(), example);
        assert_eq!(loaded.config.models.large.as_ref().map(|m| m.context_window), Some(1_047_576));
    }

    #[test]
    fn the_checked_in_schema_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../schema/phosphor.schema.json");
        let generated = format!("{}\n", serde_json::to_string_pretty(&json_schema()).unwrap());
        if std::env::var_os("PHOSPHOR_UPDATE_SCHEMA").is_some_and(|value| value == "1") {
            fs::write(path, &generated).unwrap();
        }
        let checked_in = fs::read_to_string(path).unwrap_or_default();
        assert!(
            checked_in == generated,
            "{path} is stale or missing; regenerate it with\n  \
             PHOSPHOR_UPDATE_SCHEMA=1 cargo test -p phosphor-base config::tests::the_checked_in_schema_is_current"
        );
    }

    #[test]
    fn the_schema_accepts_dollar_schema_and_states_the_ranges() {
        let schema = json_schema();
        assert_eq!(schema["properties"]["$schema"]["type"], json!("string"));
        let threshold = &schema["$defs"]["Options"]["properties"]["summarize_threshold"];
        assert_eq!(
            (threshold["exclusiveMinimum"].clone(), threshold["maximum"].clone()),
            (json!(0), json!(1))
        );
    }
}
