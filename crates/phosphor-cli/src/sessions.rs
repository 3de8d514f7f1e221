//! `phosphor sessions list | show | export`, and finding a session by id or prefix.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use phosphor_base::{Message, MessageStatus, Part, Role, Session};
use phosphor_store::{PgStore, SessionStore, SqliteStore};
use phosphor_wire::chat::{ToOpenAiOptions, to_openai_with};

use crate::format::{preview, thousands, utc_minutes};
use crate::transcript::{self, Layout};

/// Lines of a tool result `show` prints before eliding the rest.
const TOOL_OUTPUT_LINES: usize = 12;

/// The database path: `--db`, or the platform default.
pub fn db_path(db: Option<&Path>) -> Result<PathBuf> {
    match db {
        Some(path) => Ok(path.to_path_buf()),
        None => SqliteStore::default_path().ok_or_else(|| {
            anyhow!("this platform has no local data directory for the session database; pass --db PATH")
        }),
    }
}

/// The session database a command opened: a SQLite file, or a Postgres server (`--db postgres://...`).
/// It derefs to the store, so `&db` is a `&dyn SessionStore`.
#[derive(Clone)]
pub enum Db {
    /// A SQLite file.
    Sqlite(SqliteStore),
    /// A Postgres database.
    Postgres(PgStore),
}

impl std::ops::Deref for Db {
    type Target = dyn SessionStore;

    fn deref(&self) -> &(dyn SessionStore + 'static) {
        match self {
            Db::Sqlite(store) => store,
            Db::Postgres(store) => store,
        }
    }
}

impl Db {
    /// The store, as the agent holds it.
    pub fn shared(&self) -> Arc<dyn SessionStore> {
        match self.clone() {
            Db::Sqlite(store) => Arc::new(store),
            Db::Postgres(store) => Arc::new(store),
        }
    }

    /// Waits for running calls and closes the connections.
    pub async fn close(self) {
        match self {
            Db::Sqlite(store) => store.close().await,
            Db::Postgres(store) => store.close().await,
        }
    }
}

/// Whether `--db` names a Postgres server rather than a SQLite file.
pub fn is_postgres(location: &Path) -> bool {
    location.to_str().is_some_and(|l| l.starts_with("postgres://") || l.starts_with("postgresql://"))
}

/// How messages name the database: the path, or the URL without its password.
pub fn describe(location: &Path) -> String {
    match location.to_str() {
        Some(url) if is_postgres(location) => phosphor_store::redacted_url(url),
        _ => location.display().to_string(),
    }
}

/// Opens (creating when missing) the session database: a SQLite file, or the Postgres database a
/// `postgres://` URL names (its tables are created when missing).
pub async fn open_store(location: &Path) -> Result<Db> {
    let failed = |err: phosphor_store::StoreError| anyhow!("session database {}: {err}", describe(location));
    match location.to_str() {
        Some(url) if is_postgres(location) => Ok(Db::Postgres(PgStore::connect(url).await.map_err(failed)?)),
        _ => Ok(Db::Sqlite(SqliteStore::open(location).await.map_err(failed)?)),
    }
}

/// The session named by `given`: an exact id, or a prefix that names exactly one session.
pub async fn find_session(store: &dyn SessionStore, given: &str) -> Result<Session> {
    if let Some(session) = store.session(given).await? {
        return Ok(session);
    }
    if given.is_empty() {
        bail!("the session id is empty; list the sessions with `phosphor sessions list`");
    }
    let matches: Vec<Session> =
        store.list_sessions(usize::MAX).await?.into_iter().filter(|s| s.id.starts_with(given)).collect();
    match matches.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!("no session with id {given}; list the sessions with `phosphor sessions list`"),
        many => {
            let ids: Vec<&str> = many.iter().take(5).map(|s| s.id.as_str()).collect();
            bail!(
                "the session id prefix {given} is ambiguous: it matches {} sessions ({}{}); give more of the id",
                many.len(),
                ids.join(", "),
                if many.len() > 5 { ", ..." } else { "" }
            )
        }
    }
}

