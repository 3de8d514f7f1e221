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

/// Pairs of argument keys (compared without case) that hold the text an edit replaces and the text
/// it puts in its place: Claude Code's `Edit` and `MultiEdit` (`old_string`), Anthropic's text
/// editor (`old_str`), opencode's `edit` (`oldString`), and `old_text`.
pub const EDIT_TEXT_PAIRS: &[(&str, &str)] = &[
    ("old_string", "new_string"),
    ("old_str", "new_str"),
    ("old_text", "new_text"),
    ("oldstring", "newstring"),
    ("oldtext", "newtext"),
];

/// Characters of a shared stretch that an edit's two texts keep next to what changed (see
/// [`prune_arguments`]), at most: a quarter of the pruning limit when that is less, so that a
/// text cut short still shows the change and not only what led to it ([`edit_context_chars`]).
pub const EDIT_CONTEXT_CHARS: usize = 40;

/// Characters of shared context an edit's texts keep next to the change when they are cut at
/// `max_chars`.
/// `max_chars`, and never less than one (with none, a shared stretch that is a whole text would
/// leave it empty). At a `max_chars` of 0 no shared stretch is cut at all (see [`prune_arguments`]).
pub fn edit_context_chars(max_chars: usize) -> usize {
    EDIT_CONTEXT_CHARS.min(max_chars / 4).max(1)
}

/// A shared stretch of an edit's two texts is cut only when more than this many characters go
/// (less would hardly pay for the marker).
const EDIT_ELISION_MIN_CHARS: usize = 40;

/// How the marker of unchanged characters starts and ends, around the count (see
/// [`unchanged_marker`]).
const UNCHANGED_PREFIX: &str = "[... ";
const UNCHANGED_SUFFIX: &str = " unchanged characters ...]";

/// What stands for the unchanged characters cut out of an edit's two texts.
fn unchanged_marker(chars: usize) -> String {
    format!("{UNCHANGED_PREFIX}{chars}{UNCHANGED_SUFFIX}")
}

/// Whether `text` holds a marker of this module's cuts.
fn already_cut(text: &str) -> bool {
    text.contains(TRUNCATION_MARKER) || text.contains(UNCHANGED_SUFFIX)
}

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
/// An edit's two texts (a pair of [`EDIT_TEXT_PAIRS`] in one object) first lose what they share:
/// a common beginning or end that leaves more than 40 characters to cut once the context is kept
/// is cut from both down to the [`edit_context_chars`] characters next to the change (40 at a
/// limit of 160 or more, a quarter of the limit below), behind a `[... N unchanged characters
/// ...]` marker. An edit usually repeats a whole function to change one line of it; cut at
/// `max_chars` alone, both texts would keep the same unchanged start and the change would be lost.
/// At a `max_chars` of 0 (an outline of a call: its identifying values and nothing else) each
/// long text is its marker alone.
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
            let (edits, changed) = cut_edit_pairs(map, max_chars);
            changed
                + map
                    .iter_mut()
                    .filter(|(key, _)| !edits.contains(key))
                    .map(|(key, item)| cut_strings(item, is_identifying_key(key), max_chars))
                    .sum::<usize>()
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

