//! Probes: what a continuing agent must still know after a compaction, derived from the transcript
//! itself, each with the key strings a deterministic check looks for.
//!
//! Probes ask about the history *before the last turn* (the last user message and what follows it):
//! every strategy keeps the last turn, so a fact found only there tells strategies apart in no way.
//! A probe whose key strings all appear in the last turn is dropped for the same reason.
//!
//! - **artifact**: each file the history touched and each command it ran (recognised by the
//!   session-state trail's own rules, [`SessionState::collect`]); key: the path, or the command's
//!   first line (at most [`MAX_KEY_CHARS`]).
//! - **recall**: concrete facts from what the user, the assistant and the tools said: URLs, error
//!   lines (`error`, `panicked`, `exception`, `traceback`, `failed`), code-like identifiers
//!   (`snake_case`, `CamelCase`, `a::b`, backticked spans) and numbers of three or more digits the
//!   user or the assistant wrote; key: the fact itself.
//! - **intent**: each user request; keys: its [distinctive terms](distinctive_terms).
//! - **continuation**: the task state where the history before the last turn ends: each open item
//!   of the latest plan, the last command that failed (unless a later run of it succeeded), and
//!   what the assistant said last; keys: the item's or message's distinctive terms, the command.
//!
//! Each kind keeps at most [`MAX_PER_KIND`] probes, spread evenly over the history.

use std::collections::HashSet;

use phosphor_base::{Message, Part, Role};

use crate::state::SessionState;

/// Probes of one kind, at most.
pub const MAX_PER_KIND: usize = 24;
/// Characters of one key string, at most.
pub const MAX_KEY_CHARS: usize = 80;
/// Distinctive terms of one request, plan item or message, at most.
pub const MAX_TERMS: usize = 5;
/// Words shorter than this are distinctive only when they look like code.
pub const MIN_WORD_CHARS: usize = 4;
/// Words that say nothing about a request, however long.
pub const STOPWORDS: &[&str] = &[
    "about", "also", "could", "does", "from", "have", "into", "just", "like", "make", "need", "only",
    "please", "should", "some", "sure", "than", "that", "then", "there", "these", "they", "this", "those",
    "what", "when", "where", "which", "will", "with", "would", "your",
];

/// What a probe asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// Files read or changed, commands run.
    Artifact,
    /// Concrete facts from the history.
    Recall,
    /// The user's requests and constraints.
    Intent,
    /// The task state at the end.
    Continuation,
}

impl ProbeKind {
    /// Every kind, in report order.
    pub const ALL: [ProbeKind; 4] =
        [ProbeKind::Artifact, ProbeKind::Recall, ProbeKind::Intent, ProbeKind::Continuation];

    /// The kind's name in tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Artifact => "artifact",
            ProbeKind::Recall => "recall",
            ProbeKind::Intent => "intent",
            ProbeKind::Continuation => "continuation",
        }
    }
}

/// One question about the history, with what answers it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Probe {
    /// The kind.
    pub kind: ProbeKind,
    /// The question, as a judge model would be asked it.
    pub question: String,
    /// What the history says (the expected answer, for a judge).
    pub answer: String,
    /// The strings a compacted context must hold (compared [normalised](normalize)).
    pub keys: Vec<String>,
    /// The index of the message the probe comes from.
    pub message: usize,
}

/// The probes of `messages` (a transcript without its system prompt), in kind order, each kind in
/// history order.
pub fn derive(messages: &[Message]) -> Vec<Probe> {
    let last_turn = messages
        .iter()
        .rposition(|m| m.role == Role::User && !m.is_summary && m.tool_results().next().is_none())
        .filter(|&at| at > 0)
        .unwrap_or(messages.len());
    let earlier = &messages[..last_turn];
    let later = normalize(&context_text(&messages[last_turn..]));
    let mut probes = Vec::new();
    for kind in ProbeKind::ALL {
        let mut found = match kind {
            ProbeKind::Artifact => artifact(earlier),
            ProbeKind::Recall => recall(earlier),
            ProbeKind::Intent => intent(earlier),
            ProbeKind::Continuation => continuation(earlier),
        };
        found.retain(|p| !p.keys.is_empty() && !p.keys.iter().all(|k| later.contains(&normalize(k))));
        let mut seen = HashSet::new();
        found.retain(|p| seen.insert(p.keys.clone()));
        probes.extend(spread(found, MAX_PER_KIND));
    }
    probes
}

