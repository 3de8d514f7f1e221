//! Behaviour of the stores through the `SessionStore` trait: one conformance suite that runs against
//! SQLite (in memory) and against a real Postgres server (a fresh database per test, on the server
//! `PHOSPHOR_TEST_POSTGRES` names; `cargo xtask ci` starts one), then what only SQLite files do.

// The conformance bodies are plain functions that the generated tests call, so clippy does not see them
// as tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use anyhow::Context;
use phosphor_base::config::Api;
use phosphor_base::message::{
    FinishReason, Message, MessageStatus, Part, Role, Seal, Session, ToolCall, ToolResult, Usage,
    history_view,
};
use phosphor_store::{Head, SessionStore, SqliteStore, StoreError};
use pretty_assertions::assert_eq;
use sqlx::Connection;
use std::sync::Arc;

/// A store behind the trait, as the agent holds one.
type Store = Arc<dyn SessionStore>;

/// Where a conformance test gets its empty store.
enum Backend {
    Sqlite,
    /// The server's URL (any database on it); each store is a new database.
    #[allow(dead_code)]
    Postgres(String),
}

impl Backend {
    async fn store(&self) -> anyhow::Result<Store> {
        Ok(self.stores().await?.0)
    }

    /// Two handles on one new database, as two processes sharing it hold them: two pools on
    /// Postgres; on SQLite, which one process owns, two clones of the store.
    async fn stores(&self) -> anyhow::Result<(Store, Store)> {
        match self {
            Backend::Sqlite => {
                let store: Store = Arc::new(SqliteStore::in_memory().await?);
                Ok((store.clone(), store))
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres(url) => {
                use std::sync::atomic::{AtomicU32, Ordering};
                static NEXT: AtomicU32 = AtomicU32::new(0);
                let name =
                    format!("phosphor_test_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
                let mut admin =
                    sqlx::PgConnection::connect(url).await.context("connecting to the test server")?;
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .execute(&mut admin)
                    .await?;
                admin.close().await?;
                let (base, _) = url.rsplit_once('/').context("the URL names no database")?;
                let url = format!("{base}/{name}");
                let first: Store = Arc::new(phosphor_store::PgStore::connect(&url).await?);
                let second: Store = Arc::new(phosphor_store::PgStore::connect(&url).await?);
                Ok((first, second))
            }
            #[cfg(not(feature = "postgres"))]
            Backend::Postgres(_) => anyhow::bail!("phosphor-store was built without its `postgres` feature"),
        }
    }
}

/// Runs each named test against both stores: `sqlite::NAME` and `postgres::NAME`.
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(&super::Backend::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let Some(url) = phosphor_base::testing::test_url(super::POSTGRES) else { return };
                    super::$name(&super::Backend::Postgres(url)).await;
                }
            )*
        }
    };
}

/// The variable naming the Postgres server the conformance suite runs against.
const POSTGRES: &str = "PHOSPHOR_TEST_POSTGRES";

conformance!(
    every_part_and_field_round_trips,
    sessions_round_trip,
    history_starts_at_the_summary_and_resumes_after_its_cut,
    a_pinned_message_is_shown_right_after_its_summary,
    a_summary_without_a_cut_is_followed_by_every_complete_message,
    a_cut_must_name_an_earlier_message_of_the_session,
    history_of_sessions_is_separate,
    complete_summary_writes_pointer_tokens_and_message_together,
    update_session_only_points_at_complete_summaries_of_the_session,
    update_message_follows_the_rule,
    foreign_keys_and_ids_are_enforced,
    a_thousand_messages_keep_their_order,
    sessions_are_listed_most_recently_updated_first,
    concurrent_appends_keep_every_message,
    heads_are_found_longest_first_within_their_namespace,
    claims_exclude_each_other_across_processes_and_free_on_drop,
    session_locks_serialise_the_processes_sharing_a_store,
);

fn head(session_id: &str, namespace: &str, key: &str, len: u64) -> Head {
    Head {
        session_id: session_id.into(),
        namespace: namespace.into(),
        head: key.into(),
        len,
        stored: len + 1,
    }
}

