//! Assistant prose cut for a summarizer: in chat-heavy coding sessions (aider's, for one) the
//! assistant's explanations are most of the transcript once tool traffic is pruned, and the
//! summarizer needs what each answer set out to do more than every sentence of it. The newest
//! answer, where the work stands, is never cut here; what the user asked is cut only in its
//! middle, and only where the caller says (the oldest turns of a long session, whose requests the
//! caller keeps elsewhere).

use std::borrow::Cow;

use phosphor_base::message::{Message, Part, Role};

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
            Part::Text { text } | Part::Reasoning { text, .. } => long(text),
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
                Part::Reasoning { text, .. } if long(text) => {
                    cut += 1;
                    // Shortened, it is no longer what the provider sealed: the seal goes.
                    Part::reasoning(truncate_chars(text, max_chars).into_owned())
                }
                other => other.clone(),
            })
            .collect();
        *message = Cow::Owned(with_parts(message, parts));
    }
    cut
}

/// What replaces the middle of a long user message: how many characters were left out.
pub fn cut_middle_marker(chars: usize) -> String {
    format!("\n[... {chars} characters cut ...]\n")
}

/// Cuts the middle of every user message's text in `messages[..before]` that is longer than
/// `max_chars` characters, keeping its start and its end (where a pasted log or traceback states
/// its error) around [`cut_middle_marker`], at most `max_chars` characters with the marker. Returns
/// how many texts it cut. Idempotent (a cut text is no longer than `max_chars`), never splits a
/// character; summaries, other roles and everything from `before` on are left alone. A
/// `max_chars` too small to hold the marker and some text on each side cuts nothing.
pub fn shorten_user_messages(messages: &mut [Cow<'_, Message>], before: usize, max_chars: usize) -> usize {
    let before = before.min(messages.len());
    let mut cut = 0;
    for message in &mut messages[..before] {
        if message.role != Role::User || message.is_summary {
            continue;
        }
        let shorter: Vec<Option<String>> = message
            .parts
            .iter()
            .map(|part| match part {
                Part::Text { text } => cut_middle(text, max_chars),
                _ => None,
            })
            .collect();
        if shorter.iter().all(Option::is_none) {
            continue;
        }
        let parts = shorter
            .into_iter()
            .zip(&message.parts)
            .map(|(new, old)| match new {
                Some(text) => {
                    cut += 1;
                    Part::Text { text }
                }
                None => old.clone(),
            })
            .collect();
        *message = Cow::Owned(with_parts(message, parts));
    }
    cut
}

/// `text`'s start and end around [`cut_middle_marker`], at most `max_chars` characters in all, or
/// `None` when `text` fits or `max_chars` leaves fewer than 16 characters beside the marker.
fn cut_middle(text: &str, max_chars: usize) -> Option<String> {
    let total = text.chars().count();
    if total <= max_chars {
        return None;
    }
    // The marker with the widest count it may hold: what is kept is then never over `max_chars`.
    let room = max_chars.checked_sub(cut_middle_marker(total).chars().count())?;
    if room < 16 {
        return None;
    }
    let (head, tail) = (room - room / 2, room / 2);
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(at, _)| at);
    let tail_start = text.char_indices().nth(total - tail).map_or(text.len(), |(at, _)| at);
    Some(format!("{}{}{}", &text[..head_end], cut_middle_marker(total - head - tail), &text[tail_start..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TRUNCATION_MARKER, check_tool_pairing};
    use phosphor_base::message::ToolCall;
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

    #[test]
    fn a_long_request_keeps_its_start_and_end() {
        let text = format!("{}{}{}", "a".repeat(300), "m".repeat(1_000), "z".repeat(300));
        let messages = [Message::user(text.clone()), Message::assistant("ok"), Message::user(text.clone())];
        let mut input: Vec<Cow<'_, Message>> = messages.iter().map(Cow::Borrowed).collect();
        assert_eq!(shorten_user_messages(&mut input, 2, 600), 1);
        let marker = cut_middle_marker(1_600 - 600 + cut_middle_marker(1_600).len());
        let kept = 600 - cut_middle_marker(1_600).len();
        let shorter = input[0].text_content();
        assert_eq!(shorter, format!("{}{}{}", &text[..kept - kept / 2], marker, &text[1_600 - kept / 2..]));
        assert!(shorter.starts_with(&"a".repeat(250)) && shorter.ends_with(&"z".repeat(250)));
        assert!(shorter.chars().count() <= 600);
        assert!(
            matches!(input[1], Cow::Borrowed(_)) && matches!(input[2], Cow::Borrowed(_)),
            "from `before` on, nothing"
        );
        assert_eq!(shorten_user_messages(&mut input, 2, 600), 0, "a second pass cuts nothing");
        assert_eq!(shorten_user_messages(&mut input, 3, 20), 0, "no room beside the marker");
    }

    proptest! {
        #[test]
        fn a_middle_cut_is_short_idempotent_and_keeps_both_ends(text in "\\PC{0,300}", max in 0usize..200) {
            let messages = [Message::user(text.clone())];
            let mut once: Vec<Cow<'_, Message>> = messages.iter().map(Cow::Borrowed).collect();
            shorten_user_messages(&mut once, 1, max);
            let shorter = once[0].text_content();
            if shorter != text {
                prop_assert!(shorter.chars().count() <= max);
                let (head, tail) = shorter.split_once("\n[... ").unwrap();
                prop_assert!(text.starts_with(head));
                prop_assert!(text.ends_with(tail.split_once(" characters cut ...]\n").unwrap().1));
            }
            let mut twice = once.clone();
            prop_assert_eq!(shorten_user_messages(&mut twice, 1, max), 0);
            prop_assert_eq!(&twice, &once);
        }

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
