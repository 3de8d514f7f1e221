//! What every store checks and how every store encodes a row: the rules of [`SessionStore`] as pure
//! functions, so that the SQLite and Postgres stores enforce the same ones. A store fetches what a rule
//! needs and calls it; the rule decides.
//!
//! [`SessionStore`]: crate::SessionStore

use phosphor_base::message::{Message, MessageStatus, Part, Role, Session, Usage};
use std::borrow::Cow;

use sqlx::migrate::{Migration, MigrationType};
use sqlx::{ColumnIndex, Decode, Row, SqlSafeStr, Type};

use crate::Head;
use crate::error::{Result, StoreError};

pub(crate) fn check_id(id: &str, field: &'static str) -> Result<()> {
    if id.is_empty() {
        return Err(StoreError::Invalid {
            id: String::new(),
            field,
            reason: "ids must not be empty".to_owned(),
        });
    }
    Ok(())
}

/// A new session has no messages, so it can neither point at a summary nor mask any.
pub(crate) fn check_new_session(session: &Session) -> Result<()> {
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
    Ok(())
}

/// A message to append names its session.
pub(crate) fn check_new_message(message: &Message) -> Result<()> {
    check_id(&message.id, "id")?;
    if message.session_id.is_empty() {
        return Err(StoreError::Invalid {
            id: message.id.clone(),
            field: "session_id",
            reason: "a stored message must name its session; the session id is empty".to_owned(),
        });
    }
    Ok(())
}

/// A summary's `summarized_until` and `pinned_message` (`field`) must name a message already stored in the
/// same session; `owner` is the session of the message `cut` names, if it exists.
pub(crate) fn check_cut(
    message: &Message,
    field: &'static str,
    cut: &str,
    owner: Option<&str>,
) -> Result<()> {
    let invalid = |reason: String| StoreError::Invalid { id: message.id.clone(), field, reason };
    if !message.is_summary {
        return Err(invalid(
            "only a summary message (is_summary = true) replaces earlier messages".to_owned(),
        ));
    }
    match owner {
        Some(session) if session == message.session_id => Ok(()),
        Some(session) => Err(invalid(format!(
            "message {cut} belongs to session {session}; a summary can only replace messages of its own session"
        ))),
        None => {
            Err(invalid(format!("message {cut} does not exist; name a message stored before the summary")))
        }
    }
}

