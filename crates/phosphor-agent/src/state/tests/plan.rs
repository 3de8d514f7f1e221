//! The plan: the latest one written, whatever tool wrote it.

use super::*;

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
