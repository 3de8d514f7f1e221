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
//! The rules that recognise files, commands and plans are documented in docs/ARCHITECTURE.md
//! ("The session-state trail").

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use phosphor_base::{Message, Part, Role, TokenCounter};
use phosphor_prune::{COMMAND_KEYS, PATH_KEYS, PATHS_KEYS, TRUNCATION_MARKER, truncate_chars};
use serde_json::Value;

use crate::names::{add_names, defined_name, is_prose, names_of_change, note_name};

/// The heading that starts the trail inside a summary. Parsing relies on it; do not translate it.
pub const STATE_HEADING: &str = "## Session state";
/// The heading of summaries written before the trail held requests and the plan; still parsed.
const LEGACY_HEADING: &str = "## Artifact trail";

/// Most recent commands kept (before the token budget trims further).
const MAX_COMMANDS: usize = 40;
/// Most recent errors kept.
const MAX_ERRORS: usize = 20;
/// Characters kept of one command, error line, plan item or path.
const MAX_LINE_CHARS: usize = 200;
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

/// Whether a call changes a file (the trail records a written, edited, deleted or moved file) and
/// runs no command.
fn changes_a_file(tool: &str, arguments: &str) -> bool {
    let Ok(args) = serde_json::from_str::<Value>(arguments) else { return false };
    let effect = CallEffect::of(tool, &args);
    effect.command.is_none() && effect.files.iter().any(|(_, op)| *op != FileOp::Read)
}

/// What a call does by the trail's rules: the files it touches, each with its operation, the
/// names its changes define or touch, by file, and the shell command it runs.
struct CallEffect {
    files: Vec<(String, FileOp)>,
    names: Vec<(String, Vec<String>)>,
    command: Option<String>,
}

