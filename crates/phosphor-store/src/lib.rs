//! Phosphor's session store: sessions and their messages, kept in SQLite by default or in Postgres.
//!
//! [`SessionStore`] is what the agent needs from storage; [`SqliteStore`] implements it over an
//! embedded SQLite file (or an in-memory database for tests) and `PgStore` over a Postgres
//! database, both through `sqlx`.
//!
//! ```
//! use phosphor_base::message::{Message, MessageStatus, Session};
//! use phosphor_store::{SessionStore, SqliteStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> phosphor_store::Result<()> {
//! let store = SqliteStore::in_memory().await?;
//! let mut session = Session::new("s1", "Fix the test", 1_000);
//! store.create_session(&session).await?;
//! store.append_message(&Message { session_id: "s1".into(), ..Message::user("Fix it").with_id("m1") }).await?;
//!
//! // A summary is appended while it streams, then completed together with the session pointer.
//! // It replaces every message up to m1 (`summarized_until`).
//! let mut summary = Message { session_id: "s1".into(), is_summary: true, summarized_until: Some("m1".into()),
//!                             status: MessageStatus::Streaming, ..Message::assistant("").with_id("m2") };
//! store.append_message(&summary).await?;
//! summary.parts = Message::assistant("The user wants the test fixed.").parts;
//! summary.status = MessageStatus::Complete;
//! session.summary_message_id = Some("m2".into());
//! store.complete_summary(&session, &summary).await?;
//!
//! let history = store.history("s1").await?;
//! assert_eq!(history, vec![summary]);
//! assert_eq!(store.count_messages("s1").await?, 2); // compaction never deletes
//! store.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Schema
//!
//! Versioned migrations live in `migrations/` in the `sqlx migrate` format (`0001_init.sql`,
//! `0002_...`); they are embedded in the binary with `include_str!` and applied by sqlx's runtime
//! [`Migrator`](sqlx::migrate::Migrator), which records them in `_sqlx_migrations` (so `sqlx-cli`
//! understands the database too). The `migrate!` macro is not used: it would pull in sqlx's
//! proc-macro crates for no gain. Add a migration by adding a file and a line to `MIGRATIONS` in
//! `src/sqlite.rs`; never edit an applied one (its checksum is checked on open).
//!
//! `sessions.summary_message_id` and `messages.session_id` reference each other. The summary
//! pointer is a deferred foreign key (checked at commit), so one transaction can write both rows
//! in any order; the store also checks that the pointer names a *complete summary of the same
//! session*, which a foreign key cannot express.
//!
//! # Nothing is deleted
//!
//! There is no method to delete a session or a message: compaction never deletes stored
//! messages, it moves the session's summary pointer. Superseded, failed and cancelled summaries
//! stay in the table for the record.
//!
//! # Postgres
//!
//! [`PgStore`] (feature `postgres`, on by default) keeps the same tables in Postgres, created by its own
//! migrations (`migrations-pg/`), so several processes or machines share sessions. Both stores enforce
//! the same rules (one module owns them) and pass the same conformance tests.
//!
//! # Design notes
//!
//! One conformance suite (`tests/store.rs`, the `conformance!` list) runs every behaviour test
//! against SQLite in memory and against a real Postgres server, a fresh database per test:
//! `scripts/test-postgres.sh` starts a throwaway cluster (initdb, pg_ctl, loopback, trust, as the
//! `postgres` user when run as root) and `cargo xtask ci` sets `PHOSPHOR_TEST_POSTGRES` to it, so
//! CI fails rather than skips without one. For processes that share a store, the trait also has
//! session heads (`set_head`, `find_heads`, `head`: where each session of a stateless client
//! stands), claims (`try_claim`) and session locks (`lock_session`), and `is_shared`. `lease.rs`
//! owns leases: on Postgres an advisory lock held by a connection of its own (from a pool apart
//! from the queries' pool), released by `Lease::release` or, when dropped unreleased, by closing
//! that connection; on SQLite claims live in the process and the lock is a no-op (one process owns
//! the file). The conformance suite runs the claim and lock tests with two handles on one database,
//! as two processes hold them.
//!
//! **Architecture Invariant:** compaction never deletes stored messages. The store exposes no delete.
//! The history a model is shown is computed from the store alone (`SessionStore::history`).
//!
//! **API Boundary:** the trait is async and speaks core types only; the agent never knows which
//! store it has.
//!
//! **Architecture Invariant:** only phosphor-store names sqlx types. Its public error carries the
//! driver's error as the opaque `DriverError` (message and source chain, `StoreError::is_busy` for
//! the one retryable case), so a sqlx upgrade is not a breaking change for its users.
//!
//! **Decisions.** Migrations are embedded and applied by sqlx's runtime migrator (no `macros`
//! feature, no build-time database); `0002` adds a summary's `pinned_message`, `0003` the session's
//! `masked_until`. Messages are
//! append-only in substance: `update_message` may change parts, status and model only while a
//! message is not complete (a streaming summary), and never its role, session, summary flag, cut or
//! pinned message. Opening a file that another process is creating at the same moment retries
//! while SQLite answers `SQLITE_BUSY`, up to the 5 s busy timeout: switching a new file to WAL takes
//! a lock SQLite does not wait for, so without the retry one of two `phosphor` processes started
//! together could fail with "database is locked". `complete_summary` writes the summary and the
//! session row in one `BEGIN IMMEDIATE` transaction; the session's pointer may only name a complete
//! summary of the same session. On Postgres the same transactions run at READ COMMITTED with the
//! updated message row locked (`SELECT ... FOR UPDATE`); `parts` and `usage` stay JSON text checked
//! with `::json` (`jsonb` rejects `\u0000`, which JSON strings may hold); sessions get an identity
//! `seq` for SQLite's rowid order. Connecting tries one connection first, so a server that is not
//! there fails at once, and messages show the URL without its password (`redacted_url`).

