//! Pure transformations of a message history before it is sent to a model: pruning of tool
//! outputs and tool-call arguments, older assistant prose cut for a summarizer, observation masking, tool-call pairing repair, turn
//! boundaries and the overflow ladder's last rungs.
//!
//! Nothing here does I/O or copies a message it leaves alone: the functions take and return
//! [`Cow`]s, so an unchanged message is the caller's own `&Message`.
//!
//! ```
//! use phosphor_base::{ApproxCounter, Message, Part, ToolCall};
//! use phosphor_prune::{TRUNCATION_MARKER, check_tool_pairing, prune};
//!
//! let call = ToolCall { id: "c1".into(), name: "bash".into(), arguments: r#"{"cmd":"make"}"#.into() };
//! let history = vec![
//!     Message::user("build it"),
//!     Message::new(phosphor_base::Role::Assistant, vec![Part::ToolCall(call)]),
//!     Message::tool_result("c1", "bash", "x".repeat(10_000), false),
//! ];
//! let pruned = prune(&history, 200, &ApproxCounter);
//! assert_eq!(pruned.truncated_results, 1);
//! assert!(pruned.tokens_saved() > 2_000);
//! let kept = pruned.messages[2].tool_results().next().map(|r| r.content.clone()).unwrap_or_default();
//! assert_eq!(kept, format!("{}{TRUNCATION_MARKER}", "x".repeat(200)));
//! assert_eq!(check_tool_pairing(&pruned.messages), Ok(()));
//! ```
//!
//! # Errors
//!
//! The crate has no error type and no `error.rs`: pruning, repair and the ladder primitives
//! accept any history and cannot fail. The one `Result` is [`check_tool_pairing`]'s, whose
//! error is the [`PairingViolation`] it was asked to find.
//!
//! # Design notes
//!
//! **Architecture Invariant:** pruning is idempotent and never splits a Unicode scalar value; a tool
//! call and its result are never separated.
//!
//! **Decisions.** A tool output is cut only when it is longer than the limit plus the marker's 16
//! characters, so pruning never makes an output longer. Tool *inputs* are pruned too, wherever
//! outputs are (the summary request, every rung of the ladder, the dry run): in real coding sessions
//! file writes and edits carry whole files in their arguments and are the bulk of a transcript. The
//! arguments' JSON is parsed, every string value longer than the limit is cut (the JSON stays valid,
//! keys keep their order, numbers and booleans stay), and values under an identifying key (`path`,
//! `file`, `command`, `cmd`, `pattern`, `query`, `url`, `id`, `name`, ... and any key ending in
//! `path`, `file`, `dir` or `_id`) keep up to 1,000 characters, so a summarizer still sees which file
//! was written and which command ran; arguments that are not JSON are cut as a whole, like an output.
//! An edit's two texts (a key pair of `EDIT_TEXT_PAIRS`: `old_string`/`new_string`, `old_str`/`new_str`,
//! `old_text`/`new_text`, `oldString`/`newString`, compared without case, also inside `MultiEdit`'s
//! list) first lose what they share: a common beginning or end more than 40 characters longer than
//! the context kept is cut from both down to the 40 characters (`EDIT_CONTEXT_CHARS`) next to the change (a quarter
//! of the limit when that is less, `edit_context_chars`: cut at 50, 12 characters, so that a short
//! cut still shows the change and not only what led to it), behind a
//! `[... N unchanged characters ...]` marker, and what is left is then cut at the limit. An agent
//! repeats a whole function to change one line of it; cut at 200 characters alone, both texts kept the
//! same unchanged start and the change itself was lost. A pair that holds either marker already is
//! only read back, so cutting twice still equals cutting once (a proptest checks this on texts built
//! to share a beginning and an end). At a limit of 0 (an outline turn's calls, "Shedding ladder")
//! nothing of either text is kept, so nothing shared is counted: each is its marker alone.
//! Call ids and names never change, so pairing is untouched. The pairing rule is OpenAI's: each call of an
//! assistant message is answered exactly once by the tool messages right after it. Repair moves a late
//! result up to its call, answers the latest open call with a reused id, inserts synthetic error
//! results for the request only (they are never stored) and drops results whose call is gone.

use std::borrow::Cow;

use phosphor_base::message::{Message, Part, ToolCall, ToolResult};
use phosphor_base::tokens::TokenCounter;

