//! [`SqliteStore`]: the embedded SQLite implementation of [`SessionStore`].

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use phosphor_core::message::{Message, MessageStatus, Part, Role, Session, Usage};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteExecutor, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, SqlSafeStr};

use crate::SessionStore;
use crate::error::{Result, StoreError};

/// The schema migrations, in order: `(file name, SQL)`. The version and description are read
/// from the file name the way `sqlx migrate` reads them (`0001_init.sql` is version 1, `init`),
/// so a database migrated here is also understood by `sqlx-cli`, and the other way round.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_init.sql", include_str!("../migrations/0001_init.sql")),
    ("0002_pinned_message.sql", include_str!("../migrations/0002_pinned_message.sql")),
    ("0003_masked_until.sql", include_str!("../migrations/0003_masked_until.sql")),
];

/// How long a connection waits for another writer's lock before failing with `database is locked`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections of a file database's pool. SQLite allows one writer at a time (others wait up to
/// [`BUSY_TIMEOUT`]); the extra connections let reads run beside a write in WAL mode.
const FILE_POOL_CONNECTIONS: u32 = 8;

/// The columns of a message row, in the order [`message_from_row`] reads them.
macro_rules! message_columns {
    () => {
        "id, session_id, role, parts, is_summary, summarized_until, status, name, model, usage, created_at, updated_at, \
         pinned_message"
    };
}

/// The columns of a session row, in the order [`session_from_row`] reads them.
macro_rules! session_columns {
    () => {
        "id, title, summary_message_id, prompt_tokens, completion_tokens, current_tokens, created_at, updated_at, \
         masked_until"
    };
}

/// All messages of session `?1`, in order.
const MESSAGES_SQL: &str =
    concat!("SELECT ", message_columns!(), " FROM messages WHERE session_id = ?1 ORDER BY seq");

/// The history of session `?1` (the rule of `phosphor_core::message::history_view`): the
/// session's summary when it points at a complete summary of its own, then the summary's
/// `pinned_message` when it is a complete, non-summary message of the session, then every
/// complete, non-summary message stored after the summary's `summarized_until` message (after
/// none, so from the start, without a summary or a cut). The summary is ordered first with
/// `ord = -1` and the pinned message next with `ord = 0`; every lookup is by index and the last
/// arm is read in index order.
const HISTORY_SQL: &str = concat!(
    "WITH summary AS (SELECT m.seq, m.summarized_until, m.pinned_message FROM sessions AS s ",
    "JOIN messages AS m ON m.id = s.summary_message_id WHERE s.id = ?1 AND m.session_id = ?1 ",
    "AND m.is_summary = 1 AND m.status = 'complete') ",
    "SELECT -1 AS ord, ",
    message_columns!(),
    " FROM messages WHERE seq = (SELECT seq FROM summary) ",
    "UNION ALL SELECT 0 AS ord, ",
    message_columns!(),
    " FROM messages WHERE id = (SELECT pinned_message FROM summary) AND session_id = ?1 ",
    "AND is_summary = 0 AND status = 'complete' ",
    "UNION ALL SELECT seq AS ord, ",
    message_columns!(),
    " FROM messages WHERE session_id = ?1 AND is_summary = 0 AND status = 'complete' AND seq > COALESCE(",
    "(SELECT c.seq FROM messages AS c WHERE c.id = (SELECT summarized_until FROM summary) AND c.session_id = ?1), 0) ",
    "ORDER BY ord"
);

/// The number of messages of session `?1`.
const COUNT_SQL: &str = "SELECT COUNT(*) FROM messages WHERE session_id = ?1";