/// Lower case, runs of white space as one space, trimmed: how keys and contexts are compared.
pub fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Everything a model is shown of `messages`, as one text: each message's text, its tool calls
/// (name, and the arguments' keys and values, unescaped) and tool outputs.
pub fn context_text(messages: &[Message]) -> String {
    let mut out = String::new();
    for message in messages {
        for part in &message.parts {
            match part {
                Part::Text { text } | Part::Reasoning { text, .. } => out.push_str(text),
                Part::ToolCall(call) => {
                    out.push_str(&call.name);
                    out.push('\n');
                    match serde_json::from_str::<serde_json::Value>(&call.arguments) {
                        Ok(arguments) => push_strings(&arguments, &mut out),
                        Err(_) => out.push_str(&call.arguments),
                    }
                }
                Part::ToolResult(result) => out.push_str(&result.content),
                Part::Image { .. } | Part::Finish { .. } => {}
            }
            out.push('\n');
        }
    }
    out
}

/// Every key and string value of `value`, one per line (as a model reads arguments, unescaped).
fn push_strings(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::String(text) => {
            out.push_str(text);
            out.push('\n');
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| push_strings(item, out)),
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                out.push_str(key);
                out.push_str(": ");
                push_strings(item, out);
            }
        }
        other => {
            out.push_str(&other.to_string());
            out.push('\n');
        }
    }
}

/// The share of `probe`'s keys that `normalized_context` (a [`normalize`]d context) holds.
pub fn kept_share(probe: &Probe, normalized_context: &str) -> f64 {
    if probe.keys.is_empty() {
        return 1.0;
    }
    let kept = probe.keys.iter().filter(|k| normalized_context.contains(&normalize(k))).count();
    kept as f64 / probe.keys.len() as f64
}

/// Up to `max` items, evenly spaced, in order.
fn spread<T>(items: Vec<T>, max: usize) -> Vec<T> {
    let n = items.len();
    if n <= max {
        return items;
    }
    let picks: HashSet<usize> = (0..max).map(|i| i * n / max).collect();
    items.into_iter().enumerate().filter(|(i, _)| picks.contains(i)).map(|(_, item)| item).collect()
}

fn clip(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    line.chars().take(MAX_KEY_CHARS).collect::<String>().trim_end().to_owned()
}

/// Where in `messages` `key` first appears (in a tool call's arguments or a text), for ordering.
fn first_mention(messages: &[Message], key: &str) -> usize {
    messages
        .iter()
        .position(|m| {
            m.text_content().contains(key)
                || m.tool_calls().any(|c| c.arguments.contains(key) || c.arguments.contains(&escaped(key)))
        })
        .unwrap_or(0)
}

