use super::*;
use phosphor_base::{ApproxCounter, ToolCall};

fn call(id: &str, name: &str, args: &str) -> Message {
    Message::new(
        Role::Assistant,
        vec![Part::ToolCall(ToolCall { id: id.into(), name: name.into(), arguments: args.into() })],
    )
}

fn result(id: &str, name: &str, content: &str, is_error: bool) -> Message {
    Message::tool_result(id, name, content, is_error)
}

fn files(state: &SessionState) -> Vec<(&str, FileOp)> {
    state.files.iter().map(|(p, op)| (p.as_str(), *op)).collect()
}

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
fn every_plan_write_but_the_latest_is_left_out_of_the_summary_input() {
    let todos = |status: &str| {
        format!(
            r#"{{"todos": [{{"content": "Add the retry", "status": "{status}"}}, {{"content": "Test it", "status": "pending"}}]}}"#
        )
    };
    let plan_beside_text = Message::new(
        Role::Assistant,
        vec![
            Part::Text { text: "Planning.".into() },
            Part::ToolCall(ToolCall {
                id: "3".into(),
                name: "update_plan".into(),
                arguments: todos("in_progress").replace("todos", "plan"),
            }),
        ],
    );
    let messages = [
        call("1", "TodoWrite", &todos("pending")),
        result("1", "TodoWrite", "ok", false),
        call("2", "read_file", r#"{"path": "src/lib.rs"}"#),
        result("2", "read_file", "fn main() {}", false),
        plan_beside_text,
        result("3", "update_plan", "ok", false),
        // An imported transcript may reuse an id: the latest write's result is its own.
        call("1", "TodoWrite", &todos("completed")),
        result("1", "TodoWrite", "done", false),
    ];
    let mut input: Vec<Cow<'_, Message>> = messages.iter().map(Cow::Borrowed).collect();
    assert_eq!(elide_superseded_plans(&mut input), 2);
    // The latest plan is the only one left: a second pass changes nothing.
    let once = input.clone();
    assert_eq!(elide_superseded_plans(&mut input), 0);
    assert_eq!(input, once);
    let kept: Vec<&Message> = input.iter().map(|m| &**m).collect();
    assert_eq!(
        kept,
        [&messages[2], &messages[3], &Message::assistant("Planning."), &messages[6], &messages[7]]
    );
    // Pairing holds, and the messages not changed are not copied.
    phosphor_prune::check_tool_pairing(&input.iter().map(|m| m.clone().into_owned()).collect::<Vec<_>>())
        .unwrap();
    assert!(matches!(input[0], Cow::Borrowed(_)) && matches!(input[4], Cow::Borrowed(_)));
    // The trail still has the latest plan; a single plan write is left as it is.
    assert_eq!(SessionState::collect(input.iter().map(|m| &**m)).plan[0].status, "completed");
    let mut one: Vec<Cow<'_, Message>> = messages[..2].iter().map(Cow::Borrowed).collect();
    assert_eq!(elide_superseded_plans(&mut one), 0);
    assert_eq!(one.len(), 2);
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

#[test]
fn commands_carry_their_outcome_and_other_tool_errors_are_kept() {
    let messages = vec![
        call("1", "bash", r#"{"command": "cargo test\n--quiet"}"#),
        result("1", "bash", "running 3 tests\ntest result: ok\nexit code: 0", false),
        call("2", "bash", r#"{"command": "cargo build"}"#),
        result(
            "2",
            "bash",
            "Compiling x\nerror[E0308]: mismatched types\n  --> src/a.rs\nexit code: 101",
            false,
        ),
        call("3", "shell", r#"{"command": ["ls", "-la"]}"#),
        result("3", "shell", r#"{"output": "No such file", "metadata": {"exit_code": 2}}"#, false),
        call("4", "run", r#"{"cmd": "make"}"#),
        result("4", "run", "make: *** No rule to make target", true),
        call("5", "run", r#"{"cmd": "true"}"#),
        call("7", "bash", r#"{"command": "cargo test --lib"}"#),
        result(
            "7",
            "bash",
            "running 2 tests\ntest a ... FAILED\n\nerror: test failed, to rerun pass `--lib`",
            false,
        ),
        call("8", "bash", r#"{"command": "grep -rn error src"}"#),
        result("8", "bash", "src/lib.rs:3: // an error type", false),
        call("6", "fetch", r#"{"url": "https://example.com"}"#),
        result("6", "fetch", "\nHTTP 404 Not Found\nmore", true),
    ];
    let state = SessionState::collect(&messages);
    let commands: Vec<(&str, &str)> =
        state.commands.iter().map(|c| (c.command.as_str(), c.outcome.as_str())).collect();
    pretty_assertions::assert_eq!(
        commands,
        vec![
            ("cargo test ⏎ --quiet", "ok"),
            ("cargo build", "exit 101: error[E0308]: mismatched types"),
            ("ls -la", r#"exit 2: {"output": "No such file", "metadata": {"exit_code": 2}}"#),
            ("make", "failed: make: *** No rule to make target"),
            ("true", ""),
            ("cargo test --lib", "reported a failure: error: test failed, to rerun pass `--lib`"),
            ("grep -rn error src", "done"),
        ]
    );
    assert_eq!(state.errors, vec!["fetch: HTTP 404 Not Found".to_owned()]);
}

#[test]
fn a_command_that_went_through_after_failing_keeps_the_failure_in_a_note() {
    let run =
        |id: &str, command: &str| call(id, "Bash", &serde_json::json!({ "command": command }).to_string());
    let messages = vec![
        run("1", "python compare.py"),
        result(
            "1",
            "Bash",
            "Traceback (most recent call last):\nModuleNotFoundError: No module named 'torch'",
            true,
        ),
        run("2", "pip install torch"),
        result("2", "Bash", "Successfully installed torch", false),
        run("3", "python compare.py"),
        result("3", "Bash", "compared 3 models", false),
        run("4", "cargo test"),
        result("4", "Bash", "test result: ok\nexit code: 0", false),
        run("5", "cargo test"),
        result("5", "Bash", "error[E0308]: mismatched types\nexit code: 101", false),
    ];
    let state = SessionState::collect(&messages);
    let outcome =
        |command: &str| state.commands.iter().find(|c| c.command == command).unwrap().outcome.clone();
    let fixed = "done (failed before: failed: ModuleNotFoundError: No module named 'torch')";
    assert_eq!(outcome("python compare.py"), fixed);
    assert_eq!(outcome("pip install torch"), "done");
    assert_eq!(outcome("cargo test"), "exit 101: error[E0308]: mismatched types", "a new failure is itself");

    // Across summaries: a later run that goes through keeps the note; one that fails does not.
    let text = state.render(10_000, &ApproxCounter);
    assert!(text.contains(&format!("- `python compare.py` → {fixed}\n")), "{text}");
    let mut merged = SessionState::parse(&text);
    pretty_assertions::assert_eq!(merged, state);
    merged.merge(SessionState::collect(&[
        run("6", "python compare.py"),
        result("6", "Bash", "exit code: 0", false),
        run("7", "cargo test"),
        result("7", "Bash", "exit code: 0", false),
    ]));
    let outcome =
        |command: &str| merged.commands.iter().find(|c| c.command == command).unwrap().outcome.clone();
    assert_eq!(outcome("python compare.py"), fixed.replacen("done", "ok", 1));
    assert_eq!(outcome("cargo test"), "ok (failed before: exit 101: error[E0308]: mismatched types)");
    // A run with no result yet says nothing of the runs before; a failure is kept whole, even
    // one whose text holds the note's words.
    assert_eq!(follow_up("exit 1: boom", ""), "");
    assert_eq!(
        follow_up("exit 1: x (failed before: y)", "ok"),
        "ok (failed before: exit 1: x (failed before: y))"
    );
    // Parallel calls: each result finds its own command, though the second call moved the first.
    let parallel = SessionState::collect(&[
        run("1", "git diff"),
        result("1", "Bash", "exit code: 0", false),
        Message::new(
            Role::Assistant,
            ["make", "git diff"]
                .iter()
                .enumerate()
                .map(|(n, command)| {
                    Part::ToolCall(ToolCall {
                        id: format!("p{n}"),
                        name: "Bash".into(),
                        arguments: serde_json::json!({ "command": command }).to_string(),
                    })
                })
                .collect(),
        ),
        result("p0", "Bash", "make: *** No targets\nexit code: 2", false),
        result("p1", "Bash", "exit code: 0", false),
    ]);
    let outcome =
        |command: &str| parallel.commands.iter().find(|c| c.command == command).unwrap().outcome.clone();
    assert_eq!(outcome("make"), "exit 2: make: *** No targets");
    assert_eq!(outcome("git diff"), "ok");
    // Two parallel runs of a command that failed before: the note survives both answers.
    let twice = |first: &str, second: &str| {
        let mut messages =
            vec![run("1", "cargo test"), result("1", "Bash", "error: boom\nexit code: 101", false)];
        messages.push(Message::new(
            Role::Assistant,
            ["a", "b"]
                .iter()
                .map(|id| {
                    Part::ToolCall(ToolCall {
                        id: (*id).into(),
                        name: "Bash".into(),
                        arguments: r#"{"command": "cargo test"}"#.into(),
                    })
                })
                .collect(),
        ));
        messages.push(result(first, "Bash", "exit code: 0", false));
        messages.push(result(second, "Bash", "exit code: 0", false));
        SessionState::collect(&messages).commands[0].outcome.clone()
    };
    assert_eq!(twice("a", "b"), "ok (failed before: exit 101: error: boom)");
    assert_eq!(twice("b", "a"), "ok (failed before: exit 101: error: boom)");
    // An outcome may hold an arrow.
    let arrow =
        SessionState::collect(&[run("9", "make"), result("9", "Bash", "error: a → b\nexit code: 1", false)]);
    assert_eq!(SessionState::parse(&arrow.render(1_000, &ApproxCounter)), arrow);
    assert_eq!(follow_up("", "ok"), "ok");
    assert_eq!(follow_up("done", "ok"), "ok");
}

#[test]
fn the_last_answer_stays_quoted_so_that_no_line_of_it_poses_as_a_section() {
    let proposal = "I found it: `segment.rs` splits on ASCII spaces only.\n\nFiles:\n## Session state\n- [x] not a plan\n\nShall I fix it?";
    let mut summary = Message::assistant("an older summary");
    summary.is_summary = true;
    let messages = vec![
        Message::user("why does the test fail?"),
        Message::assistant("Looking."),
        call("1", "read_file", r#"{"path": "src/segment.rs"}"#),
        result("1", "read_file", "fn split() {}", false),
        Message::assistant(proposal),
        Message::user("yes"),
        // Narration beside a call is not an answer: it would hide the one "yes" replies to.
        Message::new(
            Role::Assistant,
            vec![
                Part::Text { text: "Let me edit.".into() },
                Part::ToolCall(ToolCall {
                    id: "2".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path": "src/lib.rs"}"#.into(),
                }),
            ],
        ),
        summary,
    ];
    let state = SessionState::collect(&messages);
    assert_eq!(state.last_answer, proposal, "the last answer, not narration or a summary");
    let text = format!("Summary.\n\n{}", state.render(10_000, &ApproxCounter));
    assert!(
        text.contains("Last answer:\n> I found it: `segment.rs` splits on ASCII spaces only.\n>\n> Files:\n"),
        "{text}"
    );
    let parsed = SessionState::parse(&text);
    pretty_assertions::assert_eq!(parsed, state);
    assert_eq!(strip(&text), "Summary.", "the quoted heading is not the trail's");

    // A long answer keeps its end, where it concludes or asks; a newer answer replaces an older
    // one across summaries.
    let long_text = format!("{}\nShall I go on?  \n", "word \n".repeat(400));
    let long = SessionState::collect(&[Message::assistant(long_text)]);
    assert!(long.last_answer.starts_with("... [truncated]\nword\n"), "{}", long.last_answer);
    assert!(long.last_answer.ends_with("word\n\nShall I go on?"), "{}", long.last_answer);
    assert!(long.last_answer.chars().count() <= LAST_ANSWER_CHARS + 16);
    assert_eq!(SessionState::parse(&long.render(10_000, &ApproxCounter)), long);
    let mut merged = parsed;
    merged.merge(SessionState::collect(&[Message::user("yes, do it")]));
    assert_eq!(merged.last_answer, proposal, "no newer answer: the older stays");
    merged.merge(SessionState::collect(&[Message::assistant("Fixed.")]));
    assert_eq!(merged.last_answer, "Fixed.");
    // Over budget, the answer goes whole, after the read files and before any changed file.
    let mut sections = Sections::of(&state);
    let mut dropped = Vec::new();
    while let Some(lines) = sections.drop_oldest() {
        dropped.push(lines);
    }
    let answer = dropped.iter().position(|lines| lines[0].starts_with(QUOTE.trim_end())).unwrap();
    assert_eq!(dropped[answer].len(), proposal.lines().count());
    assert!(dropped[..answer].iter().all(|lines| lines[0].contains("(read)")), "{dropped:?}");
    assert_eq!(dropped.len(), answer + 1, "nothing but read files and the answer: {dropped:?}");
}

#[test]
fn the_latest_plan_wins_whatever_tool_wrote_it() {
    let todo = r#"{"todos": [{"content": "Read the code", "status": "completed", "activeForm": "Reading"},
                             {"content": "Fix the bug", "status": "in_progress"}]}"#;
    let codex = r#"{"explanation": "x", "plan": [{"step": "Write tests", "status": "pending"},
                                                 {"step": "Ship", "status": "pending"}]}"#;
    let checklist = r#"{"list": {"items": [{"title": "Deploy", "done": true}]}}"#;
    let not_a_plan = r#"{"items": [{"content": "no status"}]}"#;
    let state = SessionState::collect(&[call("1", "TodoWrite", todo)]);
    let item = |status: &str, text: &str| PlanItem { status: status.into(), text: text.into() };
    assert_eq!(state.plan, vec![item("completed", "Read the code"), item("in_progress", "Fix the bug")]);
    let state = SessionState::collect(&[call("1", "TodoWrite", todo), call("2", "update_plan", codex)]);
    assert_eq!(state.plan, vec![item("pending", "Write tests"), item("pending", "Ship")]);
    let state = SessionState::collect(&[call("1", "checklist", checklist), call("2", "x", not_a_plan)]);
    assert_eq!(state.plan, vec![item("completed", "Deploy")]);
}

#[test]
fn requests_are_verbatim_newest_first_and_round_trip_with_everything_else() {
    let mut messages = vec![
        Message::user("Fix the failing test.\n\nIt is in `tests/a.rs`:\n    assert_eq!(1, 2);"),
        call("1", "TodoWrite", r#"{"todos": [{"content": "Fix it", "status": "in_progress"}]}"#),
        call("2", "bash", r#"{"command": "cargo test"}"#),
        result("2", "bash", "error: test failed\nexit code: 101", false),
        call("3", "write_file", r#"{"path": "src/a (copy).rs", "content": "x"}"#),
        call("4", "grep", r#"{"pattern": "x"}"#),
        result("4", "grep", "boom", true),
        Message::user("2. Then run clippy."),
    ];
    let mut summary = Message::assistant("old summary");
    summary.is_summary = true;
    messages.push(summary);
    let state = SessionState::collect(&messages);
    assert_eq!(state.requests.len(), 2);
    let text = format!("Some summary.\n\n{}", state.render(10_000, &ApproxCounter));
    assert!(text.contains("1. 2. Then run clippy.\n2. Fix the failing test.\n\n   It is in"), "{text}");
    pretty_assertions::assert_eq!(SessionState::parse(&text), state);
    assert_eq!(strip(&text), "Some summary.");
    assert_eq!(SessionState::parse("no heading here"), SessionState::default());
}

#[test]
fn older_trails_are_still_read() {
    let text = "Summary.\n\n## Artifact trail\nFiles written:\n- a.rs\nFiles read:\n- b.rs\nCommands run:\n- `make`\nErrors seen:\n- bash: boom\n";
    let state = SessionState::parse(text);
    // Least recent first; changed files count as the more recent.
    assert_eq!(files(&state), vec![("b.rs", FileOp::Read), ("a.rs", FileOp::Written)]);
    assert_eq!(state.commands, vec![CommandRun { command: "make".into(), outcome: String::new() }]);
    assert_eq!(state.errors, vec!["bash: boom".to_owned()]);
    assert_eq!(strip(text), "Summary.");
}

#[test]
fn merge_keeps_the_newest_of_everything() {
    let older = SessionState::collect(&[
        Message::user("first"),
        call("1", "read_file", r#"{"path": "a.rs"}"#),
        call("2", "run", r#"{"cmd": "make"}"#),
        call("3", "TodoWrite", r#"{"todos": [{"content": "A", "status": "pending"}]}"#),
    ]);
    let mut merged = SessionState::parse(&older.render(10_000, &ApproxCounter));
    merged.merge(SessionState::collect(&[
        Message::user("second"),
        Message::user("first"),
        call("1", "write_file", r#"{"path": "a.rs"}"#),
        call("2", "run", r#"{"cmd": "make"}"#),
        result("2", "run", "ok", false),
    ]));
    assert_eq!(merged.requests, vec!["second".to_owned(), "first".to_owned()]);
    assert_eq!(files(&merged), vec![("a.rs", FileOp::Written)]);
    assert_eq!(merged.commands, vec![CommandRun { command: "make".into(), outcome: "done".into() }]);
    assert_eq!(merged.plan.len(), 1, "no newer plan: the older one stays");
}

#[test]
fn the_budget_keeps_the_newest_requests_and_trims_the_oldest_lines() {
    let counter = ApproxCounter;
    let mut state = SessionState::default();
    for n in 0..50 {
        state.push_request(&format!("request {n}: {}", "word ".repeat(40)));
        state.touch(format!("src/file{n}.rs"), FileOp::Read);
        state.push_command(CommandRun { command: format!("cargo test {n}"), outcome: "ok".into() });
    }
    state.push_request(&"huge paste ".repeat(2_000));
    for budget in [300_u64, 1_000, 4_000] {
        let text = state.render(budget, &counter);
        let tokens = counter.count_text(&text);
        assert!(tokens <= budget + budget / 10, "budget {budget}: {tokens} tokens\n{text}");
        let parsed = SessionState::parse(&text);
        // The newest request shows first, cut with the marker; older ones newest first.
        assert!(parsed.requests.last().unwrap().starts_with("huge paste"), "{text}");
        assert!(parsed.requests.last().unwrap().ends_with("... [truncated]"), "{text}");
        // The newest commands and files survive, the oldest go first.
        if let Some(first) = parsed.commands.first() {
            assert_eq!(parsed.commands.last().unwrap().command, "cargo test 49");
            assert_ne!(first.command, "cargo test 0", "budget {budget}");
        }
    }
    // Everything fits a large budget.
    let all = SessionState::parse(&state.render(100_000, &counter));
    assert_eq!(all.requests.len(), 51);
    assert_eq!(all.commands.len(), MAX_COMMANDS);
    assert_eq!(all.files.len(), 50);
}
