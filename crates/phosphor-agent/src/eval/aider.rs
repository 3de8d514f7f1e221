//! A converter of aider's chat histories (`.aider.chat.history.md`) into tool-calling transcripts.
//!
//! Aider writes edits as SEARCH/REPLACE blocks in its answers; the conversion turns each block
//! into an `edit_file` tool call (path, old and new text), so the session has the shape of a
//! tool-calling agent's, with the bulk in tool inputs as in real coding sessions:
//!
//! - `#### ` lines are the user's message; the lines after them, up to aider's own `> ` output,
//!   are the answer;
//! - the answer's SEARCH/REPLACE blocks become one assistant message with the text before the
//!   first block and one call per block, followed by a second assistant message with the text after
//!   the last block (or [`ENDED_WITH_EDITS`]);
//! - each call's result is the `> ` lines that name its file (or [`NO_EDIT_OUTPUT`]), the last
//!   call's also every other `> ` line;
//! - `> ` lines after an answer without edits, and those before an answer, were never shown to the
//!   model and are dropped; an empty answer is [`NO_ANSWER`].
//!
//! A history holds many sessions (`# aider chat started at ...`); each becomes its own transcript.

use phosphor_base::{Message, Part, Role, ToolCall};

/// The answer of a turn whose recorded answer is empty.
pub const NO_ANSWER: &str = "(no answer was recorded)";
/// The text after a turn's edits when the recorded answer ended with them.
pub const ENDED_WITH_EDITS: &str = "(the recorded answer ended with its edits)";
/// The result of an edit for which aider printed nothing.
pub const NO_EDIT_OUTPUT: &str = "(no output was recorded for this edit)";
/// Sessions with fewer turns are not evaluated: probes ask about the turns before the last one.
pub const MIN_EVAL_TURNS: usize = 3;
/// The tool name of an edit.
pub const EDIT_TOOL: &str = "edit_file";

/// One SEARCH/REPLACE block.
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    /// The file.
    pub path: String,
    /// The text replaced.
    pub search: String,
    /// The new text.
    pub replace: String,
}

/// One recorded exchange.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Turn {
    /// The user's message.
    pub user: String,
    /// The answer before the first edit (all of it without edits).
    pub before: String,
    /// The edits, in order.
    pub edits: Vec<Edit>,
    /// The answer after the last edit.
    pub after: String,
    /// Aider's own output lines.
    pub output: Vec<String>,
}

/// The sessions of an aider chat history, each a list of turns (sessions without one are dropped).
pub fn sessions(text: &str) -> Vec<Vec<Turn>> {
    let mut sessions = Vec::new();
    for session in text.split("\n# aider chat started at ") {
        let turns = turns(session);
        if !turns.is_empty() {
            sessions.push(turns);
        }
    }
    sessions
}