mod arguments;
mod ladder;
mod masking;
mod pairing;
mod prose;
#[doc(hidden)]
pub mod synthetic;
#[cfg(test)]
mod test_dsl;
mod turns;

pub use arguments::{
    COMMAND_KEYS, EDIT_CONTEXT_CHARS, EDIT_TEXT_PAIRS, IDENTIFYING_MAX_CHARS, PATH_KEYS, PATHS_KEYS,
    edit_context_chars, is_identifying_key, prune_arguments,
};
pub use ladder::{OMITTED_OUTPUT, drop_oldest_turns, omit_oldest_tool_outputs};
pub use masking::{
    MASKED_ARGUMENT_CHARS, MASKED_PREFIX, mask_tool_traffic, masked_argument_share, masked_output,
};
pub use pairing::{INTERRUPTED_RESULT, PairingViolation, check_tool_pairing, repair_tool_pairing};
pub use prose::{cut_middle_marker, prune_assistant_prose, shorten_user_messages};
pub use turns::{keep_recent_split, keep_recent_split_by, turn_starts};

/// Appended to a tool output that was cut.
pub const TRUNCATION_MARKER: &str = "\n... [truncated]";

/// [`TRUNCATION_MARKER`]'s length in characters (it is ASCII, so also in bytes).
const MARKER_CHARS: usize = TRUNCATION_MARKER.len();

/// The first `max_chars` Unicode scalar values of `text` followed by [`TRUNCATION_MARKER`],
/// or `text` itself (borrowed) when cutting would not make it shorter.
///
/// A text of up to `max_chars + 16` characters (16 being the marker's length) is kept whole:
/// cutting it would append more than it removes. So the result is never longer than the input,
/// a cut result has exactly `max_chars + 16` characters, and a text already ending in the marker
/// whose body fits `max_chars` is left alone: truncating twice equals truncating once.
///
/// Counts scalar values (`char`s), not grapheme clusters: a cut never splits a UTF-8 sequence,
/// but may separate an emoji from its modifier or a letter from its combining accent.
pub fn truncate_chars(text: &str, max_chars: usize) -> Cow<'_, str> {
    match cut_point(text, max_chars) {
        None => Cow::Borrowed(text),
        Some(at) => {
            let mut out = String::with_capacity(at + MARKER_CHARS);
            out.push_str(&text[..at]);
            out.push_str(TRUNCATION_MARKER);
            Cow::Owned(out)
        }
    }
}

/// The byte offset at which [`truncate_chars`] cuts `text`, or `None` when it keeps it whole.
fn cut_point(text: &str, max_chars: usize) -> Option<usize> {
    let limit = max_chars.saturating_add(MARKER_CHARS);
    // Every char is at least one byte: a text of at most `limit` bytes has at most `limit` chars.
    if text.len() <= limit {
        return None;
    }
    let (at, _) = text.char_indices().nth(max_chars)?;
    // Cut only when more than the marker's worth of characters follows the cut point.
    text[at..].chars().nth(MARKER_CHARS).map(|_| at)
}

/// The result of [`prune`]: the pruned history and what pruning saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned<'a> {
    /// The history in its original order; messages that were not cut are borrowed.
    pub messages: Vec<Cow<'a, Message>>,
    /// How many tool results were cut.
    pub truncated_results: usize,
    /// How many string values inside tool-call arguments were cut (see [`prune_arguments`]).
    pub truncated_arguments: usize,
    /// Tokens of the history before pruning.
    pub tokens_before: u64,
    /// Tokens of [`Pruned::messages`].
    pub tokens_after: u64,
}

impl Pruned<'_> {
    /// `tokens_before - tokens_after` (never negative: pruning never lengthens a message).
    pub fn tokens_saved(&self) -> u64 {
        self.tokens_before.saturating_sub(self.tokens_after)
    }

    /// The pruned history as owned messages (cloning the borrowed ones).
    pub fn into_owned(self) -> Vec<Message> {
        self.messages.into_iter().map(Cow::into_owned).collect()
    }
}

