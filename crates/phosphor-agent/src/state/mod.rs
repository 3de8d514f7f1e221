//! The session-state trail: what a continuing agent needs whatever the summarizing model writes.
//! Phosphor, not the model, writes it from the folded messages and appends it to every summary:
//!
//! - the user's requests, verbatim, newest first (a long one cut with the truncation marker);
//! - the current plan: the items and statuses of the latest plan a tool call wrote;
//! - the assistant's last answer (the end of a long one), so that a request that answers it
//!   ("yes, do that") still has what it answers;
//! - files with their last change (or `read` when never changed) and the names the changes
//!   define or touch ([`crate::names`]);
//! - commands with their outcome (exit status, the first error line of a failure, and the failure
//!   a run that went through followed);
//! - errors of other tools.
//!
//! Each compaction parses the previous summary's trail, adds what the folded messages show, and
//! renders the result within a token budget ([`crate::policy::state_budget`]): requests get at least
//! half of it, the other sections the rest, and whichever needs less leaves its share to the other.
//! The rules that recognise files, commands and plans are documented in the crate docs
//! ("The session-state trail").

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use phosphor_base::{Message, Part, Role, TokenCounter};
use phosphor_prune::{TRUNCATION_MARKER, truncate_chars};
use serde_json::Value;

use crate::names::add_names;

mod calls;
mod line;
mod outcome;
#[cfg(test)]
mod tests;

use calls::{CallEffect, changes_a_file, find_plan};
pub(crate) use line::LINE_BREAK;
use line::clip;
use outcome::{error_line, follow_up, outcome, went_through};

/// The heading that starts the trail inside a summary. Parsing relies on it; do not translate it.
pub const STATE_HEADING: &str = "## Session state";
/// The heading of summaries written before the trail held requests and the plan; still parsed.
const LEGACY_HEADING: &str = "## Artifact trail";

/// Most recent commands kept (before the token budget trims further).
const MAX_COMMANDS: usize = 40;
/// Most recent errors kept.
const MAX_ERRORS: usize = 20;
/// Characters kept of a request that is cut to fit the budget are at least this many.
const MIN_REQUEST_CHARS: usize = 100;
/// Characters kept of the assistant's last answer (its end).
const LAST_ANSWER_CHARS: usize = 800;

const SECTION_REQUESTS: &str = "User requests (newest first):";
const SECTION_PLAN: &str = "Plan (latest):";
const SECTION_LAST_ANSWER: &str = "Last answer:";
const SECTION_FILES: &str = "Files:";
const SECTION_COMMANDS: &str = "Commands:";
const SECTION_ERRORS: &str = "Errors seen:";
const LEGACY_READ: &str = "Files read:";
const LEGACY_WRITTEN: &str = "Files written:";
const LEGACY_COMMANDS: &str = "Commands run:";
const SECTIONS: &[&str] = &[
    SECTION_REQUESTS,
    SECTION_PLAN,
    SECTION_LAST_ANSWER,
    SECTION_FILES,
    SECTION_COMMANDS,
    SECTION_ERRORS,
    LEGACY_READ,
    LEGACY_WRITTEN,
    LEGACY_COMMANDS,
];
/// Continuation lines of a multi-line request are indented by this.
const INDENT: &str = "   ";
/// Every line of the last answer starts with this, so that none can pose as a section.
const QUOTE: &str = "> ";
/// Between a command and its outcome.
const OUTCOME_ARROW: &str = " → ";
/// Between a file's operation and the names its changes touched (`src/a.rs (edited: run, Repo)`),
/// and between two names.
const NAMES_AFTER: &str = ": ";
const NAMES_BETWEEN: &str = ", ";

/// What happened to a file last (a read never hides an earlier change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOp {
    /// Only read (or listed, searched).
    Read,
    /// Changed in place (an edit, a patch, a replacement).
    Edited,
    /// Written whole or created.
    Written,
    /// Deleted.
    Deleted,
    /// Moved or renamed (both the old and the new path).
    Moved,
}

impl FileOp {
    const ALL: [FileOp; 5] = [FileOp::Read, FileOp::Edited, FileOp::Written, FileOp::Deleted, FileOp::Moved];

