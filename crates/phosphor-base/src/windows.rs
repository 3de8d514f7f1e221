//! The context windows of models named by id: what `phosphor serve` needs to know of a model a
//! client asks for (Claude Code's main and small models, the model in Codex's configuration) when
//! it is not a configured model slot.
//!
//! A window is looked up by the model's id in two tables, in order: the configuration's
//! `models.windows` (keys are ids or patterns, the user's word wins), then [`BUILT_IN`], a short
//! table of common hosted models. Within a table an exact id wins over a pattern, and of two
//! patterns the one with more literal characters wins (`claude-haiku-4*` over `claude-*`); ties go
//! to the first in key order. A pattern is an id with `*` standing for any run of characters.
//!
//! ```
//! use std::collections::BTreeMap;
//! use phosphor_base::windows::{self, Source, Window};
//!
//! let mine = BTreeMap::from([("my-model-*".to_owned(), Window::new(32_000, 4_096))]);
//! let (window, source) = windows::lookup("my-model-7b", &mine).unwrap();
//! assert_eq!((window.context_window, source), (32_000, Source::Configured("my-model-*")));
//! let (window, source) = windows::lookup("claude-sonnet-4-5-20250929", &mine).unwrap();
//! assert_eq!((window.context_window, source), (200_000, Source::BuiltIn("claude-sonnet-4*")));
//! assert!(windows::lookup("an-unknown-model", &mine).is_none());
//! ```

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the budget of a model is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Window {
    /// Its context window in tokens (prompt and answer together).
    #[schemars(range(min = 1))]
    pub context_window: u64,
    /// The most tokens one answer may have.
    #[serde(default = "crate::config::default_max_output_tokens")]
    #[schemars(range(min = 1))]
    pub max_output_tokens: u64,
}

impl Window {
    /// A window of `context_window` tokens whose answers may have `max_output_tokens`.
    pub const fn new(context_window: u64, max_output_tokens: u64) -> Window {
        Window { context_window, max_output_tokens }
    }
}

/// Windows of common hosted models, as their providers publish them (December 2026). A model not
/// here, or one whose figures change, is configured in `models.windows`.
pub const BUILT_IN: &[(&str, Window)] = &[
    ("claude-opus-4*", Window::new(200_000, 32_000)),
    ("claude-sonnet-4*", Window::new(200_000, 64_000)),
    ("claude-haiku-4*", Window::new(200_000, 64_000)),
    ("claude-3-7-sonnet*", Window::new(200_000, 64_000)),
    ("claude-3-5-haiku*", Window::new(200_000, 8_192)),
    ("gpt-5*", Window::new(400_000, 128_000)),
    ("gpt-4.1*", Window::new(1_047_576, 32_768)),
    ("gpt-4o*", Window::new(128_000, 16_384)),
    ("o3*", Window::new(200_000, 100_000)),
    ("o4-mini*", Window::new(200_000, 100_000)),
    ("codex-mini*", Window::new(200_000, 100_000)),
    ("gemini-2.5-*", Window::new(1_048_576, 65_536)),
];

/// Where a window was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source<'a> {
    /// The configuration's `models.windows`, under this key.
    Configured(&'a str),
    /// [`BUILT_IN`], under this pattern.
    BuiltIn(&'static str),
}

impl fmt::Display for Source<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Configured(key) => write!(f, "models.windows[{key:?}]"),
            Source::BuiltIn(pattern) => write!(f, "the built-in table ({pattern:?})"),
        }
    }
}

/// The window of `model`: from `configured` (`models.windows`), else [`BUILT_IN`]; `None` when
/// neither knows it.
pub fn lookup<'a>(model: &str, configured: &'a BTreeMap<String, Window>) -> Option<(Window, Source<'a>)> {
    if let Some((key, window)) = best(model, configured.iter().map(|(k, w)| (k.as_str(), *w))) {
        return Some((window, Source::Configured(key)));
    }
    best(model, BUILT_IN.iter().copied()).map(|(pattern, window)| (window, Source::BuiltIn(pattern)))
}