impl CallEffect {
    fn of(tool: &str, args: &Value) -> CallEffect {
        let mut found = Found::default();
        scan(args, &mut found, 0);
        let op = file_op(tool, args, &found);
        // A text editor's `command` (`view`, `str_replace`) names its operation, not a shell command.
        let command = match editor_command(args) {
            Some(_) => None,
            None => found.commands.into_iter().next_back(),
        };
        // The names of a change: from its code when it changes one file in place or whole, and
        // from each file's part of a patch.
        let mut names = found.patch_names;
        if let ([path], FileOp::Edited | FileOp::Written, None) = (found.paths.as_slice(), op, &command)
            && !is_prose(path)
        {
            names.push((path.clone(), names_of_change(found.texts.iter().map(String::as_str))));
        }
        names.retain(|(_, defined)| !defined.is_empty());
        let mut files: Vec<(String, FileOp)> = found.paths.into_iter().map(|path| (path, op)).collect();
        files.extend(found.patch_files);
        CallEffect { files, names, command }
    }
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

/// What stands for a line break in a trail line (a multi-line command is kept on one line).
pub(crate) const LINE_BREAK: &str = " ⏎ ";

fn clip(text: &str) -> String {
    let one_line = text.trim().replace('\n', LINE_BREAK);
    match one_line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

/// What the scan of one call's arguments found.
#[derive(Default)]
struct Found {
    paths: Vec<String>,
    commands: Vec<String>,
    /// Files named by a patch in the arguments (`*** Update File: a.rs`, `+++ b/a.rs`).
    patch_files: Vec<(String, FileOp)>,
    /// The names each file's part of a patch defines or touches.
    patch_names: Vec<(String, Vec<String>)>,
    /// String values that are neither paths, commands nor patches (the code of an edit or a write).
    texts: Vec<String>,
    /// Keys seen anywhere (lower case), for the operation's shape.
    keys: Vec<String>,
}

/// Finds paths, commands and patches in tool arguments, a few levels deep.
fn scan(value: &Value, found: &mut Found, depth: usize) {
    let Value::Object(map) = value else { return };
    for (key, value) in map {
        let key = key.to_ascii_lowercase();
        match value {
            Value::String(s) if !s.trim().is_empty() => {
                if PATH_KEYS.contains(&key.as_str()) {
                    found.paths.push(s.trim().to_owned());
                } else if COMMAND_KEYS.contains(&key.as_str()) {
                    found.commands.push(s.trim().to_owned());
                } else if !patch_files(s, &mut found.patch_files, &mut found.patch_names) {
                    found.texts.push(s.clone());
                }
            }
            Value::Array(items) => {
                let strings: Vec<&str> = items.iter().filter_map(|i| i.as_str()).collect();
                if PATHS_KEYS.contains(&key.as_str()) {
                    found.paths.extend(strings.iter().map(|s| s.trim().to_owned()));
                } else if COMMAND_KEYS.contains(&key.as_str()) && !strings.is_empty() {
                    found.commands.push(strings.join(" "));
                } else if depth < 3 {
                    for item in items {
                        scan(item, found, depth + 1);
                    }
                }
            }
            Value::Object(_) if depth < 3 => scan(value, found, depth + 1),
            _ => {}
        }
        found.keys.push(key);
    }
}

/// Files a patch names: codex's `*** Add/Update/Delete File:` and `*** Move to:` lines, and a
/// unified diff's `+++ b/path` lines; with the names that each file's lines define (a line's
/// `+`, `-` or ` ` marker aside, and a hunk header's text after its last `@@`, where diffs name the
/// enclosing function). Returns whether `text` named a file.
fn patch_files(
    text: &str,
    files: &mut Vec<(String, FileOp)>,
    names: &mut Vec<(String, Vec<String>)>,
) -> bool {
    if !text.contains("*** ") && !text.contains("+++ ") {
        return false;
    }
    let named = files.len();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in text.lines() {
        let code = match line.rsplit_once("@@") {
            Some((_, header)) if line.starts_with("@@") => header,
            _ => line.strip_prefix(['+', '-', ' ']).unwrap_or(line),
        };
        if let (Some((path, defined)), Some(name)) = (&mut current, defined_name(code))
            && !is_prose(path)
        {
            note_name(defined, name);
        }
        let found = [
            ("*** Add File: ", FileOp::Written),
            ("*** Update File: ", FileOp::Edited),
            ("*** Delete File: ", FileOp::Deleted),
            ("*** Move to: ", FileOp::Moved),
            ("+++ b/", FileOp::Edited),
        ]
        .into_iter()
        .find_map(|(prefix, op)| line.strip_prefix(prefix).map(|path| (path.trim(), op)));
        if let Some((path, op)) = found.filter(|(path, _)| !path.is_empty() && *path != "/dev/null") {
            files.push((path.to_owned(), op));
            // After a move, the lines are the file's at its new path.
            names.extend(current.replace((path.to_owned(), Vec::new())));
        }
    }
    names.extend(current);
    files.len() > named
}

/// Keys whose presence means the call changes a file in place: either text of an edit pair
/// ([`phosphor_prune::EDIT_TEXT_PAIRS`]), a list of edits, a diff.
fn is_edit_key(key: &str) -> bool {
    phosphor_prune::EDIT_TEXT_PAIRS
        .iter()
        .any(|(old, new)| key.eq_ignore_ascii_case(old) || key.eq_ignore_ascii_case(new))
        || ["edits", "diff"].contains(&key)
}

/// Keys whose presence (with a path) means the call writes a whole file.
const CONTENT_KEYS: &[&str] = &["content", "contents", "file_text"];

/// The operation a call performs on the paths in its arguments: the text editor's `command` when
/// it has one, then the tool's name, then the arguments' shape; `read` otherwise.
fn file_op(tool: &str, args: &Value, found: &Found) -> FileOp {
    if let Some(op) = editor_command(args) {
        return op;
    }
    let name = tool.to_ascii_lowercase();
    let named = |words: &[&str]| words.iter().any(|w| name.contains(w));
    if named(&["delete", "remove", "unlink"]) || name == "rm" {
        FileOp::Deleted
    } else if named(&["move", "rename"]) || name == "mv" {
        FileOp::Moved
    } else if named(&["edit", "patch", "replace", "insert", "apply", "update", "modify"]) {
        FileOp::Edited
    } else if named(&["write", "create", "save"]) {
        FileOp::Written
    } else if found.keys.iter().any(|k| is_edit_key(k)) {
        FileOp::Edited
    } else if found.keys.iter().any(|k| CONTENT_KEYS.contains(&k.as_str())) {
        FileOp::Written
    } else {
        FileOp::Read
    }
}

/// A text editor tool's operation (Anthropic's `str_replace_based_edit_tool`: a `path` and a
/// `command` of `view`, `create`, `str_replace`, `insert` or `undo_edit`).
fn editor_command(args: &Value) -> Option<FileOp> {
    let command = args.get("command")?.as_str()?;
    args.get("path")?;
    match command {
        "view" => Some(FileOp::Read),
        "create" => Some(FileOp::Written),
        "str_replace" | "insert" | "undo_edit" => Some(FileOp::Edited),
        _ => None,
    }
}

/// Keys under which a plan item keeps its text, in order of preference.
const ITEM_TEXT_KEYS: &[&str] = &["content", "step", "text", "title", "task", "description", "name"];
/// Keys under which a plan item keeps its status.
const ITEM_STATUS_KEYS: &[&str] = &["status", "state"];
/// Boolean keys that mark a plan item done.
const ITEM_DONE_KEYS: &[&str] = &["done", "completed", "checked"];

/// The plan in a call's arguments: the first list (a level or two deep) of at least one object,
/// every one of which has a text and a status (or a done flag). Claude Code's `TodoWrite`
/// (`todos: [{content, status}]`), codex's `update_plan` (`plan: [{step, status}]`) and
/// opencode's `todowrite` have this shape.
fn find_plan(value: &Value, depth: usize) -> Option<Vec<PlanItem>> {
    let Value::Object(map) = value else { return None };
    for value in map.values() {
        if let Value::Array(items) = value {
            let plan: Option<Vec<PlanItem>> = items.iter().map(plan_item).collect();
            if let Some(plan) = plan.filter(|p| !p.is_empty()) {
                return Some(plan);
            }
        }
    }
    if depth < 2 {
        return map.values().find_map(|v| find_plan(v, depth + 1));
    }
    None
}

fn plan_item(item: &Value) -> Option<PlanItem> {
    let text = ITEM_TEXT_KEYS.iter().find_map(|k| item.get(k)?.as_str().filter(|s| !s.trim().is_empty()))?;
    let status =
        ITEM_STATUS_KEYS.iter().find_map(|k| item.get(k)?.as_str().map(str::to_owned)).or_else(|| {
            ITEM_DONE_KEYS.iter().find_map(|k| {
                item.get(k)?.as_bool().map(|done| if done { "completed" } else { "pending" }.to_owned())
            })
        })?;
    Some(PlanItem { status: clip(&status), text: clip(text) })
}

/// A command's outcome from its result: `ok` (exit status 0), `exit N: <first error line>`,
/// `failed: <line>` (a result marked as an error), `reported a failure: <line>` (no status stated,
/// but the output has a line that only failures print), or `done` (no status, no sign of failure).
fn outcome(content: &str, is_error: bool) -> String {
    match (exit_status(content), is_error) {
        (Some(0), false) => OK.to_owned(),
        (Some(code), _) => format!("exit {code}: {}", error_line(content)),
        (None, true) => format!("failed: {}", error_line(content)),
        (None, false) => match failure_line(content) {
            Some(line) => format!("reported a failure: {}", clip(line)),
            None => DONE.to_owned(),
        },
    }
}

/// The outcome of a run that went through with a status of 0, and of one that stated none.
const OK: &str = "ok";
const DONE: &str = "done";
/// Between the outcome of a run that went through and the failure of an earlier run it followed:
/// `ok (failed before: exit 101: error[E0308]: mismatched types)`.
const FAILED_BEFORE: &str = " (failed before: ";

/// Whether an outcome says the run went through (`ok` or `done`, with or without a note of an
/// earlier failure).
fn went_through(outcome: &str) -> bool {
    let head = outcome.split_once(FAILED_BEFORE).map_or(outcome, |(head, _)| head);
    head == OK || head == DONE
}

/// The outcome a command keeps after its `newest` run, given the outcome it had `before`: a run
/// that went through after a failure keeps that failure in a note (the error met, and that it is
/// fixed, are what a continuing agent needs of it), carried over later runs that go through; a
/// failure, or a run with no result seen yet, is itself.
fn follow_up(before: &str, newest: &str) -> String {
    if !went_through(newest) || newest.contains(FAILED_BEFORE) {
        return newest.to_owned();
    }
    let failure = if went_through(before) {
        before.split_once(FAILED_BEFORE).and_then(|(_, note)| note.strip_suffix(')'))
    } else {
        (!before.is_empty()).then_some(before)
    };
    match failure {
        Some(failure) => format!("{newest}{FAILED_BEFORE}{failure})"),
        None => newest.to_owned(),
    }
}

/// The first line of an output that only a failure prints: a compiler's or tool's `error:` line,
/// a failed test summary, a panic, a Python traceback, npm's `ERR!`, a missing command or file.
/// Stricter than [`error_line`]: the output of a command that succeeded may mention errors.
fn failure_line(content: &str) -> Option<&str> {
    const STARTS: &[&str] = &["error:", "error[", "fatal:", "Error:", "FAILED", "FAIL "];
    const CONTAINS: &[&str] = &[
        "test result: FAILED",
        "panicked at",
        "Traceback (most recent call last)",
        "npm ERR!",
        "command not found",
        "No such file or directory",
    ];
    content
        .lines()
        .map(str::trim)
        .find(|line| STARTS.iter().any(|s| line.starts_with(s)) || CONTAINS.iter().any(|c| line.contains(c)))
}

/// Phrases after which a result states an exit status.
const EXIT_MARKERS: &[&str] =
    &["exit code", "exit_code", "exitcode", "exit status", "exited with code", "returncode", "return code"];

/// The exit status a command's result states (`exit code: 1`, `"exit_code": 101`, `Process exited
/// with code 2`), if any: the last one stated.
fn exit_status(content: &str) -> Option<i64> {
    let lower = content.to_ascii_lowercase();
    let mut status = None;
    for marker in EXIT_MARKERS {
        for (at, _) in lower.match_indices(marker) {
            let rest = &lower[at + marker.len()..];
            let Some(skip) = rest.find(|c: char| c.is_ascii_digit() || c == '-') else { continue };
            if skip > 3 || rest[..skip].chars().any(char::is_alphanumeric) {
                continue;
            }
            let number: String = rest[skip..]
                .char_indices()
                .take_while(|(i, c)| c.is_ascii_digit() || (*i == 0 && *c == '-'))
                .map(|(_, c)| c)
                .collect();
            if let Ok(code) = number.parse() {
                status = Some(code);
            }
        }
    }
    status
}

/// The first line of `content` that mentions an error or failure, or else its first non-empty line.
fn error_line(content: &str) -> String {
    let lines = || content.lines().map(str::trim).filter(|l| !l.is_empty());
    let marked = lines().find(|l| {
        let lower = l.to_ascii_lowercase();
        ["error", "fail", "panic", "exception", "fatal", "not found", "denied"]
            .iter()
            .any(|w| lower.contains(w))
    });
    clip(marked.or_else(|| lines().next()).unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_base::{ApproxCounter, ToolCall};

    fn call(id: &str, name: &str, args: &str) -> Message {
        Message::new(
            Role::Assistant,
            vec![Part::ToolCall(ToolCall { id: id.into(), name: name.into(), arguments: args.into() })],
        )
    }

    fn result(id: &str, name: &str, content: &str, is_error: bool) -> Message {
        Message::tool_result(id, name, content, is_error)
    }

    fn files(state: &SessionState) -> Vec<(&str, FileOp)> {
        state.files.iter().map(|(p, op)| (p.as_str(), *op)).collect()
    }

    #[test]
    fn older_file_changes_that_went_through_show_their_output_in_brief() {
        let snippet = format!(
            "The file /repo/src/a.rs has been updated. Here's the result of running `cat -n` on a snippet:\n{}",
            "    12\tlet retries = 5;\n".repeat(20)
        );
        let diagnostics = format!("Edit applied.\n{}\nerror: expected `;`, found `}}`\n", "x".repeat(300));
        let edit =
            r#"{"file_path": "/repo/src/a.rs", "old_string": "retries = 3", "new_string": "retries = 5"}"#;
        let history = vec![
            Message::user("raise the retries"),
            call("1", "Edit", edit),
            result("1", "Edit", &snippet, false),
            call("2", "Edit", edit),
            result("2", "Edit", &diagnostics, false),
            call("3", "Edit", edit),
            result("3", "Edit", &snippet, true),
            call("4", "Bash", r#"{"command": "cargo test > /repo/log.txt"}"#),
            result("4", "Bash", &snippet, false),
            call("5", "Read", r#"{"file_path": "/repo/src/a.rs"}"#),
            result("5", "Read", &snippet, false),
            Message::user("now test it"),
            call("6", "Edit", edit),
            result("6", "Edit", &snippet, false),
        ];
        // Pruned first, as in a summary request: the failure in output 4 is past the 200th character.
        let mut input = phosphor_prune::prune_messages(&history, 200);
        assert_eq!(brief_file_change_outputs(&mut input, &history, 11, 50), 1);
        let output = |at: usize| input[at].tool_results().next().unwrap().content.clone();
        assert_eq!(output(2), truncate_chars(&snippet, 50));
        // A reported failure, an error, a command and a read keep their output; so does the newest turn.
        for at in [4, 6, 8, 10, 13] {
            assert_eq!(output(at), truncate_chars(&history[at].tool_results().next().unwrap().content, 200));
        }
        assert_eq!(phosphor_prune::check_tool_pairing(&input), Ok(()));
        assert_eq!(brief_file_change_outputs(&mut input, &history, 11, 50), 0, "a second pass cuts nothing");
    }

    #[test]
    fn every_plan_write_but_the_latest_is_left_out_of_the_summary_input() {
        let todos = |status: &str| {
            format!(
                r#"{{"todos": [{{"content": "Add the retry", "status": "{status}"}}, {{"content": "Test it", "status": "pending"}}]}}"#
            )
        };
        let plan_beside_text = Message::new(
            Role::Assistant,
            vec![
                Part::Text { text: "Planning.".into() },
                Part::ToolCall(ToolCall {
                    id: "3".into(),
                    name: "update_plan".into(),
                    arguments: todos("in_progress").replace("todos", "plan"),
                }),
            ],
        );
        let messages = [
            call("1", "TodoWrite", &todos("pending")),
            result("1", "TodoWrite", "ok", false),
            call("2", "read_file", r#"{"path": "src/lib.rs"}"#),
            result("2", "read_file", "fn main() {}", false),
            plan_beside_text,
            result("3", "update_plan", "ok", false),
            // An imported transcript may reuse an id: the latest write's result is its own.
            call("1", "TodoWrite", &todos("completed")),
            result("1", "TodoWrite", "done", false),
        ];
        let mut input: Vec<Cow<'_, Message>> = messages.iter().map(Cow::Borrowed).collect();
        assert_eq!(elide_superseded_plans(&mut input), 2);
        // The latest plan is the only one left: a second pass changes nothing.
        let once = input.clone();
        assert_eq!(elide_superseded_plans(&mut input), 0);
        assert_eq!(input, once);
        let kept: Vec<&Message> = input.iter().map(|m| &**m).collect();
        assert_eq!(
            kept,
            [&messages[2], &messages[3], &Message::assistant("Planning."), &messages[6], &messages[7]]
        );
        // Pairing holds, and the messages not changed are not copied.
        phosphor_prune::check_tool_pairing(&input.iter().map(|m| m.clone().into_owned()).collect::<Vec<_>>())
            .unwrap();
        assert!(matches!(input[0], Cow::Borrowed(_)) && matches!(input[4], Cow::Borrowed(_)));
        // The trail still has the latest plan; a single plan write is left as it is.
        assert_eq!(SessionState::collect(input.iter().map(|m| &**m)).plan[0].status, "completed");
        let mut one: Vec<Cow<'_, Message>> = messages[..2].iter().map(Cow::Borrowed).collect();
        assert_eq!(elide_superseded_plans(&mut one), 0);
        assert_eq!(one.len(), 2);
    }

    #[test]
    fn files_keep_their_last_change_and_tools_are_recognised_by_name_and_shape() {
        let messages = vec![
            call("1", "read_file", r#"{"path": "src/lib.rs"}"#),
            call("2", "edit_file", r#"{"file_path": "src/main.rs", "old": "a", "new": "b"}"#),
            call("3", "read_file", r#"{"path": "src/main.rs"}"#),
            call("4", "multi_read", r#"{"paths": ["a.txt", "b.txt"]}"#),
            call("5", "fs", r#"{"file_path": "notes.md", "old_string": "x", "new_string": "y"}"#),
            call("6", "fs", r#"{"file_path": "new.md", "content": "hello"}"#),
            call(
                "7",
                "str_replace_based_edit_tool",
                r#"{"command": "create", "path": "c.py", "file_text": "x"}"#,
            ),
            call("8", "str_replace_based_edit_tool", r#"{"command": "view", "path": "d.py"}"#),
            call(
                "9",
                "apply_patch",
                r#"{"input": "*** Begin Patch\n*** Update File: e.rs\n@@\n*** Delete File: f.rs\n*** Add File: g.rs\n*** End Patch"}"#,
            ),
            call("10", "delete_file", r#"{"path": "a.txt"}"#),
            call("11", "broken", "not json"),
        ];
        let state = SessionState::collect(&messages);
        let expected = vec![
            ("src/lib.rs", FileOp::Read),
            ("src/main.rs", FileOp::Edited),
            ("b.txt", FileOp::Read),
            ("notes.md", FileOp::Edited),
            ("new.md", FileOp::Written),
            ("c.py", FileOp::Written),
            ("d.py", FileOp::Read),
            ("e.rs", FileOp::Edited),
            ("f.rs", FileOp::Deleted),
            ("g.rs", FileOp::Written),
            ("a.txt", FileOp::Deleted),
        ];
        pretty_assertions::assert_eq!(files(&state), expected);
        assert!(
            state.commands.is_empty(),
            "an editor's command is not a shell command: {:?}",
            state.commands
        );
    }

    #[test]
    fn changed_files_carry_the_names_their_changes_define() {
        let edit = serde_json::json!({
            "file_path": "aider/repo.py",
            "old_string": "    def get_tracked_files(self):\n        files = []",
            "new_string": "    def get_head(self):\n        return None\n\n    def get_tracked_files(self):\n        files = []",
        });
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@ impl Repo {\n+    pub fn head(&self) {}\n\
                     @@ fn main() {\n-    run();\n*** Add File: src/b.rs\n+pub struct Store;\n*** Delete File: c.rs\n\
                     *** End Patch";
        let messages = vec![
            call("1", "Edit", &edit.to_string()),
            call("2", "Read", r#"{"file_path": "src/lib.rs"}"#),
            call("3", "Write", r#"{"file_path": "README.md", "content": "class names are case-sensitive"}"#),
            call("4", "apply_patch", &serde_json::json!({ "input": patch }).to_string()),
            call("5", "Write", r#"{"file_path": "gone.py", "content": "def f():\n    pass"}"#),
            call("6", "Bash", r#"{"command": "rm gone.py", "description": "def x(): remove it"}"#),
            call("7", "delete_file", r#"{"path": "gone.py"}"#),
            call("8", "Write", r#"{"file_path": "src/lib.rs", "content": "fn one() {}\nfn two() {}"}"#),
        ];
        let state = SessionState::collect(&messages);
        let names = |path: &str| state.names.get(path).cloned().unwrap_or_default();
        assert_eq!(names("aider/repo.py"), ["get_tracked_files", "get_head"]);
        assert_eq!(names("src/a.rs"), ["head", "main"]);
        assert_eq!(names("src/b.rs"), ["Store"]);
        // Prose is not code, a deleted file has no names left, and a command names nothing.
        for path in ["README.md", "gone.py", "c.rs"] {
            assert!(names(path).is_empty(), "{path}: {:?}", names(path));
        }
        assert_eq!(names("src/lib.rs"), ["one", "two"], "written after it was read");
        let text = state.render(10_000, &ApproxCounter);
        assert!(text.contains("- aider/repo.py (edited: get_tracked_files, get_head)\n"), "{text}");
        assert!(text.contains("- README.md (written)\n"), "{text}");
        pretty_assertions::assert_eq!(SessionState::parse(&text), state);

        // Across summaries: the newest names of a file, each once.
        let mut merged = SessionState::parse(&text);
        let again = serde_json::json!({"file_path": "aider/repo.py", "old_string": "def get_head(self):", "new_string": "def head(self):"});
        merged.merge(SessionState::collect(&[call("9", "Edit", &again.to_string())]));
        assert_eq!(merged.names["aider/repo.py"], ["get_tracked_files", "get_head", "head"]);
    }

    #[test]
    fn commands_carry_their_outcome_and_other_tool_errors_are_kept() {
        let messages = vec![
            call("1", "bash", r#"{"command": "cargo test\n--quiet"}"#),
            result("1", "bash", "running 3 tests\ntest result: ok\nexit code: 0", false),
            call("2", "bash", r#"{"command": "cargo build"}"#),
            result(
                "2",
                "bash",
                "Compiling x\nerror[E0308]: mismatched types\n  --> src/a.rs\nexit code: 101",
                false,
            ),
            call("3", "shell", r#"{"command": ["ls", "-la"]}"#),
            result("3", "shell", r#"{"output": "No such file", "metadata": {"exit_code": 2}}"#, false),
            call("4", "run", r#"{"cmd": "make"}"#),
            result("4", "run", "make: *** No rule to make target", true),
            call("5", "run", r#"{"cmd": "true"}"#),
            call("7", "bash", r#"{"command": "cargo test --lib"}"#),
            result(
                "7",
                "bash",
                "running 2 tests\ntest a ... FAILED\n\nerror: test failed, to rerun pass `--lib`",
                false,
            ),
            call("8", "bash", r#"{"command": "grep -rn error src"}"#),
            result("8", "bash", "src/lib.rs:3: // an error type", false),
            call("6", "fetch", r#"{"url": "https://example.com"}"#),
            result("6", "fetch", "\nHTTP 404 Not Found\nmore", true),
        ];
        let state = SessionState::collect(&messages);
        let commands: Vec<(&str, &str)> =
            state.commands.iter().map(|c| (c.command.as_str(), c.outcome.as_str())).collect();
        pretty_assertions::assert_eq!(
            commands,
            vec![
                ("cargo test ⏎ --quiet", "ok"),
                ("cargo build", "exit 101: error[E0308]: mismatched types"),
                ("ls -la", r#"exit 2: {"output": "No such file", "metadata": {"exit_code": 2}}"#),
                ("make", "failed: make: *** No rule to make target"),
                ("true", ""),
                ("cargo test --lib", "reported a failure: error: test failed, to rerun pass `--lib`"),
                ("grep -rn error src", "done"),
            ]
        );
        assert_eq!(state.errors, vec!["fetch: HTTP 404 Not Found".to_owned()]);
    }

    #[test]
    fn a_command_that_went_through_after_failing_keeps_the_failure_in_a_note() {
        let run = |id: &str, command: &str| {
            call(id, "Bash", &serde_json::json!({ "command": command }).to_string())
        };
        let messages = vec![
            run("1", "python compare.py"),
            result(
                "1",
                "Bash",
                "Traceback (most recent call last):\nModuleNotFoundError: No module named 'torch'",
                true,
            ),
            run("2", "pip install torch"),
            result("2", "Bash", "Successfully installed torch", false),
            run("3", "python compare.py"),
            result("3", "Bash", "compared 3 models", false),
            run("4", "cargo test"),
            result("4", "Bash", "test result: ok\nexit code: 0", false),
            run("5", "cargo test"),
            result("5", "Bash", "error[E0308]: mismatched types\nexit code: 101", false),
        ];
        let state = SessionState::collect(&messages);
        let outcome =
            |command: &str| state.commands.iter().find(|c| c.command == command).unwrap().outcome.clone();
        let fixed = "done (failed before: failed: ModuleNotFoundError: No module named 'torch')";
        assert_eq!(outcome("python compare.py"), fixed);
        assert_eq!(outcome("pip install torch"), "done");
        assert_eq!(
            outcome("cargo test"),
            "exit 101: error[E0308]: mismatched types",
            "a new failure is itself"
        );

        // Across summaries: a later run that goes through keeps the note; one that fails does not.
        let text = state.render(10_000, &ApproxCounter);
        assert!(text.contains(&format!("- `python compare.py` → {fixed}\n")), "{text}");
        let mut merged = SessionState::parse(&text);
        pretty_assertions::assert_eq!(merged, state);
        merged.merge(SessionState::collect(&[
            run("6", "python compare.py"),
            result("6", "Bash", "exit code: 0", false),
            run("7", "cargo test"),
            result("7", "Bash", "exit code: 0", false),
        ]));
        let outcome =
            |command: &str| merged.commands.iter().find(|c| c.command == command).unwrap().outcome.clone();
        assert_eq!(outcome("python compare.py"), fixed.replacen("done", "ok", 1));
        assert_eq!(outcome("cargo test"), "ok (failed before: exit 101: error[E0308]: mismatched types)");
        // A run with no result yet says nothing of the runs before; a failure is kept whole, even
        // one whose text holds the note's words.
        assert_eq!(follow_up("exit 1: boom", ""), "");
        assert_eq!(
            follow_up("exit 1: x (failed before: y)", "ok"),
            "ok (failed before: exit 1: x (failed before: y))"
        );
        // Parallel calls: each result finds its own command, though the second call moved the first.
        let parallel = SessionState::collect(&[
            run("1", "git diff"),
            result("1", "Bash", "exit code: 0", false),
            Message::new(
                Role::Assistant,
                ["make", "git diff"]
                    .iter()
                    .enumerate()
                    .map(|(n, command)| {
                        Part::ToolCall(ToolCall {
                            id: format!("p{n}"),
                            name: "Bash".into(),
                            arguments: serde_json::json!({ "command": command }).to_string(),
                        })
                    })
                    .collect(),
            ),
            result("p0", "Bash", "make: *** No targets\nexit code: 2", false),
            result("p1", "Bash", "exit code: 0", false),
        ]);
        let outcome =
            |command: &str| parallel.commands.iter().find(|c| c.command == command).unwrap().outcome.clone();
        assert_eq!(outcome("make"), "exit 2: make: *** No targets");
        assert_eq!(outcome("git diff"), "ok");
        // Two parallel runs of a command that failed before: the note survives both answers.
        let twice = |first: &str, second: &str| {
            let mut messages =
                vec![run("1", "cargo test"), result("1", "Bash", "error: boom\nexit code: 101", false)];
            messages.push(Message::new(
                Role::Assistant,
                ["a", "b"]
                    .iter()
                    .map(|id| {
                        Part::ToolCall(ToolCall {
                            id: (*id).into(),
                            name: "Bash".into(),
                            arguments: r#"{"command": "cargo test"}"#.into(),
                        })
                    })
                    .collect(),
            ));
            messages.push(result(first, "Bash", "exit code: 0", false));
            messages.push(result(second, "Bash", "exit code: 0", false));
            SessionState::collect(&messages).commands[0].outcome.clone()
        };
        assert_eq!(twice("a", "b"), "ok (failed before: exit 101: error: boom)");
        assert_eq!(twice("b", "a"), "ok (failed before: exit 101: error: boom)");
        // An outcome may hold an arrow.
        let arrow = SessionState::collect(&[
            run("9", "make"),
            result("9", "Bash", "error: a → b\nexit code: 1", false),
        ]);
        assert_eq!(SessionState::parse(&arrow.render(1_000, &ApproxCounter)), arrow);
        assert_eq!(follow_up("", "ok"), "ok");
        assert_eq!(follow_up("done", "ok"), "ok");
    }

    #[test]
    fn the_last_answer_stays_quoted_so_that_no_line_of_it_poses_as_a_section() {
        let proposal = "I found it: `segment.rs` splits on ASCII spaces only.\n\nFiles:\n## Session state\n- [x] not a plan\n\nShall I fix it?";
        let mut summary = Message::assistant("an older summary");
        summary.is_summary = true;
        let messages = vec![
            Message::user("why does the test fail?"),
            Message::assistant("Looking."),
            call("1", "read_file", r#"{"path": "src/segment.rs"}"#),
            result("1", "read_file", "fn split() {}", false),
            Message::assistant(proposal),
            Message::user("yes"),
            // Narration beside a call is not an answer: it would hide the one "yes" replies to.
            Message::new(
                Role::Assistant,
                vec![
                    Part::Text { text: "Let me edit.".into() },
                    Part::ToolCall(ToolCall {
                        id: "2".into(),
                        name: "read_file".into(),
                        arguments: r#"{"path": "src/lib.rs"}"#.into(),
                    }),
                ],
            ),
            summary,
        ];
        let state = SessionState::collect(&messages);
        assert_eq!(state.last_answer, proposal, "the last answer, not narration or a summary");
        let text = format!("Summary.\n\n{}", state.render(10_000, &ApproxCounter));
        assert!(
            text.contains(
                "Last answer:\n> I found it: `segment.rs` splits on ASCII spaces only.\n>\n> Files:\n"
            ),
            "{text}"
        );
        let parsed = SessionState::parse(&text);
        pretty_assertions::assert_eq!(parsed, state);
        assert_eq!(strip(&text), "Summary.", "the quoted heading is not the trail's");

        // A long answer keeps its end, where it concludes or asks; a newer answer replaces an older
        // one across summaries.
        let long_text = format!("{}\nShall I go on?  \n", "word \n".repeat(400));
        let long = SessionState::collect(&[Message::assistant(long_text)]);
        assert!(long.last_answer.starts_with("... [truncated]\nword\n"), "{}", long.last_answer);
        assert!(long.last_answer.ends_with("word\n\nShall I go on?"), "{}", long.last_answer);
        assert!(long.last_answer.chars().count() <= LAST_ANSWER_CHARS + 16);
        assert_eq!(SessionState::parse(&long.render(10_000, &ApproxCounter)), long);
        let mut merged = parsed;
        merged.merge(SessionState::collect(&[Message::user("yes, do it")]));
        assert_eq!(merged.last_answer, proposal, "no newer answer: the older stays");
        merged.merge(SessionState::collect(&[Message::assistant("Fixed.")]));
        assert_eq!(merged.last_answer, "Fixed.");
        // Over budget, the answer goes whole, after the read files and before any changed file.
        let mut sections = Sections::of(&state);
        let mut dropped = Vec::new();
        while let Some(lines) = sections.drop_oldest() {
            dropped.push(lines);
        }
        let answer = dropped.iter().position(|lines| lines[0].starts_with(QUOTE.trim_end())).unwrap();
        assert_eq!(dropped[answer].len(), proposal.lines().count());
        assert!(dropped[..answer].iter().all(|lines| lines[0].contains("(read)")), "{dropped:?}");
        assert_eq!(dropped.len(), answer + 1, "nothing but read files and the answer: {dropped:?}");
    }

    #[test]
    fn the_latest_plan_wins_whatever_tool_wrote_it() {
        let todo = r#"{"todos": [{"content": "Read the code", "status": "completed", "activeForm": "Reading"},
                                 {"content": "Fix the bug", "status": "in_progress"}]}"#;
        let codex = r#"{"explanation": "x", "plan": [{"step": "Write tests", "status": "pending"},
                                                     {"step": "Ship", "status": "pending"}]}"#;
        let checklist = r#"{"list": {"items": [{"title": "Deploy", "done": true}]}}"#;
        let not_a_plan = r#"{"items": [{"content": "no status"}]}"#;
        let state = SessionState::collect(&[call("1", "TodoWrite", todo)]);
        let item = |status: &str, text: &str| PlanItem { status: status.into(), text: text.into() };
        assert_eq!(state.plan, vec![item("completed", "Read the code"), item("in_progress", "Fix the bug")]);
        let state = SessionState::collect(&[call("1", "TodoWrite", todo), call("2", "update_plan", codex)]);
        assert_eq!(state.plan, vec![item("pending", "Write tests"), item("pending", "Ship")]);
        let state = SessionState::collect(&[call("1", "checklist", checklist), call("2", "x", not_a_plan)]);
        assert_eq!(state.plan, vec![item("completed", "Deploy")]);
    }

    #[test]
    fn requests_are_verbatim_newest_first_and_round_trip_with_everything_else() {
        let mut messages = vec![
            Message::user("Fix the failing test.\n\nIt is in `tests/a.rs`:\n    assert_eq!(1, 2);"),
            call("1", "TodoWrite", r#"{"todos": [{"content": "Fix it", "status": "in_progress"}]}"#),
            call("2", "bash", r#"{"command": "cargo test"}"#),
            result("2", "bash", "error: test failed\nexit code: 101", false),
            call("3", "write_file", r#"{"path": "src/a (copy).rs", "content": "x"}"#),
            call("4", "grep", r#"{"pattern": "x"}"#),
            result("4", "grep", "boom", true),
            Message::user("2. Then run clippy."),
        ];
        let mut summary = Message::assistant("old summary");
        summary.is_summary = true;
        messages.push(summary);
        let state = SessionState::collect(&messages);
        assert_eq!(state.requests.len(), 2);
        let text = format!("Some summary.\n\n{}", state.render(10_000, &ApproxCounter));
        assert!(text.contains("1. 2. Then run clippy.\n2. Fix the failing test.\n\n   It is in"), "{text}");
        pretty_assertions::assert_eq!(SessionState::parse(&text), state);
        assert_eq!(strip(&text), "Some summary.");
        assert_eq!(SessionState::parse("no heading here"), SessionState::default());
    }

    #[test]
    fn older_trails_are_still_read() {
        let text = "Summary.\n\n## Artifact trail\nFiles written:\n- a.rs\nFiles read:\n- b.rs\nCommands run:\n- `make`\nErrors seen:\n- bash: boom\n";
        let state = SessionState::parse(text);
        // Least recent first; changed files count as the more recent.
        assert_eq!(files(&state), vec![("b.rs", FileOp::Read), ("a.rs", FileOp::Written)]);
        assert_eq!(state.commands, vec![CommandRun { command: "make".into(), outcome: String::new() }]);
        assert_eq!(state.errors, vec!["bash: boom".to_owned()]);
        assert_eq!(strip(text), "Summary.");
    }

    #[test]
    fn merge_keeps_the_newest_of_everything() {
        let older = SessionState::collect(&[
            Message::user("first"),
            call("1", "read_file", r#"{"path": "a.rs"}"#),
            call("2", "run", r#"{"cmd": "make"}"#),
            call("3", "TodoWrite", r#"{"todos": [{"content": "A", "status": "pending"}]}"#),
        ]);
        let mut merged = SessionState::parse(&older.render(10_000, &ApproxCounter));
        merged.merge(SessionState::collect(&[
            Message::user("second"),
            Message::user("first"),
            call("1", "write_file", r#"{"path": "a.rs"}"#),
            call("2", "run", r#"{"cmd": "make"}"#),
            result("2", "run", "ok", false),
        ]));
        assert_eq!(merged.requests, vec!["second".to_owned(), "first".to_owned()]);
        assert_eq!(files(&merged), vec![("a.rs", FileOp::Written)]);
        assert_eq!(merged.commands, vec![CommandRun { command: "make".into(), outcome: "done".into() }]);
        assert_eq!(merged.plan.len(), 1, "no newer plan: the older one stays");
    }

    #[test]
    fn the_budget_keeps_the_newest_requests_and_trims_the_oldest_lines() {
        let counter = ApproxCounter;
        let mut state = SessionState::default();
        for n in 0..50 {
            state.push_request(&format!("request {n}: {}", "word ".repeat(40)));
            state.touch(format!("src/file{n}.rs"), FileOp::Read);
            state.push_command(CommandRun { command: format!("cargo test {n}"), outcome: "ok".into() });
        }
        state.push_request(&"huge paste ".repeat(2_000));
        for budget in [300_u64, 1_000, 4_000] {
            let text = state.render(budget, &counter);
            let tokens = counter.count_text(&text);
            assert!(tokens <= budget + budget / 10, "budget {budget}: {tokens} tokens\n{text}");
            let parsed = SessionState::parse(&text);
            // The newest request shows first, cut with the marker; older ones newest first.
            assert!(parsed.requests.last().unwrap().starts_with("huge paste"), "{text}");
            assert!(parsed.requests.last().unwrap().ends_with("... [truncated]"), "{text}");
            // The newest commands and files survive, the oldest go first.
            if let Some(first) = parsed.commands.first() {
                assert_eq!(parsed.commands.last().unwrap().command, "cargo test 49");
                assert_ne!(first.command, "cargo test 0", "budget {budget}");
            }
        }
        // Everything fits a large budget.
        let all = SessionState::parse(&state.render(100_000, &counter));
        assert_eq!(all.requests.len(), 51);
        assert_eq!(all.commands.len(), MAX_COMMANDS);
        assert_eq!(all.files.len(), 50);
    }
}
