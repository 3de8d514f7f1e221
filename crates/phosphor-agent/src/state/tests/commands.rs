//! Commands and tool errors, with their outcomes.

use super::*;

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