pub mod error;
mod lease;
#[cfg(feature = "postgres")]
mod postgres;
mod rules;
mod sqlite;

use async_trait::async_trait;
use phosphor_base::message::{Message, Session};

pub use error::{DriverError, Result, StoreError};
pub use lease::Lease;
#[cfg(feature = "postgres")]
pub use postgres::{PgStore, redacted_url};
pub use sqlite::SqliteStore;

/// Where sessions and their messages are kept.
///
/// Messages are append-only in substance. [`append_message`](SessionStore::append_message)
/// adds one at the end of its session; [`update_message`](SessionStore::update_message) only
/// finishes a message that is still being written (a streaming summary) or records its usage.
/// The store never changes a session row on its own: `updated_at` and the token counts are what
/// the caller last wrote.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Stores a new session. Its `summary_message_id` must be `None` (it has no messages yet).
    /// A session with the same id is [`StoreError::AlreadyExists`].
    async fn create_session(&self, session: &Session) -> Result<()>;

    /// The session with this id, if any.
    async fn session(&self, id: &str) -> Result<Option<Session>>;

    /// Up to `limit` sessions, most recently updated (`updated_at`) first; among equal times the
    /// one created later comes first.
    async fn list_sessions(&self, limit: usize) -> Result<Vec<Session>>;

    /// The most recently updated session, if any.
    async fn latest_session(&self) -> Result<Option<Session>> {
        Ok(self.list_sessions(1).await?.into_iter().next())
    }

    /// Overwrites every field of an existing session ([`StoreError::NotFound`] when absent). A
    /// `summary_message_id` must name a complete summary message of this session
    /// ([`StoreError::Invalid`] otherwise); to point at a summary as it completes, use
    /// [`complete_summary`](SessionStore::complete_summary).
    async fn update_session(&self, session: &Session) -> Result<()>;

    /// Appends a message at the end of its session. The session must exist
    /// ([`StoreError::NotFound`]), the id must be new ([`StoreError::AlreadyExists`]). A
    /// `summarized_until` or `pinned_message` is only allowed on a summary and must name a message
    /// already stored in the same session ([`StoreError::Invalid`]).
    async fn append_message(&self, message: &Message) -> Result<()>;

    /// Rewrites the changeable fields of a stored message, found by id.
    ///
    /// The rule: `session_id`, `role`, `is_summary`, `summarized_until`, `pinned_message`, `name`
    /// and `created_at` never change.
    /// `parts`, `status` and `model` change only while the *stored* status is not
    /// [`Complete`](phosphor_base::message::MessageStatus::Complete) (a summary streaming, or
    /// one marked failed or cancelled). `usage` and `updated_at` may always change. Anything
    /// else is [`StoreError::Immutable`] naming the first field that differs, and nothing is
    /// written. An unknown id is [`StoreError::NotFound`].
    async fn update_message(&self, message: &Message) -> Result<()>;

    /// The message with this id, if any.
    async fn message(&self, id: &str) -> Result<Option<Message>>;

    /// Every message of the session in the order appended, summaries and unfinished ones
    /// included. An unknown session is [`StoreError::NotFound`].
    async fn messages(&self, session_id: &str) -> Result<Vec<Message>>;

    /// The messages a model is shown, by the rule of
    /// [`history_view`](phosphor_base::message::history_view): the session's summary first
    /// (when it has one), then its `pinned_message` (the user message that opened the turn a
    /// summary was written in, when its rounds were folded), then every complete, non-summary
    /// message stored after the summary's `summarized_until` message, in order; without a summary, every complete, non-summary
    /// message. Streaming, failed, cancelled and superseded summaries never appear, and messages
    /// stored before the summary but after its cut (the prompt that forced the compaction,
    /// recent turns kept verbatim) do. An unknown session is [`StoreError::NotFound`].
    async fn history(&self, session_id: &str) -> Result<Vec<Message>>;

    /// How many messages the session holds, whatever their status. An unknown session is
    /// [`StoreError::NotFound`].
    async fn count_messages(&self, session_id: &str) -> Result<u64>;

    /// Finishes a compaction in one transaction: writes the summary message (under the
    /// [`update_message`](SessionStore::update_message) rule) and overwrites the session row,
    /// whose `summary_message_id` must be `summary.id`. `summary` must be a summary of `session`
    /// with status `Complete` ([`StoreError::Invalid`] otherwise). Either both rows change or
    /// neither does, so the pointer never names an unfinished summary.
    async fn complete_summary(&self, session: &Session, summary: &Message) -> Result<()>;

    /// Whether other processes may write this store while this one uses it (a Postgres server
    /// shared by several machines). A caller that caches a session must then reload it after
    /// taking the session's [`lock_session`](SessionStore::lock_session).
    fn is_shared(&self) -> bool;

    /// Serialises work on a session across every process sharing the store: waits until no other
    /// holder has the session's lock and takes it. Held across a whole turn or compaction;
    /// released by [`Lease::release`] or on drop, and by the server when the holder's process dies.
    /// A store only one process opens (SQLite) returns [`Lease::none`]: the process's own queue
    /// already serialises.
    async fn lock_session(&self, session_id: &str) -> Result<Lease>;

    /// Takes the claim named `key` when no request holds it, in this process or any other sharing
    /// the store; `None` when one does. Claims are independent of
    /// [`lock_session`](SessionStore::lock_session)'s locks.
    async fn try_claim(&self, key: &str) -> Result<Option<Lease>>;

    /// Records where a session stands for a client-side index: an opaque `head` key over `len`
    /// messages, in `namespace` (see [`Head`]). Replaces what was recorded for the session. The
    /// session must exist ([`StoreError::NotFound`]).
    async fn set_head(&self, head: &Head) -> Result<()>;

    /// The recorded heads of `namespace` that are among `heads`, longest (`len`) first.
    async fn find_heads(&self, namespace: &str, heads: &[String]) -> Result<Vec<Head>>;

    /// The recorded head of a session, if any.
    async fn head(&self, session_id: &str) -> Result<Option<Head>>;
}

/// Where a session stands for a client that resends its whole history (`phosphor serve`): the
/// session, the namespace the client named, an opaque key of the session's messages, how many
/// messages that key covers, and how many messages the session held when it was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The session.
    pub session_id: String,
    /// The client's namespace (empty when it named none).
    pub namespace: String,
    /// The key of the session's messages (the caller's; the store only compares it).
    pub head: String,
    /// How many messages the key covers.
    pub len: u64,
    /// How many messages the session held ([`SessionStore::count_messages`]) when the head was
    /// recorded: a session that holds more was written by a process that died before recording.
    pub stored: u64,
}
