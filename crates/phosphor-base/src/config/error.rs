//! What loading a configuration reports: warnings that do not stop it, errors that do.

use std::fmt;
use std::io;
use std::path::PathBuf;

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
