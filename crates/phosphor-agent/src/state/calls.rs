//! What a tool call does, by the trail's rules: the files it touches and how, the names its
//! changes define, the command it runs, the plan it writes.

use phosphor_prune::{COMMAND_KEYS, PATH_KEYS, PATHS_KEYS};
use serde_json::Value;

use super::line::clip;
use super::{FileOp, PlanItem};
use crate::names::{defined_name, is_prose, names_of_change, note_name};

/// Whether a call changes a file (the trail records a written, edited, deleted or moved file) and
/// runs no command.
pub(super) fn changes_a_file(tool: &str, arguments: &str) -> bool {
    let Ok(args) = serde_json::from_str::<Value>(arguments) else { return false };
    let effect = CallEffect::of(tool, &args);
    effect.command.is_none() && effect.files.iter().any(|(_, op)| *op != FileOp::Read)
}

/// What a call does by the trail's rules: the files it touches, each with its operation, the
/// names its changes define or touch, by file, and the shell command it runs.
pub(super) struct CallEffect {
    pub(super) files: Vec<(String, FileOp)>,
    pub(super) names: Vec<(String, Vec<String>)>,
    pub(super) command: Option<String>,
}

impl CallEffect {
    pub(super) fn of(tool: &str, args: &Value) -> CallEffect {
        let mut found = Found::default();
        scan(args, &mut found, 0);
        let op = file_op(tool, args, &found);
        // A text editor's `command` (`view`, `str_replace`) names its operation, not a shell command.
        let command = match editor_command(args) {
            Some(_) => None,
            None => found.commands.into_iter().next_back(),
        };
        // The names of a change: from its code when it changes one file in place or whole, and
        // from each file's part of a patch.
        let mut names = found.patch_names;
        if let ([path], FileOp::Edited | FileOp::Written, None) = (found.paths.as_slice(), op, &command)
            && !is_prose(path)
        {
            names.push((path.clone(), names_of_change(found.texts.iter().map(String::as_str))));
        }
        names.retain(|(_, defined)| !defined.is_empty());
        let mut files: Vec<(String, FileOp)> = found.paths.into_iter().map(|path| (path, op)).collect();
        files.extend(found.patch_files);
        CallEffect { files, names, command }
    }
}

/// What the scan of one call's arguments found.
#[derive(Default)]
struct Found {
    paths: Vec<String>,
    commands: Vec<String>,
    /// Files named by a patch in the arguments (`*** Update File: a.rs`, `+++ b/a.rs`).
    patch_files: Vec<(String, FileOp)>,
    /// The names each file's part of a patch defines or touches.
    patch_names: Vec<(String, Vec<String>)>,
    /// String values that are neither paths, commands nor patches (the code of an edit or a write).
    texts: Vec<String>,
    /// Keys seen anywhere (lower case), for the operation's shape.
    keys: Vec<String>,
}

/// Finds paths, commands and patches in tool arguments, a few levels deep.
fn scan(value: &Value, found: &mut Found, depth: usize) {
    let Value::Object(map) = value else { return };
    for (key, value) in map {
        let key = key.to_ascii_lowercase();
        match value {
            Value::String(s) if !s.trim().is_empty() => {
                if PATH_KEYS.contains(&key.as_str()) {
                    found.paths.push(s.trim().to_owned());
                } else if COMMAND_KEYS.contains(&key.as_str()) {
                    found.commands.push(s.trim().to_owned());
                } else if !patch_files(s, &mut found.patch_files, &mut found.patch_names) {
                    found.texts.push(s.clone());
                }
            }
            Value::Array(items) => {
                let strings: Vec<&str> = items.iter().filter_map(|i| i.as_str()).collect();
                if PATHS_KEYS.contains(&key.as_str()) {
                    found.paths.extend(strings.iter().map(|s| s.trim().to_owned()));
                } else if COMMAND_KEYS.contains(&key.as_str()) && !strings.is_empty() {
                    found.commands.push(strings.join(" "));
                } else if depth < 3 {
                    for item in items {
                        scan(item, found, depth + 1);
                    }
                }
            }
            Value::Object(_) if depth < 3 => scan(value, found, depth + 1),
            _ => {}
        }
        found.keys.push(key);
    }
}

