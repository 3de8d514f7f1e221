//! Turn boundaries: where a history may be split without separating a tool call from its result.

use std::borrow::Borrow;
use std::collections::HashMap;

use phosphor_base::message::{Message, Role};
use phosphor_base::tokens::TokenCounter;

/// The indices of the user messages that start a turn, ascending.
///
/// A turn is a user message and everything up to the next turn start. Every user message starts
/// one, except a summary and a user message stored between a tool call and its result (a prompt
/// queued while a tool ran): splitting there would separate the pair. A result pairs with the
/// latest earlier assistant message that called its id.
pub fn turn_starts<M: Borrow<Message>>(messages: &[M]) -> Vec<usize> {
    // depth[i] counts the call-to-result spans that cover message i (a difference array).
    let mut depth = vec![0_i64; messages.len() + 1];
    let mut called: HashMap<&str, usize> = HashMap::new();
    for (i, message) in messages.iter().enumerate() {
        let message = message.borrow();
        for result in message.tool_results() {
            if let Some(&call) = called.get(result.call_id.as_str())
                && call + 1 < i
            {
                depth[call + 1] += 1;
                depth[i] -= 1;
            }
        }
        if message.role == Role::Assistant {
            for call in message.tool_calls() {
                called.insert(&call.id, i);
            }
        }
    }
    let mut inside = 0;
    let mut starts = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        inside += depth[i];
        let message = message.borrow();
        if inside == 0 && message.role == Role::User && !message.is_summary {
            starts.push(i);
        }
    }
    starts
}

/// The index from which `messages` is kept verbatim when the part before it is summarized: the
/// start of the longest suffix that begins at a [turn start](turn_starts) and costs at most
/// `keep_tokens`. `messages.len()` (keep nothing) when `keep_tokens` is 0 or even the last turn
/// costs more. Never falls between a tool call and its result.
pub fn keep_recent_split<M: Borrow<Message>>(
    messages: &[M],
    keep_tokens: u64,
    counter: &dyn TokenCounter,
) -> usize {
    keep_recent_split_by(messages, keep_tokens, |i| counter.count_message(messages[i].borrow()))
}

/// [`keep_recent_split`] with each message's cost given by index (`cost(i)` for `messages[i]`),
/// for a caller that already knows the counts.
pub fn keep_recent_split_by<M: Borrow<Message>>(
    messages: &[M],
    keep_tokens: u64,
    cost: impl Fn(usize) -> u64,
) -> usize {
    let mut split = messages.len();
    if keep_tokens == 0 {
        return split;
    }
    let mut tokens = 0;
    for start in turn_starts(messages).into_iter().rev() {
        tokens += (start..split).map(&cost).sum::<u64>();
        if tokens > keep_tokens {
            break;
        }
        split = start;
    }
    split
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dsl::parse;
    use phosphor_base::tokens::ApproxCounter;
    use pretty_assertions::assert_eq;

    fn check_starts(input: &str, expected: &[usize]) {
        assert_eq!(turn_starts(&parse(input)), expected, "{input}");
    }

    #[test]
    fn turns_start_at_user_messages_outside_tool_spans() {
        check_starts("", &[]);
        check_starts("S A", &[]);
        check_starts("S U A U A", &[1, 3]);
        check_starts("SUM U A(c1) T(c1) A U", &[1, 5]);
        // A prompt stored while a tool ran does not start a turn.
        check_starts("U A(c1) U T(c1) A U", &[0, 5]);
        check_starts("U A(c1,c2) T(c1) U U T(c2) U", &[0, 6]);
        // An interrupted call (no result) does not hold the next prompt back.
        check_starts("U A(c1) U A", &[0, 2]);
        // Reused ids pair with the latest call.
        check_starts("U A(c0) T(c0) U A(c0) U T(c0)", &[0, 3]);
        // A summary is not a turn, even when it is a user message.
        let mut messages = parse("U A U");
        messages[0].is_summary = true;
        assert_eq!(turn_starts(&messages), vec![2]);
    }

    fn check_split(input: &str, keep_tokens: u64, expected: usize) {
        assert_eq!(
            keep_recent_split(&parse(input), keep_tokens, &ApproxCounter),
            expected,
            "{input} {keep_tokens}"
        );
    }

    #[test]
    fn keeps_the_longest_affordable_suffix_of_whole_turns() {
        let history = "S U A(c1) T(c1) A U A U U A(c2) U T(c2)";
        let messages = parse(history);
        let tail = |from: usize| messages[from..].iter().map(|m| ApproxCounter.count_message(m)).sum::<u64>();
        check_split(history, 0, 12);
        check_split(history, tail(8) - 1, 12);
        check_split(history, tail(8), 8);
        check_split(history, tail(7), 7);
        check_split(history, tail(5) - 1, 7);
        check_split(history, tail(5), 5);
        check_split(history, tail(1), 1);
        // The system prompt is not a turn start: the split never reaches 0 here.
        check_split(history, tail(0) + 1_000, 1);
        check_split("", 100, 0);
    }
}