    /// The word the trail shows.
    pub fn as_str(self) -> &'static str {
        match self {
            FileOp::Read => "read",
            FileOp::Edited => "edited",
            FileOp::Written => "written",
            FileOp::Deleted => "deleted",
            FileOp::Moved => "moved",
        }
    }

    fn parse(word: &str) -> Option<FileOp> {
        FileOp::ALL.into_iter().find(|op| op.as_str() == word)
    }
}

/// One item of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanItem {
    /// As the tool wrote it (`pending`, `in_progress`, `completed`, ...).
    pub status: String,
    /// What the item says.
    pub text: String,
}

/// A command and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRun {
    /// The command line (one line, clipped).
    pub command: String,
    /// How it ended (see `outcome`: `ok`, `exit 101: error[E0308]: ...`, `failed: ...`,
    /// `reported a failure: ...`, `done`), or empty when no result was seen; a run that went
    /// through after a failure adds ` (failed before: <that failure>)`.
    pub outcome: String,
}

/// The session-state trail (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionState {
    /// The user's requests, oldest first.
    pub requests: Vec<String>,
    /// The latest plan written through a tool.
    pub plan: Vec<PlanItem>,
    /// The text of the last assistant answer (a message with text and no tool call, not a
    /// summary): its last 800 characters, behind the truncation marker's words when cut,
    /// no white space at the end of a line; empty when none.
    pub last_answer: String,
    /// Files and their last operation, least recently touched first.
    pub files: Vec<(String, FileOp)>,
    /// By path, the names that the changes to a file (not reads) define or touch, oldest first
    /// (at most [`MAX_NAMES_PER_FILE`](crate::names::MAX_NAMES_PER_FILE)).
    pub names: BTreeMap<String, Vec<String>>,
    /// Commands run, oldest first, each once (with its latest outcome).
    pub commands: Vec<CommandRun>,
    /// Errors of tools that are not commands, oldest first.
    pub errors: Vec<String>,
}