/// Files a patch names: codex's `*** Add/Update/Delete File:` and `*** Move to:` lines, and a
/// unified diff's `+++ b/path` lines; with the names that each file's lines define (a line's
/// `+`, `-` or ` ` marker aside, and a hunk header's text after its last `@@`, where diffs name the
/// enclosing function). Returns whether `text` named a file.
fn patch_files(
    text: &str,
    files: &mut Vec<(String, FileOp)>,
    names: &mut Vec<(String, Vec<String>)>,
) -> bool {
    if !text.contains("*** ") && !text.contains("+++ ") {
        return false;
    }
    let named = files.len();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in text.lines() {
        let code = match line.rsplit_once("@@") {
            Some((_, header)) if line.starts_with("@@") => header,
            _ => line.strip_prefix(['+', '-', ' ']).unwrap_or(line),
        };
        if let (Some((path, defined)), Some(name)) = (&mut current, defined_name(code))
            && !is_prose(path)
        {
            note_name(defined, name);
        }
        let found = [
            ("*** Add File: ", FileOp::Written),
            ("*** Update File: ", FileOp::Edited),
            ("*** Delete File: ", FileOp::Deleted),
            ("*** Move to: ", FileOp::Moved),
            ("+++ b/", FileOp::Edited),
        ]
        .into_iter()
        .find_map(|(prefix, op)| line.strip_prefix(prefix).map(|path| (path.trim(), op)));
        if let Some((path, op)) = found.filter(|(path, _)| !path.is_empty() && *path != "/dev/null") {
            files.push((path.to_owned(), op));
            // After a move, the lines are the file's at its new path.
            names.extend(current.replace((path.to_owned(), Vec::new())));
        }
    }
    names.extend(current);
    files.len() > named
}

/// Keys whose presence means the call changes a file in place: either text of an edit pair
/// ([`phosphor_prune::EDIT_TEXT_PAIRS`]), a list of edits, a diff.
fn is_edit_key(key: &str) -> bool {
    phosphor_prune::EDIT_TEXT_PAIRS
        .iter()
        .any(|(old, new)| key.eq_ignore_ascii_case(old) || key.eq_ignore_ascii_case(new))
        || ["edits", "diff"].contains(&key)
}

/// Keys whose presence (with a path) means the call writes a whole file.
const CONTENT_KEYS: &[&str] = &["content", "contents", "file_text"];

/// The operation a call performs on the paths in its arguments: the text editor's `command` when
/// it has one, then the tool's name, then the arguments' shape; `read` otherwise.
fn file_op(tool: &str, args: &Value, found: &Found) -> FileOp {
    if let Some(op) = editor_command(args) {
        return op;
    }
    let name = tool.to_ascii_lowercase();
    let named = |words: &[&str]| words.iter().any(|w| name.contains(w));
    if named(&["delete", "remove", "unlink"]) || name == "rm" {
        FileOp::Deleted
    } else if named(&["move", "rename"]) || name == "mv" {
        FileOp::Moved
    } else if named(&["edit", "patch", "replace", "insert", "apply", "update", "modify"]) {
        FileOp::Edited
    } else if named(&["write", "create", "save"]) {
        FileOp::Written
    } else if found.keys.iter().any(|k| is_edit_key(k)) {
        FileOp::Edited
    } else if found.keys.iter().any(|k| CONTENT_KEYS.contains(&k.as_str())) {
        FileOp::Written
    } else {
        FileOp::Read
    }
}

/// A text editor tool's operation (Anthropic's `str_replace_based_edit_tool`: a `path` and a
/// `command` of `view`, `create`, `str_replace`, `insert` or `undo_edit`).
fn editor_command(args: &Value) -> Option<FileOp> {
    let command = args.get("command")?.as_str()?;
    args.get("path")?;
    match command {
        "view" => Some(FileOp::Read),
        "create" => Some(FileOp::Written),
        "str_replace" | "insert" | "undo_edit" => Some(FileOp::Edited),
        _ => None,
    }
}

/// Keys under which a plan item keeps its text, in order of preference.
const ITEM_TEXT_KEYS: &[&str] = &["content", "step", "text", "title", "task", "description", "name"];
/// Keys under which a plan item keeps its status.
const ITEM_STATUS_KEYS: &[&str] = &["status", "state"];
/// Boolean keys that mark a plan item done.
const ITEM_DONE_KEYS: &[&str] = &["done", "completed", "checked"];

/// The plan in a call's arguments: the first list (a level or two deep) of at least one object,
/// every one of which has a text and a status (or a done flag). Claude Code's `TodoWrite`
/// (`todos: [{content, status}]`), codex's `update_plan` (`plan: [{step, status}]`) and
/// opencode's `todowrite` have this shape.
pub(super) fn find_plan(value: &Value, depth: usize) -> Option<Vec<PlanItem>> {
    let Value::Object(map) = value else { return None };
    for value in map.values() {
        if let Value::Array(items) = value {
            let plan: Option<Vec<PlanItem>> = items.iter().map(plan_item).collect();
            if let Some(plan) = plan.filter(|p| !p.is_empty()) {
                return Some(plan);
            }
        }
    }
    if depth < 2 {
        return map.values().find_map(|v| find_plan(v, depth + 1));
    }
    None
}

fn plan_item(item: &Value) -> Option<PlanItem> {
    let text = ITEM_TEXT_KEYS.iter().find_map(|k| item.get(k)?.as_str().filter(|s| !s.trim().is_empty()))?;
    let status =
        ITEM_STATUS_KEYS.iter().find_map(|k| item.get(k)?.as_str().map(str::to_owned)).or_else(|| {
            ITEM_DONE_KEYS.iter().find_map(|k| {
                item.get(k)?.as_bool().map(|done| if done { "completed" } else { "pending" }.to_owned())
            })
        })?;
    Some(PlanItem { status: clip(&status), text: clip(text) })
}