/// A [`SessionStore`] kept in SQLite: a file (WAL journal, `synchronous=NORMAL`, foreign keys
/// on, a 5 s busy timeout) or a private in-memory database.
///
/// Cloning is cheap and every clone shares the same connection pool.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Opens the database file at `path`, creating its parent directories and the file when
    /// missing, and brings the schema up to date.
    pub async fn open(path: &Path) -> Result<SqliteStore> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|source| StoreError::Io { path: parent.to_path_buf(), source })?;
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        // Switching a new file to WAL needs a lock that SQLite does not wait for (no busy handler):
        // when another process is creating the same database, opening is retried for as long as
        // the busy timeout.
        let started = std::time::Instant::now();
        let pool = loop {
            match SqlitePoolOptions::new()
                .max_connections(FILE_POOL_CONNECTIONS)
                .connect_with(options.clone())
                .await
            {
                Err(e) if is_busy(&e) && started.elapsed() < BUSY_TIMEOUT => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                result => {
                    break result
                        .map_err(|e| StoreError::database(format_args!("opening {}", path.display()), e))?;
                }
            }
        };
        SqliteStore::migrated(pool).await
    }

    /// A new, empty in-memory database, gone when the store is closed or dropped.
    ///
    /// The pool holds exactly one connection that never expires, because every SQLite
    /// connection to `:memory:` opens a database of its own: with one connection every clone
    /// of the store sees the same data. Calls from several tasks take turns.
    pub async fn in_memory() -> Result<SqliteStore> {
        let options =
            SqliteConnectOptions::new().in_memory(true).foreign_keys(true).busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await
            .map_err(|e| StoreError::database("opening an in-memory database", e))?;
        SqliteStore::migrated(pool).await
    }

    /// Where Phosphor keeps its sessions by default: `phosphor/sessions.db` under the platform's
    /// local data directory (`$XDG_DATA_HOME` or `~/.local/share` on Linux,
    /// `~/Library/Application Support` on macOS, `%LOCALAPPDATA%` on Windows). `None` when the
    /// platform has no such directory.
    pub fn default_path() -> Option<PathBuf> {
        dirs::data_local_dir().map(|dir| dir.join("phosphor").join("sessions.db"))
    }

    /// Waits for running calls to finish and closes every connection. A file database is
    /// checkpointed, so its `-wal` file is folded back into the main file.
    pub async fn close(self) {
        self.pool.close().await;
    }

    /// Applies the pending migrations inside one `BEGIN IMMEDIATE` transaction, so that two
    /// processes opening a new database at once take turns instead of both creating tables.
    async fn migrated(pool: SqlitePool) -> Result<SqliteStore> {
        let migrator = Migrator::with_migrations(migrations());
        let mut tx = pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| StoreError::database("locking the database to migrate it", e))?;
        migrator.run(&mut *tx).await.map_err(StoreError::migration)?;
        tx.commit().await.map_err(|e| StoreError::database("committing the schema migrations", e))?;
        Ok(SqliteStore { pool })
    }

    /// Whether a session with this id exists.
    async fn session_exists(&self, id: &str) -> Result<bool> {
        session_exists(&self.pool, id).await
    }

    /// Turns an empty result into [`StoreError::NotFound`] when the session does not exist.
    async fn require_session(&self, id: &str) -> Result<()> {
        if self.session_exists(id).await? { Ok(()) } else { Err(not_found("session", id)) }
    }

    /// Runs a query returning message rows of one session and decodes them; an empty result
    /// for a session that does not exist is [`StoreError::NotFound`].
    async fn message_list(
        &self,
        sql: &'static str,
        session_id: &str,
        operation: &str,
    ) -> Result<Vec<Message>> {
        let rows = sqlx::query(sql)
            .bind(session_id)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| StoreError::database(format_args!("{operation} of session {session_id}"), e))?;
        if rows.is_empty() {
            self.require_session(session_id).await?;
        }
        rows.iter().map(message_from_row).collect()
    }
}

