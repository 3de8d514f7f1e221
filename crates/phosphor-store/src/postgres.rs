//! [`PgStore`]: the Postgres implementation of [`SessionStore`], for sessions shared by several
//! processes or machines (`phosphor serve` instances, `phosphor chat` on two hosts).
//!
//! The rules are the SQLite store's (`rules.rs` owns them); what differs is SQL: `$n` placeholders,
//! `BOOLEAN`, identity columns, and row locks (`SELECT ... FOR UPDATE`) where SQLite takes its one
//! writer lock with `BEGIN IMMEDIATE`.

use async_trait::async_trait;
use phosphor_base::message::{Message, Session};
use sqlx::migrate::Migrator;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions, Postgres};

use crate::error::{Result, StoreError};
use crate::lease::Release;
use crate::rules::{
    self, MessageRow, SessionRow, is_constraint, message_from_row, not_found, session_from_row,
};
use crate::{Head, Lease, SessionStore};

/// The schema migrations on Postgres, in order (`migrations-pg/`).
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_init.sql", include_str!("../migrations-pg/0001_init.sql")),
    ("0002_session_heads.sql", include_str!("../migrations-pg/0002_session_heads.sql")),
];

/// Connections of the pool that runs the queries.
const POOL_CONNECTIONS: u32 = 8;

/// Connections of the pool that holds leases: a lease keeps its connection until it is released,
/// and a request in flight holds up to two (its claim and its session lock). Kept apart from the
/// query pool so that leases can never leave the queries without a connection.
const LEASE_CONNECTIONS: u32 = 64;

/// The first key of the advisory locks that serialise work on a session (`pg_advisory_lock(class,
/// hashtext(session id))`); claims use [`CLAIM_CLASS`]. Two ids with the same hash share a lock,
/// which costs some waiting and nothing else.
const LOCK_CLASS: i32 = 0x5048_0001;
/// The first key of claims' advisory locks.
const CLAIM_CLASS: i32 = 0x5048_0002;

/// The columns of a message row, in the order of the `INSERT`.
macro_rules! message_columns {
    () => {
        "id, session_id, role, parts, is_summary, summarized_until, status, name, model, usage, created_at, updated_at, \
         pinned_message"
    };
}

/// The columns of a session row, in the order of the `INSERT`.
macro_rules! session_columns {
    () => {
        "id, title, summary_message_id, prompt_tokens, completion_tokens, current_tokens, created_at, updated_at, \
         masked_until"
    };
}

const MESSAGES_SQL: &str =
    concat!("SELECT ", message_columns!(), " FROM messages WHERE session_id = $1 ORDER BY seq");

/// The history of session `$1`, by the same rule and in the same shape as the SQLite store's query.
const HISTORY_SQL: &str = concat!(
    "WITH summary AS (SELECT m.seq, m.summarized_until, m.pinned_message FROM sessions AS s ",
    "JOIN messages AS m ON m.id = s.summary_message_id WHERE s.id = $1 AND m.session_id = $1 ",
    "AND m.is_summary AND m.status = 'complete') ",
    "SELECT -1::BIGINT AS ord, ",
    message_columns!(),
    " FROM messages WHERE seq = (SELECT seq FROM summary) ",
    "UNION ALL SELECT 0::BIGINT AS ord, ",
    message_columns!(),
    " FROM messages WHERE id = (SELECT pinned_message FROM summary) AND session_id = $1 ",
    "AND NOT is_summary AND status = 'complete' ",
    "UNION ALL SELECT seq AS ord, ",
    message_columns!(),
    " FROM messages WHERE session_id = $1 AND NOT is_summary AND status = 'complete' AND seq > COALESCE(",
    "(SELECT c.seq FROM messages AS c WHERE c.id = (SELECT summarized_until FROM summary) AND c.session_id = $1), 0) ",
    "ORDER BY ord"
);

/// A [`SessionStore`] kept in Postgres. Cloning is cheap and every clone shares the pool.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    leases: PgPool,
}

