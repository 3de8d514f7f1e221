//! The deterministic artifact trail: files read and written, commands run and errors seen,
//! collected from tool calls without a model and appended to every summary.
//!
//! A summary written by a small model may forget a file; the trail cannot. Each compaction
//! merges the previous summary's trail with what the folded messages show.

use std::collections::BTreeSet;

use phosphor_core::{Message, Part};
use phosphor_prune::{COMMAND_KEYS, PATH_KEYS, PATHS_KEYS};

/// The heading that starts the trail inside a summary. Parsing relies on it; do not translate it.
pub const TRAIL_HEADING: &str = "## Artifact trail";

/// Most recent commands kept (files are never dropped).
const MAX_COMMANDS: usize = 40;
/// Most recent errors kept.
const MAX_ERRORS: usize = 20;
/// Characters kept of one command or error line.
const MAX_LINE_CHARS: usize = 200;

const SECTION_READ: &str = "Files read:";
const SECTION_WRITTEN: &str = "Files written:";
const SECTION_COMMANDS: &str = "Commands run:";
const SECTION_ERRORS: &str = "Errors seen:";

/// Words in a tool's name that mean it changes files.
const WRITE_WORDS: &[&str] = &[
    "write", "edit", "create", "patch", "apply", "replace", "delete", "remove", "move", "rename", "save",
    "insert",
];

/// What the folded history touched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArtifactTrail {
    /// Files only read.
    pub files_read: BTreeSet<String>,
    /// Files written, edited, created, moved or deleted.
    pub files_written: BTreeSet<String>,
    /// Commands run, oldest first, without repeats.
    pub commands: Vec<String>,
    /// Tool errors seen, oldest first.
    pub errors: Vec<String>,
}

impl ArtifactTrail {
    /// Collects the trail of `messages` (tool calls and failed tool results).
    pub fn collect<'a>(messages: impl IntoIterator<Item = &'a Message>) -> ArtifactTrail {
        let mut trail = ArtifactTrail::default();
        for message in messages {
            for part in &message.parts {
                match part {
                    Part::ToolCall(call) => trail.add_call(&call.name, &call.arguments),
                    Part::ToolResult(result) if result.is_error => {
                        let first = result.content.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                        trail.push_error(format!("{}: {}", result.name, first.trim()));
                    }
                    _ => {}
                }
            }
        }
        trail
    }

    fn add_call(&mut self, tool: &str, arguments: &str) {
        let Ok(args) = serde_json::from_str::<serde_json::Value>(arguments) else { return };
        let lower = tool.to_ascii_lowercase();
        let writes = WRITE_WORDS.iter().any(|w| lower.contains(w));
        let mut paths = Vec::new();
        let mut commands = Vec::new();
        scan(&args, &mut paths, &mut commands, 0);
        for path in paths {
            if writes {
                self.files_read.remove(&path);
                self.files_written.insert(path);
            } else if !self.files_written.contains(&path) {
                self.files_read.insert(path);
            }
        }
        for command in commands {
            self.push_command(command);
        }
    }

    fn push_command(&mut self, command: String) {
        let command = clip(&command);
        self.commands.retain(|c| c != &command);
        self.commands.push(command);
        if self.commands.len() > MAX_COMMANDS {
            self.commands.remove(0);
        }
    }

    fn push_error(&mut self, error: String) {
        self.errors.push(clip(&error));
        if self.errors.len() > MAX_ERRORS {
            self.errors.remove(0);
        }
    }

    /// Adds `newer` on top of this (older) trail.
    pub fn merge(&mut self, newer: ArtifactTrail) {
        for path in newer.files_written {
            self.files_read.remove(&path);
            self.files_written.insert(path);
        }
        for path in newer.files_read {
            if !self.files_written.contains(&path) {
                self.files_read.insert(path);
            }
        }
        for command in newer.commands {
            self.push_command(command);
        }
        for error in newer.errors {
            self.push_error(error);
        }
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.files_read.is_empty()
            && self.files_written.is_empty()
            && self.commands.is_empty()
            && self.errors.is_empty()
    }

    /// Every file, written ones first.
    pub fn files(&self) -> Vec<String> {
        self.files_written.iter().chain(self.files_read.iter()).cloned().collect()
    }

    /// The trail as markdown, starting with [`TRAIL_HEADING`].
    pub fn render(&self) -> String {
        let mut out = format!("{TRAIL_HEADING}\n");
        if self.is_empty() {
            out.push_str("(no files, commands or tool errors yet)\n");
            return out;
        }
        let mut section = |title: &str, items: &mut dyn Iterator<Item = String>| {
            let items: Vec<String> = items.collect();
            if !items.is_empty() {
                out.push_str(title);
                out.push('\n');
                for item in items {
                    out.push_str("- ");
                    out.push_str(&item);
                    out.push('\n');
                }
            }
        };
        section(SECTION_WRITTEN, &mut self.files_written.iter().cloned());
        section(SECTION_READ, &mut self.files_read.iter().cloned());
        section(SECTION_COMMANDS, &mut self.commands.iter().map(|c| format!("`{c}`")));
        section(SECTION_ERRORS, &mut self.errors.iter().cloned());
        out
    }

    /// Reads back a trail rendered by [`ArtifactTrail::render`] from anywhere in `text`
    /// (the text after the last [`TRAIL_HEADING`]). No heading: an empty trail.
    pub fn parse(text: &str) -> ArtifactTrail {
        let mut trail = ArtifactTrail::default();
        let Some(start) = text.rfind(TRAIL_HEADING) else { return trail };
        let mut section = "";
        for line in text[start + TRAIL_HEADING.len()..].lines() {
            let line = line.trim_end();
            if [SECTION_READ, SECTION_WRITTEN, SECTION_COMMANDS, SECTION_ERRORS].contains(&line) {
                section = line;
                continue;
            }
            if line.starts_with("## ") {
                break;
            }
            let Some(item) = line.strip_prefix("- ") else { continue };
            match section {
                SECTION_READ => {
                    trail.files_read.insert(item.to_owned());
                }
                SECTION_WRITTEN => {
                    trail.files_written.insert(item.to_owned());
                }
                SECTION_COMMANDS => {
                    let command = item.strip_prefix('`').and_then(|c| c.strip_suffix('`')).unwrap_or(item);
                    trail.commands.push(command.to_owned());
                }
                SECTION_ERRORS => trail.errors.push(item.to_owned()),
                _ => {}
            }
        }
        trail
    }
}

