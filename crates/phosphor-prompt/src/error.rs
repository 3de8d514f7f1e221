//! The error type of prompt profile resolution and rendering.
//!
//! Problems with a user's template file (missing, unreadable, escaping its folder, failing to parse or
//! render) are not errors: they become warnings and the next tier is used. Only a bad profile name, which
//! no tier can serve, and a broken compiled-in template, which is a bug, are errors.

/// Result alias for this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong choosing or rendering a summarization prompt. Each variant says what the caller should do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The profile name is not allowed, so no file was looked up. Do not retry: ask the user to fix the
    /// name (the `profile` setting or the command-line flag) to one the message allows.
    #[error(
        "invalid profile name {name:?}: {reason}; a profile name is {rule}",
        rule = phosphor_base::config::profile_name_rule()
    )]
    InvalidProfileName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The template compiled into the program failed to parse or render. This is a bug in Phosphor, not
    /// in the user's files: do not retry; report it.
    #[error("the compiled-in default template failed{}: {message}", line.map(|l| format!(" at line {l}")).unwrap_or_default())]
    DefaultTemplate {
        /// The line of the template the error points at, when known.
        line: Option<usize>,
        /// minijinja's description of the failure.
        message: String,
    },
}
