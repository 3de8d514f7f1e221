//! What a command's result says about it: its outcome line, whether it went through, the line
//! that tells its failure.

use super::line::clip;

/// A command's outcome from its result: `ok` (exit status 0), `exit N: <first error line>`,
/// `failed: <line>` (a result marked as an error), `reported a failure: <line>` (no status stated,
/// but the output has a line that only failures print), or `done` (no status, no sign of failure).
pub(super) fn outcome(content: &str, is_error: bool) -> String {
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
pub(super) fn went_through(outcome: &str) -> bool {
    let head = outcome.split_once(FAILED_BEFORE).map_or(outcome, |(head, _)| head);
    head == OK || head == DONE
}

/// The outcome a command keeps after its `newest` run, given the outcome it had `before`: a run
/// that went through after a failure keeps that failure in a note (the error met, and that it is
/// fixed, are what a continuing agent needs of it), carried over later runs that go through; a
/// failure, or a run with no result seen yet, is itself.
pub(super) fn follow_up(before: &str, newest: &str) -> String {
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
pub(super) fn error_line(content: &str) -> String {
    let lines = || content.lines().map(str::trim).filter(|l| !l.is_empty());
    let marked = lines().find(|l| {
        let lower = l.to_ascii_lowercase();
        ["error", "fail", "panic", "exception", "fatal", "not found", "denied"]
            .iter()
            .any(|w| lower.contains(w))
    });
    clip(marked.or_else(|| lines().next()).unwrap_or(""))
}