fn turns(session: &str) -> Vec<Turn> {
    enum Line<'a> {
        User(&'a str),
        Output(&'a str),
        Answer(&'a str),
    }
    fn classify(line: &str) -> Line<'_> {
        let marked = line.strip_suffix("  ").unwrap_or(line);
        if let Some(text) = marked.strip_prefix("#### ").or((marked == "####").then_some("")) {
            Line::User(text)
        } else if let Some(text) = marked.strip_prefix("> ").or((marked == ">").then_some("")) {
            Line::Output(text)
        } else {
            Line::Answer(line)
        }
    }
    let mut turns = Vec::new();
    // (user lines, answer lines, output lines) of the turn being read.
    let mut current: Option<(Vec<&str>, Vec<&str>, Vec<&str>)> = None;
    for line in session.lines() {
        match classify(line) {
            Line::User(text) => match &mut current {
                Some((user, answer, output)) if answer.is_empty() && output.is_empty() => user.push(text),
                _ => {
                    turns.extend(current.take().map(|(u, a, o)| build_turn(&u, &a, &o)));
                    current = Some((vec![text], Vec::new(), Vec::new()));
                }
            },
            Line::Answer(text) => {
                if let Some((_, answer, output)) = &mut current
                    && output.is_empty()
                {
                    answer.push(text);
                }
            }
            Line::Output(text) => {
                if let Some((_, answer, output)) = &mut current
                    && answer.iter().any(|l| !l.trim().is_empty())
                {
                    output.push(text);
                }
            }
        }
    }
    turns.extend(current.map(|(u, a, o)| build_turn(&u, &a, &o)));
    turns.retain(|t| !t.user.is_empty());
    turns
}

fn build_turn(user: &[&str], answer: &[&str], output: &[&str]) -> Turn {
    let mut turn = Turn {
        user: user.join("\n").trim().to_owned(),
        output: output.iter().map(|l| l.trim()).filter(|l| !l.is_empty()).map(str::to_owned).collect(),
        ..Turn::default()
    };
    let mut prose: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < answer.len() {
        if answer[i].trim_end() != "<<<<<<< SEARCH" {
            prose.push(answer[i]);
            i += 1;
            continue;
        }
        // The path is on the line before the opening fence (or right before the marker).
        if prose.last().is_some_and(|l| l.starts_with("```")) {
            prose.pop();
        }
        let path = prose.pop().unwrap_or("").trim().to_owned();
        let mut search = Vec::new();
        let mut replace = Vec::new();
        i += 1;
        while i < answer.len() && answer[i].trim_end() != "=======" {
            search.push(answer[i]);
            i += 1;
        }
        i += 1;
        while i < answer.len() && answer[i].trim_end() != ">>>>>>> REPLACE" {
            replace.push(answer[i]);
            i += 1;
        }
        i += 1;
        if i < answer.len() && answer[i].starts_with("```") {
            i += 1;
        }
        if turn.edits.is_empty() {
            turn.before = prose.join("\n").trim().to_owned();
            prose.clear();
        }
        turn.edits.push(Edit { path, search: search.join("\n"), replace: replace.join("\n") });
    }
    let rest = prose.join("\n").trim().to_owned();
    if turn.edits.is_empty() {
        turn.before = rest;
    } else {
        turn.after = rest;
    }
    turn
}

impl Edit {
    /// The edit as `edit_file` arguments (JSON text).
    pub fn arguments(&self) -> String {
        serde_json::json!({ "path": self.path, "old_string": self.search, "new_string": self.replace })
            .to_string()
    }
}

impl Turn {
    /// The answer before the edits, or [`NO_ANSWER`] for a turn without edits and without text.
    pub fn first_answer(&self) -> &str {
        if self.edits.is_empty() && self.before.is_empty() { NO_ANSWER } else { &self.before }
    }

    /// The answer after the edits ([`ENDED_WITH_EDITS`] when empty).
    pub fn last_answer(&self) -> &str {
        if self.after.is_empty() { ENDED_WITH_EDITS } else { &self.after }
    }

    /// The id of the `k`th edit call of turn `index`.
    pub fn call_id(index: usize, k: usize) -> String {
        format!("t{index}_e{k}")
    }

    /// The recorded result of each edit, in call order.
    pub fn edit_results(&self) -> Vec<String> {
        let mut results = Vec::new();
        let mut unclaimed: Vec<&str> = self.output.iter().map(String::as_str).collect();
        for edit in &self.edits {
            let (mine, others): (Vec<&str>, Vec<&str>) =
                unclaimed.iter().partition(|line| !edit.path.is_empty() && line.contains(edit.path.as_str()));
            unclaimed = others;
            results.push(if mine.is_empty() { NO_EDIT_OUTPUT.to_owned() } else { mine.join("\n") });
        }
        if let Some(last) = results.last_mut()
            && !unclaimed.is_empty()
        {
            last.push('\n');
            last.push_str(&unclaimed.join("\n"));
        }
        results
    }

    /// Turn `index` as messages: the user's, the answer (with the edit calls), the edits' results
    /// and the answer after them.
    pub fn messages(&self, index: usize) -> Vec<Message> {
        let mut messages = vec![Message::user(self.user.clone())];
        if self.edits.is_empty() {
            messages.push(Message::assistant(self.first_answer()));
            return messages;
        }
        let mut parts = Vec::new();
        if !self.before.is_empty() {
            parts.push(Part::Text { text: self.before.clone() });
        }
        for (k, edit) in self.edits.iter().enumerate() {
            parts.push(Part::ToolCall(ToolCall {
                id: Turn::call_id(index, k),
                name: EDIT_TOOL.into(),
                arguments: edit.arguments(),
            }));
        }
        messages.push(Message::new(Role::Assistant, parts));
        for (k, result) in self.edit_results().into_iter().enumerate() {
            messages.push(Message::tool_result(Turn::call_id(index, k), EDIT_TOOL, result, false));
        }
        messages.push(Message::assistant(self.last_answer()));
        messages
    }
}

/// Turns of a session taken into the evaluation corpus, at least and at most.
pub const CORPUS_TURNS: std::ops::RangeInclusive<usize> = 6..=30;
/// Edits of a session taken into the evaluation corpus, at least.
pub const CORPUS_MIN_EDITS: usize = 4;
/// Bytes of a corpus session's text (requests, answers, edits, outputs), at least and at most.
pub const CORPUS_BYTES: std::ops::RangeInclusive<usize> = 8_000..=60_000;

/// The sessions of an aider history that make the evaluation corpus (`eval/corpus/`): the first
/// `count` whose turns, edits and size fall in [`CORPUS_TURNS`], [`CORPUS_MIN_EDITS`] and
/// [`CORPUS_BYTES`], each with its number (from 1, in the history's order, as `phosphor eval`
/// names sessions).
pub fn corpus_sessions(text: &str, count: usize) -> Vec<(usize, Vec<Turn>)> {
    let bytes = |turn: &Turn| {
        turn.user.len()
            + turn.before.len()
            + turn.after.len()
            + turn.edits.iter().map(|e| e.path.len() + e.search.len() + e.replace.len()).sum::<usize>()
            + turn.output.iter().map(String::len).sum::<usize>()
    };
    sessions(text)
        .into_iter()
        .enumerate()
        .filter(|(_, turns)| {
            CORPUS_TURNS.contains(&turns.len())
                && turns.iter().map(|t| t.edits.len()).sum::<usize>() >= CORPUS_MIN_EDITS
                && CORPUS_BYTES.contains(&turns.iter().map(bytes).sum())
        })
        .take(count)
        .map(|(index, turns)| (index + 1, turns))
        .collect()
}

/// A session's turns as one transcript.
pub fn transcript(turns: &[Turn]) -> Vec<Message> {
    turns.iter().enumerate().flat_map(|(index, turn)| turn.messages(index)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn aider_format_is_read_into_turns_with_edits_and_outputs() {
        let text = "\
    > Aider v0.50.1  \n> Added a.py to the chat.  \n\n\
    #### fix the bug  \n####   \n#### in a.py  \n\n\
    Here is the fix:\n\na.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n\n\
    b.py\n```python\n<<<<<<< SEARCH\n=======\nnew file\n>>>>>>> REPLACE\n```\n\nThat should do it.\n\n\
    > Applied edit to a.py  \n> Applied edit to b.py  \n> Commit 1234 fix  \n\n\
    #### thanks  \n\nYou're welcome.\n\n> Tokens: 1k  \n\n\
    # aider chat started at 2024-08-01\n\n#### only a question  \n";
        let sessions = sessions(text);
        assert_eq!(sessions.len(), 2);
        let turns = &sessions[0];
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].user, "fix the bug\n\nin a.py");
        assert_eq!(turns[0].before, "Here is the fix:");
        assert_eq!(
            turns[0].edits,
            vec![
                Edit { path: "a.py".into(), search: "x = 1".into(), replace: "x = 2".into() },
                Edit { path: "b.py".into(), search: String::new(), replace: "new file".into() },
            ]
        );
        assert_eq!(turns[0].after, "That should do it.");
        assert_eq!(
            turns[0].edit_results(),
            vec!["Applied edit to a.py".to_owned(), "Applied edit to b.py\nCommit 1234 fix".to_owned()]
        );
        assert_eq!(turns[1].before, "You're welcome.");
        assert_eq!(sessions[1][0].user, "only a question");
        let messages = transcript(turns);
        let roles: Vec<Role> = messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Tool,
                Role::Assistant,
                Role::User,
                Role::Assistant
            ]
        );
        assert_eq!(messages[1].tool_calls().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["t0_e0", "t0_e1"]);
        assert_eq!(messages[4].text_content(), "That should do it.");
        phosphor_prune::check_tool_pairing(&messages).unwrap();
    }
}