/// `sessions list`.
pub async fn list(store: &dyn SessionStore, db: &Path, json: bool, limit: usize) -> Result<String> {
    let sessions = store.list_sessions(limit).await?;
    let mut counts = Vec::with_capacity(sessions.len());
    for session in &sessions {
        counts.push(store.count_messages(&session.id).await?);
    }
    if json {
        let mut rows = Vec::with_capacity(sessions.len());
        for (session, count) in sessions.iter().zip(&counts) {
            let mut row = serde_json::to_value(session)?;
            if let Some(object) = row.as_object_mut() {
                object.insert("message_count".to_owned(), (*count).into());
            }
            rows.push(row);
        }
        return Ok(format!("{}\n", serde_json::to_string_pretty(&rows)?));
    }
    if sessions.is_empty() {
        return Ok(format!("no sessions in {}\n", describe(db)));
    }
    let id_width = sessions.iter().map(|s| s.id.len()).max().unwrap_or(2).max(2);
    let mut out = format!(
        "{:<id_width$}  {:<16}  {:>8}  {:>9}  {:<7}  TITLE\n",
        "ID", "UPDATED (UTC)", "MESSAGES", "TOKENS", "SUMMARY"
    );
    for (session, count) in sessions.iter().zip(&counts) {
        let _ = writeln!(
            out,
            "{:<id_width$}  {:<16}  {:>8}  {:>9}  {:<7}  {}",
            session.id,
            utc_minutes(session.updated_at),
            count,
            thousands(session.current_tokens),
            if session.summary_message_id.is_some() { "yes" } else { "no" },
            preview(&session.title, 60),
        );
    }
    Ok(out)
}

/// `sessions show`: the history a model would see, or with `full` every stored message.
pub async fn show(store: &dyn SessionStore, given: &str, full: bool) -> Result<String> {
    let session = find_session(store, given).await?;
    let history = store.history(&session.id).await?;
    // Observation masking: the tool outputs of the history up to `masked_until` are shown to the
    // model as placeholders.
    let masked_end = session
        .masked_until
        .as_deref()
        .and_then(|id| history.iter().position(|m| m.id == id))
        .map_or(0, |at| at + 1);
    let masked: HashSet<&str> = history[..masked_end]
        .iter()
        .filter(|m| m.tool_results().next().is_some())
        .map(|m| m.id.as_str())
        .collect();
    let mut out = format!(
        "session {} · {} · {} tokens{}{}\n",
        session.id,
        if session.title.is_empty() { "(untitled)" } else { &session.title },
        thousands(session.current_tokens),
        match &session.summary_message_id {
            Some(_) => " · compacted",
            None => "",
        },
        match masked.len() {
            0 => String::new(),
            1 => " · 1 old tool output masked".to_owned(),
            n => format!(" · {n} old tool outputs masked"),
        }
    );
    let masked_note = |message: &Message| masked.contains(message.id.as_str()).then(|| "masked".to_owned());
    if full {
        let in_view: HashSet<&str> = history.iter().map(|m| m.id.as_str()).collect();
        let messages = store.messages(&session.id).await?;
        for message in &messages {
            let note = if message.is_summary {
                summary_note(message, session.summary_message_id.as_deref())
            } else if in_view.contains(message.id.as_str()) {
                masked_note(message)
            } else if message.status.is_complete() {
                Some("compacted".to_owned())
            } else {
                Some(message.status.as_str().to_owned())
            };
            render_message(&mut out, message, note.as_deref());
        }
    } else {
        for message in &history {
            render_message(&mut out, message, masked_note(message).as_deref());
        }
    }
    Ok(out)
}

/// Why a summary in `--full` output is or is not the current one.
fn summary_note(message: &Message, current: Option<&str>) -> Option<String> {
    if current == Some(message.id.as_str()) {
        None
    } else if message.status == MessageStatus::Complete {
        Some("superseded".to_owned())
    } else {
        Some(message.status.as_str().to_owned())
    }
}