/// Cuts the texts of each edit pair in `map` (see [`prune_arguments`]): what they share, then each
/// at `max_chars`. Returns the keys of the pairs it handled and how many values it changed.
fn cut_edit_pairs(map: &mut serde_json::Map<String, Value>, max_chars: usize) -> (Vec<String>, usize) {
    let (mut handled, mut changed) = (Vec::new(), 0);
    for (old_key, new_key) in EDIT_TEXT_PAIRS {
        let find = |wanted: &str| map.keys().find(|k| k.eq_ignore_ascii_case(wanted)).cloned();
        let (Some(old_key), Some(new_key)) = (find(old_key), find(new_key)) else { continue };
        let (Some(Value::String(old)), Some(Value::String(new))) = (map.get(&old_key), map.get(&new_key))
        else {
            continue;
        };
        // A pair cut before (a marker in either text) is only read back: cutting twice equals
        // cutting once. At a limit of 0 nothing of either text is kept, so there is no change to
        // show and no shared stretch is counted: each text is its marker alone.
        let fresh = max_chars > 0 && !already_cut(old) && !already_cut(new);
        let (old_parts, new_parts) =
            match fresh.then(|| shared_cut(old, new, edit_context_chars(max_chars))).flatten() {
                Some(parts) => parts,
                None => (read_back(old), read_back(new)),
            };
        let (old_text, new_text) = (old_parts.render(max_chars), new_parts.render(max_chars));
        for (key, text) in [(old_key, old_text), (new_key, new_text)] {
            if map.get(&key).and_then(Value::as_str) != Some(text.as_str()) {
                changed += 1;
                map.insert(key.clone(), Value::String(text));
            }
            handled.push(key);
        }
    }
    (handled, changed)
}

/// An edit text as cut: the unchanged characters cut from its start, the text kept, and those cut
/// from its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EditText<'a> {
    before: usize,
    kept: &'a str,
    after: usize,
}

impl EditText<'_> {
    /// The text with its markers, what is kept cut at `max_chars` (the end marker goes with a cut).
    fn render(&self, max_chars: usize) -> String {
        let mut out = String::new();
        if self.before > 0 {
            out.push_str(&unchanged_marker(self.before));
        }
        let kept = truncate_chars(self.kept, max_chars);
        let whole = matches!(kept, Cow::Borrowed(_));
        out.push_str(&kept);
        if self.after > 0 && whole {
            out.push_str(&unchanged_marker(self.after));
        }
        out
    }
}

/// A text this module wrote, read back into its parts (a text without markers is all kept).
fn read_back(text: &str) -> EditText<'_> {
    let mut parts = EditText { before: 0, kept: text, after: 0 };
    if let Some(rest) = parts.kept.strip_prefix(UNCHANGED_PREFIX)
        && let Some((count, rest)) = rest.split_once(UNCHANGED_SUFFIX)
        && let Ok(count) = count.parse()
    {
        parts = EditText { before: count, kept: rest, after: 0 };
    }
    if let Some(rest) = parts.kept.strip_suffix(UNCHANGED_SUFFIX)
        && let Some((kept, count)) = rest.rsplit_once(UNCHANGED_PREFIX)
        && let Ok(count) = count.parse()
    {
        parts = EditText { kept, after: count, ..parts };
    }
    parts
}