impl PgStore {
    /// Connects to the database `url` names (`postgres://user:password@host:port/database`, or any
    /// form libpq's connection URIs take) and brings the schema up to date. Two processes opening a new
    /// database at once take turns (sqlx's migrator holds an advisory lock).
    pub async fn connect(url: &str) -> Result<PgStore> {
        let options: PgConnectOptions = url.parse().map_err(|e| {
            StoreError::database(format_args!("reading the Postgres URL {}", redacted_url(url)), e)
        })?;
        // One connection first: a server that is not there fails at once, where the pool would keep
        // retrying until its acquire timeout.
        let first = sqlx::ConnectOptions::connect(&options)
            .await
            .map_err(|e| StoreError::database(format_args!("connecting to {}", redacted_url(url)), e))?;
        sqlx::Connection::close(first).await.ok();
        let pool = PgPoolOptions::new()
            .max_connections(POOL_CONNECTIONS)
            .connect_with(options.clone())
            .await
            .map_err(|e| StoreError::database(format_args!("connecting to {}", redacted_url(url)), e))?;
        let leases = PgPoolOptions::new()
            .max_connections(LEASE_CONNECTIONS)
            .min_connections(0)
            .connect_lazy_with(options);
        Migrator::with_migrations(rules::migrations(MIGRATIONS))
            .run(&pool)
            .await
            .map_err(StoreError::migration)?;
        Ok(PgStore { pool, leases })
    }

    /// Waits for running calls to finish and closes every connection.
    pub async fn close(self) {
        self.leases.close().await;
        self.pool.close().await;
    }

    /// Takes the advisory lock `(class, hashtext(key))` on a connection of its own, waiting for it
    /// (`wait`) or not; `None` when it is held and `wait` is false.
    async fn advisory(&self, class: i32, key: &str, wait: bool) -> Result<Option<Lease>> {
        let what = || format!("{} {key}", if class == CLAIM_CLASS { "claiming" } else { "locking session" });
        let conn = self.leases.acquire().await.map_err(|e| StoreError::database(what(), e))?;
        // From here the connection is the lease's: if this future is dropped while it waits, the
        // lease's drop closes the connection, so a lock granted after the caller left is freed.
        let mut lease = PgLease { conn: Some(conn), class, key: key.to_owned() };
        let Some(conn) = lease.conn.as_mut() else { return Ok(None) };
        let sql = if wait {
            "SELECT true FROM (SELECT pg_advisory_lock($1, hashtext($2))) AS taken"
        } else {
            "SELECT pg_try_advisory_lock($1, hashtext($2))"
        };
        let taken: bool = sqlx::query_scalar(sql)
            .bind(class)
            .bind(key)
            .fetch_one(&mut **conn)
            .await
            .map_err(|e| StoreError::database(what(), e))?;
        if taken {
            Ok(Some(Lease::new(lease)))
        } else {
            // Not taken: the connection holds nothing and goes back to the pool.
            lease.conn.take();
            Ok(None)
        }
    }

    async fn require_session(&self, id: &str) -> Result<()> {
        let exists = sqlx::query_scalar::<_, i32>("SELECT 1 FROM sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| StoreError::database(format_args!("looking up session {id}"), e))?;
        if exists.is_some() { Ok(()) } else { Err(not_found("session", id)) }
    }

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

    async fn begin(&self, what: String) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        self.pool.begin().await.map_err(|e| StoreError::database(format_args!("starting to {what}"), e))
    }
}

