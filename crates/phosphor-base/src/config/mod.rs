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
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

pub use crate::windows::Window;

mod blame;
mod error;
#[cfg(test)]
mod tests;
mod types;
mod validate;

use blame::{Blame, value_at};
pub use error::{ConfigError, ConfigWarning};
use types::SCHEMA_KEY;
pub(crate) use types::default_max_output_tokens;
pub use types::{
    Api, Config, DEFAULT_MAX_OUTPUT_TOKENS, EmbeddedModels, Engine, FILE_NAME, InferenceConfig,
    MIN_STATE_TOKENS, ModelConfig, Models, Options, ProviderConfig, SummarizeModel, json_schema,
};
use validate::validate;
pub use validate::{MAX_PROFILE_NAME_LEN, check_profile_name, profile_name_rule};

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
