//! The short model names `model_repo` accepts, the default model, and the parsing of `model_repo`.

use crate::error::{EmbeddedError, Result};
use crate::select::{is_supported_architecture, unsupported};

/// A short name for a GGUF model on Hugging Face: `"model_repo": "Qwen3-0.6B"` means [`ShortName::repo`]'s
/// [`ShortName::file`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortName {
    /// The name written in `model_repo` (matched case-insensitively).
    pub name: &'static str,
    /// The Hugging Face repo holding the file.
    pub repo: &'static str,
    /// The GGUF file in the repo.
    pub file: &'static str,
    /// The model's `general.architecture`, known before downloading.
    pub architecture: &'static str,
    /// The download size in megabytes, roughly.
    pub size_mb: u32,
}

impl ShortName {
    /// Whether an engine in this build can run this model.
    pub fn is_supported(&self) -> bool {
        is_supported_architecture(self.architecture)
    }
}

/// Every short name, the default first. `Qwen3.5-0.8B`, `Gemma-2-2B` and the Gemma 3
/// models have architectures only llama.cpp runs: without the `llamacpp` feature they are refused before any
/// download, with a list of the names that would work.
pub const SHORT_NAMES: &[ShortName] = &[
    ShortName {
        name: "Qwen3-0.6B",
        repo: "unsloth/Qwen3-0.6B-GGUF",
        file: "Qwen3-0.6B-Q4_K_M.gguf",
        architecture: "qwen3",
        size_mb: 397,
    },
    ShortName {
        name: "Qwen3-1.7B",
        repo: "unsloth/Qwen3-1.7B-GGUF",
        file: "Qwen3-1.7B-Q4_K_M.gguf",
        architecture: "qwen3",
        size_mb: 1107,
    },
    ShortName {
        name: "Qwen3-4B",
        repo: "unsloth/Qwen3-4B-GGUF",
        file: "Qwen3-4B-Q4_K_M.gguf",
        architecture: "qwen3",
        size_mb: 2497,
    },
    ShortName {
        name: "Qwen2.5-0.5B-Instruct",
        repo: "Qwen/Qwen2.5-0.5B-Instruct-GGUF",
        file: "qwen2.5-0.5b-instruct-q4_k_m.gguf",
        architecture: "qwen2",
        size_mb: 491,
    },
    ShortName {
        name: "Qwen2.5-1.5B-Instruct",
        repo: "Qwen/Qwen2.5-1.5B-Instruct-GGUF",
        file: "qwen2.5-1.5b-instruct-q4_k_m.gguf",
        architecture: "qwen2",
        size_mb: 1120,
    },
    ShortName {
        name: "Llama-3.2-1B",
        repo: "bartowski/Llama-3.2-1B-Instruct-GGUF",
        file: "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
        architecture: "llama",
        size_mb: 808,
    },
    ShortName {
        name: "Phi-3-mini",
        repo: "microsoft/Phi-3-mini-4k-instruct-gguf",
        file: "Phi-3-mini-4k-instruct-q4.gguf",
        architecture: "phi3",
        size_mb: 2393,
    },
    ShortName {
        name: "Gemma-3-270M",
        repo: "unsloth/gemma-3-270m-it-GGUF",
        file: "gemma-3-270m-it-Q4_K_M.gguf",
        architecture: "gemma3",
        size_mb: 253,
    },
    ShortName {
        name: "Gemma-3-1B",
        repo: "unsloth/gemma-3-1b-it-GGUF",
        file: "gemma-3-1b-it-Q4_K_M.gguf",
        architecture: "gemma3",
        size_mb: 806,
    },
    ShortName {
        name: "Qwen3.5-0.8B",
        repo: "unsloth/Qwen3.5-0.8B-GGUF",
        file: "Qwen3.5-0.8B-Q4_K_M.gguf",
        architecture: "qwen35",
        size_mb: 528,
    },
    ShortName {
        name: "Gemma-2-2B",
        repo: "bartowski/gemma-2-2b-it-GGUF",
        file: "gemma-2-2b-it-Q4_K_M.gguf",
        architecture: "gemma2",
        size_mb: 1709,
    },
];

/// The model used when neither `model_path` nor `model_repo` is set: Qwen3-0.6B, Q4_K_M (about 400 MB).
///
/// Among the architectures both engines load from GGUF it gives the most quality per megabyte: the strongest
/// sub-1B instruction model (it follows instructions better than Qwen2.5-0.5B-Instruct at the same size), with a
/// window of more than 32k tokens, fast enough on a laptop CPU for summaries. It runs whichever engine a build
/// has.
pub fn default_model() -> &'static ShortName {
    &SHORT_NAMES[0]
}

/// Looks up a short name, ignoring ASCII case.
pub fn short_name(name: &str) -> Option<&'static ShortName> {
    SHORT_NAMES.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

/// The short names this build can run, for error messages.
pub(crate) fn supported_short_names() -> String {
    SHORT_NAMES.iter().filter(|s| s.is_supported()).map(|s| s.name).collect::<Vec<_>>().join(", ")
}

/// Where a model comes from, once `model_repo` is parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoSpec {
    /// The Hugging Face repo id (`owner/name`).
    pub repo: String,
    /// The GGUF file in it; `None` picks one (Q4_K_M first).
    pub file: Option<String>,
    /// The short name it came from, if any.
    pub short_name: Option<&'static ShortName>,
}