/// A database URL without its password, for messages and listings.
pub fn redacted_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[async_trait]
impl SessionStore for PgStore {
    async fn create_session(&self, session: &Session) -> Result<()> {
        rules::check_new_session(session)?;
        let row = SessionRow::encode(session)?;
        sqlx::query(concat!(
            "INSERT INTO sessions (",
            session_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
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
        let row = sqlx::query(concat!("SELECT ", session_columns!(), " FROM sessions WHERE id = $1"))
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
            " FROM sessions ORDER BY updated_at DESC, seq DESC LIMIT $1"
        ))
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::database("listing sessions", e))?;
        rows.iter().map(session_from_row).collect()
    }

    async fn update_session(&self, session: &Session) -> Result<()> {
        let mut tx = self.begin(format!("update session {}", session.id)).await?;
        write_session(&mut tx, session).await?;
        tx.commit()
            .await
            .map_err(|e| StoreError::database(format_args!("committing session {}", session.id), e))
    }

    async fn append_message(&self, message: &Message) -> Result<()> {
        rules::check_new_message(message)?;
        for (field, cut) in
            [("summarized_until", &message.summarized_until), ("pinned_message", &message.pinned_message)]
        {
            if let Some(cut) = cut {
                let owner = if message.is_summary { message_session(&self.pool, cut).await? } else { None };
                rules::check_cut(message, field, cut, owner.as_deref())?;
            }
        }
        let row = MessageRow::encode(message)?;
        sqlx::query(concat!(
            "INSERT INTO messages (",
            message_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
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
        let mut tx = self.begin(format!("update message {}", message.id)).await?;
        write_message_update(&mut tx, message).await?;
        tx.commit()
            .await
            .map_err(|e| StoreError::database(format_args!("committing message {}", message.id), e))
    }

    async fn message(&self, id: &str) -> Result<Option<Message>> {
        fetch_message(
            &mut *self
                .pool
                .acquire()
                .await
                .map_err(|e| StoreError::database(format_args!("reading message {id}"), e))?,
            id,
            false,
        )
        .await
    }

    async fn messages(&self, session_id: &str) -> Result<Vec<Message>> {
        self.message_list(MESSAGES_SQL, session_id, "reading the messages").await
    }

    async fn history(&self, session_id: &str) -> Result<Vec<Message>> {
        self.message_list(HISTORY_SQL, session_id, "reading the history").await
    }

    async fn count_messages(&self, session_id: &str) -> Result<u64> {
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE session_id = $1")
            .bind(session_id)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| {
                StoreError::database(format_args!("counting the messages of session {session_id}"), e)
            })?;
        if count == 0 {
            self.require_session(session_id).await?;
        }
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn complete_summary(&self, session: &Session, summary: &Message) -> Result<()> {
        rules::check_completed_summary(session, summary)?;
        let mut tx = self.begin(format!("complete summary {}", summary.id)).await?;
        write_message_update(&mut tx, summary).await?;
        write_session(&mut tx, session).await?;
        tx.commit()
            .await
            .map_err(|e| StoreError::database(format_args!("committing summary {}", summary.id), e))
    }

    fn is_shared(&self) -> bool {
        true
    }

    async fn lock_session(&self, session_id: &str) -> Result<Lease> {
        Ok(self.advisory(LOCK_CLASS, session_id, true).await?.unwrap_or_else(Lease::none))
    }

    async fn try_claim(&self, key: &str) -> Result<Option<Lease>> {
        self.advisory(CLAIM_CLASS, key, false).await
    }

    async fn set_head(&self, head: &Head) -> Result<()> {
        let result = sqlx::query(
            "INSERT INTO session_heads (session_id, namespace, head, len, stored) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (session_id) DO UPDATE SET namespace = $2, head = $3, len = $4, stored = $5",
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
        let rows = sqlx::query(
            "SELECT session_id, namespace, head, len, stored FROM session_heads \
             WHERE namespace = $1 AND head = ANY($2) ORDER BY len DESC, session_id",
        )
        .bind(namespace)
        .bind(heads)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::database(format_args!("looking up heads in namespace {namespace:?}"), e))?;
        rows.iter().map(rules::head_from_row).collect()
    }

    async fn head(&self, session_id: &str) -> Result<Option<Head>> {
        let row = sqlx::query(
            "SELECT session_id, namespace, head, len, stored FROM session_heads WHERE session_id = $1",
        )
        .bind(session_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::database(format_args!("reading the head of session {session_id}"), e))?;
        row.as_ref().map(rules::head_from_row).transpose()
    }
}

/// An advisory lock and the connection that holds it.
struct PgLease {
    conn: Option<PoolConnection<Postgres>>,
    class: i32,
    key: String,
}

impl Drop for PgLease {
    fn drop(&mut self) {
        // Dropped unreleased (a panic, a cancelled task): closing the connection is the one way to
        // free its locks without waiting, and the server does it as soon as the socket closes.
        if let Some(conn) = self.conn.take() {
            drop(conn.detach());
        }
    }
}

#[async_trait]
impl Release for PgLease {
    async fn release(mut self: Box<Self>) {
        let Some(mut conn) = self.conn.take() else { return };
        let unlocked = sqlx::query("SELECT pg_advisory_unlock($1, hashtext($2))")
            .bind(self.class)
            .bind(&self.key)
            .execute(&mut *conn)
            .await;
        if unlocked.is_err() {
            // The lock may still be held: the connection must not go back to the pool.
            drop(conn.detach());
        }
    }
}

/// Checks the update rule on the stored message, locked until the transaction ends, and writes the
/// changeable fields.
async fn write_message_update(conn: &mut PgConnection, message: &Message) -> Result<()> {
    let existing = fetch_message(&mut *conn, &message.id, true)
        .await?
        .ok_or_else(|| not_found("message", &message.id))?;
    rules::check_message_update(&existing, message)?;
    let row = MessageRow::encode(message)?;
    sqlx::query(
        "UPDATE messages SET parts = $1, status = $2, usage = $3, model = $4, updated_at = $5 WHERE id = $6",
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

/// Checks the session's pointers and overwrites every column of its row.
async fn write_session(conn: &mut PgConnection, session: &Session) -> Result<()> {
    let row = SessionRow::encode(session)?;
    if let Some(summary_id) = &session.summary_message_id {
        let summary = fetch_message(&mut *conn, summary_id, false).await?;
        rules::check_summary_pointer(session, summary_id, summary.as_ref())?;
    }
    if let Some(masked) = &session.masked_until {
        rules::check_masked(session, masked, fetch_message(&mut *conn, masked, false).await?.as_ref())?;
    }
    let result = sqlx::query(
        "UPDATE sessions SET title = $2, summary_message_id = $3, prompt_tokens = $4, completion_tokens = $5, \
         current_tokens = $6, created_at = $7, updated_at = $8, masked_until = $9 WHERE id = $1",
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

/// The session of message `id`, if the message exists.
async fn message_session(pool: &PgPool, id: &str) -> Result<Option<String>> {
    sqlx::query_scalar("SELECT session_id FROM messages WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await
        .map_err(|e| StoreError::database(format_args!("looking up message {id}"), e))
}

/// The message `id`; with `lock`, its row stays locked until the transaction ends.
async fn fetch_message(conn: &mut PgConnection, id: &str, lock: bool) -> Result<Option<Message>> {
    const PLAIN: &str = concat!("SELECT ", message_columns!(), " FROM messages WHERE id = $1");
    const LOCKED: &str = concat!("SELECT ", message_columns!(), " FROM messages WHERE id = $1 FOR UPDATE");
    let row = sqlx::query(if lock { LOCKED } else { PLAIN })
        .bind(id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| StoreError::database(format_args!("reading message {id}"), e))?;
    row.as_ref().map(message_from_row).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(redacted_url("postgres://me:secret@db:5432/x"), "postgres://me:***@db:5432/x");
        assert_eq!(redacted_url("postgres://me@db/x"), "postgres://me@db/x");
        assert_eq!(redacted_url("postgres:///x?host=/tmp"), "postgres:///x?host=/tmp");
    }

    #[test]
    fn migration_file_names_parse() {
        let versions: Vec<i64> = rules::migrations(MIGRATIONS).iter().map(|m| m.version).collect();
        assert_eq!(versions, vec![1, 2]);
    }
}
