//! Invariants of pruning, pairing repair and the ladder over arbitrary (and broken) histories.

use std::borrow::Cow;

use phosphor_base::message::{Message, Part, Role, ToolCall, ToolResult};
use phosphor_base::tokens::{ApproxCounter, TokenCounter};
use phosphor_prune::{
    EDIT_TEXT_PAIRS, IDENTIFYING_MAX_CHARS, INTERRUPTED_RESULT, OMITTED_OUTPUT, TRUNCATION_MARKER,
    check_tool_pairing, drop_oldest_turns, is_identifying_key, keep_recent_split, omit_oldest_tool_outputs,
    prune, prune_arguments, repair_tool_pairing, truncate_chars, turn_starts,
};
use proptest::prelude::*;
use serde_json::Value;

const MARKER_CHARS: usize = TRUNCATION_MARKER.len();

/// Text mixing ASCII, 2-, 3- and 4-byte characters, combining marks and joiners; sometimes
/// already ending in the truncation marker.
fn text() -> impl Strategy<Value = String> {
    let chars = prop::sample::select(vec![
        'a', 'b', 'z', ' ', '\n', '{', '"', 'é', 'ß', 'Ж', '日', '本', '€', '👍', '🏽', '\u{200d}',
        '\u{301}', '\0',
    ]);
    (prop::collection::vec(chars, 0..300), any::<bool>(), 0..4_usize).prop_map(|(chars, marked, repeat)| {
        let mut text: String = chars.into_iter().collect();
        text = text.repeat(repeat.max(1));
        if marked {
            text.push_str(TRUNCATION_MARKER);
        }
        text
    })
}

/// Call ids from a small pool, so that histories reuse ids, answer calls twice and answer
/// calls nobody made.
fn call_id() -> impl Strategy<Value = String> {
    (0..6_u8).prop_map(|n| format!("c{n}"))
}

fn result_part() -> impl Strategy<Value = Part> {
    (call_id(), text(), any::<bool>()).prop_map(|(call_id, content, is_error)| {
        Part::ToolResult(ToolResult { name: format!("tool_{call_id}"), call_id, content, is_error })
    })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        1 => text().prop_map(Message::system),
        3 => text().prop_map(Message::user),
        1 => (text(), prop::collection::vec(result_part(), 1..3)).prop_map(|(text, results)| {
            let mut message = Message::user(text);
            message.parts.extend(results);
            message
        }),
        1 => text().prop_map(|text| Message { is_summary: true, ..Message::assistant(text) }),
        3 => (text(), prop::collection::vec(call_id(), 0..4)).prop_map(|(text, ids)| {
            let mut message = Message::assistant(text);
            message.parts.extend(ids.into_iter().map(|id| {
                Part::ToolCall(ToolCall { name: format!("tool_{id}"), id, arguments: "{}".into() })
            }));
            message
        }),
        5 => prop::collection::vec(result_part(), 0..3).prop_map(|parts| Message::new(Role::Tool, parts)),
    ]
}

/// Tool-call arguments: a JSON object of identifying and bulky keys (strings, nested lists of
/// items, numbers), or text that is not JSON at all.
fn arguments() -> impl Strategy<Value = String> {
    let key =
        prop::sample::select(vec!["path", "content", "command", "new_string", "old_string", "id", "pattern"]);
    let leaf = prop_oneof![
        4 => text().prop_map(Value::String),
        1 => any::<i32>().prop_map(Value::from),
    ];
    let value =
        leaf.prop_recursive(2, 16, 4, move |inner| prop::collection::vec(inner, 0..4).prop_map(Value::Array));
    prop_oneof![
        4 => prop::collection::vec((key, value), 0..5).prop_map(|pairs| {
            Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()).to_string()
        }),
        1 => text(),
    ]
}

