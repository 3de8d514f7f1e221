//! Tool-call pairing: the invariant that every request sent to a model has a result for every
//! tool call and a call for every result, a checker for it, and a repair that restores it.

use std::borrow::{Borrow, Cow};
use std::collections::HashMap;

use phosphor_base::message::{Message, Part, Role, ToolCall};

use crate::with_parts;

/// The content of the error result [`repair_tool_pairing`] inserts for a call that has none.
pub const INTERRUPTED_RESULT: &str = "error: tool call was interrupted before it returned a result";

/// The first place where a history breaks the pairing rule (see [`check_tool_pairing`]).
/// `message` fields are indices into the checked slice.
///
/// Every violation is fixed by [`repair_tool_pairing`]; seeing one in a request about to be sent
/// means the caller skipped that step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PairingViolation {
    /// The assistant message `message` called `call_id`, and the tool messages right after it do
    /// not answer it (the call was interrupted, or its result landed later). Repair inserts an
    /// error result, or moves the late result up.
    #[error(
        "tool call {call_id:?} ({name}) in message {message} has no result in the tool messages right after it"
    )]
    MissingResult {
        /// The call's id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The index of the assistant message that made the call.
        message: usize,
    },
    /// The result in message `message` answers a call id that no earlier assistant message made
    /// (its call was compacted away, or the transcript was cut). Repair removes it.
    #[error(
        "tool result for {call_id:?} in message {message} answers no tool call of an earlier assistant message"
    )]
    OrphanResult {
        /// The id the result names.
        call_id: String,
        /// The index of the message holding the result.
        message: usize,
    },
    /// The result in message `message` answers a call that already has a result (or it sits in a
    /// message that is not a tool message right after the call). Repair removes it.
    #[error(
        "tool result for {call_id:?} in message {message} repeats a result of the call in message {call_message}"
    )]
    DuplicateResult {
        /// The id the result names.
        call_id: String,
        /// The index of the message holding the result.
        message: usize,
        /// The index of the latest assistant message that made a call with this id.
        call_message: usize,
    },
}

/// The calls of the assistant message whose run of tool messages is being read.
struct OpenCalls<'m> {
    message: usize,
    calls: Vec<(&'m ToolCall, bool)>,
}

impl OpenCalls<'_> {
    /// Marks the first unanswered call with `id` answered; false when there is none.
    fn answer(&mut self, id: &str) -> bool {
        match self.calls.iter_mut().find(|(call, answered)| !answered && call.id == id) {
            Some((_, answered)) => {
                *answered = true;
                true
            }
            None => false,
        }
    }

    fn first_missing(&self) -> Option<PairingViolation> {
        self.calls.iter().find(|(_, answered)| !answered).map(|(call, _)| PairingViolation::MissingResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            message: self.message,
        })
    }
}

/// `Ok` when `messages` keeps the pairing rule, else the first violation found walking forward
/// (a missing result is found where the tool messages after its call end).
///
/// The rule is as strict as the strictest provider (OpenAI rejects a request that breaks it):
/// the tool calls of an assistant message are answered by the run of [`Role::Tool`] messages
/// directly after it, each call by exactly one [`Part::ToolResult`] with its id. A tool result
/// anywhere else (after a user message, inside a user or assistant message, answering a call
/// twice or a call nobody made) is a violation. Only tool calls in assistant messages count.
pub fn check_tool_pairing<M: Borrow<Message>>(messages: &[M]) -> Result<(), PairingViolation> {
    let mut open: Option<OpenCalls<'_>> = None;
    // The latest assistant message that made each call id.
    let mut called: HashMap<&str, usize> = HashMap::new();
    for (i, message) in messages.iter().enumerate() {
        let message = message.borrow();
        if message.role != Role::Tool
            && let Some(violation) = open.take().and_then(|open| open.first_missing())
        {
            return Err(violation);
        }
        for result in message.tool_results() {
            if message.role == Role::Tool && open.as_mut().is_some_and(|open| open.answer(&result.call_id)) {
                continue;
            }
            return Err(match called.get(result.call_id.as_str()) {
                Some(&call_message) => PairingViolation::DuplicateResult {
                    call_id: result.call_id.clone(),
                    message: i,
                    call_message,
                },
                None => PairingViolation::OrphanResult { call_id: result.call_id.clone(), message: i },
            });
        }
        if message.role == Role::Assistant {
            let calls: Vec<_> = message.tool_calls().map(|call| (call, false)).collect();
            for (call, _) in &calls {
                called.insert(&call.id, i);
            }
            if !calls.is_empty() {
                open = Some(OpenCalls { message: i, calls });
            }
        }
    }
    match open.and_then(|open| open.first_missing()) {
        Some(violation) => Err(violation),
        None => Ok(()),
    }
}

