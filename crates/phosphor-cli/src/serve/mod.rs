//! `phosphor serve`: a proxy in front of the session model that compacts every client's
//! conversation as the agent does (`SessionAgent::respond`). It speaks three APIs, each read and
//! written by `phosphor-wire`: OpenAI chat completions (`/v1/chat/completions`), Anthropic Messages
//! (`/v1/messages`, Claude Code) and OpenAI Responses (`/v1/responses`, Codex CLI). Clients resend
//! their whole history; the proxy recognises the session it continues (`SessionAgent::claim`, by
//! the heads kept in the store, so several proxies on one Postgres share sessions), stores what is
//! new and forwards the summary plus the rest. The client runs its own tools.
//!
//! This module starts the server and owns what every route shares (keys, session names); `front`
//! answers a request of any of the three formats; `route` picks the model that answers it.

mod front;
mod route;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt as _;
use phosphor_agent::SessionAgent;
use phosphor_prompt::Profiles;
use phosphor_wire::{Failure, FailureKind};
use serde_json::json;
use tokio::sync::Semaphore;

use self::front::Format;
use self::route::Upstreams;

use crate::cli::ServeArgs;
use crate::models::{self, Purpose};
use crate::{Globals, config_check, sessions, warn};

/// The header that names a client's session (its namespace, see `SessionAgent::claim`).
pub const SESSION_HEADER: &str = "x-phosphor-session";
/// The headers in which clients send a key of their own conversation, read when
/// [`SESSION_HEADER`] is absent: Claude Code's, then Codex CLI's.
const CLIENT_SESSION_HEADERS: [&str; 2] = ["x-claude-code-session-id", "session-id"];
/// The longest session name.
const MAX_SESSION_NAME: usize = 128;
/// The routes, for the answer to a request of any other.
const ROUTES: &str = "POST /v1/chat/completions, POST /v1/messages, POST /v1/messages/count_tokens, \
                      POST /v1/responses, GET /v1/models and GET /health";

/// What every request handler shares.
struct Shared {
    agent: SessionAgent,
    api_key: Option<String>,
    permits: Arc<Semaphore>,
    upstreams: Upstreams,
    max_body_bytes: usize,
    timeout: Duration,
}

/// Runs `phosphor serve` until SIGTERM or Ctrl-C.
pub async fn serve(globals: &Globals, args: ServeArgs) -> Result<()> {
    let api_key = match &args.api_key_env {
        Some(name) => match std::env::var(name) {
            Ok(key) if !key.is_empty() => Some(key),
            _ => bail!("--api-key-env {name}: the environment variable {name} is unset or empty"),
        },
        None => None,
    };
    if !args.listen.ip().is_loopback() && api_key.is_none() {
        bail!(
            "--listen {}: refusing to serve beyond this machine without a key; add --api-key-env NAME \
             (clients then send `Authorization: Bearer <key>`), or listen on 127.0.0.1",
            args.listen
        );
    }
    let loaded = config_check::load(&globals.workspace, globals.config.as_deref())?;
    for warning in &loaded.warnings {
        warn(warning);
    }
    let models = models::build(&loaded.config, Purpose::Turns, globals.model_path.as_deref()).await?;
    let model = models.large.info().model.clone();
    let upstreams = Upstreams::new(&loaded.config, models.large.clone(), globals.model_path.is_some());
    let db = sessions::db_path(globals.db.as_deref())?;
    let opened = sessions::open_store(&db).await?;
    let store = opened.shared();
    let agent = SessionAgent::new(store.clone(), models, loaded.config.options.clone())
        .with_profiles(Profiles::discover(&globals.workspace));
    let recorded = agent.record_missing_heads().await?;
    let shared = Arc::new(Shared {
        agent,
        api_key,
        permits: Arc::new(Semaphore::new(usize::try_from(args.max_concurrent).unwrap_or(4096))),
        upstreams,
        max_body_bytes: args.max_body_bytes,
        timeout: Duration::from_secs(args.request_timeout),
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(front::chat_completions))
        .route("/v1/messages", post(front::messages))
        .route("/v1/messages/count_tokens", post(front::count_tokens))
        .route("/v1/responses", post(front::responses))
        .route("/v1/models", get(list_models))
        .route("/health", get(health))
        .fallback(not_found)
        .with_state(shared);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("--listen {}: cannot bind", args.listen))?;
    let address = listener.local_addr()?;
    // The first line on stdout is the address (a test or script listening on port 0 reads it).
    crate::print_out(&format!("listening on http://{address}\n"))?;
    eprintln!(
        "phosphor serve: model {model}, database {}{}",
        sessions::describe(&db),
        if recorded > 0 { format!(", {recorded} stored sessions made continuable") } else { String::new() }
    );
    // Answers go out as they are written: without TCP_NODELAY a stream's small frames wait for the
    // client's delayed ACK (40 ms a request on Linux; `cargo xtask bench serve_latency`).
    let listener = listener.tap_io(|stream| {
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY not set on a connection: {err}");
        }
    });
    axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await.context("serving")?;
    opened.close().await;
    eprintln!("phosphor serve: stopped");
    Ok(())
}