/// An edit's arguments: a path and a pair of [`EDIT_TEXT_PAIRS`] whose texts share a beginning
/// and an end (the usual shape: a function repeated to change a line of it).
fn edit_arguments() -> impl Strategy<Value = String> {
    (prop::sample::select(EDIT_TEXT_PAIRS.to_vec()), text(), text(), text(), text()).prop_map(
        |((old_key, new_key), head, old, new, tail)| {
            let mut object = serde_json::Map::new();
            object.insert("path".into(), Value::from("src/lib.rs"));
            object.insert(old_key.to_owned(), Value::from(format!("{head}{old}{tail}")));
            object.insert(new_key.to_uppercase(), Value::from(format!("{head}{new}{tail}")));
            Value::Object(object).to_string()
        },
    )
}

/// Checks that `after` is `before` with some strings cut to `max` characters (`IDENTIFYING_MAX_CHARS`
/// under an identifying key) plus the marker, and counts the cut strings.
fn check_cut_value(
    before: &Value,
    after: &Value,
    identifying: bool,
    max: usize,
) -> Result<usize, TestCaseError> {
    match (before, after) {
        (Value::String(old), Value::String(new)) if old == new => Ok(0),
        (Value::String(old), Value::String(new)) => {
            let limit = if identifying { max.max(IDENTIFYING_MAX_CHARS) } else { max };
            let body = new.strip_suffix(TRUNCATION_MARKER).unwrap_or("missing marker");
            prop_assert_eq!(body.chars().count(), limit);
            prop_assert!(old.starts_with(body));
            Ok(1)
        }
        (Value::Array(old), Value::Array(new)) => {
            prop_assert_eq!(old.len(), new.len());
            old.iter().zip(new).map(|(o, n)| check_cut_value(o, n, identifying, max)).sum()
        }
        (Value::Object(old), Value::Object(new)) => {
            prop_assert_eq!(old.keys().collect::<Vec<_>>(), new.keys().collect::<Vec<_>>());
            old.iter()
                .map(|(k, o)| match (o, &new[k]) {
                    (Value::String(before), Value::String(after)) if is_elided(before, after) => {
                        check_elided(k, max, before, after, old)
                    }
                    (o, n) => check_cut_value(o, n, is_identifying_key(k), max),
                })
                .sum()
        }
        (old, new) => {
            prop_assert_eq!(old, new);
            Ok(0)
        }
    }
}

/// Whether `after` is an edit text with its shared stretch cut (see `prune_arguments`).
fn is_elided(before: &str, after: &str) -> bool {
    after.contains(" unchanged characters ...]") && !before.contains(" unchanged characters ...]")
}

/// `[... N unchanged characters ...]` at the start of `text`: N and the rest.
fn leading_marker(text: &str) -> Option<(usize, &str)> {
    let rest = text.strip_prefix("[... ")?;
    let (n, rest) = rest.split_once(" unchanged characters ...]")?;
    Some((n.parse().ok()?, rest))
}

/// Checks an edit text whose shared stretch was cut: `after` is `before` less a beginning and an
/// end it shares with the other text of its pair (each marked with its length), then perhaps cut at
/// the limit.
fn check_elided(
    key: &str,
    max: usize,
    before: &str,
    after: &str,
    object: &serde_json::Map<String, Value>,
) -> Result<usize, TestCaseError> {
    let other = EDIT_TEXT_PAIRS
        .iter()
        .find_map(|(o, n)| {
            if key.eq_ignore_ascii_case(o) {
                Some(n)
            } else if key.eq_ignore_ascii_case(n) {
                Some(o)
            } else {
                None
            }
        })
        .and_then(|k| object.iter().find(|(key, _)| key.eq_ignore_ascii_case(k)))
        .and_then(|(_, v)| v.as_str());
    let Some(other) = other else {
        return Err(TestCaseError::fail(format!("{key} elided without the other text of its pair")));
    };
    let (skipped, rest) = leading_marker(after).unwrap_or((0, after));
    let chars: Vec<char> = before.chars().collect();
    prop_assert!(skipped <= chars.len());
    prop_assert_eq!(
        before.chars().take(skipped).collect::<String>(),
        other.chars().take(skipped).collect::<String>()
    );
    let remaining: String = chars[skipped..].iter().collect();
    if let Some(body) = rest.strip_suffix(TRUNCATION_MARKER) {
        prop_assert!(remaining.starts_with(body), "{} is not a cut of {}", body, remaining);
        prop_assert_eq!(body.chars().count(), max);
    } else {
        let (body, dropped) = match rest.rfind("[... ") {
            Some(at) => (&rest[..at], leading_marker(&rest[at..]).map_or(0, |(n, _)| n)),
            None => (rest, 0),
        };
        prop_assert!(remaining.starts_with(body));
        prop_assert_eq!(remaining.chars().count(), body.chars().count() + dropped);
        let end: String = chars[chars.len() - dropped..].iter().collect();
        prop_assert!(other.ends_with(&end));
    }
    Ok(1)
}

