//! Assistant prose cut for a summarizer: in chat-heavy coding sessions (aider's, for one) the
//! assistant's explanations are most of the transcript once tool traffic is pruned, and the
//! summarizer needs what each answer set out to do more than every sentence of it. What the
//! user asked is never cut here, and neither is the newest answer, where the work stands.

use std::borrow::Cow;

use phosphor_core::message::{Message, Part, Role};

use crate::{truncate_chars, with_parts};

/// Cuts the text and reasoning of every assistant message in `messages[..before]` to its first
/// `max_chars` characters plus [`TRUNCATION_MARKER`](crate::TRUNCATION_MARKER) (as
/// [`truncate_chars`] does: idempotent, never splitting a character) and returns how many parts it
/// cut. User, system and tool messages, summaries, tool calls and everything from `before` on are
/// left alone, so the pairing of tool calls and results is untouched.
pub fn prune_assistant_prose(messages: &mut [Cow<'_, Message>], before: usize, max_chars: usize) -> usize {
    let before = before.min(messages.len());
    let mut cut = 0;
    for message in &mut messages[..before] {
        if message.role != Role::Assistant || message.is_summary {
            continue;
        }
        let long = |text: &str| matches!(truncate_chars(text, max_chars), Cow::Owned(_));
        let any_long = message.parts.iter().any(|part| match part {
            Part::Text { text } | Part::Reasoning { text } => long(text),
            _ => false,
        });
        if !any_long {
            continue;
        }
        let parts = message
            .parts
            .iter()
            .map(|part| match part {
                Part::Text { text } if long(text) => {
                    cut += 1;
                    Part::Text { text: truncate_chars(text, max_chars).into_owned() }
                }
                Part::Reasoning { text } if long(text) => {
                    cut += 1;
                    Part::Reasoning { text: truncate_chars(text, max_chars).into_owned() }
                }
                other => other.clone(),
            })
            .collect();
        *message = Cow::Owned(with_parts(message, parts));
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TRUNCATION_MARKER, check_tool_pairing};
    use phosphor_core::message::ToolCall;
    use proptest::prelude::*;

    fn history(answer: &str) -> Vec<Message> {
        let call =
            ToolCall { id: "c1".into(), name: "edit_file".into(), arguments: r#"{"path":"a.rs"}"#.into() };
        vec![
            Message::user("u".repeat(500)),
            Message::new(Role::Assistant, vec![Part::Text { text: answer.into() }, Part::ToolCall(call)]),
            Message::tool_result("c1", "edit_file", "ok", false),
            Message { is_summary: true, ..Message::assistant("s".repeat(500)) },
            Message::assistant(answer),
        ]
    }

    #[test]
    fn cuts_older_answers_only_and_keeps_the_rest() {
        let answer = "é".repeat(300);
        let history = history(&answer);
        let mut input: Vec<Cow<'_, Message>> = history.iter().map(Cow::Borrowed).collect();
        assert_eq!(prune_assistant_prose(&mut input, 4, 100), 1);
        assert_eq!(input[1].text_content(), format!("{}{TRUNCATION_MARKER}", "é".repeat(100)));
        assert_eq!(input[1].tool_calls().count(), 1, "the call stays");
        for at in [0, 2, 3, 4] {
            assert!(matches!(input[at], Cow::Borrowed(_)), "message {at} is left alone");
        }
        assert_eq!(check_tool_pairing(&input), Ok(()));
        assert_eq!(prune_assistant_prose(&mut input, 4, 100), 0, "a second pass cuts nothing");
    }

    proptest! {
        #[test]
        fn never_longer_idempotent_and_paired(text in "\\PC{0,400}", max in 1usize..200, before in 0usize..6) {
            let history = history(&text);
            let mut once: Vec<Cow<'_, Message>> = history.iter().map(Cow::Borrowed).collect();
            prune_assistant_prose(&mut once, before, max);
            for (pruned, original) in once.iter().zip(&history) {
                prop_assert!(pruned.text_content().len() <= original.text_content().len());
                prop_assert_eq!(pruned.role, original.role);
            }
            let mut twice = once.clone();
            prop_assert_eq!(prune_assistant_prose(&mut twice, before, max), 0);
            prop_assert_eq!(&twice, &once);
            prop_assert_eq!(check_tool_pairing(&once), Ok(()));
        }
    }
}
