//! The files a session read and changed, and what they define.

use super::*;

#[test]
fn older_file_changes_that_went_through_show_their_output_in_brief() {
    let snippet = format!(
        "The file /repo/src/a.rs has been updated. Here's the result of running `cat -n` on a snippet:\n{}",
        "    12\tlet retries = 5;\n".repeat(20)
    );
    let diagnostics = format!("Edit applied.\n{}\nerror: expected `;`, found `}}`\n", "x".repeat(300));
    let edit = r#"{"file_path": "/repo/src/a.rs", "old_string": "retries = 3", "new_string": "retries = 5"}"#;
    let history = vec![
        Message::user("raise the retries"),
        call("1", "Edit", edit),
        result("1", "Edit", &snippet, false),
        call("2", "Edit", edit),
        result("2", "Edit", &diagnostics, false),
        call("3", "Edit", edit),
        result("3", "Edit", &snippet, true),
        call("4", "Bash", r#"{"command": "cargo test > /repo/log.txt"}"#),
        result("4", "Bash", &snippet, false),
        call("5", "Read", r#"{"file_path": "/repo/src/a.rs"}"#),
        result("5", "Read", &snippet, false),
        Message::user("now test it"),
        call("6", "Edit", edit),
        result("6", "Edit", &snippet, false),
    ];
    // Pruned first, as in a summary request: the failure in output 4 is past the 200th character.
    let mut input = phosphor_prune::prune_messages(&history, 200);
    assert_eq!(brief_file_change_outputs(&mut input, &history, 11, 50), 1);
    let output = |at: usize| input[at].tool_results().next().unwrap().content.clone();
    assert_eq!(output(2), truncate_chars(&snippet, 50));
    // A reported failure, an error, a command and a read keep their output; so does the newest turn.
    for at in [4, 6, 8, 10, 13] {
        assert_eq!(output(at), truncate_chars(&history[at].tool_results().next().unwrap().content, 200));
    }
    assert_eq!(phosphor_prune::check_tool_pairing(&input), Ok(()));
    assert_eq!(brief_file_change_outputs(&mut input, &history, 11, 50), 0, "a second pass cuts nothing");
}

#[test]
fn files_keep_their_last_change_and_tools_are_recognised_by_name_and_shape() {
    let messages = vec![
        call("1", "read_file", r#"{"path": "src/lib.rs"}"#),
        call("2", "edit_file", r#"{"file_path": "src/main.rs", "old": "a", "new": "b"}"#),
        call("3", "read_file", r#"{"path": "src/main.rs"}"#),
        call("4", "multi_read", r#"{"paths": ["a.txt", "b.txt"]}"#),
        call("5", "fs", r#"{"file_path": "notes.md", "old_string": "x", "new_string": "y"}"#),
        call("6", "fs", r#"{"file_path": "new.md", "content": "hello"}"#),
        call(
            "7",
            "str_replace_based_edit_tool",
            r#"{"command": "create", "path": "c.py", "file_text": "x"}"#,
        ),
        call("8", "str_replace_based_edit_tool", r#"{"command": "view", "path": "d.py"}"#),
        call(
            "9",
            "apply_patch",
            r#"{"input": "*** Begin Patch\n*** Update File: e.rs\n@@\n*** Delete File: f.rs\n*** Add File: g.rs\n*** End Patch"}"#,
        ),
        call("10", "delete_file", r#"{"path": "a.txt"}"#),
        call("11", "broken", "not json"),
    ];
    let state = SessionState::collect(&messages);
    let expected = vec![
        ("src/lib.rs", FileOp::Read),
        ("src/main.rs", FileOp::Edited),
        ("b.txt", FileOp::Read),
        ("notes.md", FileOp::Edited),
        ("new.md", FileOp::Written),
        ("c.py", FileOp::Written),
        ("d.py", FileOp::Read),
        ("e.rs", FileOp::Edited),
        ("f.rs", FileOp::Deleted),
        ("g.rs", FileOp::Written),
        ("a.txt", FileOp::Deleted),
    ];
    pretty_assertions::assert_eq!(files(&state), expected);
    assert!(state.commands.is_empty(), "an editor's command is not a shell command: {:?}", state.commands);
}

#[test]
fn changed_files_carry_the_names_their_changes_define() {
    let edit = serde_json::json!({
        "file_path": "aider/repo.py",
        "old_string": "    def get_tracked_files(self):\n        files = []",
        "new_string": "    def get_head(self):\n        return None\n\n    def get_tracked_files(self):\n        files = []",
    });
    let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@ impl Repo {\n+    pub fn head(&self) {}\n\
                 @@ fn main() {\n-    run();\n*** Add File: src/b.rs\n+pub struct Store;\n*** Delete File: c.rs\n\
                 *** End Patch";
    let messages = vec![
        call("1", "Edit", &edit.to_string()),
        call("2", "Read", r#"{"file_path": "src/lib.rs"}"#),
        call("3", "Write", r#"{"file_path": "README.md", "content": "class names are case-sensitive"}"#),
        call("4", "apply_patch", &serde_json::json!({ "input": patch }).to_string()),
        call("5", "Write", r#"{"file_path": "gone.py", "content": "def f():\n    pass"}"#),
        call("6", "Bash", r#"{"command": "rm gone.py", "description": "def x(): remove it"}"#),
        call("7", "delete_file", r#"{"path": "gone.py"}"#),
        call("8", "Write", r#"{"file_path": "src/lib.rs", "content": "fn one() {}\nfn two() {}"}"#),
    ];
    let state = SessionState::collect(&messages);
    let names = |path: &str| state.names.get(path).cloned().unwrap_or_default();
    assert_eq!(names("aider/repo.py"), ["get_tracked_files", "get_head"]);
    assert_eq!(names("src/a.rs"), ["head", "main"]);
    assert_eq!(names("src/b.rs"), ["Store"]);
    // Prose is not code, a deleted file has no names left, and a command names nothing.
    for path in ["README.md", "gone.py", "c.rs"] {
        assert!(names(path).is_empty(), "{path}: {:?}", names(path));
    }
    assert_eq!(names("src/lib.rs"), ["one", "two"], "written after it was read");
    let text = state.render(10_000, &ApproxCounter);
    assert!(text.contains("- aider/repo.py (edited: get_tracked_files, get_head)\n"), "{text}");
    assert!(text.contains("- README.md (written)\n"), "{text}");
    pretty_assertions::assert_eq!(SessionState::parse(&text), state);

    // Across summaries: the newest names of a file, each once.
    let mut merged = SessionState::parse(&text);
    let again = serde_json::json!({"file_path": "aider/repo.py", "old_string": "def get_head(self):", "new_string": "def head(self):"});
    merged.merge(SessionState::collect(&[call("9", "Edit", &again.to_string())]));
    assert_eq!(merged.names["aider/repo.py"], ["get_tracked_files", "get_head", "head"]);
}