/// The embedded migrations as sqlx sees them.
fn migrations() -> Vec<Migration> {
    MIGRATIONS
        .iter()
        .map(|&(file, sql)| {
            let stem = file.trim_end_matches(".sql");
            let (version, description) = stem.split_once('_').unwrap_or((stem, ""));
            // The file names are constants of this crate; a test checks that they parse.
            let version = version.parse().unwrap_or(0);
            Migration::new(
                version,
                Cow::Owned(description.replace('_', " ")),
                MigrationType::Simple,
                sql.into_sql_str(),
                false,
            )
        })
        .collect()
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn create_session(&self, session: &Session) -> Result<()> {
        check_id(&session.id, "id")?;
        if let Some(summary) = &session.summary_message_id {
            return Err(StoreError::Invalid {
                id: session.id.clone(),
                field: "summary_message_id",
                reason: format!(
                    "a new session has no messages, so it cannot point at summary {summary}; \
                     create it with none and set it with complete_summary"
                ),
            });
        }
        if let Some(masked) = &session.masked_until {
            return Err(StoreError::Invalid {
                id: session.id.clone(),
                field: "masked_until",
                reason: format!(
                    "a new session has no messages, so it cannot mask up to message {masked}; \
                     create it with none and set it with update_session"
                ),
            });
        }
        let row = SessionRow::encode(session)?;
        sqlx::query(concat!(
            "INSERT INTO sessions (",
            session_columns!(),
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
        ))
        .bind(&session.id)
        .bind(&session.title)
        .bind(&session.summary_message_id)
        .bind(row.prompt_tokens)
        .bind(row.completion_tokens)
        .bind(row.current_tokens)
        .bind(session.created_at)
        .bind(session.updated_at)
        .bind(&session.masked_until)
        .execute(&self.pool)
        .await
        .map_err(|e| {
            if is_constraint(&e, sqlx::error::ErrorKind::UniqueViolation) {
                StoreError::AlreadyExists { what: "session", id: session.id.clone() }
            } else {
                StoreError::database(format_args!("creating session {}", session.id), e)
            }
        })?;
        Ok(())
    }

    async fn session(&self, id: &str) -> Result<Option<Session>> {
        let row = sqlx::query(concat!("SELECT ", session_columns!(), " FROM sessions WHERE id = ?1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| StoreError::database(format_args!("reading session {id}"), e))?;
        row.as_ref().map(session_from_row).transpose()
    }

    async fn list_sessions(&self, limit: usize) -> Result<Vec<Session>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = sqlx::query(concat!(
            "SELECT ",
            session_columns!(),
            " FROM sessions ORDER BY updated_at DESC, rowid DESC LIMIT ?1"
        ))
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::database("listing sessions", e))?;
        rows.iter().map(session_from_row).collect()
    }

    async fn update_session(&self, session: &Session) -> Result<()> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(|e| {
            StoreError::database(format_args!("starting to update session {}", session.id), e)
        })?;
        write_session(&mut tx, session).await?;
        tx.commit()
            .await
            .map_err(|e| StoreError::database(format_args!("committing session {}", session.id), e))
    }

    async fn append_message(&self, message: &Message) -> Result<()> {
        check_id(&message.id, "id")?;
        if message.session_id.is_empty() {
            return Err(StoreError::Invalid {
                id: message.id.clone(),
                field: "session_id",
                reason: "a stored message must name its session; the session id is empty".to_owned(),
            });
        }
        if let Some(cut) = &message.summarized_until {
            check_cut(&self.pool, message, "summarized_until", cut).await?;
        }
        if let Some(pinned) = &message.pinned_message {
            check_cut(&self.pool, message, "pinned_message", pinned).await?;
        }
        let row = MessageRow::encode(message)?;
        sqlx::query(concat!(
            "INSERT INTO messages (",
            message_columns!(),
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
        ))
        .bind(&message.id)
        .bind(&message.session_id)
        .bind(message.role.as_str())
        .bind(row.parts)
        .bind(message.is_summary)
        .bind(&message.summarized_until)
        .bind(message.status.as_str())
        .bind(&message.name)
        .bind(&message.model)
        .bind(row.usage)
        .bind(message.created_at)
        .bind(message.updated_at)
        .bind(&message.pinned_message)
        .execute(&self.pool)
        .await
        .map_err(|e| {
            if is_constraint(&e, sqlx::error::ErrorKind::ForeignKeyViolation) {
                not_found("session", &message.session_id)
            } else if is_constraint(&e, sqlx::error::ErrorKind::UniqueViolation) {
                StoreError::AlreadyExists { what: "message", id: message.id.clone() }
            } else {
                StoreError::database(format_args!("appending message {}", message.id), e)
            }
        })?;
        Ok(())
    }

    async fn update_message(&self, message: &Message) -> Result<()> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(|e| {
            StoreError::database(format_args!("starting to update message {}", message.id), e)
        })?;
        write_message_update(&mut tx, message).await?;
        tx.commit()
            .await
            .map_err(|e| StoreError::database(format_args!("committing message {}", message.id), e))
    }

    async fn message(&self, id: &str) -> Result<Option<Message>> {
        fetch_message(&self.pool, id).await
    }

    async fn messages(&self, session_id: &str) -> Result<Vec<Message>> {
        self.message_list(MESSAGES_SQL, session_id, "reading the messages").await
    }

    async fn history(&self, session_id: &str) -> Result<Vec<Message>> {
        // Every lookup and the scan use an index: the cost is that of the rows returned.
        self.message_list(HISTORY_SQL, session_id, "reading the history").await
    }

    async fn count_messages(&self, session_id: &str) -> Result<u64> {
        let count: i64 =
            sqlx::query_scalar(COUNT_SQL).bind(session_id).fetch_one(&self.pool).await.map_err(|e| {
                StoreError::database(format_args!("counting the messages of session {session_id}"), e)
            })?;
        if count == 0 {
            self.require_session(session_id).await?;
        }
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn complete_summary(&self, session: &Session, summary: &Message) -> Result<()> {
        let invalid = |field: &'static str, reason: String| StoreError::Invalid {
            id: summary.id.clone(),
            field,
            reason,
        };
        if !summary.is_summary {
            return Err(invalid(
                "is_summary",
                "complete_summary needs a summary message (is_summary = true)".to_owned(),
            ));
        }
        if summary.status != MessageStatus::Complete {
            return Err(invalid(
                "status",
                format!(
                    "complete_summary stores a finished summary; the status is {}, set it to complete",
                    summary.status.as_str()
                ),
            ));
        }
        if summary.session_id != session.id {
            return Err(invalid(
                "session_id",
                format!(
                    "the summary belongs to session {:?}, not to session {}",
                    summary.session_id, session.id
                ),
            ));
        }
        if session.summary_message_id.as_deref() != Some(summary.id.as_str()) {
            return Err(StoreError::Invalid {
                id: session.id.clone(),
                field: "summary_message_id",
                reason: format!(
                    "complete_summary must point the session at the summary it completes ({}), not at {:?}",
                    summary.id, session.summary_message_id
                ),
            });
        }
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(|e| {
            StoreError::database(format_args!("starting to complete summary {}", summary.id), e)
        })?;
        write_message_update(&mut tx, summary).await?;
        write_session(&mut tx, session).await?;
        tx.commit()
            .await
            .map_err(|e| StoreError::database(format_args!("committing summary {}", summary.id), e))
    }
}

