//! `phosphor config check`: validates the configuration tiers and shows where each value came from.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use phosphor_base::config::{self, Config, ConfigSources, LoadedConfig, SummarizeModel};
use serde_json::Value;

/// Loads the configuration for `workspace` (plus `explicit`), failing with the loader's message.
pub fn load(workspace: &Path, explicit: Option<&Path>) -> Result<LoadedConfig> {
    let sources = ConfigSources::discover(workspace, explicit);
    Ok(config::load(&sources)?)
}

/// The report `config check` prints for the files `sources` found for `workspace`; `Err` when the
/// configuration does not load. `env` reads environment variables (to check API keys are set).
pub fn check(
    sources: &ConfigSources,
    workspace: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String> {
    let mut out = String::from("configuration files, lowest precedence first:\n");
    let global = config::global_config_path();
    let tiers = [
        ("global", sources.global.as_deref(), global.as_deref()),
        ("workspace", sources.workspace.as_deref(), None),
        ("explicit", sources.explicit.as_deref(), None),
    ];
    for (tier, found, expected) in tiers {
        let shown = match (found, expected) {
            (Some(path), _) => path.display().to_string(),
            (None, Some(path)) => format!("(none; would be {})", path.display()),
            (None, None) if tier == "workspace" => format!(
                "(none; would be {} or {})",
                workspace.join(".phosphor").join(config::FILE_NAME).display(),
                workspace.join(config::FILE_NAME).display()
            ),
            (None, None) => "(none; --config FILE)".to_owned(),
        };
        let _ = writeln!(out, "  {tier:<10} {shown}");
    }
    let loaded = config::load(sources)?;
    let notes = notes(&loaded.config, env);
    if !loaded.warnings.is_empty() || !notes.is_empty() {
        out.push_str("warnings:\n");
        for warning in &loaded.warnings {
            let _ = writeln!(out, "  {warning}");
        }
        for note in &notes {
            let _ = writeln!(out, "  {note}");
        }
    }
    out.push_str("resolved configuration (key = value  <- origin):\n");
    let mut leaves = Vec::new();
    flatten(&serde_json::to_value(&loaded.config)?, "", &mut leaves);
    let width = leaves.iter().map(|(path, value)| path.len() + value.len() + 3).max().unwrap_or(0);
    for (path, value) in leaves {
        let origin = origin(&loaded, &path);
        let entry = format!("{path} = {value}");
        let _ = writeln!(out, "  {entry:<width$}  <- {origin}");
    }
    out.push_str("ok\n");
    Ok(out)
}

/// Problems that do not stop loading but will stop a command later.
fn notes(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut notes = Vec::new();
    for (name, provider) in &config.providers {
        if let Some(var) = &provider.api_key_env
            && env(var).is_none_or(|value| value.is_empty())
        {
            notes.push(format!(
                "providers.{name}.api_key_env: the environment variable {var} is not set; requests to {} will \
                 fail until it is",
                provider.base_url
            ));
        }
    }
    if config.models.large.is_none() {
        let inference = &config.embedded_models.inference;
        let local = match (&inference.model_path, &inference.model_repo) {
            (Some(path), _) if inference.enabled => path.display().to_string(),
            (None, Some(repo)) if inference.enabled => repo.clone(),
            _ => format!("the default model, {}", phosphor_embedded::default_model().name),
        };
        notes.push(format!("models.large is not set: chat and run use the embedded model ({local})"));
    }
    match config.options.summarize_model {
        SummarizeModel::Small if config.models.small.is_none() => notes.push(
            "options.summarize_model is \"small\", but models.small is not set; compaction will fail"
                .to_owned(),
        ),
        _ => {}
    }
    notes
}

/// Every non-object value of `value` with its dotted path; empty objects are values too.
fn flatten(value: &Value, prefix: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(object) if !object.is_empty() => {
            for (key, child) in object {
                let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                flatten(child, &path, out);
            }
        }
        other => out.push((prefix.to_owned(), other.to_string())),
    }
}

/// The file that set `path` (or the nearest enclosing value), else `default`.
fn origin(loaded: &LoadedConfig, path: &str) -> String {
    let mut current = path;
    loop {
        if let Some(file) = loaded.origin(current) {
            return file.display().to_string();
        }
        match current.rfind('.') {
            Some(at) => current = &current[..at],
            None => return "default".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::fs;

    #[test]
    fn names_the_file_of_each_value_and_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("phosphor.json");
        fs::write(
            &file,
            r#"{ "options": { "summarize_threshold": 0.5, "profile_x": 1 },
                 "providers": { "local": { "base_url": "http://127.0.0.1:8080/v1", "api_key_env": "LOCAL_KEY" } },
                 "models": { "large": { "provider": "local", "model": "m", "context_window": 8000 } } }"#,
        )
        .unwrap();
        let sources = ConfigSources::discover_with_global_dir(None, dir.path(), None);
        let report = check(&sources, dir.path(), &|_| None).unwrap();
        let path = file.display().to_string();
        assert!(report.contains(&format!("  workspace  {path}\n")), "{report}");
        assert!(report.contains(&format!("  {path}: options.profile_x: unknown key, ignored\n")), "{report}");
        assert!(report.contains("the environment variable LOCAL_KEY is not set"), "{report}");
        let line = |key: &str| {
            report.lines().find(|l| l.trim_start().starts_with(&format!("{key} ="))).unwrap().to_owned()
        };
        let threshold = line("options.summarize_threshold");
        assert!(threshold.starts_with("  options.summarize_threshold = 0.5 "), "{threshold}");
        assert!(threshold.ends_with(&format!("  <- {path}")), "{threshold}");
        assert!(
            line("options.summarize_model").ends_with("<- default"),
            "{}",
            line("options.summarize_model")
        );
        assert!(line("models.large.context_window").ends_with(&format!("<- {path}")));
        assert!(line("models.large.max_output_tokens").ends_with("<- default"));
        assert!(report.ends_with("ok\n"));
        // With the key set, the note goes away.
        let report =
            check(&sources, dir.path(), &|var| (var == "LOCAL_KEY").then(|| "k".to_owned())).unwrap();
        assert!(!report.contains("LOCAL_KEY is not set"), "{report}");
    }

    #[test]
    fn a_bad_value_is_an_error_naming_file_path_and_range() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("explicit.json");
        fs::write(&file, r#"{ "options": { "summarize_threshold": 1.5 } }"#).unwrap();
        let sources = ConfigSources::discover_with_global_dir(None, dir.path(), Some(&file));
        let error = check(&sources, dir.path(), &|_| None).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "{}: options.summarize_threshold: 1.5 is out of range; allowed: a number > 0 and <= 1",
                file.display()
            )
        );
    }
}