impl RepoSpec {
    /// Parses `model_repo`: a short name, `owner/name`, or `owner/name:file.gguf`.
    ///
    /// A short name whose architecture no engine in this build loads is refused here, before anything is
    /// downloaded.
    pub fn parse(spec: &str) -> Result<RepoSpec> {
        let spec = spec.trim();
        if let Some(short) = short_name(spec) {
            if !short.is_supported() {
                return Err(unsupported(short.name, short.architecture));
            }
            return Ok(RepoSpec {
                repo: short.repo.to_owned(),
                file: Some(short.file.to_owned()),
                short_name: Some(short),
            });
        }
        let bad = || EmbeddedError::BadModelSpec { spec: spec.to_owned(), known: all_short_names() };
        let (repo, file) = match spec.split_once(':') {
            Some((repo, file)) => (repo, Some(file)),
            None => (spec, None),
        };
        let valid_part = |part: &str| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        match repo.split_once('/') {
            Some((owner, name)) if valid_part(owner) && valid_part(name) => {}
            _ => return Err(bad()),
        }
        if let Some(file) = file {
            let safe = file.ends_with(".gguf")
                && !file.starts_with('/')
                && file.split('/').all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\\'));
            if !safe {
                return Err(bad());
            }
        }
        Ok(RepoSpec { repo: repo.to_owned(), file: file.map(str::to_owned), short_name: None })
    }
}

/// Every short name, comma-separated.
fn all_short_names() -> String {
    SHORT_NAMES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn short_names_resolve_case_insensitively() {
        let spec = RepoSpec::parse(" qwen3-0.6b ").unwrap();
        assert_eq!(
            spec,
            RepoSpec {
                repo: "unsloth/Qwen3-0.6B-GGUF".into(),
                file: Some("Qwen3-0.6B-Q4_K_M.gguf".into()),
                short_name: Some(default_model()),
            }
        );
        let phi = RepoSpec::parse("Phi-3-mini").unwrap();
        assert_eq!(
            (phi.repo.as_str(), phi.file.as_deref()),
            ("microsoft/Phi-3-mini-4k-instruct-gguf", Some("Phi-3-mini-4k-instruct-q4.gguf"))
        );
    }

    #[test]
    fn the_default_is_a_supported_short_name() {
        assert!(default_model().is_supported());
        assert_eq!(short_name(default_model().name), Some(default_model()));
    }

    #[test]
    fn short_names_are_unique_and_well_formed() {
        for (i, s) in SHORT_NAMES.iter().enumerate() {
            assert!(SHORT_NAMES[..i].iter().all(|o| !o.name.eq_ignore_ascii_case(s.name)), "{}", s.name);
            let parsed = RepoSpec::parse(&format!("{}:{}", s.repo, s.file)).unwrap();
            assert_eq!(parsed.file.as_deref(), Some(s.file));
        }
    }

    #[test]
    fn short_names_of_architectures_only_llama_cpp_runs() {
        for name in ["Qwen3.5-0.8B", "Gemma-2-2B", "Gemma-3-270M", "Gemma-3-1B"] {
            let short = short_name(name).unwrap();
            let parsed = RepoSpec::parse(name);
            if cfg!(feature = "llamacpp") {
                assert_eq!(parsed.unwrap().file.as_deref(), Some(short.file));
                continue;
            }
            let err = parsed.unwrap_err();
            assert!(
                err.to_string().starts_with(&format!(
                    "{name} is a `{}` model, which no engine in this build can run from GGUF (",
                    short.architecture
                )),
                "{err}"
            );
            assert!(err.to_string().contains("llama.cpp could, but is not in this build"), "{err}");
        }
    }

    #[test]
    fn repo_ids_with_and_without_a_file() {
        assert_eq!(
            RepoSpec::parse("owner/My_Model-GGUF").unwrap(),
            RepoSpec { repo: "owner/My_Model-GGUF".into(), file: None, short_name: None }
        );
        assert_eq!(
            RepoSpec::parse("owner/name:sub/dir/m.Q4_K_M.gguf").unwrap(),
            RepoSpec {
                repo: "owner/name".into(),
                file: Some("sub/dir/m.Q4_K_M.gguf".into()),
                short_name: None
            }
        );
    }

    #[test]
    fn malformed_specs_are_refused() {
        for bad in [
            "",
            "gpt-5",
            "a/b/c",
            "/name",
            "owner/",
            "own er/name",
            "../x",
            "owner/name:",
            "owner/name:model.bin",
            "owner/name:../../etc/x.gguf",
            "owner/name:/abs.gguf",
            "owner/name:a//b.gguf",
        ] {
            let err = RepoSpec::parse(bad).unwrap_err();
            assert!(matches!(err, EmbeddedError::BadModelSpec { .. }), "{bad:?}: {err}");
        }
        let err = RepoSpec::parse("gpt-5").unwrap_err();
        assert_eq!(
            err.to_string(),
            "`embedded_models.inference.model_repo` is \"gpt-5\": expected a Hugging Face repo id (`owner/name`, \
             optionally `owner/name:file.gguf`) or one of the short names Qwen3-0.6B, Qwen3-1.7B, Qwen3-4B, \
             Qwen2.5-0.5B-Instruct, Qwen2.5-1.5B-Instruct, Llama-3.2-1B, Phi-3-mini, Gemma-3-270M, Gemma-3-1B, \
             Qwen3.5-0.8B, Gemma-2-2B"
        );
    }
}