/// Cuts the content of every [`Part::ToolResult`] to `max_chars` characters with
/// [`truncate_chars`], and the long string values inside every [`Part::ToolCall`]'s arguments with
/// [`prune_arguments`] (the call's id and name stay, so pairing is unchanged); every other part and
/// every message without a cut is left alone and borrowed.
///
/// Token counts come from `counter.count_message`: each message is counted once, and a cut
/// message once more after the cut. Order, ids and tool-call pairing are unchanged.
pub fn prune<'a>(messages: &'a [Message], max_chars: usize, counter: &dyn TokenCounter) -> Pruned<'a> {
    let mut cut = Cuts::default();
    let out = prune_with(messages, |_| Limits { outputs: max_chars, arguments: max_chars }, &mut cut);
    let tokens_before = messages.iter().map(|m| counter.count_message(m)).sum();
    let tokens_after = messages
        .iter()
        .zip(&out)
        .map(|(original, pruned)| match pruned {
            Cow::Borrowed(_) => counter.count_message(original),
            Cow::Owned(pruned) => counter.count_message(pruned),
        })
        .sum();
    Pruned {
        messages: out,
        truncated_results: cut.results,
        truncated_arguments: cut.arguments,
        tokens_before,
        tokens_after,
    }
}

/// [`prune`]'s messages alone, without counting tokens: for a caller that counts what it sends
/// itself (with an exact counter, counting is the costly part).
pub fn prune_messages(messages: &[Message], max_chars: usize) -> Vec<Cow<'_, Message>> {
    prune_messages_by(messages, |_| Limits { outputs: max_chars, arguments: max_chars })
}

/// [`prune_messages`], except that the tool calls in `messages[..before]` have their arguments cut
/// at `older_argument_chars` (at most `max_chars`): a summarizer reads the older turns' calls in
/// brief and the newest turn's at the standard limit, while every tool output is cut at
/// `max_chars`.
pub fn prune_messages_graded(
    messages: &[Message],
    max_chars: usize,
    before: usize,
    older_argument_chars: usize,
) -> Vec<Cow<'_, Message>> {
    let older = older_argument_chars.min(max_chars);
    prune_messages_by(messages, |at| Limits {
        outputs: max_chars,
        arguments: if at < before { older } else { max_chars },
    })
}

/// The characters [`prune_messages_by`] keeps of one message's tool outputs and of the long string
/// values in its tool calls' arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Each tool output's (see [`truncate_chars`]).
    pub outputs: usize,
    /// Each long string value's in a call's arguments (see [`prune_arguments`]).
    pub arguments: usize,
}

/// [`prune_messages`] with limits chosen per message: `limits(index)` for `messages[index]`.
pub fn prune_messages_by(messages: &[Message], limits: impl Fn(usize) -> Limits) -> Vec<Cow<'_, Message>> {
    prune_with(messages, limits, &mut Cuts::default())
}

/// Every message pruned at `limits(index)`.
fn prune_with<'a>(
    messages: &'a [Message],
    limits: impl Fn(usize) -> Limits,
    cuts: &mut Cuts,
) -> Vec<Cow<'a, Message>> {
    messages
        .iter()
        .enumerate()
        .map(|(at, message)| {
            let Limits { outputs, arguments } = limits(at);
            prune_message(message, outputs, arguments, cuts).map_or(Cow::Borrowed(message), Cow::Owned)
        })
        .collect()
}

/// What [`prune`] cut so far.
#[derive(Default)]
struct Cuts {
    results: usize,
    arguments: usize,
}

/// The message with its long tool results (cut at `max_chars`) and call arguments (cut at
/// `argument_chars`), or `None` when nothing in it is long. Builds the copy part by part so that a
/// long output is never copied whole.
fn prune_message(
    message: &Message,
    max_chars: usize,
    argument_chars: usize,
    cuts: &mut Cuts,
) -> Option<Message> {
    let mut changed = false;
    let parts: Vec<Option<Part>> = message
        .parts
        .iter()
        .map(|part| match part {
            Part::ToolResult(result) => match truncate_chars(&result.content, max_chars) {
                Cow::Owned(content) => {
                    cuts.results += 1;
                    Some(Part::ToolResult(ToolResult { content, ..clone_result_meta(result) }))
                }
                Cow::Borrowed(_) => None,
            },
            Part::ToolCall(call) => {
                prune_arguments(&call.arguments, argument_chars).map(|(arguments, cut)| {
                    cuts.arguments += cut;
                    Part::ToolCall(ToolCall { id: call.id.clone(), name: call.name.clone(), arguments })
                })
            }
            _ => None,
        })
        .inspect(|part| changed |= part.is_some())
        .collect();
    if !changed {
        return None;
    }
    let parts =
        parts.into_iter().zip(&message.parts).map(|(new, old)| new.unwrap_or_else(|| old.clone())).collect();
    Some(with_parts(message, parts))
}

