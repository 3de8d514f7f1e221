//! [`SqliteStore`]: the embedded SQLite implementation of [`SessionStore`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use phosphor_base::message::{Message, Session};
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteExecutor, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};

use crate::error::{Result, StoreError};
use crate::lease::LocalClaims;
use crate::rules::{
    self, MessageRow, SessionRow, is_constraint, message_from_row, not_found, session_from_row,
};
use crate::{Head, Lease, SessionStore};

/// The schema migrations, in order: `(file name, SQL)`. The version and description are read
/// from the file name the way `sqlx migrate` reads them (`0001_init.sql` is version 1, `init`),
/// so a database migrated here is also understood by `sqlx-cli`, and the other way round.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_init.sql", include_str!("../migrations/0001_init.sql")),
    ("0002_pinned_message.sql", include_str!("../migrations/0002_pinned_message.sql")),
    ("0003_masked_until.sql", include_str!("../migrations/0003_masked_until.sql")),
    ("0004_session_heads.sql", include_str!("../migrations/0004_session_heads.sql")),
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

/// The history of session `?1` (the rule of `phosphor_base::message::history_view`): the
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
    /// Claims of requests in flight: a SQLite database is one process's, so claims live in it.
    claims: LocalClaims,
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
        let migrator = Migrator::with_migrations(rules::migrations(MIGRATIONS));
        let mut tx = pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| StoreError::database("locking the database to migrate it", e))?;
        migrator.run(&mut *tx).await.map_err(StoreError::migration)?;
        tx.commit().await.map_err(|e| StoreError::database("committing the schema migrations", e))?;
        Ok(SqliteStore { pool, claims: LocalClaims::default() })
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

#[async_trait]
impl SessionStore for SqliteStore {
    async fn create_session(&self, session: &Session) -> Result<()> {
        rules::check_new_session(session)?;
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
        rules::check_new_message(message)?;
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
        rules::check_completed_summary(session, summary)?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(|e| {
            StoreError::database(format_args!("starting to complete summary {}", summary.id), e)
        })?;
        write_message_update(&mut tx, summary).await?;
        write_session(&mut tx, session).await?;
        tx.commit()
            .await
            .map_err(|e| StoreError::database(format_args!("committing summary {}", summary.id), e))
    }

    fn is_shared(&self) -> bool {
        false
    }

    async fn lock_session(&self, _session_id: &str) -> Result<Lease> {
        Ok(Lease::none())
    }

    async fn try_claim(&self, key: &str) -> Result<Option<Lease>> {
        Ok(self.claims.try_claim(key))
    }

    async fn set_head(&self, head: &Head) -> Result<()> {
        let result = sqlx::query(
            "INSERT INTO session_heads (session_id, namespace, head, len, stored) VALUES (?1, ?2, ?3, ?4, ?5) \
             ON CONFLICT (session_id) DO UPDATE SET namespace = ?2, head = ?3, len = ?4, stored = ?5",
        )
        .bind(&head.session_id)
        .bind(&head.namespace)
        .bind(&head.head)
        .bind(rules::count_column(head.len))
        .bind(rules::count_column(head.stored))
        .execute(&self.pool)
        .await;
        rules::head_written(result, head)
    }

    async fn find_heads(&self, namespace: &str, heads: &[String]) -> Result<Vec<Head>> {
        let keys = serde_json::Value::from(heads.to_vec()).to_string();
        let rows = sqlx::query(
            "SELECT session_id, namespace, head, len, stored FROM session_heads \
             WHERE namespace = ?1 AND head IN (SELECT value FROM json_each(?2)) ORDER BY len DESC, session_id",
        )
            .bind(namespace)
            .bind(keys)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| StoreError::database(format_args!("looking up heads in namespace {namespace:?}"), e))?;
        rows.iter().map(rules::head_from_row).collect()
    }

    async fn head(&self, session_id: &str) -> Result<Option<Head>> {
        let row = sqlx::query(
            "SELECT session_id, namespace, head, len, stored FROM session_heads WHERE session_id = ?1",
        )
        .bind(session_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::database(format_args!("reading the head of session {session_id}"), e))?;
        row.as_ref().map(rules::head_from_row).transpose()
    }
}

/// Checks the update rule of [`SessionStore::update_message`] and writes the changeable fields.
async fn write_message_update(conn: &mut SqliteConnection, message: &Message) -> Result<()> {
    let existing =
        fetch_message(&mut *conn, &message.id).await?.ok_or_else(|| not_found("message", &message.id))?;
    rules::check_message_update(&existing, message)?;
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

/// Checks the summary pointer and overwrites every column of an existing session row.
async fn write_session(conn: &mut SqliteConnection, session: &Session) -> Result<()> {
    let row = SessionRow::encode(session)?;
    if let Some(summary_id) = &session.summary_message_id {
        check_summary_pointer(&mut *conn, session, summary_id).await?;
    }
    if let Some(masked) = &session.masked_until {
        rules::check_masked(session, masked, fetch_message(&mut *conn, masked).await?.as_ref())?;
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
    let summary = fetch_message(&mut *conn, summary_id).await?;
    rules::check_summary_pointer(session, summary_id, summary.as_ref())
}

/// A summary's `summarized_until` and `pinned_message` (`field`) must name a message already stored
/// in the same session.
async fn check_cut<'e>(
    executor: impl SqliteExecutor<'e>,
    message: &Message,
    field: &'static str,
    cut: &str,
) -> Result<()> {
    if !message.is_summary {
        return rules::check_cut(message, field, cut, None);
    }
    let session: Option<String> = sqlx::query_scalar("SELECT session_id FROM messages WHERE id = ?1")
        .bind(cut)
        .fetch_optional(executor)
        .await
        .map_err(|e| StoreError::database(format_args!("looking up message {cut}"), e))?;
    rules::check_cut(message, field, cut, session.as_deref())
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

/// Whether `error` is SQLite's `SQLITE_BUSY` (primary code 5, any extended code).
pub(crate) fn is_busy(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(e)
        if e.code().and_then(|code| code.parse::<i32>().ok()).is_some_and(|code| code & 0xff == 5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migration_file_names_parse() {
        let versions: Vec<(i64, String)> =
            rules::migrations(MIGRATIONS).iter().map(|m| (m.version, m.description.to_string())).collect();
        assert_eq!(
            versions,
            vec![
                (1, "init".to_owned()),
                (2, "pinned message".to_owned()),
                (3, "masked until".to_owned()),
                (4, "session heads".to_owned())
            ]
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
            let plan: Vec<String> =
                rows.iter().map(|row| sqlx::Row::get::<String, _>(row, "detail")).collect();
            let plan = plan.join("\n");
            assert!(plan.contains("messages_by_session"), "{sql}\n{plan}");
            assert!(!plan.contains("SCAN messages"), "{sql}\n{plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{sql}\n{plan}");
        }
    }
}