/// Checks the update rule of [`SessionStore::update_message`] and writes the changeable fields.
async fn write_message_update(conn: &mut SqliteConnection, message: &Message) -> Result<()> {
    let existing =
        fetch_message(&mut *conn, &message.id).await?.ok_or_else(|| not_found("message", &message.id))?;
    check_message_update(&existing, message)?;
    let row = MessageRow::encode(message)?;
    sqlx::query(
        "UPDATE messages SET parts = ?1, status = ?2, usage = ?3, model = ?4, updated_at = ?5 WHERE id = ?6",
    )
    .bind(row.parts)
    .bind(message.status.as_str())
    .bind(row.usage)
    .bind(&message.model)
    .bind(message.updated_at)
    .bind(&message.id)
    .execute(&mut *conn)
    .await
    .map_err(|e| StoreError::database(format_args!("updating message {}", message.id), e))?;
    Ok(())
}

/// The update rule: role, session, summary flag, summary cut, name and creation time never change; parts,
/// status and model change only while the stored message is not complete; usage and
/// `updated_at` may always change.
fn check_message_update(existing: &Message, new: &Message) -> Result<()> {
    let frozen = [
        ("session_id", existing.session_id == new.session_id),
        ("role", existing.role == new.role),
        ("is_summary", existing.is_summary == new.is_summary),
        ("summarized_until", existing.summarized_until == new.summarized_until),
        ("pinned_message", existing.pinned_message == new.pinned_message),
        ("name", existing.name == new.name),
        ("created_at", existing.created_at == new.created_at),
    ];
    let frozen_once_complete = [
        ("status", existing.status == new.status),
        ("parts", existing.parts == new.parts),
        ("model", existing.model == new.model),
    ];
    let complete = existing.status.is_complete();
    let changed =
        frozen.iter().chain(frozen_once_complete.iter().filter(|_| complete)).find(|(_, same)| !same);
    match changed {
        Some(&(field, _)) => Err(StoreError::Immutable { id: new.id.clone(), field }),
        None => Ok(()),
    }
}

