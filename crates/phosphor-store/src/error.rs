//! The error type of the session store.

use std::path::PathBuf;

/// Result alias for this crate's [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// What can go wrong reading or writing the session store. Each variant says what the caller
/// should do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database failed (I/O, a lock held too long, a constraint the store did not expect).
    /// `operation` names what the store was doing. A busy database
    /// ([`StoreError::is_busy`]) may pass: retry later. Anything else is not fixed by retrying;
    /// report it.
    #[error("database error while {operation}: {source}")]
    Database {
        /// What the store was doing, e.g. `appending message 01J...`.
        operation: String,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// The directory for a database file could not be created. Fix the path or its permissions.
    #[error("cannot create the directory {}: {source}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The schema could not be brought up to date: the database was written by a newer Phosphor,
    /// an applied migration was edited, or a migration failed. Do not retry; use a matching
    /// Phosphor version or move the database aside.
    #[error("cannot migrate the session database: {0}")]
    Migration(#[source] DriverError),
    /// The session or message does not exist. Check the id; nothing was written.
    #[error("{what} not found: {id}")]
    NotFound {
        /// `session` or `message`.
        what: &'static str,
        /// The id looked for.
        id: String,
    },
    /// A session or message with this id already exists. Use a fresh id (or the update method);
    /// nothing was written.
    #[error("{what} already exists: {id}")]
    AlreadyExists {
        /// `session` or `message`.
        what: &'static str,
        /// The id.
        id: String,
    },
    /// A stored row cannot be read back: a JSON column does not parse or a value is out of range.
    /// The database was changed outside Phosphor or by an incompatible version; do not retry.
    #[error("corrupt row {id}: column {field}: {reason}")]
    Corrupt {
        /// The id of the message or session whose row is bad.
        id: String,
        /// The column.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// [`update_message`](crate::SessionStore::update_message) or
    /// [`complete_summary`](crate::SessionStore::complete_summary) tried to change a field that
    /// may not change (see the rule on `update_message`). Nothing was written; append a new
    /// message instead.
    #[error("message {id}: field {field} may not change")]
    Immutable {
        /// The message id.
        id: String,
        /// The field the update tried to change.
        field: &'static str,
    },
    /// A value the store refuses: an empty id, a count over `i64::MAX`, or a summary pointer that
    /// does not name a complete summary message of the same session. Nothing was written; fix
    /// the value.
    #[error("invalid {field} for {id}: {reason}")]
    Invalid {
        /// The id of the session or message being written.
        id: String,
        /// The field.
        field: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },
}

impl StoreError {
    /// Wraps a driver error with what the store was doing.
    pub(crate) fn database(operation: impl std::fmt::Display, source: sqlx::Error) -> StoreError {
        StoreError::Database { operation: operation.to_string(), source: DriverError(Driver::Sqlx(source)) }
    }

    /// Wraps a failed migration.
    pub(crate) fn migration(source: sqlx::migrate::MigrateError) -> StoreError {
        StoreError::Migration(DriverError(Driver::Migrate(source)))
    }

    /// Whether the database was busy (another process held its lock past the busy timeout):
    /// the one database error that retrying later may fix.
    pub fn is_busy(&self) -> bool {
        matches!(self, StoreError::Database { source: DriverError(Driver::Sqlx(e)), .. } if crate::sqlite::is_busy(e))
    }
}

/// The database driver's own error, kept opaque: only `phosphor-store` names the driver (sqlx),
/// so upgrading it is not a breaking change for users of this crate. Its `Display` is the
/// driver's message, and [`std::error::Error::source`] continues the chain.
#[derive(Debug)]
pub struct DriverError(Driver);

#[derive(Debug)]
enum Driver {
    Sqlx(sqlx::Error),
    Migrate(sqlx::migrate::MigrateError),
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Driver::Sqlx(e) => e.fmt(f),
            Driver::Migrate(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DriverError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0 {
            Driver::Sqlx(e) => e.source(),
            Driver::Migrate(e) => e.source(),
        }
    }
}
