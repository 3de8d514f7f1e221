//! The error type of model resolution and loading.

use std::path::PathBuf;

use phosphor_base::gguf::GgufError;

/// Result alias for this crate's [`EmbeddedError`].
pub type Result<T, E = EmbeddedError> = std::result::Result<T, E>;

/// What can go wrong finding, downloading or loading a local model. Each variant says what the caller should do.
///
/// Errors while a loaded model answers are [`phosphor_base::Error`]s, as for every [`phosphor_base::ChatModel`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbeddedError {
    /// `embedded_models.inference.enabled` is false. Set it to true, or do not load the embedded model.
    #[error("the embedded model is disabled: set `embedded_models.inference.enabled` to true to use it")]
    Disabled,
    /// `model_repo` is neither a known short name nor a Hugging Face repo id. Fix the configuration.
    #[error(
        "`embedded_models.inference.model_repo` is {spec:?}: expected a Hugging Face repo id (`owner/name`, \
         optionally `owner/name:file.gguf`) or one of the short names {known}"
    )]
    BadModelSpec {
        /// The configured value.
        spec: String,
        /// The short names, comma-separated.
        known: String,
    },
    /// No engine in this build can run the model's architecture. Nothing was downloaded; pick a model the message
    /// names (or build with the engine that runs it).
    #[error(
        "{model} is a `{architecture}` model, which no engine in this build can run from GGUF ({engines}); \
         use one of the short names {alternatives}, or point `model_path` at a GGUF file of a supported architecture"
    )]
    UnsupportedArchitecture {
        /// The model: its short name, repo or file.
        model: String,
        /// Its architecture (`general.architecture`).
        architecture: String,
        /// What each engine loads, or that it is not compiled in; `; `-separated.
        engines: String,
        /// Short names of models that would work, comma-separated.
        alternatives: String,
    },
    /// `embedded_models.inference.engine` names an engine that is not compiled in or cannot run the model's
    /// architecture. Do what the message says: another engine, `auto`, or another build.
    #[error(
        "`embedded_models.inference.engine` is \"{engine}\", but {model} is a `{architecture}` model and {reason}; \
         {instead}"
    )]
    EngineUnavailable {
        /// The configured engine.
        engine: &'static str,
        /// The model: its short name, repo or file.
        model: String,
        /// Its architecture.
        architecture: String,
        /// Why the engine cannot run it.
        reason: String,
        /// What would work.
        instead: String,
    },
    /// The model is not in the local Hugging Face cache and downloads are off (`HF_HUB_OFFLINE`). Download it
    /// once with network access, or point `model_path` at a local GGUF file.
    #[error(
        "{repo}/{file} is not in the Hugging Face cache at {} and HF_HUB_OFFLINE is set, so it was not \
         downloaded: unset HF_HUB_OFFLINE to download it once, or set `embedded_models.inference.model_path` \
         to a local GGUF file",
        cache_dir.display()
    )]
    Offline {
        /// The repo id.
        repo: String,
        /// The file looked for (`*.gguf` when none was named).
        file: String,
        /// The hub cache searched.
        cache_dir: PathBuf,
    },
    /// Downloading the model failed (no network, refused, not found, interrupted). Check the network and the
    /// repo and file names, or point `model_path` at a local GGUF file.
    #[error(
        "could not download {repo}/{file} from {endpoint} (not found in the Hugging Face cache at {} either): \
         {message}; check the network and the repo and file names, or set \
         `embedded_models.inference.model_path` to a local GGUF file",
        cache_dir.display()
    )]
    Download {
        /// The repo id.
        repo: String,
        /// The file (`*.gguf` when none was named and the listing failed).
        file: String,
        /// The Hugging Face endpoint tried.
        endpoint: String,
        /// The hub cache searched first.
        cache_dir: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The repo holds no GGUF file. Name the file (`owner/name:file.gguf`) or choose another repo.
    #[error(
        "{repo} has no `.gguf` file (it has {files}); name one as `{repo}:file.gguf` or choose a GGUF repo"
    )]
    NoGgufInRepo {
        /// The repo id.
        repo: String,
        /// The files it has, comma-separated.
        files: String,
    },
    /// The model file cannot be read. Fix `model_path` (or remove a damaged cached file so it downloads again).
    #[error("cannot read the model file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a readable GGUF model. Point `model_path` at a GGUF file (or remove a damaged cached file).
    #[error("{} is not a usable gguf model: {source}", path.display())]
    Gguf {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: GgufError,
    },
    /// The GGUF file lacks a key the engine needs. Use another model file.
    #[error("{} has no `{key}` metadata: {why}", path.display())]
    MissingMetadata {
        /// The file.
        path: PathBuf,
        /// The missing key.
        key: String,
        /// What it is needed for.
        why: &'static str,
    },
    /// The engine failed to load the model. The message says why; do not retry with the same file.
    #[error("{engine} could not load {}: {message}", path.display())]
    Load {
        /// The engine (`llama.cpp`, `mistral.rs`), or `phosphor` for failures before an engine ran.
        engine: &'static str,
        /// The file.
        path: PathBuf,
        /// The engine's words.
        message: String,
    },
}