/// Checks the summary pointer and overwrites every column of an existing session row.
async fn write_session(conn: &mut SqliteConnection, session: &Session) -> Result<()> {
    let row = SessionRow::encode(session)?;
    if let Some(summary_id) = &session.summary_message_id {
        check_summary_pointer(&mut *conn, session, summary_id).await?;
    }
    if let Some(masked) = &session.masked_until {
        let invalid =
            |reason: String| StoreError::Invalid { id: session.id.clone(), field: "masked_until", reason };
        match fetch_message(&mut *conn, masked).await? {
            None => return Err(invalid(format!("message {masked} does not exist"))),
            Some(message) if message.session_id != session.id => {
                return Err(invalid(format!(
                    "message {masked} belongs to session {}; masking names a message of this session",
                    message.session_id
                )));
            }
            Some(_) => {}
        }
    }
    let result = sqlx::query(
        "UPDATE sessions SET title = ?2, summary_message_id = ?3, prompt_tokens = ?4, completion_tokens = ?5, \
         current_tokens = ?6, created_at = ?7, updated_at = ?8, masked_until = ?9 WHERE id = ?1",
    )
    .bind(&session.id)
    .bind(&session.title)
    .bind(&session.summary_message_id)
    .bind(row.prompt_tokens)
    .bind(row.completion_tokens)
    .bind(row.current_tokens)
    .bind(session.created_at)
    .bind(session.updated_at)
    .bind(&session.masked_until)
    .execute(&mut *conn)
    .await
    .map_err(|e| StoreError::database(format_args!("updating session {}", session.id), e))?;
    if result.rows_affected() == 0 {
        return Err(not_found("session", &session.id));
    }
    Ok(())
}

/// A session's summary pointer must name a complete summary message of the same session.
async fn check_summary_pointer(
    conn: &mut SqliteConnection,
    session: &Session,
    summary_id: &str,
) -> Result<()> {
    let invalid =
        |reason: String| StoreError::Invalid { id: session.id.clone(), field: "summary_message_id", reason };
    let Some(summary) = fetch_message(&mut *conn, summary_id).await? else {
        return Err(invalid(format!("message {summary_id} does not exist")));
    };
    if summary.session_id != session.id {
        return Err(invalid(format!(
            "message {summary_id} belongs to session {}; the pointer must name a summary of this session",
            summary.session_id
        )));
    }
    if !summary.is_summary {
        return Err(invalid(format!("message {summary_id} is not a summary message")));
    }
    if !summary.status.is_complete() {
        return Err(invalid(format!(
            "summary {summary_id} is {}; only a complete summary can start the history",
            summary.status.as_str()
        )));
    }
    Ok(())
}