fn render_message(out: &mut String, message: &Message, note: Option<&str>) {
    let mut header = if message.is_summary {
        "summary".to_owned()
    } else {
        match message.role {
            Role::Tool => match message.tool_results().next() {
                Some(result) if result.is_error => format!("tool · {} · error", result.name),
                Some(result) => format!("tool · {}", result.name),
                None => "tool".to_owned(),
            },
            role => role.as_str().to_owned(),
        }
    };
    if let Some(model) =
        message.model.as_deref().filter(|_| message.role == Role::Assistant && !message.is_summary)
    {
        let _ = write!(header, " · {model}");
    }
    if let Some(note) = note {
        let _ = write!(header, " ({note})");
    }
    let _ = writeln!(out, "── {header} ──");
    for part in &message.parts {
        match part {
            Part::Text { text } => push_block(out, text),
            Part::Reasoning { text, .. } => {
                for line in text.trim().lines() {
                    let _ = writeln!(out, "│ {line}");
                }
            }
            Part::Image { url, .. } => {
                let _ = writeln!(out, "[image {}]", preview(url, 60));
            }
            Part::ToolCall(call) => {
                let _ = writeln!(out, "→ {} {}", call.name, preview(&call.arguments, 200));
            }
            Part::ToolResult(result) => {
                let lines: Vec<&str> = result.content.lines().collect();
                for line in lines.iter().take(TOOL_OUTPUT_LINES) {
                    let _ = writeln!(out, "{line}");
                }
                if lines.len() > TOOL_OUTPUT_LINES {
                    let _ = writeln!(
                        out,
                        "… {} more lines (`phosphor sessions export` has them all)",
                        lines.len() - TOOL_OUTPUT_LINES
                    );
                }
            }
            Part::Finish { .. } => {}
        }
    }
}

fn push_block(out: &mut String, text: &str) {
    let text = text.trim_matches('\n');
    if !text.is_empty() {
        out.push_str(text);
        out.push('\n');
    }
}

