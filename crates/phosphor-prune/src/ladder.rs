//! The last rungs of the overflow ladder, used when even aggressive pruning leaves a request too
//! large: blank the oldest tool outputs, then drop the oldest whole turns. Both keep the
//! tool-call pairing of a history that had it.

use std::borrow::Cow;

use phosphor_base::message::{Message, Part, Role, ToolResult};

use crate::turns::turn_starts;
use crate::{clone_result_meta, with_parts};

/// The content that replaces a tool output removed by [`omit_oldest_tool_outputs`].
pub const OMITTED_OUTPUT: &str = "[tool output omitted to fit the context window]";

/// Whether blanking `result` would make it shorter (false once it has been blanked).
fn omittable(result: &ToolResult) -> bool {
    result.content.len() > OMITTED_OUTPUT.len()
}

/// Replaces the content of the oldest `count` tool results with [`OMITTED_OUTPUT`] and returns
/// how many it replaced. Results no longer than that text (already omitted ones included) are
/// skipped, so calling it again moves on to newer results. Ids, names and `is_error` stay, so the
/// pairing is kept; a borrowed message that changes becomes owned without copying its outputs.
pub fn omit_oldest_tool_outputs(messages: &mut [Cow<'_, Message>], count: usize) -> usize {
    let mut omitted = 0;
    for message in messages.iter_mut() {
        if omitted == count {
            break;
        }
        let here = message.tool_results().filter(|result| omittable(result)).count().min(count - omitted);
        if here == 0 {
            continue;
        }
        let mut left = here;
        let mut omit = |result: &ToolResult| {
            let yes = left > 0 && omittable(result);
            if yes {
                left -= 1;
            }
            yes
        };
        match message {
            Cow::Owned(owned) => {
                for part in &mut owned.parts {
                    if let Part::ToolResult(result) = part
                        && omit(result)
                    {
                        result.content = OMITTED_OUTPUT.to_owned();
                    }
                }
            }
            Cow::Borrowed(borrowed) => {
                let parts = borrowed
                    .parts
                    .iter()
                    .map(|part| match part {
                        Part::ToolResult(result) if omit(result) => Part::ToolResult(ToolResult {
                            content: OMITTED_OUTPUT.to_owned(),
                            ..clone_result_meta(result)
                        }),
                        _ => part.clone(),
                    })
                    .collect();
                *message = Cow::Owned(with_parts(borrowed, parts));
            }
        }
        omitted += here;
    }
    omitted
}

/// Removes the oldest `turns` whole [turns](turn_starts) (a user message and everything up to
/// the next turn start) and returns how many messages it removed.
///
/// Never removes a message with `is_summary`, the turn holding the last user message, or
/// anything before the first turn start (the system prompt, a leading summary). Turns never split
/// a tool call from its result, so a history that keeps the pairing rule still does.
pub fn drop_oldest_turns(messages: &mut Vec<Cow<'_, Message>>, turns: usize) -> usize {
    let starts = turn_starts(messages);
    let Some(&first) = starts.first() else { return 0 };
    let last_user = messages.iter().rposition(|m| m.role == Role::User).unwrap_or(messages.len());
    let mut end = first;
    for (t, _) in starts.iter().enumerate().take(turns) {
        let turn_end = starts.get(t + 1).copied().unwrap_or(messages.len());
        if last_user < turn_end {
            break;
        }
        end = turn_end;
    }
    let before = messages.len();
    let mut index = 0;
    messages.retain(|message| {
        let keep = index < first || index >= end || message.is_summary;
        index += 1;
        keep
    });
    before - messages.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairing::check_tool_pairing;
    use crate::test_dsl::{parse, render};
    use pretty_assertions::assert_eq;

    fn borrowed(messages: &[Message]) -> Vec<Cow<'_, Message>> {
        messages.iter().map(Cow::Borrowed).collect()
    }

    fn check_drop(input: &str, turns: usize, expected: &str) {
        let messages = parse(input);
        let mut kept = borrowed(&messages);
        let removed = drop_oldest_turns(&mut kept, turns);
        assert_eq!(render(&kept), expected, "dropping {turns} turns of {input}");
        assert_eq!(removed, messages.len() - kept.len());
        if check_tool_pairing(&messages).is_ok() {
            assert_eq!(check_tool_pairing(&kept), Ok(()), "{input}");
        }
    }

    #[test]
    fn drops_whole_old_turns_but_never_the_last_prompt_or_a_summary() {
        check_drop("", 3, "");
        check_drop("S A", 3, "S A");
        check_drop("S U A U A", 0, "S U A U A");
        check_drop("S U A(c1) T(c1) A U A", 1, "S U A");
        check_drop("S U A U A U A", 1, "S U A U A");
        check_drop("S U A U A U A", 2, "S U A");
        check_drop("S U A U A U A", 9, "S U A");
        check_drop("SUM U A U", 1, "SUM U");
        // A summary inside a dropped turn stays.
        check_drop("S U A SUM U A U A", 2, "S SUM U A");
        // The last user message may sit inside a tool span: its turn stays whole.
        check_drop("U A U A(c1) U T(c1) A", 5, "U A(c1) U T(c1) A");
        check_drop("U A(c1) U T(c1) U A", 1, "U A");
    }

    #[test]
    fn omits_the_oldest_long_outputs_first() {
        let long = "o".repeat(OMITTED_OUTPUT.len() + 1);
        let short = "s".repeat(OMITTED_OUTPUT.len());
        let tool = |id: &str, content: &str| Message::tool_result(id, "read", content, false).with_id(id);
        let messages = vec![
            Message::user("go"),
            tool("c1", &short),
            tool("c2", &long),
            Message::new(
                Role::Tool,
                vec![
                    Part::ToolResult(ToolResult {
                        call_id: "c3".into(),
                        name: "read".into(),
                        content: long.clone(),
                        is_error: true,
                    }),
                    Part::ToolResult(ToolResult {
                        call_id: "c4".into(),
                        name: "read".into(),
                        content: long.clone(),
                        is_error: false,
                    }),
                ],
            ),
            tool("c5", &long),
        ];
        let mut history = borrowed(&messages);
        assert_eq!(omit_oldest_tool_outputs(&mut history, 2), 2);
        let mut expected = messages.clone();
        expected[2] = tool("c2", OMITTED_OUTPUT);
        let Part::ToolResult(c3) = &mut expected[3].parts[0] else { unreachable!() };
        c3.content = OMITTED_OUTPUT.to_owned();
        assert_eq!(history.iter().map(|m| m.as_ref().clone()).collect::<Vec<_>>(), expected);
        assert!(matches!(history[1], Cow::Borrowed(_)) && matches!(history[4], Cow::Borrowed(_)));

        // Again: the owned message is edited in place and the next outputs go.
        assert_eq!(omit_oldest_tool_outputs(&mut history, 5), 2);
        let Part::ToolResult(c4) = &mut expected[3].parts[1] else { unreachable!() };
        c4.content = OMITTED_OUTPUT.to_owned();
        expected[4] = tool("c5", OMITTED_OUTPUT);
        assert_eq!(history.iter().map(|m| m.as_ref().clone()).collect::<Vec<_>>(), expected);
        assert_eq!(omit_oldest_tool_outputs(&mut history, 5), 0);
    }
}