/// A summary's `summarized_until` and `pinned_message` (`field`) must name a message already stored
/// in the same session.
async fn check_cut<'e>(
    executor: impl SqliteExecutor<'e>,
    message: &Message,
    field: &'static str,
    cut: &str,
) -> Result<()> {
    let invalid = |reason: String| StoreError::Invalid { id: message.id.clone(), field, reason };
    if !message.is_summary {
        return Err(invalid(
            "only a summary message (is_summary = true) replaces earlier messages".to_owned(),
        ));
    }
    let session: Option<String> = sqlx::query_scalar("SELECT session_id FROM messages WHERE id = ?1")
        .bind(cut)
        .fetch_optional(executor)
        .await
        .map_err(|e| StoreError::database(format_args!("looking up message {cut}"), e))?;
    match session {
        Some(session) if session == message.session_id => Ok(()),
        Some(session) => Err(invalid(format!(
            "message {cut} belongs to session {session}; a summary can only replace messages of its own session"
        ))),
        None => {
            Err(invalid(format!("message {cut} does not exist; name a message stored before the summary")))
        }
    }
}

async fn session_exists<'e>(executor: impl SqliteExecutor<'e>, id: &str) -> Result<bool> {
    sqlx::query_scalar::<_, i64>("SELECT 1 FROM sessions WHERE id = ?1")
        .bind(id)
        .fetch_optional(executor)
        .await
        .map(|row| row.is_some())
        .map_err(|e| StoreError::database(format_args!("looking up session {id}"), e))
}

async fn fetch_message<'e>(executor: impl SqliteExecutor<'e>, id: &str) -> Result<Option<Message>> {
    let row = sqlx::query(concat!("SELECT ", message_columns!(), " FROM messages WHERE id = ?1"))
        .bind(id)
        .fetch_optional(executor)
        .await
        .map_err(|e| StoreError::database(format_args!("reading message {id}"), e))?;
    row.as_ref().map(message_from_row).transpose()
}

/// The columns of a message that need encoding.
struct MessageRow {
    parts: String,
    usage: Option<String>,
}

impl MessageRow {
    fn encode(message: &Message) -> Result<MessageRow> {
        let json_error = |field: &'static str, e: serde_json::Error| StoreError::Invalid {
            id: message.id.clone(),
            field,
            reason: format!("cannot be written as JSON: {e}"),
        };
        Ok(MessageRow {
            parts: serde_json::to_string(&message.parts).map_err(|e| json_error("parts", e))?,
            usage: message
                .usage
                .as_ref()
                .map(serde_json::to_string)
                .transpose()
                .map_err(|e| json_error("usage", e))?,
        })
    }
}

/// The token counts of a session as SQLite integers.
struct SessionRow {
    prompt_tokens: i64,
    completion_tokens: i64,
    current_tokens: i64,
}

impl SessionRow {
    fn encode(session: &Session) -> Result<SessionRow> {
        let count = |field: &'static str, value: u64| {
            i64::try_from(value).map_err(|_| StoreError::Invalid {
                id: session.id.clone(),
                field,
                reason: format!("{value} is larger than the largest storable count, {}", i64::MAX),
            })
        };
        Ok(SessionRow {
            prompt_tokens: count("prompt_tokens", session.prompt_tokens)?,
            completion_tokens: count("completion_tokens", session.completion_tokens)?,
            current_tokens: count("current_tokens", session.current_tokens)?,
        })
    }
}

fn session_from_row(row: &SqliteRow) -> Result<Session> {
    let id: String = column(row, "?", "id")?;
    let count = |field: &'static str| -> Result<u64> {
        let value: i64 = column(row, &id, field)?;
        u64::try_from(value).map_err(|_| corrupt(&id, field, format!("negative token count {value}")))
    };
    Ok(Session {
        title: column(row, &id, "title")?,
        summary_message_id: column(row, &id, "summary_message_id")?,
        prompt_tokens: count("prompt_tokens")?,
        completion_tokens: count("completion_tokens")?,
        current_tokens: count("current_tokens")?,
        masked_until: column(row, &id, "masked_until")?,
        created_at: column(row, &id, "created_at")?,
        updated_at: column(row, &id, "updated_at")?,
        id,
    })
}

