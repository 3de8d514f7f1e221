//! Pruning of tool-call arguments: in coding sessions the bulk of a transcript is often what the
//! model *sent* to its tools (whole files in a write, old and new text in an edit), not what came
//! back. Long string values inside the arguments' JSON are cut like tool outputs; values that
//! identify what a call acted on (a path, a command, a pattern, an id) stay whole when they are
//! reasonably short, so a summarizer still sees which file was written and which command ran.

use std::borrow::Cow;

use serde_json::Value;

use crate::{TRUNCATION_MARKER, truncate_chars};

/// Argument keys that hold one path (the artifact trail reads files from them).
pub const PATH_KEYS: &[&str] = &[
    "path",
    "file",
    "file_path",
    "filepath",
    "filename",
    "target_file",
    "source",
    "destination",
    "old_path",
    "new_path",
    "notebook_path",
];

/// Argument keys that hold a list of paths.
pub const PATHS_KEYS: &[&str] = &["paths", "files", "file_paths"];

/// Argument keys that hold a shell command.
pub const COMMAND_KEYS: &[&str] = &["command", "cmd", "script", "shell"];

/// Further keys whose values identify what a call acted on: patterns, queries, addresses, ids.
const OTHER_IDENTIFYING_KEYS: &[&str] = &[
    "pattern",
    "glob",
    "regex",
    "query",
    "url",
    "uri",
    "id",
    "name",
    "branch",
    "ref",
    "dir",
    "directory",
    "cwd",
    "workdir",
];

/// Characters an identifying value keeps, whatever the pruning limit (a heredoc in a shell command
/// is still cut, at this length).
pub const IDENTIFYING_MAX_CHARS: usize = 1_000;

/// Whether string values under `key` (compared without case) identify what a call acted on: a key
/// of [`PATH_KEYS`], [`PATHS_KEYS`], [`COMMAND_KEYS`], a pattern, query, address or id, or any key
/// ending in `path`, `file`, `dir` or `_id` (`old_path`, `target_file`, `call_id`).
pub fn is_identifying_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [PATH_KEYS, PATHS_KEYS, COMMAND_KEYS, OTHER_IDENTIFYING_KEYS]
        .iter()
        .any(|keys| keys.contains(&key.as_str()))
        || ["path", "file", "dir", "_id"].iter().any(|suffix| key.ends_with(suffix))
}

/// `arguments` (a tool call's JSON text) with every long string value cut to `max_chars`
/// characters plus [`TRUNCATION_MARKER`](crate::TRUNCATION_MARKER), identifying values (see
/// [`is_identifying_key`]) to [`IDENTIFYING_MAX_CHARS`] at least, and how many values were cut;
/// `None` when nothing is cut.
///
/// The result is valid JSON with the same keys in the same order (only string values change);
/// text that is not JSON is cut as a whole, like a tool output. Cutting twice equals cutting once,
/// and a cut never splits a character (see [`truncate_chars`]).
pub fn prune_arguments(arguments: &str, max_chars: usize) -> Option<(String, usize)> {
    // No value can be longer than the text that holds it: short arguments are not even parsed.
    if arguments.len() <= max_chars.saturating_add(TRUNCATION_MARKER.len()) {
        return None;
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(mut value) => {
            let cuts = cut_strings(&mut value, false, max_chars);
            // Compact JSON text is what a cut value re-serializes to; the keys keep their order
            // (serde_json's `preserve_order`).
            (cuts > 0).then(|| (value.to_string(), cuts))
        }
        Err(_) => match truncate_chars(arguments, max_chars) {
            Cow::Owned(cut) => Some((cut, 1)),
            Cow::Borrowed(_) => None,
        },
    }
}

/// Cuts the long strings in `value` (`identifying`: it sits under an identifying key) and returns
/// how many it cut.
fn cut_strings(value: &mut Value, identifying: bool, max_chars: usize) -> usize {
    match value {
        Value::String(text) => {
            let limit = if identifying { max_chars.max(IDENTIFYING_MAX_CHARS) } else { max_chars };
            match truncate_chars(text, limit) {
                Cow::Owned(cut) => {
                    *text = cut;
                    1
                }
                Cow::Borrowed(_) => 0,
            }
        }
        Value::Array(items) => items.iter_mut().map(|item| cut_strings(item, identifying, max_chars)).sum(),
        Value::Object(map) => {
            map.iter_mut().map(|(key, item)| cut_strings(item, is_identifying_key(key), max_chars)).sum()
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn long_values_are_cut_and_identifying_ones_kept() {
        let content = "fn main() {}\n".repeat(100);
        let arguments = json!({
            "file_path": "src/very/deep/module/path.rs",
            "content": content,
            "command": format!("cat <<'EOF' > x\n{}", "y".repeat(2_000)),
            "todos": [{ "content": "write the parser", "status": "in_progress" }],
        })
        .to_string();
        let (cut, cuts) = prune_arguments(&arguments, 20).unwrap();
        assert_eq!(cuts, 2);
        let value: Value = serde_json::from_str(&cut).unwrap();
        assert_eq!(value["file_path"], "src/very/deep/module/path.rs");
        assert_eq!(value["content"], format!("{}{TRUNCATION_MARKER}", &content[..20]));
        assert_eq!(
            value["command"].as_str().unwrap().chars().count(),
            IDENTIFYING_MAX_CHARS + TRUNCATION_MARKER.len()
        );
        assert_eq!(value["todos"][0]["content"], "write the parser");
        assert_eq!(value["todos"][0]["status"], "in_progress");
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["file_path", "content", "command", "todos"]);
        // Idempotent.
        assert_eq!(prune_arguments(&cut, 20), None);
    }

    #[test]
    fn short_arguments_and_non_json_text() {
        assert_eq!(prune_arguments(r#"{"path":"a.rs","offset":3}"#, 5), None);
        assert_eq!(prune_arguments("", 5), None);
        let raw = "not json ".repeat(10);
        let (cut, cuts) = prune_arguments(&raw, 5).unwrap();
        assert_eq!((cut, cuts), (format!("not j{TRUNCATION_MARKER}"), 1));
    }

    #[test]
    fn identifying_keys_by_name_and_suffix() {
        for key in ["path", "FILE_PATH", "target_file", "old_path", "call_id", "cmd", "pattern", "workdir"] {
            assert!(is_identifying_key(key), "{key}");
        }
        for key in ["content", "new_string", "old_string", "patch", "text", "body"] {
            assert!(!is_identifying_key(key), "{key}");
        }
    }
}