async fn heads_are_found_longest_first_within_their_namespace(backend: &Backend) {
    let (store, other) = backend.stores().await.unwrap();
    for id in ["a", "b", "c"] {
        store.create_session(&Session::new(id, "", 1)).await.unwrap();
    }
    store.set_head(&head("a", "x", "h1", 1)).await.unwrap();
    store.set_head(&head("b", "x", "h2", 2)).await.unwrap();
    store.set_head(&head("c", "y", "h2", 2)).await.unwrap();
    let keys = |list: &[&str]| list.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>();
    // What one process records, another finds.
    assert_eq!(
        other.find_heads("x", &keys(&["h1", "h2", "h9"])).await.unwrap(),
        vec![head("b", "x", "h2", 2), head("a", "x", "h1", 1)]
    );
    assert_eq!(other.find_heads("z", &keys(&["h1", "h2"])).await.unwrap(), vec![]);
    assert_eq!(other.find_heads("x", &[]).await.unwrap(), vec![]);
    // A session has one head: recording it again replaces it.
    store.set_head(&head("a", "x", "h3", 3)).await.unwrap();
    assert_eq!(other.find_heads("x", &keys(&["h1"])).await.unwrap(), vec![]);
    assert_eq!(other.head("a").await.unwrap(), Some(head("a", "x", "h3", 3)));
    assert_eq!(other.head("nope").await.unwrap(), None);
    assert!(matches!(
        store.set_head(&head("ghost", "x", "h", 1)).await,
        Err(StoreError::NotFound { what: "session", .. })
    ));
}