fn clip(text: &str) -> String {
    let one_line = text.replace('\n', " ⏎ ");
    match one_line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

/// Finds paths and commands in tool arguments, a few levels deep.
fn scan(value: &serde_json::Value, paths: &mut Vec<String>, commands: &mut Vec<String>, depth: usize) {
    let serde_json::Value::Object(map) = value else { return };
    for (key, value) in map {
        let key = key.as_str();
        match value {
            serde_json::Value::String(s) if !s.trim().is_empty() => {
                if PATH_KEYS.contains(&key) {
                    paths.push(s.trim().to_owned());
                } else if COMMAND_KEYS.contains(&key) {
                    commands.push(s.trim().to_owned());
                }
            }
            serde_json::Value::Array(items) => {
                let strings: Vec<&str> = items.iter().filter_map(|i| i.as_str()).collect();
                if PATHS_KEYS.contains(&key) {
                    paths.extend(strings.iter().map(|s| s.trim().to_owned()));
                } else if COMMAND_KEYS.contains(&key) && !strings.is_empty() {
                    commands.push(strings.join(" "));
                } else if depth < 3 {
                    for item in items {
                        scan(item, paths, commands, depth + 1);
                    }
                }
            }
            serde_json::Value::Object(_) if depth < 3 => scan(value, paths, commands, depth + 1),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_core::{Role, ToolCall};

    fn call(name: &str, args: &str) -> Message {
        Message::new(
            Role::Assistant,
            vec![Part::ToolCall(ToolCall { id: "c".into(), name: name.into(), arguments: args.into() })],
        )
    }

    #[test]
    fn collects_files_commands_and_errors() {
        let messages = vec![
            call("read_file", r#"{"path": "src/lib.rs"}"#),
            call("edit_file", r#"{"file_path": "src/main.rs", "old": "a", "new": "b"}"#),
            call("read_file", r#"{"path": "src/main.rs"}"#),
            call("bash", r#"{"command": "cargo test\n--quiet"}"#),
            call("multi_read", r#"{"paths": ["a.txt", "b.txt"]}"#),
            call("bash", r#"{"command": ["ls", "-la"]}"#),
            call("broken", "not json"),
            Message::tool_result("c", "bash", "\nerror[E0308]: mismatched types\nmore", true),
        ];
        let trail = ArtifactTrail::collect(&messages);
        let expected = ArtifactTrail {
            files_read: ["src/lib.rs", "a.txt", "b.txt"].map(String::from).into(),
            files_written: ["src/main.rs".to_owned()].into(),
            commands: vec!["cargo test ⏎ --quiet".into(), "ls -la".into()],
            errors: vec!["bash: error[E0308]: mismatched types".into()],
        };
        pretty_assertions::assert_eq!(trail, expected);
    }

    #[test]
    fn render_and_parse_round_trip_and_merge_keeps_everything() {
        let older = ArtifactTrail::collect(&[
            call("read_file", r#"{"path": "a.rs"}"#),
            call("run", r#"{"cmd": "make"}"#),
        ]);
        let text = format!("Some summary.\n\n{}", older.render());
        let mut parsed = ArtifactTrail::parse(&text);
        pretty_assertions::assert_eq!(parsed, older);
        parsed.merge(ArtifactTrail::collect(&[
            call("write_file", r#"{"path": "a.rs"}"#),
            call("run", r#"{"cmd": "make"}"#),
        ]));
        assert_eq!(parsed.files_written, ["a.rs".to_owned()].into());
        assert!(parsed.files_read.is_empty());
        assert_eq!(parsed.commands, vec!["make".to_owned()]);
        assert_eq!(ArtifactTrail::parse("no heading here"), ArtifactTrail::default());
    }
}