/// A copy of `result` with empty content (the caller supplies new content).
pub(crate) fn clone_result_meta(result: &ToolResult) -> ToolResult {
    ToolResult {
        call_id: result.call_id.clone(),
        name: result.name.clone(),
        content: String::new(),
        is_error: result.is_error,
    }
}

/// A copy of `message` holding `parts` instead of its own (its own parts are not cloned).
/// Lists every field on purpose: a field added to [`Message`] must be added here, and the
/// compiler says so.
pub(crate) fn with_parts(message: &Message, parts: Vec<Part>) -> Message {
    Message {
        id: message.id.clone(),
        session_id: message.session_id.clone(),
        role: message.role,
        parts,
        is_summary: message.is_summary,
        summarized_until: message.summarized_until.clone(),
        pinned_message: message.pinned_message.clone(),
        status: message.status,
        name: message.name.clone(),
        model: message.model.clone(),
        usage: message.usage,
        created_at: message.created_at,
        updated_at: message.updated_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_base::message::Role;
    use phosphor_base::tokens::ApproxCounter;
    use pretty_assertions::assert_eq;

    /// `expected` is `None` when the text must come back borrowed and unchanged.
    fn check(input: &str, max: usize, expected: Option<&str>) {
        let out = truncate_chars(input, max);
        match expected {
            None => {
                assert!(matches!(out, Cow::Borrowed(_)), "{input:?} at {max} was copied: {out:?}");
                assert_eq!(out, input);
            }
            Some(expected) => {
                assert!(matches!(out, Cow::Owned(_)), "{input:?} at {max} was not cut");
                assert_eq!(out, format!("{expected}{TRUNCATION_MARKER}"), "{input:?} at {max}");
            }
        }
    }

    #[test]
    fn graded_pruning_cuts_older_calls_harder_and_every_output_alike() {
        let call = |id: &str| {
            let arguments = serde_json::json!({ "path": "src/a.rs", "content": "x".repeat(500) }).to_string();
            Message::new(
                Role::Assistant,
                vec![Part::ToolCall(ToolCall { id: id.into(), name: "write".into(), arguments })],
            )
        };
        let history = vec![
            Message::user("write it"),
            call("c1"),
            Message::tool_result("c1", "write", "y".repeat(500), false),
            Message::user("again"),
            call("c2"),
            Message::tool_result("c2", "write", "y".repeat(500), false),
        ];
        let pruned = prune_messages_graded(&history, 200, 3, 50);
        let content = |at: usize| {
            let call = pruned[at].tool_calls().next().unwrap().arguments.clone();
            let value: serde_json::Value = serde_json::from_str(&call).unwrap();
            assert_eq!(value["path"], "src/a.rs", "a path stays whole");
            value["content"].as_str().unwrap().to_owned()
        };
        assert_eq!(content(1), format!("{}{TRUNCATION_MARKER}", "x".repeat(50)));
        assert_eq!(content(4), format!("{}{TRUNCATION_MARKER}", "x".repeat(200)));
        for at in [2, 5] {
            let output = pruned[at].tool_results().next().unwrap().content.clone();
            assert_eq!(output, format!("{}{TRUNCATION_MARKER}", "y".repeat(200)), "output {at}");
        }
        assert_eq!(check_tool_pairing(&pruned), Ok(()));
        // An older limit above the standard one is the standard one; `before` past the end is the end.
        assert_eq!(prune_messages_graded(&history, 200, 99, 500), prune_messages(&history, 200));
    }

    #[test]
    fn truncates_by_chars_and_never_lengthens() {
        let a20 = "a".repeat(20);
        let a21 = "a".repeat(21);
        check("", 0, None);
        check("", 5, None);
        check("short", 5, None);
        // Up to 16 characters over the limit: the marker would cost more than the cut saves.
        check(&"a".repeat(5 + 16), 5, None);
        check(&"a".repeat(5 + 17), 5, Some("aaaaa"));
        check(&a20, 3, Some("aaa"));
        check(&a21, 0, Some(""));
        check(&"a".repeat(16), 0, None);
        check(&"a".repeat(17), 0, Some(""));
    }

    #[test]
    fn counts_scalar_values_not_bytes() {
        // 2-byte, 3-byte and 4-byte characters; 40 bytes of 20 chars must not be cut at 10.
        let e20 = "é".repeat(20);
        check(&e20, 10, None);
        check(&"é".repeat(27), 10, Some(&"é".repeat(10)));
        check(&"日本語".repeat(10), 3, Some("日本語"));
        check(&"日本語".repeat(10), 4, Some("日本語日"));
        check(&"👍".repeat(30), 1, Some("👍"));
        check(&format!("ab👍{}", "x".repeat(30)), 3, Some("ab👍"));
        check(&format!("ab👍{}", "x".repeat(30)), 2, Some("ab"));
        // A skin-tone modifier and a ZWJ family are several scalars: the cut may separate them.
        check(&format!("👍🏽{}", "x".repeat(30)), 1, Some("👍"));
        check(&format!("👨‍👩‍👧{}", "y".repeat(30)), 2, Some("👨\u{200d}"));
        // A combining accent is its own scalar.
        check(&format!("e\u{301}{}", "z".repeat(30)), 1, Some("e"));
        // Mixed: the byte fast path must not decide for multi-byte text over the limit.
        check(&"ü".repeat(16), 0, None);
        check(&format!("{}a", "ü".repeat(16)), 0, Some(""));
    }

    #[test]
    fn already_truncated_text_is_left_alone() {
        let once = truncate_chars(&"x".repeat(500), 200).into_owned();
        check(&once, 200, None);
        check(&once, 250, None);
        // A stricter limit cuts the body again without doubling the marker.
        check(&once, 50, Some(&"x".repeat(50)));
        check(&format!("{}{TRUNCATION_MARKER}", "ß".repeat(30)), 30, None);
    }

    fn tool(content: &str) -> Message {
        Message::tool_result("c1", "read", content, false).with_id("t")
    }

    #[test]
    fn prune_cuts_only_long_tool_results_and_counts_tokens() {
        let long = "L".repeat(1_000);
        let history = vec![
            Message::user(long.clone()).with_id("u"),
            Message::assistant(long.clone()).with_id("a"),
            tool(&long),
            tool("short"),
        ];
        let pruned = prune(&history, 100, &ApproxCounter);
        let cut = format!("{}{TRUNCATION_MARKER}", "L".repeat(100));
        assert_eq!(
            pruned.clone().into_owned(),
            vec![history[0].clone(), history[1].clone(), tool(&cut), tool("short")]
        );
        assert!(matches!(pruned.messages[0], Cow::Borrowed(m) if std::ptr::eq(m, &history[0])));
        assert!(matches!(pruned.messages[1], Cow::Borrowed(_)));
        assert!(matches!(pruned.messages[2], Cow::Owned(_)));
        assert!(matches!(pruned.messages[3], Cow::Borrowed(_)));
        assert_eq!(pruned.truncated_results, 1);
        let count = |ms: &[Message]| ms.iter().map(|m| ApproxCounter.count_message(m)).sum::<u64>();
        assert_eq!(pruned.tokens_before, count(&history));
        assert_eq!(pruned.tokens_after, count(&pruned.clone().into_owned()));
        assert_eq!(
            pruned.tokens_saved(),
            ApproxCounter::count_bytes(1_000) - ApproxCounter::count_bytes(cut.len())
        );
    }

    #[test]
    fn prune_cuts_each_result_of_a_multi_result_message() {
        let result = |id: &str, content: &str| {
            Part::ToolResult(ToolResult {
                call_id: id.into(),
                name: "grep".into(),
                content: content.into(),
                is_error: id == "c2",
            })
        };
        let long = "ÿ".repeat(100);
        let message = Message::new(
            Role::Tool,
            vec![
                result("c1", "ok"),
                result("c2", &long),
                Part::Text { text: long.clone() },
                result("c3", &long),
            ],
        );
        let pruned = prune(std::slice::from_ref(&message), 10, &ApproxCounter);
        let cut = format!("{}{TRUNCATION_MARKER}", "ÿ".repeat(10));
        let expected = Message::new(
            Role::Tool,
            vec![result("c1", "ok"), result("c2", &cut), Part::Text { text: long }, result("c3", &cut)],
        );
        assert_eq!(pruned.truncated_results, 2);
        assert_eq!(pruned.into_owned(), vec![expected]);
    }
}