/// A session's summary pointer must name a complete summary message of the same session; `summary` is the
/// message it names, if it exists.
pub(crate) fn check_summary_pointer(
    session: &Session,
    summary_id: &str,
    summary: Option<&Message>,
) -> Result<()> {
    let invalid =
        |reason: String| StoreError::Invalid { id: session.id.clone(), field: "summary_message_id", reason };
    let Some(summary) = summary else {
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

/// A session's masking boundary must name a message of the same session; `message` is the one it names, if
/// it exists.
pub(crate) fn check_masked(session: &Session, masked: &str, message: Option<&Message>) -> Result<()> {
    let invalid =
        |reason: String| StoreError::Invalid { id: session.id.clone(), field: "masked_until", reason };
    match message {
        None => Err(invalid(format!("message {masked} does not exist"))),
        Some(message) if message.session_id != session.id => Err(invalid(format!(
            "message {masked} belongs to session {}; masking names a message of this session",
            message.session_id
        ))),
        Some(_) => Ok(()),
    }
}

/// What `complete_summary` needs before it writes: a complete summary of `session`, which the session row
/// points at.
pub(crate) fn check_completed_summary(session: &Session, summary: &Message) -> Result<()> {
    let invalid =
        |field: &'static str, reason: String| StoreError::Invalid { id: summary.id.clone(), field, reason };
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
            format!("the summary belongs to session {:?}, not to session {}", summary.session_id, session.id),
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
    Ok(())
}

/// The update rule: role, session, summary flag, summary cut, name and creation time never change; parts,
/// status and model change only while the stored message is not complete; usage and
/// `updated_at` may always change.
pub(crate) fn check_message_update(existing: &Message, new: &Message) -> Result<()> {
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

/// The columns of a message that need encoding.
pub(crate) struct MessageRow {
    pub(crate) parts: String,
    pub(crate) usage: Option<String>,
}

impl MessageRow {
    pub(crate) fn encode(message: &Message) -> Result<MessageRow> {
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

/// The token counts of a session as 64-bit signed integers (what SQLite and Postgres store).
pub(crate) struct SessionRow {
    pub(crate) prompt_tokens: i64,
    pub(crate) completion_tokens: i64,
    pub(crate) current_tokens: i64,
}

impl SessionRow {
    pub(crate) fn encode(session: &Session) -> Result<SessionRow> {
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

/// A row type of a database whose text, integer and boolean columns decode as `String`, `i64` and `bool`.
pub(crate) trait StoreRow: Row
where
    for<'a> &'a str: ColumnIndex<Self>,
{
    /// Reads one column, reporting a value of the wrong type as [`StoreError::Corrupt`].
    fn field<'r, T>(&'r self, id: &str, field: &'static str) -> Result<T>
    where
        T: Decode<'r, Self::Database> + Type<Self::Database>,
    {
        self.try_get(field).map_err(|e| corrupt(id, field, e.to_string()))
    }
}

impl<R: Row> StoreRow for R where for<'a> &'a str: ColumnIndex<R> {}

/// A [`Head`] from a `session_heads` row.
pub(crate) fn head_from_row<R>(row: &R) -> Result<Head>
where
    R: StoreRow,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let session_id: String = row.field("?", "session_id")?;
    let len: i64 = row.field(&session_id, "len")?;
    let stored: i64 = row.field(&session_id, "stored")?;
    Ok(Head {
        stored: u64::try_from(stored)
            .map_err(|_| corrupt(&session_id, "stored", format!("negative count {stored}")))?,
        namespace: row.field(&session_id, "namespace")?,
        head: row.field(&session_id, "head")?,
        len: u64::try_from(len).map_err(|_| corrupt(&session_id, "len", format!("negative length {len}")))?,
        session_id,
    })
}

pub(crate) fn session_from_row<R>(row: &R) -> Result<Session>
where
    R: StoreRow,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let id: String = row.field("?", "id")?;
    let count = |field: &'static str| -> Result<u64> {
        let value: i64 = row.field(&id, field)?;
        u64::try_from(value).map_err(|_| corrupt(&id, field, format!("negative token count {value}")))
    };
    Ok(Session {
        title: row.field(&id, "title")?,
        summary_message_id: row.field(&id, "summary_message_id")?,
        prompt_tokens: count("prompt_tokens")?,
        completion_tokens: count("completion_tokens")?,
        current_tokens: count("current_tokens")?,
        masked_until: row.field(&id, "masked_until")?,
        created_at: row.field(&id, "created_at")?,
        updated_at: row.field(&id, "updated_at")?,
        id,
    })
}

pub(crate) fn message_from_row<R>(row: &R) -> Result<Message>
where
    R: StoreRow,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
{
    let id: String = row.field("?", "id")?;
    let role: String = row.field(&id, "role")?;
    let role = Role::parse(&role).ok_or_else(|| {
        corrupt(&id, "role", format!("unknown role {role:?}; expected system, user, assistant or tool"))
    })?;
    let status: String = row.field(&id, "status")?;
    let status = MessageStatus::parse(&status).ok_or_else(|| {
        corrupt(
            &id,
            "status",
            format!("unknown status {status:?}; expected complete, streaming, failed or cancelled"),
        )
    })?;
    let parts: String = row.field(&id, "parts")?;
    let parts: Vec<Part> = serde_json::from_str(&parts)
        .map_err(|e| corrupt(&id, "parts", format!("not a JSON array of parts: {e}")))?;
    let usage: Option<String> = row.field(&id, "usage")?;
    let usage: Option<Usage> = usage
        .map(|usage| serde_json::from_str(&usage))
        .transpose()
        .map_err(|e| corrupt(&id, "usage", format!("not a JSON usage object: {e}")))?;
    Ok(Message {
        session_id: row.field(&id, "session_id")?,
        role,
        parts,
        is_summary: row.field(&id, "is_summary")?,
        summarized_until: row.field(&id, "summarized_until")?,
        pinned_message: row.field(&id, "pinned_message")?,
        status,
        name: row.field(&id, "name")?,
        model: row.field(&id, "model")?,
        usage,
        created_at: row.field(&id, "created_at")?,
        updated_at: row.field(&id, "updated_at")?,
        id,
    })
}

pub(crate) fn corrupt(id: &str, field: &'static str, reason: String) -> StoreError {
    StoreError::Corrupt { id: id.to_owned(), field, reason }
}

pub(crate) fn not_found(what: &'static str, id: &str) -> StoreError {
    StoreError::NotFound { what, id: id.to_owned() }
}

pub(crate) fn is_constraint(error: &sqlx::Error, kind: sqlx::error::ErrorKind) -> bool {
    matches!(error, sqlx::Error::Database(e) if e.kind() == kind)
}

/// A count as both stores keep it: a signed 64-bit column, saturating (no real count reaches it).
pub(crate) fn count_column(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// The outcome of writing `head`: a session that does not exist is `NotFound`, as everywhere.
pub(crate) fn head_written<T>(result: std::result::Result<T, sqlx::Error>, head: &Head) -> Result<()> {
    match result {
        Err(e) if is_constraint(&e, sqlx::error::ErrorKind::ForeignKeyViolation) => {
            Err(not_found("session", &head.session_id))
        }
        result => result.map(drop).map_err(|e| {
            StoreError::database(format_args!("recording the head of session {}", head.session_id), e)
        }),
    }
}

/// Embedded migrations, `(file name, SQL)` in order, as sqlx sees them. The version and description are read
/// from the file name the way `sqlx migrate` reads them (`0001_init.sql` is version 1, `init`), so a
/// database migrated here is also understood by `sqlx-cli`, and the other way round.
pub(crate) fn migrations(files: &[(&str, &'static str)]) -> Vec<Migration> {
    files
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