/// `old` and `new` without the long beginning and end they share, down to `context` characters
/// next to the change, or `None` when there is nothing worth cutting.
fn shared_cut<'a>(old: &'a str, new: &'a str, context: usize) -> Option<(EditText<'a>, EditText<'a>)> {
    let old_chars: Vec<(usize, char)> = old.char_indices().collect();
    let new_chars: Vec<(usize, char)> = new.char_indices().collect();
    let shortest = old_chars.len().min(new_chars.len());
    let prefix = old_chars.iter().zip(&new_chars).take_while(|((_, a), (_, b))| a == b).count();
    let suffix = old_chars
        .iter()
        .rev()
        .zip(new_chars.iter().rev())
        .take(shortest - prefix)
        .take_while(|((_, a), (_, b))| a == b)
        .count();
    let worth = |shared: usize| match shared.saturating_sub(context) {
        cut if cut > EDIT_ELISION_MIN_CHARS => cut,
        _ => 0,
    };
    let (before, after) = (worth(prefix), worth(suffix));
    if before == 0 && after == 0 {
        return None;
    }
    let part = |text: &'a str, chars: &[(usize, char)]| {
        let start = chars[before].0;
        let end = chars.get(chars.len() - after).map_or(text.len(), |(at, _)| *at);
        EditText { before, kept: &text[start..end], after }
    };
    Some((part(old, &old_chars), part(new, &new_chars)))
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
    fn an_edit_s_two_texts_lose_what_they_share_and_keep_the_change() {
        let head = "fn parse(input: &str) -> Result<Config> {\n    let mut config = Config::default();\n    config.retries = ";
        let tail = "\n    Ok(config)\n}\n// the end of the parser, which is long enough to be cut as well\n";
        let old = format!("{head}3;{tail}");
        let new = format!("{head}5; // é{tail}");
        let arguments =
            json!({ "file_path": "src/config.rs", "old_string": old, "new_string": new }).to_string();
        let (cut, cuts) = prune_arguments(&arguments, 200).unwrap();
        assert_eq!(cuts, 2);
        let value: Value = serde_json::from_str(&cut).unwrap();
        let context_before: String = head.chars().skip(head.chars().count() - EDIT_CONTEXT_CHARS).collect();
        let context_after: String = tail.chars().take(EDIT_CONTEXT_CHARS).collect();
        let elided = |middle: &str| {
            format!(
                "{}{context_before}{middle}{context_after}{}",
                unchanged_marker(head.chars().count() - EDIT_CONTEXT_CHARS),
                unchanged_marker(tail.chars().count() - EDIT_CONTEXT_CHARS),
            )
        };
        assert_eq!(value["old_string"], elided("3;"));
        assert_eq!(value["new_string"], elided("5; // é"));
        assert_eq!(value["file_path"], "src/config.rs");
        // Idempotent; an edit with little in common is only cut at the limit; opencode's spelling.
        assert_eq!(prune_arguments(&cut, 200), None);
        let apart = json!({ "oldString": "a".repeat(300), "newString": "b".repeat(300) }).to_string();
        let (cut, _) = prune_arguments(&apart, 100).unwrap();
        let value: Value = serde_json::from_str(&cut).unwrap();
        assert_eq!(value["oldString"], format!("{}{TRUNCATION_MARKER}", "a".repeat(100)));
        let shared = json!({ "oldString": format!("{}x", "a".repeat(300)), "newString": format!("{}y", "a".repeat(300)) });
        let (cut, _) = prune_arguments(&shared.to_string(), 100).unwrap();
        let value: Value = serde_json::from_str(&cut).unwrap();
        // Cut at 100, the context is a quarter of the limit: 25 characters.
        assert_eq!(value["newString"], format!("{}{}y", unchanged_marker(275), "a".repeat(25)));
        // Cut at 50, the change still shows behind 12 characters of context.
        let (cut, _) = prune_arguments(&arguments, 50).unwrap();
        let value: Value = serde_json::from_str(&cut).unwrap();
        let shown = value["new_string"].as_str().unwrap();
        assert!(shown.contains("= 5; // é"), "{shown}");
        assert_eq!(edit_context_chars(50), 12);
        assert_eq!(edit_context_chars(1_000), EDIT_CONTEXT_CHARS);
        // At 0 (an outline) each text is its marker alone, whatever it shares; the path stays.
        let (cut, _) = prune_arguments(&arguments, 0).unwrap();
        let value: Value = serde_json::from_str(&cut).unwrap();
        assert_eq!(
            (value["old_string"].as_str(), value["new_string"].as_str()),
            (Some(TRUNCATION_MARKER), Some(TRUNCATION_MARKER))
        );
        assert_eq!(value["file_path"], "src/config.rs");
        assert_eq!(prune_arguments(&cut, 0), None);
        // Tiny limits: an edit that only appends, or changes nothing, keeps a character of context
        // (at 0, none: each text is its marker alone); cutting twice equals cutting once.
        for max in 0..5 {
            assert_eq!(edit_context_chars(max), 1.max(max / 4), "{max}");
            for (old, new) in
                [("x".repeat(60), format!("{}y", "x".repeat(60))), ("x".repeat(60), "x".repeat(60))]
            {
                let arguments = json!({ "old_string": old, "new_string": new }).to_string();
                let (cut, _) = prune_arguments(&arguments, max).unwrap();
                assert_eq!(prune_arguments(&cut, max), None, "{max}: cutting twice equals cutting once");
            }
        }
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