/// `text` as it appears inside a JSON string.
fn escaped(text: &str) -> String {
    let quoted = serde_json::Value::String(text.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

fn artifact(messages: &[Message]) -> Vec<Probe> {
    let state = SessionState::collect(messages);
    let mut probes: Vec<Probe> = state
        .files
        .iter()
        .map(|(path, op)| Probe {
            kind: ProbeKind::Artifact,
            question: format!("What happened to the file {path}?"),
            answer: format!("It was {}.", op.as_str()),
            keys: vec![path.clone()],
            message: first_mention(messages, path),
        })
        .collect();
    probes.extend(state.commands.iter().map(|run| {
        // The trail keeps a multi-line command on one line; its first line is what the history holds.
        let key = clip(run.command.split(crate::state::LINE_BREAK).next().unwrap_or_default());
        let outcome = if run.outcome.is_empty() { "no result was seen" } else { &run.outcome };
        Probe {
            kind: ProbeKind::Artifact,
            question: format!("Was the command `{key}` run, and how did it end?"),
            answer: format!("It ran: {outcome}."),
            message: first_mention(messages, &key),
            keys: vec![key],
        }
    }));
    probes.sort_by_key(|p| p.message);
    probes
}

fn recall(messages: &[Message]) -> Vec<Probe> {
    let mut probes = Vec::new();
    let mut push = |message: usize, what: &str, fact: String| {
        probes.push(Probe {
            kind: ProbeKind::Recall,
            question: format!("Which {what} came up in the conversation?"),
            answer: fact.clone(),
            keys: vec![fact],
            message,
        });
    };
    for (index, message) in messages.iter().enumerate() {
        let spoken = match message.role {
            Role::User | Role::Assistant => message.text_content(),
            _ => String::new(),
        };
        let outputs: Vec<&str> = message.tool_results().map(|r| r.content.as_str()).collect();
        for text in std::iter::once(spoken.as_str()).chain(outputs.iter().copied()) {
            for line in text.lines() {
                if is_error_line(line) {
                    push(index, "error message", clip(line));
                }
            }
            for word in text.split_whitespace() {
                if word.starts_with("http://") || word.starts_with("https://") {
                    let url = word.trim_end_matches(|c: char| ".,;:)]}>\"'`".contains(c));
                    push(index, "URL", url.chars().take(MAX_KEY_CHARS).collect());
                }
            }
        }
        for span in backticked(&spoken) {
            push(index, "name", span.to_owned());
        }
        for word in spoken.split_whitespace().map(trim_word) {
            if is_identifier(word) {
                push(index, "identifier", word.to_owned());
            } else if word.len() >= 3
                && word.chars().all(|c| c.is_ascii_digit() || c == ',' || c == '.')
                && word.chars().filter(char::is_ascii_digit).count() >= 3
                && word.chars().next().is_some_and(|c| c.is_ascii_digit())
            {
                push(index, "number", word.to_owned());
            }
        }
    }
    probes
}

fn is_error_line(line: &str) -> bool {
    let lower = line.trim().to_lowercase();
    lower.len() >= 8
        && ["error", "panicked", "exception", "traceback", "failed"].iter().any(|w| lower.contains(w))
}

/// Spans between single backticks, of 3 to [`MAX_KEY_CHARS`] characters on one line.
fn backticked(text: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(inside), Some(_)) = (parts.next(), parts.next()) {
            let n = inside.trim().chars().count();
            if (3..=MAX_KEY_CHARS).contains(&n) {
                spans.push(inside.trim());
            }
        }
    }
    spans
}

fn trim_word(word: &str) -> &str {
    word.trim_matches(|c: char| {
        !(c.is_alphanumeric() || c == '_' || c == '/' || c == '.' || c == ':' || c == '-')
    })
    .trim_end_matches(['.', ':', '-'])
}

/// `snake_case` (with a letter), `CamelCase` (a lower case letter followed by an upper case one)
/// or a `a::b` path, six characters or more.
fn is_identifier(word: &str) -> bool {
    if word.chars().count() < 6 || word.contains('/') || word.starts_with("http") {
        return false;
    }
    let wordish = word.chars().all(|c| c.is_alphanumeric() || c == '_' || c == ':' || c == '.');
    let snake = word.contains('_') && word.chars().any(char::is_alphabetic);
    let camel = word.as_bytes().windows(2).any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    wordish && (snake || camel || word.contains("::"))
}

/// Up to [`MAX_TERMS`] terms of `text` that identify it: code-like words first (paths, identifiers,
/// words with digits), then the longest other words of [`MIN_WORD_CHARS`] letters or more that are
/// not [`STOPWORDS`]; returned in the order they appear.
pub fn distinctive_terms(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut words: Vec<(bool, usize, usize, &str)> = Vec::new();
    for (position, word) in text.split_whitespace().map(trim_word).enumerate() {
        if word.is_empty() || !seen.insert(word.to_lowercase()) {
            continue;
        }
        let code = is_identifier(word)
            || (word.contains('/') && word.len() > 3 && !word.starts_with("http"))
            || (word.contains('.')
                && word.len() > 3
                && word.chars().any(char::is_alphabetic)
                && !word.ends_with('.'))
            || (word.chars().any(|c| c.is_ascii_digit()) && word.chars().count() >= 3);
        let long = word.chars().count() >= MIN_WORD_CHARS
            && word.chars().all(char::is_alphabetic)
            && !STOPWORDS.contains(&word.to_lowercase().as_str());
        if code || long {
            words.push((code, word.chars().count(), position, word));
        }
    }
    words.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    words.truncate(MAX_TERMS);
    words.sort_by_key(|w| w.2);
    words.into_iter().map(|w| w.3.chars().take(MAX_KEY_CHARS).collect()).collect()
}