/// SIGTERM or Ctrl-C: stop accepting, let the requests in flight (and their compactions) finish.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    eprintln!("phosphor serve: stopping; requests in flight finish first");
}

async fn health() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

async fn not_found(uri: axum::http::Uri) -> Response {
    let failure =
        Failure::new(404, FailureKind::NotFound, format!("no route {uri}: this server answers {ROUTES}"));
    let format = if uri.path().starts_with("/v1/messages") { Format::Anthropic } else { Format::Chat };
    format.failure(&failure)
}

async fn list_models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Err(failure) = authorize(&shared, &headers) {
        return Format::Chat.failure(&failure);
    }
    axum::Json(json!({
        "object": "list",
        "data": [{"id": shared.upstreams.main().info().model, "object": "model", "created": 0, "owned_by": "phosphor"}],
    }))
    .into_response()
}

/// The key a client sent for the upstream (`route::client_credential`): none when the proxy has a
/// key of its own, since the client's key is then the proxy's.
fn forwarded_credential(shared: &Shared, headers: &HeaderMap) -> Option<phosphor_llm::Credential> {
    if shared.api_key.is_some() { None } else { route::client_credential(headers) }
}

/// With a key configured, the client sends it as `Authorization: Bearer <key>` (OpenAI clients,
/// Codex CLI) or `x-api-key: <key>` (Anthropic clients, Claude Code); compared in constant time.
fn authorize(shared: &Shared, headers: &HeaderMap) -> Result<(), Failure> {
    let Some(key) = &shared.api_key else { return Ok(()) };
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let given = header(header::AUTHORIZATION.as_str())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| header("x-api-key"))
        .unwrap_or("");
    if constant_time_eq(given.as_bytes(), key.as_bytes()) {
        Ok(())
    } else {
        Err(Failure::new(
            401,
            FailureKind::Authentication,
            "missing or wrong API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`",
        ))
    }
}

/// Equality whose time depends on the lengths only, not on where the bytes differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, byte) in b.iter().enumerate() {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ byte);
    }
    diff == 0
}

/// The one rule of session names: letters, digits, `.`, `_` and `-`, at most [`MAX_SESSION_NAME`].
fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// The namespace of a request's session (see `SessionAgent::claim`): the name in
/// [`SESSION_HEADER`], which must follow the rule of names; else the client's own key of its
/// conversation (Claude Code's `X-Claude-Code-Session-Id`, Codex CLI's `session-id` or its
/// `prompt_cache_key`), reduced to the characters the rule allows; else the shared empty one.
fn session_name(headers: &HeaderMap, conversation_key: Option<&str>) -> Result<String, Failure> {
    if let Some(value) = headers.get(SESSION_HEADER) {
        let name = value.to_str().unwrap_or("");
        if name.is_empty() || name.len() > MAX_SESSION_NAME || !name.chars().all(name_char) {
            return Err(Failure::new(
                400,
                FailureKind::InvalidRequest,
                format!("{SESSION_HEADER} must be 1 to {MAX_SESSION_NAME} letters, digits, '.', '_' or '-'"),
            ));
        }
        return Ok(name.to_owned());
    }
    let client_keys = CLIENT_SESSION_HEADERS.iter().filter_map(|name| headers.get(*name)?.to_str().ok());
    let reduced = client_keys
        .chain(conversation_key)
        .map(|key| key.chars().filter(|c| name_char(*c)).take(MAX_SESSION_NAME).collect::<String>())
        .find(|name| !name.is_empty());
    Ok(reduced.unwrap_or_default())
}

/// The listen address's default: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:4871";

/// Parses `--listen`.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| format!("{text:?} is not an address: give IP:PORT, e.g. {DEFAULT_LISTEN}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_whole() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secre", b"secret"));
        assert!(!constant_time_eq(b"secretx", b"secret"));
        assert!(!constant_time_eq(b"", b"secret"));
        assert!(!constant_time_eq(b"sEcret", b"secret"));
    }

    /// Request headers of `pairs`.
    pub(super) fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn sessions_are_named_by_the_header_then_the_client_key() {
        let uuid = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";
        assert_eq!(session_name(&headers(&[]), None).unwrap(), "");
        assert_eq!(session_name(&headers(&[("x-claude-code-session-id", uuid)]), Some("k")).unwrap(), uuid);
        assert_eq!(session_name(&headers(&[("session-id", "a b/c")]), None).unwrap(), "abc");
        assert_eq!(session_name(&headers(&[]), Some("thread 7")).unwrap(), "thread7");
        assert_eq!(
            session_name(&headers(&[(SESSION_HEADER, "mine"), ("session-id", "theirs")]), None).unwrap(),
            "mine"
        );
        let error = session_name(&headers(&[(SESSION_HEADER, "a/b")]), None).unwrap_err();
        assert_eq!(error.status, 400);
        assert!(error.message.contains(SESSION_HEADER), "{}", error.message);
    }
}