fn message_from_row(row: &SqliteRow) -> Result<Message> {
    let id: String = column(row, "?", "id")?;
    let role: String = column(row, &id, "role")?;
    let role = Role::parse(&role).ok_or_else(|| {
        corrupt(&id, "role", format!("unknown role {role:?}; expected system, user, assistant or tool"))
    })?;
    let status: String = column(row, &id, "status")?;
    let status = MessageStatus::parse(&status).ok_or_else(|| {
        corrupt(
            &id,
            "status",
            format!("unknown status {status:?}; expected complete, streaming, failed or cancelled"),
        )
    })?;
    let parts: String = column(row, &id, "parts")?;
    let parts: Vec<Part> = serde_json::from_str(&parts)
        .map_err(|e| corrupt(&id, "parts", format!("not a JSON array of parts: {e}")))?;
    let usage: Option<String> = column(row, &id, "usage")?;
    let usage: Option<Usage> = usage
        .map(|usage| serde_json::from_str(&usage))
        .transpose()
        .map_err(|e| corrupt(&id, "usage", format!("not a JSON usage object: {e}")))?;
    Ok(Message {
        session_id: column(row, &id, "session_id")?,
        role,
        parts,
        is_summary: column(row, &id, "is_summary")?,
        summarized_until: column(row, &id, "summarized_until")?,
        pinned_message: column(row, &id, "pinned_message")?,
        status,
        name: column(row, &id, "name")?,
        model: column(row, &id, "model")?,
        usage,
        created_at: column(row, &id, "created_at")?,
        updated_at: column(row, &id, "updated_at")?,
        id,
    })
}

/// Reads one column, reporting a value of the wrong type as [`StoreError::Corrupt`].
fn column<'r, T>(row: &'r SqliteRow, id: &str, field: &'static str) -> Result<T>
where
    T: sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
{
    row.try_get(field).map_err(|e| corrupt(id, field, e.to_string()))
}

fn corrupt(id: &str, field: &'static str, reason: String) -> StoreError {
    StoreError::Corrupt { id: id.to_owned(), field, reason }
}

fn not_found(what: &'static str, id: &str) -> StoreError {
    StoreError::NotFound { what, id: id.to_owned() }
}

fn check_id(id: &str, field: &'static str) -> Result<()> {
    if id.is_empty() {
        return Err(StoreError::Invalid {
            id: String::new(),
            field,
            reason: "ids must not be empty".to_owned(),
        });
    }
    Ok(())
}

/// Whether `error` is SQLite's `SQLITE_BUSY` (primary code 5, any extended code).
pub(crate) fn is_busy(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(e)
        if e.code().and_then(|code| code.parse::<i32>().ok()).is_some_and(|code| code & 0xff == 5))
}

fn is_constraint(error: &sqlx::Error, kind: sqlx::error::ErrorKind) -> bool {
    matches!(error, sqlx::Error::Database(e) if e.kind() == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migration_file_names_parse() {
        let versions: Vec<(i64, String)> =
            migrations().iter().map(|m| (m.version, m.description.to_string())).collect();
        assert_eq!(
            versions,
            vec![(1, "init".to_owned()), (2, "pinned message".to_owned()), (3, "masked until".to_owned())]
        );
        for (index, (file, _)) in MIGRATIONS.iter().enumerate() {
            let version: i64 = file.split('_').next().and_then(|v| v.parse().ok()).expect(file);
            assert_eq!(version, index as i64 + 1, "migrations are numbered 1, 2, ... in order: {file}");
        }
    }

    /// The reads the agent makes on every turn use the `(session_id, seq)` index, not a scan
    /// of the table, and need no sort step.
    #[tokio::test]
    async fn reads_use_the_session_index() {
        let store = SqliteStore::in_memory().await.expect("store");
        for sql in [MESSAGES_SQL, HISTORY_SQL, COUNT_SQL] {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")))
                .bind("s")
                .fetch_all(&store.pool)
                .await
                .expect("plan");
            let plan: Vec<String> = rows.iter().map(|row| row.get::<String, _>("detail")).collect();
            let plan = plan.join("\n");
            assert!(plan.contains("messages_by_session"), "{sql}\n{plan}");
            assert!(!plan.contains("SCAN messages"), "{sql}\n{plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{sql}\n{plan}");
        }
    }
}