fn intent(messages: &[Message]) -> Vec<Probe> {
    messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User && !m.is_summary && m.tool_results().next().is_none())
        .map(|(index, m)| {
            let text = m.text_content();
            Probe {
                kind: ProbeKind::Intent,
                question: "What did the user ask for here, and with which constraints?".to_owned(),
                answer: text.trim().to_owned(),
                keys: distinctive_terms(&text),
                message: index,
            }
        })
        .collect()
}

fn continuation(messages: &[Message]) -> Vec<Probe> {
    let state = SessionState::collect(messages);
    let end = messages.len().saturating_sub(1);
    let mut probes: Vec<Probe> = state
        .plan
        .iter()
        .filter(|item| {
            !["completed", "complete", "done", "cancelled"].contains(&item.status.to_lowercase().as_str())
        })
        .map(|item| Probe {
            kind: ProbeKind::Continuation,
            question: "Which items of the plan are still open?".to_owned(),
            answer: format!("[{}] {}", item.status, item.text),
            keys: distinctive_terms(&item.text),
            message: end,
        })
        .collect();
    let failed = |outcome: &str| {
        outcome.starts_with("exit ")
            || outcome.starts_with("failed")
            || outcome.starts_with("reported a failure")
    };
    if let Some(run) =
        state.commands.iter().rev().find(|run| !run.outcome.is_empty()).filter(|run| failed(&run.outcome))
    {
        let key = clip(&run.command);
        probes.push(Probe {
            kind: ProbeKind::Continuation,
            question: "Which command failed last, and how?".to_owned(),
            answer: format!("`{}` → {}", run.command, run.outcome),
            keys: vec![key],
            message: end,
        });
    }
    if let Some((index, last)) = messages
        .iter()
        .enumerate()
        .rev()
        .find(|(_, m)| m.role == Role::Assistant && !m.is_summary && !m.text_content().trim().is_empty())
    {
        let text = last.text_content();
        probes.push(Probe {
            kind: ProbeKind::Continuation,
            question: "What was the assistant doing or about to do when the history ends?".to_owned(),
            answer: text.trim().to_owned(),
            keys: distinctive_terms(&text),
            message: index,
        });
    }
    probes
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_base::ToolCall;
    use pretty_assertions::assert_eq;

    fn call(id: &str, name: &str, arguments: serde_json::Value) -> Message {
        Message::new(
            Role::Assistant,
            vec![Part::ToolCall(ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: arguments.to_string(),
            })],
        )
    }

    fn result(id: &str, name: &str, content: &str, is_error: bool) -> Message {
        Message::tool_result(id, name, content, is_error)
    }

    fn session() -> Vec<Message> {
        vec![
            Message::user(
                "Port the retry logic in `fetch_with_backoff` to src/net/client.rs; keep MSRV 1.74 and never block the executor.",
            ),
            call("c1", "read_file", serde_json::json!({"path": "src/net/client.rs"})),
            result("c1", "read_file", "pub fn fetch_with_backoff() {}", false),
            call("c2", "bash", serde_json::json!({"command": "cargo test -p net"})),
            result("c2", "bash", "error[E0308]: mismatched types\nexit code 101", true),
            call(
                "c3",
                "TodoWrite",
                serde_json::json!({"todos": [
                {"content": "Fix the mismatched types in RetryPolicy", "status": "in_progress"},
                {"content": "Document the backoff schedule", "status": "pending"},
                {"content": "Read the client", "status": "completed"}]}),
            ),
            result("c3", "TodoWrite", "ok", false),
            Message::assistant(
                "The RetryPolicy struct needs a Duration field; see https://docs.rs/tokio/latest/tokio/time/ for sleeps. Next I will change RetryPolicy::delay.",
            ),
            Message::user("Go on."),
            Message::assistant("Done."),
        ]
    }

    fn of(probes: &[Probe], kind: ProbeKind) -> Vec<(Vec<String>, String)> {
        probes.iter().filter(|p| p.kind == kind).map(|p| (p.keys.clone(), p.answer.clone())).collect()
    }

    #[test]
    fn artifact_probes_name_every_file_and_command_with_how_it_ended() {
        let probes = derive(&session());
        assert_eq!(
            of(&probes, ProbeKind::Artifact),
            vec![
                (vec!["src/net/client.rs".to_owned()], "It was read.".to_owned()),
                (
                    vec!["cargo test -p net".to_owned()],
                    "It ran: exit 101: error[E0308]: mismatched types.".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn a_multi_line_command_is_probed_by_its_first_line_which_the_history_holds() {
        let messages = [
            Message::user("Check the mapping."),
            call("c1", "Bash", serde_json::json!({"command": "python -c \"\nimport sys\nprint(sys.path)\""})),
            result("c1", "Bash", "['']", false),
            Message::user("Go on."),
        ];
        let probes = derive(&messages);
        let artifact = of(&probes, ProbeKind::Artifact);
        assert_eq!(artifact, [(vec!["python -c \"".to_owned()], "It ran: done.".to_owned())]);
        let context = normalize(&context_text(&messages));
        assert!(context.contains(&normalize(&artifact[0].0[0])), "{context}");
    }

    #[test]
    fn recall_probes_hold_errors_urls_identifiers_and_numbers() {
        let probes = derive(&session());
        let keys: Vec<String> = of(&probes, ProbeKind::Recall).into_iter().flat_map(|(k, _)| k).collect();
        for expected in [
            "fetch_with_backoff",
            "error[E0308]: mismatched types",
            "https://docs.rs/tokio/latest/tokio/time/",
            "RetryPolicy::delay",
            "RetryPolicy",
        ] {
            assert!(keys.contains(&expected.to_owned()), "{expected} missing from {keys:?}");
        }
        assert!(keys.contains(&"1.74".to_owned()), "a number of three digits: {keys:?}");
        // The last turn ("Go on.", "Done.") is not probed, and words are not facts.
        assert!(!keys.iter().any(|k| k.contains("Done") || k == "Port"), "{keys:?}");
    }

    #[test]
    fn intent_probes_keep_the_requests_distinctive_terms_but_not_the_last_turn() {
        let probes = derive(&session());
        assert_eq!(
            of(&probes, ProbeKind::Intent),
            vec![(
                ["retry", "fetch_with_backoff", "src/net/client.rs", "1.74", "executor"]
                    .map(str::to_owned)
                    .to_vec(),
                session()[0].text_content()
            )]
        );
    }

    #[test]
    fn continuation_probes_are_the_open_plan_the_last_failure_and_the_last_words() {
        let probes = derive(&session());
        let continuation = of(&probes, ProbeKind::Continuation);
        assert_eq!(
            continuation.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
            vec![
                vec!["mismatched".to_owned(), "types".to_owned(), "RetryPolicy".to_owned()],
                vec!["Document".to_owned(), "backoff".to_owned(), "schedule".to_owned()],
                vec!["cargo test -p net".to_owned()],
                vec![
                    "RetryPolicy".to_owned(),
                    "struct".to_owned(),
                    "Duration".to_owned(),
                    "https://docs.rs/tokio/latest/tokio/time/".to_owned(),
                    "RetryPolicy::delay".to_owned()
                ],
            ]
        );
        assert_eq!(continuation[0].1, "[in_progress] Fix the mismatched types in RetryPolicy");
    }

    #[test]
    fn a_probe_answered_by_the_last_turn_is_dropped() {
        let mut messages = session();
        messages.push(Message::user("Also check src/net/client.rs again and rerun cargo test -p net"));
        let probes = derive(&messages);
        assert!(of(&probes, ProbeKind::Artifact).is_empty(), "{probes:#?}");
    }

    #[test]
    fn kept_share_counts_normalised_keys() {
        let probe = Probe {
            kind: ProbeKind::Intent,
            question: String::new(),
            answer: String::new(),
            keys: vec!["Fetch_With_Backoff".into(), "never  block".into()],
            message: 0,
        };
        assert_eq!(kept_share(&probe, &normalize("we kept fetch_with_backoff")), 0.5);
        assert_eq!(kept_share(&probe, &normalize("fetch_with_backoff; never\n block")), 1.0);
    }

    #[test]
    fn spread_keeps_the_ends_and_evenly_spaced_items() {
        assert_eq!(spread((0..10).collect(), 4), vec![0, 2, 5, 7]);
        assert_eq!(spread((0..3).collect(), 4), vec![0, 1, 2]);
    }
}