/// A history with unique message ids; the pairing rule may or may not hold.
fn history() -> impl Strategy<Value = Vec<Message>> {
    prop::collection::vec(message(), 0..40).prop_map(|messages| {
        messages.into_iter().enumerate().map(|(i, m)| m.with_id(format!("m{i}"))).collect()
    })
}

/// A history that keeps the pairing rule (a repaired arbitrary one, ids made unique again:
/// inserted error results have none).
fn valid_history() -> impl Strategy<Value = Vec<Message>> {
    history().prop_map(|messages| {
        repair_tool_pairing(messages.iter().map(Cow::Borrowed).collect())
            .into_iter()
            .enumerate()
            .map(|(i, m)| m.into_owned().with_id(format!("v{i}")))
            .collect()
    })
}

fn borrowed(messages: &[Message]) -> Vec<Cow<'_, Message>> {
    messages.iter().map(Cow::Borrowed).collect()
}

fn owned(messages: &[Cow<'_, Message>]) -> Vec<Message> {
    messages.iter().map(|m| m.as_ref().clone()).collect()
}

fn tokens(messages: &[Message]) -> u64 {
    messages.iter().map(|m| ApproxCounter.count_message(m)).sum()
}

/// `message` with every tool result's content replaced by `content(result)`.
fn with_contents(message: &Message, mut content: impl FnMut(&ToolResult) -> String) -> Message {
    let mut message = message.clone();
    for part in &mut message.parts {
        if let Part::ToolResult(result) = part {
            result.content = content(result);
        }
    }
    message
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn truncation_never_lengthens_and_cuts_on_char_boundaries(input in text(), max in 0..400_usize) {
        let out = truncate_chars(&input, max);
        let (in_chars, out_chars) = (input.chars().count(), out.chars().count());
        prop_assert!(out_chars <= in_chars);
        prop_assert!(out_chars <= max + MARKER_CHARS);
        if in_chars <= max + MARKER_CHARS {
            prop_assert!(matches!(out, Cow::Borrowed(_)));
        } else {
            let body: String = input.chars().take(max).collect();
            prop_assert_eq!(out.as_ref(), format!("{body}{TRUNCATION_MARKER}"));
        }
        prop_assert!(matches!(truncate_chars(&out, max), Cow::Borrowed(_)), "truncating twice cut again");
    }

    #[test]
    fn prune_cuts_only_tool_results_and_keeps_everything_else(messages in history(), max in 0..300_usize) {
        let pruned = prune(&messages, max, &ApproxCounter);
        prop_assert_eq!(pruned.messages.len(), messages.len());
        let mut cuts = 0;
        for (before, after) in messages.iter().zip(&pruned.messages) {
            if before.tool_results().next().is_none() || matches!(after, Cow::Borrowed(_)) {
                prop_assert!(matches!(after, Cow::Borrowed(m) if std::ptr::eq(*m, before)), "{} was copied", before.id);
                continue;
            }
            // Equal but for tool result contents, each a prefix of the original plus the marker.
            let mut results = after.tool_results();
            let expected = with_contents(before, |result| {
                let content = results.next().map(|r| r.content.clone()).unwrap_or_default();
                if content != result.content {
                    cuts += 1;
                }
                content
            });
            prop_assert_eq!(after.as_ref(), &expected);
            for (old, new) in before.tool_results().zip(after.tool_results()) {
                prop_assert!(new.content.chars().count() <= old.content.chars().count());
                prop_assert!(new.content.chars().count() <= max + MARKER_CHARS);
                if new.content != old.content {
                    let body = new.content.strip_suffix(TRUNCATION_MARKER).unwrap_or("missing marker");
                    prop_assert_eq!(body.chars().count(), max);
                    prop_assert!(old.content.starts_with(body));
                }
            }
        }
        prop_assert_eq!(pruned.truncated_results, cuts);
        prop_assert_eq!(pruned.tokens_before, tokens(&messages));
        let after = pruned.clone().into_owned();
        prop_assert_eq!(pruned.tokens_after, tokens(&after));
        prop_assert_eq!(check_tool_pairing(&after), check_tool_pairing(&messages));
    }

    #[test]
    fn argument_pruning_keeps_json_valid_and_identifying_values_whole(
        args in prop_oneof![arguments(), edit_arguments()],
        max in 0..300_usize,
    ) {
        let Some((cut, cuts)) = prune_arguments(&args, max) else {
            // Nothing cut: every string fits its limit.
            if let Ok(value) = serde_json::from_str::<Value>(&args) {
                prop_assert_eq!(check_cut_value(&value, &value, false, max)?, 0);
            }
            return Ok(());
        };
        prop_assert!(cuts > 0);
        match serde_json::from_str::<Value>(&args) {
            Ok(before) => {
                let after: Value = serde_json::from_str(&cut).expect("pruned arguments stay valid JSON");
                prop_assert_eq!(check_cut_value(&before, &after, false, max)?, cuts);
            }
            Err(_) => prop_assert_eq!(cut.clone(), truncate_chars(&args, max).into_owned()),
        }
        // Idempotent.
        prop_assert_eq!(prune_arguments(&cut, max), None);
    }

    #[test]
    fn pruning_arguments_keeps_call_ids_names_and_pairing(
        messages in valid_history(),
        args in prop::collection::vec(arguments(), 1..8),
        max in 0..300_usize,
    ) {
        let mut args = args.into_iter().cycle();
        let messages: Vec<Message> = messages
            .into_iter()
            .map(|mut m| {
                for part in &mut m.parts {
                    if let Part::ToolCall(call) = part {
                        call.arguments = args.next().unwrap_or_default();
                    }
                }
                m
            })
            .collect();
        let pruned = prune(&messages, max, &ApproxCounter);
        let after = pruned.clone().into_owned();
        let calls = |ms: &[Message]| {
            ms.iter().flat_map(|m| m.tool_calls().map(|c| (c.id.clone(), c.name.clone()))).collect::<Vec<_>>()
        };
        prop_assert_eq!(calls(&after), calls(&messages));
        prop_assert_eq!(check_tool_pairing(&after), Ok(()));
        prop_assert!(pruned.tokens_after <= pruned.tokens_before);
        let twice = prune(&after, max, &ApproxCounter);
        prop_assert_eq!((twice.truncated_results, twice.truncated_arguments), (0, 0));
    }

    #[test]
    fn pruning_twice_equals_pruning_once(messages in history(), max in 0..300_usize) {
        let once = prune(&messages, max, &ApproxCounter).into_owned();
        let twice = prune(&once, max, &ApproxCounter);
        prop_assert_eq!(twice.truncated_results, 0);
        prop_assert_eq!(twice.tokens_saved(), 0);
        prop_assert!(twice.messages.iter().all(|m| matches!(m, Cow::Borrowed(_))));
        prop_assert_eq!(twice.into_owned(), once.clone());
        // A stricter second pass equals a single pass at the stricter limit.
        let strict = max / 2;
        prop_assert_eq!(prune(&once, strict, &ApproxCounter).into_owned(), prune(&messages, strict, &ApproxCounter).into_owned());
    }

    #[test]
    fn repair_always_yields_a_valid_history(messages in history()) {
        let repaired = repair_tool_pairing(borrowed(&messages));
        prop_assert_eq!(check_tool_pairing(&repaired), Ok(()));
        // Valid input, and so repaired output, comes back untouched.
        let again = repair_tool_pairing(repaired.clone());
        prop_assert_eq!(owned(&again), owned(&repaired));
        if check_tool_pairing(&messages).is_ok() {
            prop_assert_eq!(owned(&repaired), messages.clone());
            prop_assert!(repaired.iter().all(|m| matches!(m, Cow::Borrowed(_))));
        }
        // Messages without tool results keep their order and stay uncopied.
        let plain: Vec<&str> = messages.iter().filter(|m| m.tool_results().next().is_none()).map(|m| m.id.as_str()).collect();
        let kept: Vec<&str> = repaired.iter().filter(|m| matches!(m, Cow::Borrowed(b) if b.tool_results().next().is_none())).map(|m| m.id.as_str()).collect();
        prop_assert_eq!(kept, plain);
        // Every result is one from the input or an inserted error result.
        let inputs: Vec<(&str, &str)> = messages.iter().flat_map(Message::tool_results).map(|r| (r.call_id.as_str(), r.content.as_str())).collect();
        for result in repaired.iter().flat_map(|m| m.tool_results().cloned().collect::<Vec<_>>()) {
            let inserted = result.is_error && result.content == INTERRUPTED_RESULT;
            prop_assert!(inserted || inputs.contains(&(result.call_id.as_str(), result.content.as_str())), "{result:?}");
        }
    }

    #[test]
    fn the_kept_tail_is_whole_turns_within_budget(messages in valid_history(), keep in 0..3_000_u64) {
        let split = keep_recent_split(&messages, keep, &ApproxCounter);
        let starts = turn_starts(&messages);
        if split < messages.len() {
            prop_assert!(starts.contains(&split), "split {split} is not a turn start {starts:?}");
            prop_assert!(tokens(&messages[split..]) <= keep);
            prop_assert_eq!(check_tool_pairing(&messages[split..]), Ok(()));
        }
        // Longest: the turn start before the split would not fit.
        if let Some(&earlier) = starts.iter().rev().find(|&&s| s < split) {
            prop_assert!(tokens(&messages[earlier..]) > keep);
        }
    }

    #[test]
    fn dropping_turns_keeps_pairing_summaries_and_the_last_prompt(messages in valid_history(), turns in 0..6_usize) {
        let mut kept = borrowed(&messages);
        let removed = drop_oldest_turns(&mut kept, turns);
        prop_assert_eq!(removed, messages.len() - kept.len());
        prop_assert_eq!(check_tool_pairing(&kept), Ok(()));
        let ids: Vec<&str> = kept.iter().map(|m| m.id.as_str()).collect();
        for message in &messages {
            if message.is_summary {
                prop_assert!(ids.contains(&message.id.as_str()), "summary {} removed", message.id);
            }
        }
        if let Some(last) = messages.iter().rev().find(|m| m.role == Role::User) {
            prop_assert!(ids.contains(&last.id.as_str()), "last user message {} removed", last.id);
        }
        // What is left is in the original order.
        let positions: Vec<usize> = ids.iter().filter_map(|id| messages.iter().position(|m| m.id == *id)).collect();
        prop_assert!(positions.windows(2).all(|w| w[0] < w[1]));
        if turns > 0 && turn_starts(&messages).len() > 1 {
            prop_assert!(removed > 0);
        }
    }

    #[test]
    fn omitting_outputs_keeps_pairing_and_goes_oldest_first(messages in valid_history(), count in 0..8_usize) {
        let mut history = borrowed(&messages);
        let changed = omit_oldest_tool_outputs(&mut history, count);
        prop_assert!(changed <= count);
        prop_assert_eq!(check_tool_pairing(&history), Ok(()));
        let before: Vec<&ToolResult> = messages.iter().flat_map(Message::tool_results).collect();
        let after: Vec<ToolResult> = history.iter().flat_map(|m| m.tool_results().cloned().collect::<Vec<_>>()).collect();
        prop_assert_eq!(before.len(), after.len());
        let mut seen = 0;
        for (old, new) in before.iter().zip(&after) {
            let long = old.content.len() > OMITTED_OUTPUT.len();
            if long && seen < count {
                seen += 1;
                prop_assert_eq!(new.content.as_str(), OMITTED_OUTPUT);
            } else {
                prop_assert_eq!(&new.content, &old.content);
            }
        }
        prop_assert_eq!(changed, seen);
    }
}