impl SessionState {
    /// Collects the state `messages` show: user requests, plans, files and commands from tool
    /// calls, outcomes from their results.
    pub fn collect<'a>(messages: impl IntoIterator<Item = &'a Message>) -> SessionState {
        let mut state = SessionState::default();
        // Calls by id, so that a result finds its command (by its text: a later call may move it)
        // and the outcome of its run before.
        let mut pending: HashMap<String, (String, String)> = HashMap::new();
        for message in messages {
            if message.role == Role::User && !message.is_summary {
                state.push_request(message.text_content().trim());
            }
            // An answer ends a turn: text beside tool calls is narration ("Let me edit."), which
            // would hide the answer a request replies to.
            if message.role == Role::Assistant && !message.is_summary && message.tool_calls().next().is_none()
            {
                let text = answer_end(&message.text_content());
                if !text.is_empty() {
                    state.last_answer = text;
                }
            }
            for part in &message.parts {
                match part {
                    Part::ToolCall(call) => {
                        if let Some((command, mut before)) = state.add_call(&call.name, &call.arguments) {
                            // A parallel call of the same command, still unanswered, holds the run
                            // before both.
                            if before.is_empty()
                                && let Some((_, earlier)) = pending.values().find(|(c, _)| *c == command)
                            {
                                before = earlier.clone();
                            }
                            pending.insert(call.id.clone(), (command, before));
                        }
                    }
                    Part::ToolResult(result) => match pending.remove(&result.call_id) {
                        Some((command, before)) => {
                            let newest = outcome(&result.content, result.is_error);
                            match state.commands.iter_mut().find(|c| c.command == command) {
                                // A parallel call of the same command answered first: its outcome
                                // is the run before this one.
                                Some(run) if !run.outcome.is_empty() => {
                                    run.outcome = follow_up(&run.outcome.clone(), &newest);
                                }
                                Some(run) => run.outcome = follow_up(&before, &newest),
                                // Pushed out by 40 newer commands in the meantime.
                                None if result.is_error => {
                                    state.push_error(format!(
                                        "{}: {}",
                                        result.name,
                                        error_line(&result.content)
                                    ));
                                }
                                None => {}
                            }
                        }
                        None if result.is_error => {
                            state.push_error(format!("{}: {}", result.name, error_line(&result.content)));
                        }
                        None => {}
                    },
                    _ => {}
                }
            }
        }
        state
    }

    fn push_request(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.requests.retain(|r| r != text);
        self.requests.push(text.to_owned());
    }

    /// Records one call; returns the command it ran, if it ran one (as the trail keeps it), and the
    /// outcome of that command's run before.
    fn add_call(&mut self, tool: &str, arguments: &str) -> Option<(String, String)> {
        let Ok(args) = serde_json::from_str::<Value>(arguments) else { return None };
        if let Some(plan) = find_plan(&args, 0) {
            self.plan = plan;
        }
        let effect = CallEffect::of(tool, &args);
        for (path, op) in effect.files {
            self.touch(path, op);
        }
        for (path, names) in effect.names {
            self.add_names(&path, names);
        }
        let command = effect.command?;
        Some(self.push_command(CommandRun { command, outcome: String::new() }))
    }

    fn touch(&mut self, path: String, op: FileOp) {
        let path = clip(&path);
        let previous = self.files.iter().position(|(p, _)| *p == path).map(|at| self.files.remove(at).1);
        let op = match previous {
            Some(changed) if op == FileOp::Read && changed != FileOp::Read => changed,
            _ => op,
        };
        if op == FileOp::Deleted {
            self.names.remove(&path);
        }
        self.files.push((path, op));
    }

    fn add_names(&mut self, path: &str, names: Vec<String>) {
        if !names.is_empty() {
            add_names(self.names.entry(clip(path)).or_default(), names);
        }
    }

    /// Records a run of a command, which replaces its run before (its outcome followed up, see
    /// [`follow_up`]); returns the command as kept and the outcome of the run before (empty if
    /// none).
    fn push_command(&mut self, run: CommandRun) -> (String, String) {
        let command = clip(&run.command);
        let before = match self.commands.iter().position(|c| c.command == command) {
            Some(at) => self.commands.remove(at).outcome,
            None => String::new(),
        };
        self.commands
            .push(CommandRun { command: command.clone(), outcome: follow_up(&before, &run.outcome) });
        if self.commands.len() > MAX_COMMANDS {
            self.commands.remove(0);
        }
        (command, before)
    }

    fn push_error(&mut self, error: String) {
        self.errors.push(clip(&error));
        if self.errors.len() > MAX_ERRORS {
            self.errors.remove(0);
        }
    }

    /// Adds `newer` on top of this (older) state.
    pub fn merge(&mut self, newer: SessionState) {
        for request in newer.requests {
            self.push_request(&request);
        }
        if !newer.plan.is_empty() {
            self.plan = newer.plan;
        }
        if !newer.last_answer.is_empty() {
            self.last_answer = newer.last_answer;
        }
        for (path, op) in newer.files {
            self.touch(path, op);
        }
        for (path, names) in newer.names {
            self.add_names(&path, names);
        }
        for run in newer.commands {
            self.push_command(run);
        }
        for error in newer.errors {
            self.push_error(error);
        }
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
            && self.plan.is_empty()
            && self.last_answer.is_empty()
            && self.files.is_empty()
            && self.commands.is_empty()
            && self.errors.is_empty()
    }

    /// Whether the trail holds `command`, in the one-line form it keeps (cut short where long).
    pub fn has_command(&self, command: &str) -> bool {
        let line = clip(command);
        self.commands.iter().any(|r| r.command == line)
    }

    /// The last operation on `path`, if the trail has it.
    pub fn file_op(&self, path: &str) -> Option<FileOp> {
        self.files.iter().rev().find(|(p, _)| p == path).map(|(_, op)| *op)
    }

    /// Every file path, changed ones first, each group most recently touched first.
    pub fn file_paths(&self) -> Vec<String> {
        let changed = self.files.iter().rev().filter(|(_, op)| *op != FileOp::Read);
        let read = self.files.iter().rev().filter(|(_, op)| *op == FileOp::Read);
        changed.chain(read).map(|(p, _)| p.clone()).collect()
    }

    /// The trail as markdown, starting with [`STATE_HEADING`], within `budget` tokens of `counter`
    /// (the heading and one request, cut short if need be, always fit). Requests get at least half
    /// of the budget; the other sections drop their oldest lines first (errors, then commands, then
    /// read files, then the last answer, whole, then changed files, then plan items) when they do
    /// not fit theirs.
    pub fn render(&self, budget: u64, counter: &dyn TokenCounter) -> String {
        let line_cost = |line: &str| counter.count_text(line) + 1;
        let mut others = Sections::of(self);
        let mut others_cost: u64 = others.lines().map(|(_, l)| line_cost(l)).sum();
        let headings_cost = line_cost(STATE_HEADING) + SECTIONS.len() as u64;

        // Requests: newest first, while they fit what the other sections leave (at least half).
        let request_budget = budget.saturating_sub(headings_cost + others_cost.min(budget / 2));
        // One request may take half of that, so that a pasted log does not hide every earlier ask.
        let per_request = request_budget / 2;
        let mut requests = Vec::new();
        let mut spent = 0;
        for (number, request) in self.requests.iter().rev().enumerate() {
            let room = request_budget.saturating_sub(spent);
            let item = request_item(number + 1, request);
            let cost = line_cost(&item);
            if cost <= room.min(per_request) {
                spent += cost;
                requests.push(item);
                continue;
            }
            // Too long: cut to its share. The newest request always shows; an older one when a
            // useful part of it fits.
            let Some(cut) = cut_to(request, room.min(per_request), number == 0, counter) else { break };
            let item = request_item(number + 1, &cut);
            spent += line_cost(&item);
            requests.push(item);
            if cost > room {
                break;
            }
        }

        // The other sections: what the requests left, dropping the oldest lines that do not fit.
        let others_budget = budget.saturating_sub(headings_cost + spent);
        while others_cost > others_budget {
            let Some(dropped) = others.drop_oldest() else { break };
            others_cost -= dropped.iter().map(|line| line_cost(line)).sum::<u64>();
        }

        let mut out = format!("{STATE_HEADING}\n");
        if self.is_empty() {
            out.push_str("(no requests, files, commands or tool errors yet)\n");
            return out;
        }
        if !requests.is_empty() {
            out.push_str(SECTION_REQUESTS);
            out.push('\n');
            for item in requests {
                out.push_str(&item);
                out.push('\n');
            }
        }
        let mut current = "";
        for (section, line) in others.lines() {
            if section != current {
                out.push_str(section);
                out.push('\n');
                current = section;
            }
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    /// Reads back a trail rendered by [`SessionState::render`] from anywhere in `text` (the text
    /// after the last [`STATE_HEADING`], or the older `## Artifact trail`). No heading: an empty state.
    pub fn parse(text: &str) -> SessionState {
        let mut state = SessionState::default();
        let Some((_, trail)) = split(text) else { return state };
        let mut section = "";
        let mut newest_first = Vec::new();
        let mut answer: Vec<&str> = Vec::new();
        for line in trail.lines().skip(1) {
            if SECTIONS.contains(&line.trim_end()) {
                section = SECTIONS.iter().find(|s| **s == line.trim_end()).copied().unwrap_or("");
                continue;
            }
            if line.starts_with("## ") {
                break;
            }
            if section == SECTION_REQUESTS {
                if let Some(first) = numbered_item(line) {
                    newest_first.push(first.to_owned());
                } else if let (Some(last), Some(more)) =
                    (newest_first.last_mut(), line.strip_prefix(INDENT).or(line.is_empty().then_some("")))
                {
                    last.push('\n');
                    last.push_str(more);
                }
                continue;
            }
            if section == SECTION_LAST_ANSWER {
                if let Some(text) =
                    line.strip_prefix(QUOTE).or((line.trim_end() == QUOTE.trim_end()).then_some(""))
                {
                    answer.push(text);
                }
                continue;
            }
            let Some(item) = line.trim_end().strip_prefix("- ") else { continue };
            match section {
                SECTION_PLAN => {
                    let (status, text) =
                        item.strip_prefix('[').and_then(|rest| rest.split_once("] ")).unwrap_or(("", item));
                    state.plan.push(PlanItem { status: status.to_owned(), text: text.to_owned() });
                }
                SECTION_FILES => {
                    let parsed = item.rsplit_once(" (").and_then(|(path, inside)| {
                        let inside = inside.strip_suffix(')')?;
                        let (op, names) = inside.split_once(NAMES_AFTER).unwrap_or((inside, ""));
                        Some((path, FileOp::parse(op)?, names))
                    });
                    let (path, op, names) = parsed.unwrap_or((item, FileOp::Read, ""));
                    state.files.push((path.to_owned(), op));
                    let names: Vec<&str> = names.split(NAMES_BETWEEN).filter(|n| !n.is_empty()).collect();
                    if !names.is_empty() {
                        state.names.insert(path.to_owned(), names.into_iter().map(str::to_owned).collect());
                    }
                }
                LEGACY_READ => state.files.push((item.to_owned(), FileOp::Read)),
                LEGACY_WRITTEN => state.files.push((item.to_owned(), FileOp::Written)),
                SECTION_COMMANDS | LEGACY_COMMANDS => {
                    // The outcome follows the command's closing backtick, and may hold an arrow.
                    let closing = format!("`{OUTCOME_ARROW}");
                    let (command, outcome) =
                        match item.strip_prefix('`').and_then(|rest| rest.split_once(closing.as_str())) {
                            Some((command, outcome)) => (command, outcome),
                            None => {
                                (item.strip_prefix('`').and_then(|c| c.strip_suffix('`')).unwrap_or(item), "")
                            }
                        };
                    state
                        .commands
                        .push(CommandRun { command: command.to_owned(), outcome: outcome.to_owned() });
                }
                SECTION_ERRORS => state.errors.push(item.to_owned()),
                _ => {}
            }
        }
        for request in newest_first.into_iter().rev() {
            state.requests.push(request.trim_end().to_owned());
        }
        state.last_answer = answer.join("\n").trim_end().to_owned();
        // Rendered most recent first: back to least recent first (changed files count as the
        // more recent, which is also the order they are dropped in).
        state.files.reverse();
        state
    }
}

/// `text` split into the summary proper and the trail (from its heading on), if it has one.
/// The heading counts only as a whole line: a request quoted in the trail is indented, so it
/// cannot pose as one.
pub(crate) fn split(text: &str) -> Option<(&str, &str)> {
    let at = heading_at(text, STATE_HEADING).or_else(|| heading_at(text, LEGACY_HEADING))?;
    Some((text[..at].trim_end(), &text[at..]))
}

/// Where the last line that is exactly `heading` starts.
fn heading_at(text: &str, heading: &str) -> Option<usize> {
    text.match_indices(heading)
        .map(|(at, _)| at)
        .filter(|&at| {
            let starts_line = at == 0 || text[..at].ends_with('\n');
            let rest = &text[at + heading.len()..];
            starts_line && (rest.is_empty() || rest.starts_with('\n') || rest.starts_with("\r\n"))
        })
        .last()
}

/// In a summary request's input, every plan write but the latest is left out, call and result:
/// the latest plan is in the input whole and in the trail, and a coding agent rewrites its whole
/// list at every step (Claude Code's `TodoWrite`, 13 times in a real 124-message session), so the
/// older lists and their acknowledgements would fill the request with copies. Text beside a
/// removed call stays; a message left with nothing is removed. Returns how many were left out.
pub(crate) fn elide_superseded_plans(messages: &mut Vec<Cow<'_, Message>>) -> usize {
    // Where each plan write is, (message, part); then where its result is (ids may repeat in an
    // imported transcript: the first result with its id after the call).
    let mut plans: Vec<(usize, usize)> = Vec::new();
    for (m, message) in messages.iter().enumerate() {
        for (p, part) in message.parts.iter().enumerate() {
            let Part::ToolCall(call) = part else { continue };
            let Ok(args) = serde_json::from_str::<Value>(&call.arguments) else { continue };
            if find_plan(&args, 0).is_some() {
                plans.push((m, p));
            }
        }
    }
    let Some((_, superseded)) = plans.split_last() else { return 0 };
    let mut left_out: HashSet<(usize, usize)> = superseded.iter().copied().collect();
    for &(m, p) in superseded {
        let Part::ToolCall(call) = &messages[m].parts[p] else { continue };
        let result = messages.iter().enumerate().skip(m + 1).find_map(|(r, message)| {
            message.parts.iter().enumerate().find_map(|(q, part)| match part {
                Part::ToolResult(result) if result.call_id == call.id && !left_out.contains(&(r, q)) => {
                    Some((r, q))
                }
                _ => None,
            })
        });
        left_out.extend(result);
    }
    let mut index = 0;
    messages.retain_mut(|message| {
        let m = index;
        index += 1;
        if !(0..message.parts.len()).any(|p| left_out.contains(&(m, p))) {
            return true;
        }
        let parts = &mut message.to_mut().parts;
        let mut positions = 0..;
        parts.retain(|_| positions.next().is_some_and(|p| !left_out.contains(&(m, p))));
        parts.iter().any(|part| !matches!(part, Part::Finish { .. }))
    });
    superseded.len()
}

/// In a summary request's input (`messages`, pruned from `original` message for message and part
/// for part), the output of a file change in `messages[..before]` (the turns before the newest
/// folded one) that went through is cut at `max_chars` where that is shorter than what `messages`
/// shows of it (an outline turn shows only the marker), both judged on `original` (a failure
/// stated after the standard cut still counts): the call shows the change and the trail records
/// the file, and such an output only confirms it, often with an echo of the file (Claude Code's
/// `Edit` answers with a numbered snippet of the edited file, `NotebookEdit` with the new cell). An output that is an error, states a failing exit status or
/// has a line only failures print (diagnostics that some agents append to an edit's result) keeps
/// the standard limit. A change is what the trail records as one: a written, edited, deleted or
/// moved file, by a call that runs no command. Returns how many outputs it cut.
pub(crate) fn brief_file_change_outputs(
    messages: &mut [Cow<'_, Message>],
    original: &[Message],
    before: usize,
    max_chars: usize,
) -> usize {
    let before = before.min(messages.len()).min(original.len());
    // Changes by call id; a result takes the latest call with its id (ids may repeat in an
    // imported transcript).
    let mut changes: HashSet<String> = HashSet::new();
    let mut cut = 0;
    for (message, original) in messages[..before].iter_mut().zip(original) {
        let mut briefer: Vec<(usize, String)> = Vec::new();
        for (at, part) in original.parts.iter().enumerate() {
            match part {
                Part::ToolCall(call) => {
                    if changes_a_file(&call.name, &call.arguments) {
                        changes.insert(call.id.clone());
                    } else {
                        changes.remove(&call.id);
                    }
                }
                Part::ToolResult(result) if changes.remove(&result.call_id) => {
                    let went_through = went_through(&outcome(&result.content, result.is_error));
                    let shown = match message.parts.get(at) {
                        Some(Part::ToolResult(shown)) => shown.content.as_str(),
                        _ => "",
                    };
                    match (went_through, phosphor_prune::truncate_chars(&result.content, max_chars)) {
                        // Never longer than what the input already shows (an outline shows less).
                        (true, Cow::Owned(content)) if content.len() < shown.len() => {
                            briefer.push((at, content))
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        if briefer.is_empty() {
            continue;
        }
        let parts = &mut message.to_mut().parts;
        for (at, content) in briefer {
            if let Some(Part::ToolResult(result)) = parts.get_mut(at) {
                result.content = content;
                cut += 1;
            }
        }
    }
    cut
}

/// The summary text without its trail (the trail is merged separately).
pub fn strip(text: &str) -> &str {
    split(text).map_or(text, |(summary, _)| summary)
}

/// The lines of every section but the requests, in the order they are rendered.
struct Sections {
    plan: Vec<String>,
    answer: Vec<String>,
    changed: Vec<String>,
    read: Vec<String>,
    commands: Vec<String>,
    errors: Vec<String>,
}

impl Sections {
    fn of(state: &SessionState) -> Sections {
        let file = |(path, op): &(String, FileOp)| match state.names.get(path) {
            Some(names) if *op != FileOp::Read && !names.is_empty() => {
                format!("- {path} ({}{NAMES_AFTER}{})", op.as_str(), names.join(NAMES_BETWEEN))
            }
            _ => format!("- {path} ({})", op.as_str()),
        };
        Sections {
            plan: state.plan.iter().map(|i| format!("- [{}] {}", i.status, i.text)).collect(),
            answer: match state.last_answer.as_str() {
                "" => Vec::new(),
                answer => answer.lines().map(|l| format!("{QUOTE}{l}").trim_end().to_owned()).collect(),
            },
            changed: state.files.iter().rev().filter(|(_, op)| *op != FileOp::Read).map(file).collect(),
            read: state.files.iter().rev().filter(|(_, op)| *op == FileOp::Read).map(file).collect(),
            commands: state
                .commands
                .iter()
                .map(|c| match c.outcome.as_str() {
                    "" => format!("- `{}`", c.command),
                    outcome => format!("- `{}`{OUTCOME_ARROW}{outcome}", c.command),
                })
                .collect(),
            errors: state.errors.iter().map(|e| format!("- {e}")).collect(),
        }
    }

    fn lines(&self) -> impl Iterator<Item = (&'static str, &str)> {
        let plan = self.plan.iter().map(|l| (SECTION_PLAN, l.as_str()));
        let answer = self.answer.iter().map(|l| (SECTION_LAST_ANSWER, l.as_str()));
        let files = self.changed.iter().chain(&self.read).map(|l| (SECTION_FILES, l.as_str()));
        let commands = self.commands.iter().map(|l| (SECTION_COMMANDS, l.as_str()));
        let errors = self.errors.iter().map(|l| (SECTION_ERRORS, l.as_str()));
        plan.chain(answer).chain(files).chain(commands).chain(errors)
    }

    /// Drops the least useful lines: the oldest error, command or read file, then the last answer
    /// (whole: a part of it could read as all of it), then the oldest changed file, plan item.
    fn drop_oldest(&mut self) -> Option<Vec<String>> {
        if !self.errors.is_empty() {
            return Some(vec![self.errors.remove(0)]);
        }
        if !self.commands.is_empty() {
            return Some(vec![self.commands.remove(0)]);
        }
        // Files are stored most recent first.
        if let Some(read) = self.read.pop() {
            return Some(vec![read]);
        }
        if !self.answer.is_empty() {
            return Some(std::mem::take(&mut self.answer));
        }
        self.changed.pop().or_else(|| self.plan.pop()).map(|line| vec![line])
    }
}

/// `N. first line`, further lines indented.
fn request_item(number: usize, request: &str) -> String {
    let mut lines = request.lines();
    let mut out = format!("{number}. {}", lines.next().unwrap_or(""));
    for line in lines {
        out.push('\n');
        if !line.is_empty() {
            out.push_str(INDENT);
            out.push_str(line);
        }
    }
    out
}

/// The text of a `N. ` line, if it is one.
fn numbered_item(line: &str) -> Option<&str> {
    let digits = line.find(|c: char| !c.is_ascii_digit())?;
    if digits == 0 {
        return None;
    }
    line[digits..].strip_prefix(". ").or_else(|| (line[digits..].trim_end() == ".").then_some(""))
}

/// `request` cut (with the truncation marker) to about `room` tokens, or `None` when less than
/// [`MIN_REQUEST_CHARS`] would fit and `always` is false.
fn cut_to(request: &str, room: u64, always: bool, counter: &dyn TokenCounter) -> Option<String> {
    let mut chars = (room as usize).saturating_mul(3);
    loop {
        if chars < MIN_REQUEST_CHARS {
            if !always {
                return None;
            }
            return Some(truncate_chars(request, MIN_REQUEST_CHARS).into_owned());
        }
        let cut = truncate_chars(request, chars);
        if counter.count_text(&cut) < room {
            return Some(cut.into_owned());
        }
        chars = chars * 3 / 4;
    }
}

/// An answer as the trail keeps it: without white space at the end of a line, and when longer
/// than [`LAST_ANSWER_CHARS`], its end behind the truncation marker's words (`... [truncated]`):
/// a long answer ends with what it concluded or asks, which a reply answers.
fn answer_end(text: &str) -> String {
    let text = text.trim().lines().map(str::trim_end).collect::<Vec<_>>().join("\n");
    let chars = text.chars().count();
    if chars <= LAST_ANSWER_CHARS {
        return text;
    }
    let start = text.char_indices().nth(chars - LAST_ANSWER_CHARS).map_or(0, |(at, _)| at);
    format!("{}\n{}", TRUNCATION_MARKER.trim_start(), text[start..].trim_start())
}