async fn claims_exclude_each_other_across_processes_and_free_on_drop(backend: &Backend) {
    let (first, second) = backend.stores().await.unwrap();
    let claim = first.try_claim("s").await.unwrap().expect("a free claim is taken");
    assert!(second.try_claim("s").await.unwrap().is_none(), "held by another process");
    assert!(first.try_claim("s").await.unwrap().is_none(), "held by another request of this process");
    let unrelated = second.try_claim("t").await.unwrap().expect("claims are per key");
    claim.release().await;
    let again = second.try_claim("s").await.unwrap().expect("released: free again");
    // A holder that goes away without releasing (a panic, a killed task) frees its claim too.
    drop(again);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(claim) = first.try_claim("s").await.unwrap() {
            claim.release().await;
            break;
        }
        assert!(std::time::Instant::now() < deadline, "a dropped claim is still held after 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    unrelated.release().await;
}

async fn session_locks_serialise_the_processes_sharing_a_store(backend: &Backend) {
    let (first, second) = backend.stores().await.unwrap();
    assert_eq!(first.is_shared(), matches!(backend, Backend::Postgres(_)));
    let lock = first.lock_session("s").await.unwrap();
    let waiter = tokio::spawn(async move {
        let lock = second.lock_session("s").await.unwrap();
        lock.release().await;
        std::time::Instant::now()
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let released = std::time::Instant::now();
    lock.release().await;
    let taken = waiter.await.unwrap();
    if first.is_shared() {
        // Another process waited for the lock until it was released.
        assert!(taken >= released, "the second process took the lock while the first held it");
    }
    // Other sessions are never blocked.
    let a = first.lock_session("a").await.unwrap();
    let b = first.lock_session("b").await.unwrap();
    a.release().await;
    b.release().await;
}

fn msg(id: &str, session: &str, role: Role, text: &str, at: i64) -> Message {
    Message {
        id: id.to_owned(),
        session_id: session.to_owned(),
        created_at: at,
        updated_at: at,
        ..Message::text(role, text)
    }
}

fn summary(id: &str, session: &str, status: MessageStatus, text: &str, at: i64) -> Message {
    Message {
        is_summary: true,
        status,
        model: Some("gpt-test".to_owned()),
        ..msg(id, session, Role::Assistant, text, at)
    }
}

/// A message using every part kind and every optional field; it replaces message `m0`.
fn rich_message(id: &str, session: &str) -> Message {
    Message {
        id: id.to_owned(),
        session_id: session.to_owned(),
        role: Role::Assistant,
        parts: vec![
            Part::reasoning("think \"hard\"\nthen act".to_owned()),
            Part::Reasoning {
                text: "signed".to_owned(),
                seal: Some(Seal { api: Api::Anthropic, data: "EqQBCgIYAhIM==".to_owned(), redacted: false }),
            },
            Part::Reasoning {
                text: String::new(),
                seal: Some(Seal { api: Api::Responses, data: "gAAAAB".to_owned(), redacted: true }),
            },
            Part::Text { text: "Héllo ✓ 🚀 \u{0} end".to_owned() },
            Part::Image { url: "data:image/png;base64,AAAA".to_owned(), detail: Some("high".to_owned()) },
            Part::Image { url: "https://example.com/a.png".to_owned(), detail: None },
            Part::ToolCall(ToolCall {
                id: "call_1".to_owned(),
                name: "read_file".to_owned(),
                arguments: "{\"path\": \"src/lib.rs\"".to_owned(), // not valid JSON: kept verbatim
            }),
            Part::ToolResult(ToolResult {
                call_id: "call_1".to_owned(),
                name: "read_file".to_owned(),
                content: "fn main() {}".to_owned(),
                is_error: false,
            }),
            Part::ToolResult(ToolResult {
                call_id: "call_2".to_owned(),
                name: "run".to_owned(),
                content: "exit 1".to_owned(),
                is_error: true,
            }),
            Part::Finish { reason: FinishReason::Stop },
            Part::Finish { reason: FinishReason::Length },
            Part::Finish { reason: FinishReason::ToolCalls },
            Part::Finish { reason: FinishReason::ContentFilter },
            Part::Finish { reason: FinishReason::Cancelled },
            Part::Finish { reason: FinishReason::Error("boom".to_owned()) },
            Part::Finish { reason: FinishReason::Other("weird".to_owned()) },
        ],
        is_summary: true,
        summarized_until: Some("m0".to_owned()),
        pinned_message: Some("m0".to_owned()),
        status: MessageStatus::Failed,
        name: Some("helper".to_owned()),
        model: Some("qwen3.5-0.8b".to_owned()),
        usage: Some(Usage {
            input_tokens: 1200,
            output_tokens: 34,
            cached_input_tokens: 1000,
            reasoning_tokens: 7,
        }),
        created_at: 1_700_000_000_123,
        updated_at: 1_700_000_000_456,
    }
}

async fn store_with_session(backend: &Backend, id: &str) -> anyhow::Result<(Store, Session)> {
    let store = backend.store().await?;
    let session = Session::new(id, "a session", 1_000);
    store.create_session(&session).await?;
    Ok((store, session))
}

fn ids(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

async fn every_part_and_field_round_trips(backend: &Backend) {
    let (store, _) = store_with_session(backend, "s").await.unwrap();
    let plain = Message { usage: None, name: None, model: None, ..msg("m0", "s", Role::User, "", 5) };
    let rich = rich_message("m1", "s");
    let tool =
        Message { session_id: "s".to_owned(), ..Message::tool_result("c", "t", "out", false).with_id("m2") };
    for m in [&plain, &rich, &tool] {
        store.append_message(m).await.unwrap();
    }
    assert_eq!(store.message("m1").await.unwrap(), Some(rich.clone()));
    assert_eq!(store.messages("s").await.unwrap(), vec![plain, rich, tool]);
    assert_eq!(store.message("nope").await.unwrap(), None);
}

async fn sessions_round_trip(backend: &Backend) {
    let store = backend.store().await.unwrap();
    let session = Session {
        id: "s".to_owned(),
        title: "Ünïcode title".to_owned(),
        summary_message_id: None,
        prompt_tokens: 1,
        completion_tokens: 2,
        current_tokens: i64::MAX as u64,
        masked_until: None,
        created_at: -5,
        updated_at: 9,
    };
    store.create_session(&session).await.unwrap();
    assert_eq!(store.session("s").await.unwrap(), Some(session.clone()));
    assert_eq!(store.session("t").await.unwrap(), None);

    let updated = Session { title: "new".to_owned(), prompt_tokens: 10, updated_at: 20, ..session.clone() };
    store.update_session(&updated).await.unwrap();
    assert_eq!(store.session("s").await.unwrap(), Some(updated));

    let too_big = Session { current_tokens: u64::MAX, ..session.clone() };
    assert!(matches!(
        store.update_session(&too_big).await,
        Err(StoreError::Invalid { field: "current_tokens", .. })
    ));
    assert!(matches!(
        store.create_session(&session).await,
        Err(StoreError::AlreadyExists { what: "session", ref id }) if id == "s"
    ));
    assert!(matches!(
        store.update_session(&Session::new("ghost", "", 0)).await,
        Err(StoreError::NotFound { what: "session", ref id }) if id == "ghost"
    ));
    let pointed = Session { id: "p".to_owned(), summary_message_id: Some("m".to_owned()), ..session };
    assert!(matches!(
        store.create_session(&pointed).await,
        Err(StoreError::Invalid { field: "summary_message_id", .. })
    ));
    assert!(matches!(
        store.create_session(&Session::new("", "", 0)).await,
        Err(StoreError::Invalid { field: "id", .. })
    ));
}

/// Checks `history` against the expected ids and against the reference rule in phosphor-base.
async fn check_history(store: &Store, session_id: &str, expected: &[&str]) -> anyhow::Result<()> {
    let history = store.history(session_id).await?;
    assert_eq!(ids(&history), expected);
    let all = store.messages(session_id).await?;
    let session = store.session(session_id).await?.context("the session exists")?;
    let reference: Vec<Message> =
        history_view(&all, session.summary_message_id.as_deref()).into_iter().cloned().collect();
    assert_eq!(history, reference);
    Ok(())
}

fn cut(message: Message, until: &str) -> Message {
    Message { summarized_until: Some(until.to_owned()), ..message }
}

async fn history_starts_at_the_summary_and_resumes_after_its_cut(backend: &Backend) {
    let (store, mut session) = store_with_session(backend, "s").await.unwrap();
    let before = [msg("u1", "s", Role::User, "hi", 1), msg("a1", "s", Role::Assistant, "hello", 2)];
    for m in &before {
        store.append_message(m).await.unwrap();
    }
    // No summary yet: everything.
    assert_eq!(store.history("s").await.unwrap(), before.to_vec());

    // A summary that fails is kept but never shown, nor used as a start.
    store.append_message(&cut(summary("f1", "s", MessageStatus::Failed, "partial", 3), "a1")).await.unwrap();
    check_history(&store, "s", &["u1", "a1"]).await.unwrap();

    // The prompt that forced the compaction is stored before the summary, after its cut.
    store.append_message(&msg("u2", "s", Role::User, "big prompt", 4)).await.unwrap();
    let mut s1 = cut(summary("s1", "s", MessageStatus::Streaming, "", 5), "a1");
    store.append_message(&s1).await.unwrap();
    check_history(&store, "s", &["u1", "a1", "u2"]).await.unwrap();
    s1.parts = vec![Part::Text { text: "summary one".to_owned() }];
    s1.status = MessageStatus::Complete;
    session.summary_message_id = Some("s1".to_owned());
    store.complete_summary(&session, &s1).await.unwrap();
    check_history(&store, "s", &["s1", "u2"]).await.unwrap();
    assert_eq!(store.history("s").await.unwrap()[0], s1);

    for m in [
        msg("a2", "s", Role::Assistant, "ok", 6),
        cut(summary("s2", "s", MessageStatus::Streaming, "half", 7), "u2"),
        cut(summary("s3", "s", MessageStatus::Cancelled, "stopped", 8), "u2"),
        // Complete but never pointed at: not a start, and not shown.
        cut(summary("s4", "s", MessageStatus::Complete, "orphan", 9), "u2"),
        msg("u3", "s", Role::User, "again", 10),
    ] {
        store.append_message(&m).await.unwrap();
    }
    check_history(&store, "s", &["s1", "u2", "a2", "u3"]).await.unwrap();

    // A second compaction supersedes the first, which is no longer shown.
    let s5 = cut(summary("s5", "s", MessageStatus::Complete, "summary two", 11), "a2");
    store.append_message(&Message { status: MessageStatus::Streaming, ..s5.clone() }).await.unwrap();
    session.summary_message_id = Some("s5".to_owned());
    store.complete_summary(&session, &s5).await.unwrap();
    store.append_message(&msg("a3", "s", Role::Assistant, "done", 12)).await.unwrap();
    check_history(&store, "s", &["s5", "u3", "a3"]).await.unwrap();

    // Nothing was deleted.
    assert_eq!(store.count_messages("s").await.unwrap(), 12);
    assert_eq!(
        ids(&store.messages("s").await.unwrap()),
        ["u1", "a1", "f1", "u2", "s1", "a2", "s2", "s3", "s4", "u3", "s5", "a3"]
    );
}

async fn a_pinned_message_is_shown_right_after_its_summary(backend: &Backend) {
    let (store, mut session) = store_with_session(backend, "s").await.unwrap();
    for m in [
        msg("u1", "s", Role::User, "read the files", 1),
        msg("a1", "s", Role::Assistant, "reading", 2),
        msg("t1", "s", Role::Tool, "one", 3),
        msg("a2", "s", Role::Assistant, "reading more", 4),
        msg("t2", "s", Role::Tool, "two", 5),
    ] {
        store.append_message(&m).await.unwrap();
    }
    let pinned = |m: Message, id: &str| Message { pinned_message: Some(id.to_owned()), ..m };
    let s1 = pinned(cut(summary("s1", "s", MessageStatus::Complete, "read one file", 6), "t1"), "u1");
    store.append_message(&Message { status: MessageStatus::Streaming, ..s1.clone() }).await.unwrap();
    session.summary_message_id = Some("s1".to_owned());
    store.complete_summary(&session, &s1).await.unwrap();
    check_history(&store, "s", &["s1", "u1", "a2", "t2"]).await.unwrap();

    // A pin must name a message of the same session, and only a summary may pin.
    let stray = pinned(summary("s2", "s", MessageStatus::Streaming, "", 7), "nope");
    assert!(matches!(
        store.append_message(&stray).await,
        Err(StoreError::Invalid { field: "pinned_message", .. })
    ));
    let not_summary = pinned(msg("a3", "s", Role::Assistant, "x", 8), "u1");
    assert!(matches!(
        store.append_message(&not_summary).await,
        Err(StoreError::Invalid { field: "pinned_message", .. })
    ));
}

async fn a_summary_without_a_cut_is_followed_by_every_complete_message(backend: &Backend) {
    let (store, mut session) = store_with_session(backend, "s").await.unwrap();
    store.append_message(&msg("u1", "s", Role::User, "hi", 1)).await.unwrap();
    store.append_message(&summary("sum", "s", MessageStatus::Complete, "sum", 2)).await.unwrap();
    store.append_message(&msg("u2", "s", Role::User, "more", 3)).await.unwrap();
    session.summary_message_id = Some("sum".to_owned());
    store.update_session(&session).await.unwrap();
    check_history(&store, "s", &["sum", "u1", "u2"]).await.unwrap();
}

async fn a_cut_must_name_an_earlier_message_of_the_session(backend: &Backend) {
    let (store, _) = store_with_session(backend, "s").await.unwrap();
    store.create_session(&Session::new("t", "", 1)).await.unwrap();
    store.append_message(&msg("u1", "s", Role::User, "hi", 1)).await.unwrap();
    store.append_message(&msg("t1", "t", Role::User, "hi", 1)).await.unwrap();
    let cases = [
        cut(msg("x1", "s", Role::Assistant, "not a summary", 2), "u1"),
        cut(summary("x2", "s", MessageStatus::Streaming, "", 2), "t1"),
        cut(summary("x3", "s", MessageStatus::Streaming, "", 2), "later"),
        cut(summary("x4", "s", MessageStatus::Streaming, "", 2), "x4"),
    ];
    for case in &cases {
        let result = store.append_message(case).await;
        assert!(
            matches!(result, Err(StoreError::Invalid { field: "summarized_until", ref id, .. }) if *id == case.id),
            "{}: {result:?}",
            case.id
        );
    }
    assert_eq!(store.count_messages("s").await.unwrap(), 1);
}

async fn history_of_sessions_is_separate(backend: &Backend) {
    let (store, mut a) = store_with_session(backend, "a").await.unwrap();
    store.create_session(&Session::new("b", "b", 1)).await.unwrap();
    store.append_message(&msg("b1", "b", Role::User, "b", 1)).await.unwrap();
    store.append_message(&summary("as", "a", MessageStatus::Complete, "sum", 2)).await.unwrap();
    store.append_message(&msg("b2", "b", Role::User, "b", 3)).await.unwrap();
    a.summary_message_id = Some("as".to_owned());
    store.update_session(&a).await.unwrap();
    assert_eq!(ids(&store.history("a").await.unwrap()), ["as"]);
    assert_eq!(ids(&store.history("b").await.unwrap()), ["b1", "b2"]);
    assert_eq!(store.history("c").await.map_err(|e| e.to_string()), Err("session not found: c".to_owned()));
    assert!(matches!(store.messages("c").await, Err(StoreError::NotFound { what: "session", .. })));
    assert!(matches!(store.count_messages("c").await, Err(StoreError::NotFound { what: "session", .. })));
    store.create_session(&Session::new("empty", "", 1)).await.unwrap();
    assert_eq!(store.history("empty").await.unwrap(), vec![]);
    assert_eq!(store.count_messages("empty").await.unwrap(), 0);
}

async fn complete_summary_writes_pointer_tokens_and_message_together(backend: &Backend) {
    let (store, session) = store_with_session(backend, "s").await.unwrap();
    store.append_message(&msg("u1", "s", Role::User, "hi", 1)).await.unwrap();
    let streaming = cut(summary("sum", "s", MessageStatus::Streaming, "par", 2), "u1");
    store.append_message(&streaming).await.unwrap();

    let done = Message {
        parts: vec![Part::Text { text: "partial then whole".to_owned() }],
        status: MessageStatus::Complete,
        usage: Some(Usage { input_tokens: 900, output_tokens: 40, ..Usage::default() }),
        updated_at: 3,
        ..streaming.clone()
    };
    let compacted = Session {
        summary_message_id: Some("sum".to_owned()),
        prompt_tokens: 0,
        completion_tokens: 40,
        current_tokens: 12,
        updated_at: 3,
        ..session.clone()
    };

    // A failure after the message was written inside the transaction (the session's token count
    // cannot be stored) leaves both rows as they were.
    let unstorable = Session { current_tokens: u64::MAX, ..compacted.clone() };
    assert!(matches!(
        store.complete_summary(&unstorable, &done).await,
        Err(StoreError::Invalid { field: "current_tokens", .. })
    ));
    assert_eq!(store.message("sum").await.unwrap(), Some(streaming.clone()));
    assert_eq!(store.session("s").await.unwrap(), Some(session.clone()));
    assert_eq!(ids(&store.history("s").await.unwrap()), ["u1"]);

    // Refused before anything is written.
    let still_streaming = Message { status: MessageStatus::Streaming, ..done.clone() };
    assert!(matches!(
        store.complete_summary(&compacted, &still_streaming).await,
        Err(StoreError::Invalid { field: "status", .. })
    ));
    let wrong_pointer = Session { summary_message_id: Some("u1".to_owned()), ..compacted.clone() };
    assert!(matches!(
        store.complete_summary(&wrong_pointer, &done).await,
        Err(StoreError::Invalid { field: "summary_message_id", .. })
    ));
    let not_summary = Message { is_summary: false, ..done.clone() };
    assert!(matches!(
        store.complete_summary(&compacted, &not_summary).await,
        Err(StoreError::Invalid { field: "is_summary", .. })
    ));
    let renamed = Message { name: Some("x".to_owned()), ..done.clone() };
    assert!(matches!(
        store.complete_summary(&compacted, &renamed).await,
        Err(StoreError::Immutable { field: "name", .. })
    ));
    assert_eq!(store.message("sum").await.unwrap(), Some(streaming));
    assert_eq!(store.session("s").await.unwrap(), Some(session));

    store.complete_summary(&compacted, &done).await.unwrap();
    assert_eq!(store.message("sum").await.unwrap(), Some(done.clone()));
    assert_eq!(store.session("s").await.unwrap(), Some(compacted));
    assert_eq!(store.history("s").await.unwrap(), vec![done]);
}

async fn update_session_only_points_at_complete_summaries_of_the_session(backend: &Backend) {
    let (store, session) = store_with_session(backend, "s").await.unwrap();
    store.create_session(&Session::new("other", "", 1)).await.unwrap();
    store.append_message(&msg("u1", "s", Role::User, "hi", 1)).await.unwrap();
    store.append_message(&summary("streaming", "s", MessageStatus::Streaming, "", 2)).await.unwrap();
    store.append_message(&summary("foreign", "other", MessageStatus::Complete, "x", 3)).await.unwrap();
    for target in ["u1", "streaming", "foreign", "missing"] {
        let pointed = Session { summary_message_id: Some(target.to_owned()), ..session.clone() };
        let result = store.update_session(&pointed).await;
        assert!(
            matches!(result, Err(StoreError::Invalid { field: "summary_message_id", .. })),
            "{target}: {result:?}"
        );
    }
    assert_eq!(store.session("s").await.unwrap(), Some(session));
}

async fn update_message_follows_the_rule(backend: &Backend) {
    let (store, _) = store_with_session(backend, "s").await.unwrap();
    store.create_session(&Session::new("t", "", 1)).await.unwrap();
    let streaming = summary("sum", "s", MessageStatus::Streaming, "a", 1);
    store.append_message(&streaming).await.unwrap();

    // While streaming: parts, status, model, usage and updated_at change.
    let grown = Message {
        parts: vec![Part::Text { text: "ab".to_owned() }],
        model: Some("other-model".to_owned()),
        updated_at: 2,
        ..streaming.clone()
    };
    store.update_message(&grown).await.unwrap();
    assert_eq!(store.message("sum").await.unwrap(), Some(grown.clone()));

    // Never: session, role, summary flag, name, creation time.
    let refused: Vec<(&str, Message)> = vec![
        ("session_id", Message { session_id: "t".to_owned(), ..grown.clone() }),
        ("role", Message { role: Role::User, ..grown.clone() }),
        ("is_summary", Message { is_summary: false, ..grown.clone() }),
        ("summarized_until", Message { summarized_until: Some("sum".to_owned()), ..grown.clone() }),
        ("name", Message { name: Some("n".to_owned()), ..grown.clone() }),
        ("created_at", Message { created_at: 99, ..grown.clone() }),
    ];
    for (field, changed) in &refused {
        let result = store.update_message(changed).await;
        assert!(
            matches!(result, Err(StoreError::Immutable { field: f, ref id }) if f == *field && id == "sum"),
            "{field}: {result:?}"
        );
    }
    assert_eq!(store.message("sum").await.unwrap(), Some(grown.clone()));

    let done = Message { status: MessageStatus::Complete, updated_at: 3, ..grown.clone() };
    store.update_message(&done).await.unwrap();

    // Once complete: parts, status and model are frozen too; usage may still be recorded.
    let refused_once_complete: Vec<(&str, Message)> = vec![
        ("parts", Message { parts: vec![], ..done.clone() }),
        ("status", Message { status: MessageStatus::Failed, ..done.clone() }),
        ("model", Message { model: None, ..done.clone() }),
    ];
    for (field, changed) in &refused_once_complete {
        let result = store.update_message(changed).await;
        assert!(
            matches!(result, Err(StoreError::Immutable { field: f, .. }) if f == *field),
            "{field}: {result:?}"
        );
    }
    let with_usage =
        Message { usage: Some(Usage { input_tokens: 5, ..Usage::default() }), updated_at: 4, ..done };
    store.update_message(&with_usage).await.unwrap();
    assert_eq!(store.message("sum").await.unwrap(), Some(with_usage));

    let ghost = msg("ghost", "s", Role::User, "", 1);
    assert!(matches!(
        store.update_message(&ghost).await,
        Err(StoreError::NotFound { what: "message", ref id }) if id == "ghost"
    ));
    // A user message is complete from the start: its text is never rewritten.
    let user = msg("u", "s", Role::User, "original", 1);
    store.append_message(&user).await.unwrap();
    let edited = Message { parts: vec![Part::Text { text: "edited".to_owned() }], ..user.clone() };
    assert!(matches!(store.update_message(&edited).await, Err(StoreError::Immutable { field: "parts", .. })));
    assert_eq!(store.message("u").await.unwrap(), Some(user));
}

async fn foreign_keys_and_ids_are_enforced(backend: &Backend) {
    let (store, _) = store_with_session(backend, "s").await.unwrap();
    let orphan = msg("m", "nobody", Role::User, "hi", 1);
    let result = store.append_message(&orphan).await;
    assert!(
        matches!(result, Err(StoreError::NotFound { what: "session", ref id }) if id == "nobody"),
        "{result:?}"
    );
    assert_eq!(store.message("m").await.unwrap(), None);

    store.append_message(&msg("m", "s", Role::User, "hi", 1)).await.unwrap();
    assert!(matches!(
        store.append_message(&msg("m", "s", Role::User, "again", 2)).await,
        Err(StoreError::AlreadyExists { what: "message", .. })
    ));
    assert!(matches!(
        store.append_message(&msg("", "s", Role::User, "", 2)).await,
        Err(StoreError::Invalid { field: "id", .. })
    ));
    assert!(matches!(
        store.append_message(&msg("x", "", Role::User, "", 2)).await,
        Err(StoreError::Invalid { field: "session_id", .. })
    ));
    assert_eq!(store.count_messages("s").await.unwrap(), 1);
}

#[tokio::test]
async fn a_file_database_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("deeper").join("sessions.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let mut session = Session::new("s", "persisted", 10);
    store.create_session(&session).await.unwrap();
    let rich = rich_message("m1", "s");
    let user = msg("m0", "s", Role::User, "first", 1);
    store.append_message(&user).await.unwrap();
    store.append_message(&rich).await.unwrap();
    let sum = cut(summary("sum", "s", MessageStatus::Complete, "summary", 3), "m1");
    store.append_message(&sum).await.unwrap();
    session.summary_message_id = Some("sum".to_owned());
    session.current_tokens = 4;
    session.masked_until = Some("m1".to_owned());
    store.update_session(&session).await.unwrap();
    let ghost = Session { masked_until: Some("nope".to_owned()), ..session.clone() };
    assert!(matches!(
        store.update_session(&ghost).await,
        Err(StoreError::Invalid { field: "masked_until", .. })
    ));
    store.close().await;

    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(store.session("s").await.unwrap(), Some(session));
    assert_eq!(store.messages("s").await.unwrap(), vec![user, rich, sum.clone()]);
    assert_eq!(store.history("s").await.unwrap(), vec![sum]);
    store.close().await;

    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode").fetch_one(&mut conn).await.unwrap();
    assert_eq!(mode, "wal");
    let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(versions, vec![1, 2, 3, 4]);
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_row_that_does_not_parse_is_reported_with_its_id_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let store = SqliteStore::open(&path).await.unwrap();
    store.create_session(&Session::new("s", "", 1)).await.unwrap();
    store.append_message(&msg("good", "s", Role::User, "ok", 1)).await.unwrap();
    store.append_message(&msg("bad", "s", Role::User, "ok", 2)).await.unwrap();

    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    sqlx::query("UPDATE messages SET parts = '[{\"type\": \"hologram\"}]' WHERE id = 'bad'")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();

    assert_eq!(store.message("good").await.unwrap().map(|m| m.id), Some("good".to_owned()));
    for result in [store.message("bad").await.map(|_| ()), store.history("s").await.map(|_| ())] {
        match result {
            Err(StoreError::Corrupt { id, field, reason }) => {
                assert_eq!((id.as_str(), field), ("bad", "parts"));
                assert!(reason.contains("hologram"), "{reason}");
            }
            other => panic!("expected a corrupt row, got {other:?}"),
        }
    }
    store.close().await;
}

async fn a_thousand_messages_keep_their_order(backend: &Backend) {
    let (store, _) = store_with_session(backend, "s").await.unwrap();
    // Ids whose text order differs from the insertion order, and times that run backwards: the
    // order is the order of appending, nothing else.
    let expected: Vec<String> = (0..1000).map(|i| format!("m{:03}", (i * 7919) % 1000)).collect();
    for (i, id) in expected.iter().enumerate() {
        store.append_message(&msg(id, "s", Role::User, id, 10_000 - i as i64)).await.unwrap();
    }
    let stored = store.messages("s").await.unwrap();
    assert_eq!(stored.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), expected);
    assert_eq!(store.history("s").await.unwrap(), stored);
    assert_eq!(store.count_messages("s").await.unwrap(), 1000);
}

async fn sessions_are_listed_most_recently_updated_first(backend: &Backend) {
    let store = backend.store().await.unwrap();
    assert_eq!(store.latest_session().await.unwrap(), None);
    assert_eq!(store.list_sessions(10).await.unwrap(), vec![]);
    for (id, updated) in [("a", 30), ("b", 10), ("c", 20), ("d", 20)] {
        store.create_session(&Session { updated_at: updated, ..Session::new(id, id, 0) }).await.unwrap();
    }
    let listed = |sessions: Vec<Session>| sessions.into_iter().map(|s| s.id).collect::<Vec<_>>();
    // Equal times: the one created later first.
    assert_eq!(listed(store.list_sessions(10).await.unwrap()), ["a", "d", "c", "b"]);
    assert_eq!(listed(store.list_sessions(2).await.unwrap()), ["a", "d"]);
    assert_eq!(listed(store.list_sessions(0).await.unwrap()), Vec::<String>::new());
    assert_eq!(listed(store.list_sessions(usize::MAX).await.unwrap()).len(), 4);

    let mut b = store.session("b").await.unwrap().unwrap();
    b.updated_at = 40;
    store.update_session(&b).await.unwrap();
    assert_eq!(listed(store.list_sessions(10).await.unwrap()), ["b", "a", "d", "c"]);
    assert_eq!(store.latest_session().await.unwrap(), Some(b));
}

async fn append_concurrently(store: Store) -> anyhow::Result<()> {
    store.create_session(&Session::new("s", "", 0)).await?;
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..50 {
                    let id = format!("t{task}-{i:02}");
                    store.append_message(&msg(&id, "s", Role::User, &id, i)).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let stored = store.messages("s").await?;
    assert_eq!(stored.len(), 400);
    for task in 0..8 {
        let prefix = format!("t{task}-");
        let own: Vec<String> =
            stored.iter().filter(|m| m.id.starts_with(&prefix)).map(|m| m.id.clone()).collect();
        let expected: Vec<String> = (0..50).map(|i| format!("{prefix}{i:02}")).collect();
        assert_eq!(own, expected, "each task's messages are all there, in its order");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_to_a_file_keep_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("sessions.db")).await.unwrap();
    append_concurrently(Arc::new(store.clone())).await.unwrap();
    store.close().await;
}

async fn concurrent_appends_keep_every_message(backend: &Backend) {
    append_concurrently(backend.store().await.unwrap()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_can_open_a_new_file_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let (a, b) = tokio::join!(SqliteStore::open(&path), SqliteStore::open(&path));
    let (a, b) = (a.unwrap(), b.unwrap());
    a.create_session(&Session::new("s", "", 0)).await.unwrap();
    assert_eq!(b.session("s").await.unwrap(), Some(Session::new("s", "", 0)));
    a.close().await;
    b.close().await;
}

#[test]
fn the_default_path_is_under_the_local_data_directory() {
    let expected = dirs::data_local_dir().map(|dir| dir.join("phosphor").join("sessions.db"));
    assert_eq!(SqliteStore::default_path(), expected);
}