/// Where a tool result goes in the repaired history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// It answers a call of the assistant message whose tool run it is in: it stays.
    Stays,
    /// It answers a call of another assistant message, or sits outside a tool message: it moves
    /// to the end of its call's tool run (listed in [`Plan::moves`]).
    Moves,
    /// It answers no call that is still open: it is removed.
    Removed,
}

/// What [`repair_tool_pairing`] will do, worked out before any message is moved.
struct Plan {
    roles: Vec<Role>,
    /// Whether each message is an assistant message with tool calls.
    opens_run: Vec<bool>,
    /// The fate of each message's tool results, in part order (empty for most messages).
    fates: Vec<Vec<Fate>>,
    /// For each assistant message: the (message, part) of results that move to its run.
    moves: Vec<Vec<(usize, usize)>>,
    /// For each assistant message: the error results for its calls that nothing answers.
    interrupted: Vec<Vec<Message>>,
}

impl Plan {
    fn new(messages: &[Cow<'_, Message>]) -> Plan {
        let n = messages.len();
        let mut plan = Plan {
            roles: Vec::with_capacity(n),
            opens_run: Vec::with_capacity(n),
            fates: Vec::with_capacity(n),
            moves: vec![Vec::new(); n],
            interrupted: vec![Vec::new(); n],
        };
        // Unanswered calls by id, latest last: (message, index among its calls).
        let mut pending: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
        let mut answered: Vec<Vec<bool>> = vec![Vec::new(); n];
        // The assistant message whose run of tool messages we are in.
        let mut run_of: Option<usize> = None;
        for (i, message) in messages.iter().enumerate() {
            if message.role != Role::Tool {
                run_of = None;
            }
            let mut fates = Vec::new();
            for (j, part) in message.parts.iter().enumerate() {
                let Part::ToolResult(result) = part else { continue };
                let call = pending.get_mut(result.call_id.as_str()).and_then(Vec::pop);
                fates.push(match call {
                    None => Fate::Removed,
                    Some((k, c)) => {
                        answered[k][c] = true;
                        if message.role == Role::Tool && run_of == Some(k) {
                            Fate::Stays
                        } else {
                            plan.moves[k].push((i, j));
                            Fate::Moves
                        }
                    }
                });
            }
            plan.fates.push(fates);
            let mut opens = false;
            if message.role == Role::Assistant {
                for (c, call) in message.tool_calls().enumerate() {
                    pending.entry(&call.id).or_default().push((i, c));
                    answered[i].push(false);
                    opens = true;
                }
                if opens {
                    run_of = Some(i);
                }
            }
            plan.roles.push(message.role);
            plan.opens_run.push(opens);
        }
        for (k, message) in messages.iter().enumerate() {
            for (call, _) in message.tool_calls().zip(&answered[k]).filter(|(_, answered)| !**answered) {
                let mut result = Message::tool_result(&call.id, &call.name, INTERRUPTED_RESULT, true);
                result.session_id.clone_from(&message.session_id);
                result.created_at = message.created_at;
                result.updated_at = message.updated_at;
                plan.interrupted[k].push(result);
            }
        }
        plan
    }
}

/// Restores the pairing rule: afterwards [`check_tool_pairing`] passes.
///
/// - A call without a result gets an error result ([`INTERRUPTED_RESULT`], `is_error`, the
///   call's id and name) inserted after the tool messages that follow its assistant message.
///   The inserted message is request-only: its `id` is empty and it must not be stored.
/// - A result that answers an earlier call but sits out of place (after a user message that was
///   stored between the call and its result, or inside a non-tool message) moves to the end of
///   its call's tool messages, ahead of any inserted error results.
/// - A result whose call id appears in no earlier assistant message, or whose call already has a
///   result, is removed; a message left empty by that is removed too.
///
/// A result answers the latest earlier call with its id that is still open, so histories from
/// models that reuse ids (`call_0` every turn) pair correctly. A history that already keeps the
/// rule is returned as it was, without a copy; otherwise only the messages that change are copied.
pub fn repair_tool_pairing<'a>(messages: Vec<Cow<'a, Message>>) -> Vec<Cow<'a, Message>> {
    if check_tool_pairing(&messages).is_ok() {
        return messages;
    }
    let plan = Plan::new(&messages);
    let n = messages.len();
    let mut slots: Vec<Option<Cow<'a, Message>>> = messages.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(n + plan.interrupted.iter().map(Vec::len).sum::<usize>());
    let mut run_of: Option<usize> = None;
    for i in 0..n {
        if plan.roles[i] != Role::Tool
            && let Some(k) = run_of.take()
        {
            close_run(&plan, k, &mut slots, &mut out);
        }
        if let Some(message) = slots[i].take()
            && let Some(kept) = keep_staying(message, &plan.fates[i])
        {
            out.push(kept);
        }
        if plan.opens_run[i] {
            run_of = Some(i);
        }
    }
    if let Some(k) = run_of {
        close_run(&plan, k, &mut slots, &mut out);
    }
    out
}

