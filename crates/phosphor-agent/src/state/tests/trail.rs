//! The requests, the rendered trail, its budget, and merging with an older trail.

use super::*;

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