/// The entry of `table` that names `model` best: its exact id, else the matching pattern with the
/// most literal characters (the first of equals).
fn best<'a>(model: &str, table: impl Iterator<Item = (&'a str, Window)>) -> Option<(&'a str, Window)> {
    let mut found: Option<(usize, &'a str, Window)> = None;
    for (key, window) in table {
        if key == model {
            return Some((key, window));
        }
        let literal = key.chars().filter(|c| *c != '*').count();
        if key.contains('*') && matches(key, model) && found.is_none_or(|(best, ..)| literal > best) {
            found = Some((literal, key, window));
        }
    }
    found.map(|(_, key, window)| (key, window))
}

/// Whether `model` matches `pattern`, where each `*` stands for any run of characters (none
/// included) and everything else for itself.
pub fn matches(pattern: &str, model: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = model.strip_prefix(first) else { return false };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else { return rest.is_empty() };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// What a key of `models.windows` may be, in words, for error messages.
pub const KEY_RULE: &str =
    "a model id, or a pattern where * stands for any run of characters, such as claude-*";

/// Checks a key of `models.windows`: `Err` says what is wrong with it.
pub fn check_key(key: &str) -> Result<(), &'static str> {
    if key.is_empty() || key.chars().all(|c| c == '*') {
        Err("matches every model or none; name the models it is for")
    } else if key.chars().any(char::is_whitespace) {
        Err("has whitespace, which no model id has")
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_runs_of_characters() {
        for (pattern, model) in [
            ("claude-*", "claude-sonnet-4-5"),
            ("claude-*", "claude-"),
            ("*-mini", "o4-mini"),
            ("gpt-*-codex*", "gpt-5.1-codex-max"),
            ("a*b*c", "abc"),
            ("a*a", "aa"),
            ("exact", "exact"),
        ] {
            assert!(matches(pattern, model), "{pattern} should match {model}");
        }
        for (pattern, model) in [
            ("claude-*", "claud"),
            ("*-mini", "o4-mini-high"),
            ("a*a", "a"),
            ("gpt-*-codex", "gpt-5-codex-max"),
            ("exact", "exact2"),
        ] {
            assert!(!matches(pattern, model), "{pattern} should not match {model}");
        }
    }

    #[test]
    fn the_configuration_wins_then_the_exact_id_then_the_longest_pattern() {
        let configured = BTreeMap::from([
            ("claude-*".to_owned(), Window::new(100_000, 1_000)),
            ("claude-haiku-*".to_owned(), Window::new(50_000, 1_000)),
            ("claude-haiku-4-5".to_owned(), Window::new(40_000, 1_000)),
        ]);
        let window = |model| lookup(model, &configured).map(|(w, s)| (w.context_window, s.to_string()));
        assert_eq!(
            window("claude-haiku-4-5"),
            Some((40_000, r#"models.windows["claude-haiku-4-5"]"#.into()))
        );
        assert_eq!(window("claude-haiku-4-6"), Some((50_000, r#"models.windows["claude-haiku-*"]"#.into())));
        assert_eq!(window("claude-opus-4-1"), Some((100_000, r#"models.windows["claude-*"]"#.into())));
        assert_eq!(window("gpt-5.1-codex"), Some((400_000, r#"the built-in table ("gpt-5*")"#.into())));
        assert_eq!(window("llama3"), None);
        // Of the built-in patterns, the longer one wins too.
        let none = BTreeMap::new();
        assert_eq!(lookup("o4-mini-2025", &none).map(|(_, s)| s), Some(Source::BuiltIn("o4-mini*")));
    }

    #[test]
    fn built_in_entries_are_valid_keys_with_room_for_a_prompt() {
        for (pattern, window) in BUILT_IN {
            assert_eq!(check_key(pattern), Ok(()), "{pattern}");
            assert!(window.max_output_tokens < window.context_window, "{pattern}");
        }
        assert!(check_key("*").is_err() && check_key("").is_err() && check_key("my model").is_err());
    }
}