/// Appends the results that move to assistant message `k`'s run, then its interrupted calls.
fn close_run<'a>(
    plan: &Plan,
    k: usize,
    slots: &mut [Option<Cow<'a, Message>>],
    out: &mut Vec<Cow<'a, Message>>,
) {
    let moves = &plan.moves[k];
    let mut start = 0;
    while start < moves.len() {
        let i = moves[start].0;
        let end = start + moves[start..].iter().take_while(|(m, _)| *m == i).count();
        let whole =
            plan.roles[i] == Role::Tool && slots[i].as_ref().is_some_and(|m| m.parts.len() == end - start);
        if whole {
            out.extend(slots[i].take());
        } else if let Some(source) = slots[i].as_deref() {
            let parts = moves[start..end].iter().map(|&(_, j)| source.parts[j].clone()).collect();
            let mut moved = with_parts(source, parts);
            if moved.role != Role::Tool {
                moved.role = Role::Tool;
                moved.is_summary = false;
                moved.summarized_until = None;
                moved.name = None;
                moved.model = None;
                moved.usage = None;
            }
            out.push(Cow::Owned(moved));
        }
        start = end;
    }
    out.extend(plan.interrupted[k].iter().cloned().map(Cow::Owned));
}

/// `message` without the tool results that move or are removed; `None` when nothing is left.
fn keep_staying<'a>(message: Cow<'a, Message>, fates: &[Fate]) -> Option<Cow<'a, Message>> {
    if fates.iter().all(|fate| *fate == Fate::Stays) {
        return Some(message);
    }
    let mut fates = fates.iter();
    let parts: Vec<Part> = message
        .parts
        .iter()
        .filter(|part| !matches!(part, Part::ToolResult(_)) || fates.next() == Some(&Fate::Stays))
        .cloned()
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(Cow::Owned(with_parts(&message, parts)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dsl::{parse, render};
    use pretty_assertions::assert_eq;

    fn check_repair(input: &str, expected: &str) {
        let messages = parse(input);
        let repaired = repair_tool_pairing(messages.iter().map(Cow::Borrowed).collect());
        assert_eq!(render(&repaired), expected, "repairing {input}");
        assert_eq!(check_tool_pairing(&repaired), Ok(()), "{input} repaired to {expected}");
    }

    #[test]
    fn repairs_every_kind_of_break() {
        // Already valid: unchanged.
        check_repair("S U A(c1,c2) T(c1) T(c2) A U A", "S U A(c1,c2) T(c1) T(c2) A U A");
        check_repair("U A(c1,c2) T(c2,c1) A", "U A(c1,c2) T(c2,c1) A");
        // Interrupted calls get an error result after the existing ones.
        check_repair("U A(c1,c2) T(c1) U", "U A(c1,c2) T(c1) E(c2) U");
        check_repair("U A(c1,c2)", "U A(c1,c2) E(c1) E(c2)");
        check_repair("U A(c1) A(c2) T(c2)", "U A(c1) E(c1) A(c2) T(c2)");
        // Orphans and duplicates are removed.
        check_repair("T(c9) U A", "U A");
        check_repair("U A(c1) T(c1) T(c1) A", "U A(c1) T(c1) A");
        check_repair("U A(c1) T(c1,c9) A", "U A(c1) T(c1) A");
        check_repair("U A(c1) T(c1) U T(c1) A", "U A(c1) T(c1) U A");
        check_repair("U T(c1) A(c1) T(c1)", "U A(c1) T(c1)");
        // A late result moves up to its call, ahead of the error results.
        check_repair("U A(c1,c2) U T(c1) A", "U A(c1,c2) T(c1) E(c2) U A");
        check_repair("U A(c1,c2) T(c2) U T(c1) A", "U A(c1,c2) T(c2) T(c1) U A");
        check_repair("U A(c1) U(c1) A", "U A(c1) T(c1) U A");
        check_repair("U A(c1) A(c2) T(c1,c2)", "U A(c1) T(c1) A(c2) T(c2)");
        // Consecutive assistant messages each get their own error results.
        check_repair("U A(c1) A(c2) A(c3)", "U A(c1) E(c1) A(c2) E(c2) A(c3) E(c3)");
        // Reused ids: a result answers the latest open call with its id.
        check_repair("U A(c0) T(c0) U A(c0) T(c0)", "U A(c0) T(c0) U A(c0) T(c0)");
        check_repair("U A(c0) U A(c0) T(c0)", "U A(c0) E(c0) U A(c0) T(c0)");
        check_repair("U A(c0,c0) T(c0)", "U A(c0,c0) T(c0) E(c0)");
        // Summaries and tool messages without results are left alone.
        check_repair("SUM T U A(c1)", "SUM T U A(c1) E(c1)");
    }

    #[test]
    fn inserted_results_name_the_call_and_keep_the_rest_borrowed() {
        let mut messages = parse("U A(c1,c2) T(c1) U");
        messages[1].session_id = "s1".into();
        messages[1].created_at = 42;
        let repaired = repair_tool_pairing(messages.iter().map(Cow::Borrowed).collect());
        let mut expected = Message::tool_result("c2", "tool_c2", INTERRUPTED_RESULT, true);
        expected.session_id = "s1".into();
        expected.created_at = 42;
        assert_eq!(repaired[3].as_ref(), &expected);
        for (i, j) in [(0, 0), (1, 1), (2, 2), (4, 3)] {
            assert!(
                matches!(&repaired[i], Cow::Borrowed(m) if std::ptr::eq(*m, &messages[j])),
                "message {i}"
            );
        }
    }

    #[test]
    fn a_moved_result_from_a_user_message_becomes_a_tool_message() {
        let messages = parse("U A(c1) U(c1)");
        let repaired = repair_tool_pairing(messages.iter().map(Cow::Borrowed).collect());
        let mut moved = with_parts(&messages[2], vec![messages[2].parts[1].clone()]);
        moved.role = Role::Tool;
        let mut user = messages[2].clone();
        user.parts.truncate(1);
        assert_eq!(
            repaired.into_iter().map(Cow::into_owned).collect::<Vec<_>>(),
            vec![messages[0].clone(), messages[1].clone(), moved, user]
        );
    }

    fn check_violation(input: &str, expected: Result<(), PairingViolation>) {
        assert_eq!(check_tool_pairing(&parse(input)), expected, "{input}");
    }

    #[test]
    fn reports_the_first_violation() {
        use PairingViolation::*;
        let missing =
            |id: &str, message| MissingResult { call_id: id.into(), name: format!("tool_{id}"), message };
        check_violation("", Ok(()));
        check_violation("S U A U A", Ok(()));
        check_violation("U A(c1) T(c1) T", Ok(()));
        check_violation("U A(c1,c2) T(c1)", Err(missing("c2", 1)));
        check_violation("U A(c1) U T(c1)", Err(missing("c1", 1)));
        check_violation("U A(c1) A(c2) T(c2)", Err(missing("c1", 1)));
        check_violation("U A(c1) U(c1)", Err(missing("c1", 1)));
        check_violation("T(c1) U", Err(OrphanResult { call_id: "c1".into(), message: 0 }));
        check_violation("U A(c1) T(c2)", Err(OrphanResult { call_id: "c2".into(), message: 2 }));
        check_violation(
            "U A(c1) T(c1) T(c1)",
            Err(DuplicateResult { call_id: "c1".into(), message: 3, call_message: 1 }),
        );
        check_violation(
            "U A(c1) T(c1) U(c1)",
            Err(DuplicateResult { call_id: "c1".into(), message: 3, call_message: 1 }),
        );
    }

    #[test]
    fn violations_read_as_sentences() {
        let violation = check_tool_pairing(&parse("U A(c1) U")).err().map(|v| v.to_string());
        assert_eq!(
            violation.as_deref(),
            Some("tool call \"c1\" (tool_c1) in message 1 has no result in the tool messages right after it")
        );
    }
}