/// `sessions export`: every stored message as OpenAI JSON, with ids and summary flags.
pub async fn export(store: &dyn SessionStore, given: &str, jsonl: bool) -> Result<String> {
    let session = find_session(store, given).await?;
    let messages = store.messages(&session.id).await?;
    let values = to_openai_with(&messages, &ToOpenAiOptions { ids: true, summary_flag: true });
    transcript::render(values, if jsonl { &Layout::Lines } else { &Layout::Array })
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_base::ToolCall;
    use pretty_assertions::assert_eq;

    async fn store_with_compacted_session() -> SqliteStore {
        let store = SqliteStore::in_memory().await.unwrap();
        let mut session = Session::new("0190-aaaa", "Fix the test", 1_000);
        store.create_session(&session).await.unwrap();
        store.create_session(&Session::new("0190-bbbb", "Other", 2_000)).await.unwrap();
        let call = ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"src/lib.rs"}"#.into(),
        };
        let messages = [
            Message::user("Fix the failing test").with_id("m1"),
            Message::new(Role::Assistant, vec![Part::ToolCall(call)]).with_id("m2"),
            Message::tool_result("c1", "read_file", "fn main() {}", false).with_id("m3"),
            Message::assistant("Fixed.").with_id("m4"),
            Message::user("Now the docs").with_id("m5"),
        ];
        for message in messages {
            store.append_message(&Message { session_id: session.id.clone(), ..message }).await.unwrap();
        }
        let summary = Message {
            session_id: session.id.clone(),
            is_summary: true,
            summarized_until: Some("m4".into()),
            ..Message::assistant("## Goal\nFix the test (done).").with_id("m6")
        };
        store.append_message(&Message { status: MessageStatus::Streaming, ..summary.clone() }).await.unwrap();
        session.summary_message_id = Some("m6".into());
        session.current_tokens = 1234;
        store.complete_summary(&session, &summary).await.unwrap();
        store
    }

    #[tokio::test]
    async fn show_marks_the_summary_and_shows_only_the_history_by_default() {
        let store = store_with_compacted_session().await;
        assert_eq!(
            show(&store, "0190-aaaa", false).await.unwrap(),
            "session 0190-aaaa · Fix the test · 1,234 tokens · compacted\n\
             ── summary ──\n## Goal\nFix the test (done).\n\
             ── user ──\nNow the docs\n"
        );
        assert_eq!(
            show(&store, "0190-a", true).await.unwrap(),
            "session 0190-aaaa · Fix the test · 1,234 tokens · compacted\n\
             ── user (compacted) ──\nFix the failing test\n\
             ── assistant (compacted) ──\n→ read_file {\"path\":\"src/lib.rs\"}\n\
             ── tool · read_file (compacted) ──\nfn main() {}\n\
             ── assistant (compacted) ──\nFixed.\n\
             ── user ──\nNow the docs\n\
             ── summary ──\n## Goal\nFix the test (done).\n"
        );
    }

    #[tokio::test]
    async fn show_marks_the_tool_outputs_the_model_sees_masked() {
        let store = SqliteStore::in_memory().await.unwrap();
        let mut session = Session::new("0190-cccc", "Masked", 1);
        store.create_session(&session).await.unwrap();
        let call = |id: &str| ToolCall { id: id.into(), name: "read_file".into(), arguments: "{}".into() };
        let messages = vec![
            Message::user("Read both").with_id("n1"),
            Message::new(Role::Assistant, vec![Part::ToolCall(call("c1"))]).with_id("n2"),
            Message::tool_result("c1", "read_file", "old", false).with_id("n3"),
            Message::new(Role::Assistant, vec![Part::ToolCall(call("c2"))]).with_id("n4"),
            Message::tool_result("c2", "read_file", "new", false).with_id("n5"),
        ];
        for message in messages {
            store.append_message(&Message { session_id: session.id.clone(), ..message }).await.unwrap();
        }
        session.masked_until = Some("n4".into());
        store.update_session(&session).await.unwrap();
        let shown = show(&store, "0190-cccc", false).await.unwrap();
        assert!(
            shown.starts_with("session 0190-cccc · Masked · 0 tokens · 1 old tool output masked\n"),
            "{shown}"
        );
        assert!(shown.contains("── tool · read_file (masked) ──\nold\n"), "{shown}");
        assert!(shown.contains("── tool · read_file ──\nnew\n"), "{shown}");
        assert_eq!(show(&store, "0190-cccc", true).await.unwrap(), shown, "nothing compacted: the same view");
    }

    #[tokio::test]
    async fn sessions_are_found_by_unambiguous_prefix() {
        let store = store_with_compacted_session().await;
        assert_eq!(find_session(&store, "0190-b").await.unwrap().id, "0190-bbbb");
        assert_eq!(
            find_session(&store, "0190").await.unwrap_err().to_string(),
            "the session id prefix 0190 is ambiguous: it matches 2 sessions (0190-bbbb, 0190-aaaa); give more of the id"
        );
        assert_eq!(
            find_session(&store, "zzz").await.unwrap_err().to_string(),
            "no session with id zzz; list the sessions with `phosphor sessions list`"
        );
    }

    #[tokio::test]
    async fn export_writes_every_message_with_the_summary_flagged() {
        let store = store_with_compacted_session().await;
        let text = export(&store, "0190-aaaa", true).await.unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 6);
        assert_eq!(
            lines[5],
            serde_json::json!({ "id": "m6", "role": "assistant", "content": "## Goal\nFix the test (done).", "is_summary": true })
        );
        // What was exported reads back as the same messages.
        let read = transcript::parse(&text, "export").unwrap().messages;
        assert_eq!(
            read.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
            ["m1", "m2", "m3", "m4", "m5", "m6"]
        );
        assert!(read[5].is_summary);
    }

    #[tokio::test]
    async fn list_shows_a_table_and_json() {
        let store = store_with_compacted_session().await;
        let table = list(&store, Path::new("x.db"), false, 20).await.unwrap();
        // Both sessions were created at 1 s and 2 s; the summary completion wrote updated_at as given (1 s).
        assert_eq!(
            table,
            "ID         UPDATED (UTC)     MESSAGES     TOKENS  SUMMARY  TITLE\n\
             0190-bbbb  1970-01-01 00:00         0          0  no       Other\n\
             0190-aaaa  1970-01-01 00:00         6      1,234  yes      Fix the test\n"
        );
        let json: serde_json::Value =
            serde_json::from_str(&list(&store, Path::new("x.db"), true, 1).await.unwrap()).unwrap();
        assert_eq!(json[0]["id"], "0190-bbbb");
        assert_eq!(json[0]["message_count"], 0);
        assert_eq!(
            list(&SqliteStore::in_memory().await.unwrap(), Path::new("x.db"), false, 20).await.unwrap(),
            "no sessions in x.db\n"
        );
    }
}
