//! The range and cross-field checks on the merged configuration.

use serde_json::Value;

use super::blame::{Blame, value_at};
use super::error::ConfigError;
use super::types::{Config, MIN_STATE_TOKENS, SummarizeModel};

/// The problem of a number outside what a key allows.
const OUT_OF_RANGE: &str = "is out of range";

/// Cross-field and range checks on the merged configuration.
pub(super) fn validate(config: &Config, merged: &Value, blame: &Blame<'_>) -> Result<(), ConfigError> {
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
