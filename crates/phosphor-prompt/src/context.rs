//! The facts about a session that a summarization template can use.

use serde::Serialize;

/// The variables a summarization template is rendered with. Every field is always defined (a template
/// that names any other variable fails, since rendering is strict about undefined variables); optional
/// facts are `none` and lists may be empty, so templates test them with `{% if ... %}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SummaryContext {
    /// The summary written by the previous compaction of this session, if any. The template asks the
    /// model to merge new information into it rather than start over.
    pub previous_summary: Option<String>,
    /// Extra instructions from the user for this summary (what to focus on), if any.
    pub custom_instructions: Option<String>,
    /// The session's identifier.
    pub session_id: String,
    /// The session's title.
    pub session_title: String,
    /// How many messages are being summarized.
    pub message_count: usize,
    /// Estimated tokens of the history before compaction.
    pub tokens_before: u64,
    /// The context window of the session's model, in tokens.
    pub context_window: u64,
    /// The session's model.
    pub model: String,
    /// The workspace directory, if the session has one.
    pub workspace: Option<String>,
    /// Files the session read or changed, from the deterministic session-state trail: the summary must keep them.
    pub files: Vec<String>,
    /// Names of the tools the session used.
    pub tools_used: Vec<String>,
    /// Today's date, as the caller wants it written (the crate reads no clock).
    pub date: String,
}

impl SummaryContext {
    /// A context with every optional fact present and every list non-empty: the trial render of
    /// [`Profiles::validate`](crate::Profiles::validate) uses it (and [`SummaryContext::default`], which
    /// has every optional fact absent) so that both sides of each `{% if %}` are exercised.
    pub fn sample() -> Self {
        Self {
            previous_summary: Some("## Goal\nThe user wants \"the build fixed\".".to_owned()),
            custom_instructions: Some("Focus on the database migration.".to_owned()),
            session_id: "01970000-0000-7000-8000-000000000000".to_owned(),
            session_title: "Fix the build".to_owned(),
            message_count: 42,
            tokens_before: 100_000,
            context_window: 128_000,
            model: "example-model".to_owned(),
            workspace: Some("/home/user/project".to_owned()),
            files: vec!["src/main.rs".to_owned(), "Cargo.toml".to_owned()],
            tools_used: vec!["bash".to_owned(), "edit".to_owned()],
            date: "2025-01-31".to_owned(),
        }
    }
}
