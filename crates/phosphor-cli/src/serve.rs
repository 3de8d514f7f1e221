//! `phosphor serve`: an OpenAI-compatible proxy in front of the session model that compacts every
//! client's conversation as the agent does (`SessionAgent::respond`). Clients resend their whole
//! history; the proxy recognises the session it continues (`SessionAgent::claim`, by the heads kept
//! in the store, so several proxies on one Postgres share sessions), stores what is new and
//! forwards the summary plus the rest. The client runs its own tools.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use phosphor_agent::{AgentError, AgentEvent, Exchange, Reply, SessionAgent};
use phosphor_core::{FinishReason, Message, Part, Role, ToolSpec, Usage};
use phosphor_prompt::Profiles;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};

use crate::cli::ServeArgs;
use crate::models::{self, Purpose};
use crate::{Globals, config_check, sessions, warn};

/// The header that names a client's session (its namespace, see `SessionAgent::claim`).
pub const SESSION_HEADER: &str = "x-phosphor-session";
/// The longest session name a client may give.
const MAX_SESSION_NAME: usize = 128;

/// What every request handler shares.
struct Shared {
    agent: SessionAgent,
    api_key: Option<String>,
    permits: Arc<Semaphore>,
    model: String,
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
        model: model.clone(),
        max_body_bytes: args.max_body_bytes,
        timeout: Duration::from_secs(args.request_timeout),
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
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

/// An error as OpenAI's API shapes it: `{"error": {"message", "type", "param", "code"}}`.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    message: String,
    kind: &'static str,
    code: Option<&'static str>,
    retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        let kind = match status.as_u16() {
            401 => "authentication_error",
            404 => "not_found_error",
            429 => "rate_limit_error",
            400..=499 => "invalid_request_error",
            _ => "api_error",
        };
        ApiError { status, message: message.into(), kind, code: None, retry_after: None }
    }

    fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": null, "code": self.code}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// The status and words of an agent error: context errors are the client's 400
/// (`context_length_exceeded`, as OpenAI says it), upstream errors keep their status where they
/// had one (502 otherwise), and the proxy's own failures are 500.
fn agent_error(err: AgentError) -> ApiError {
    use phosphor_core::Error as Model;
    let message = err.to_string();
    let mut error = match &err {
        AgentError::MessageTooLarge { .. } | AgentError::StillOverflowing { .. } => {
            let mut e = ApiError::new(StatusCode::BAD_REQUEST, message);
            e.code = Some("context_length_exceeded");
            e
        }
        AgentError::Model(Model::ContextOverflow { .. }) => {
            let mut e = ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("{message} (and compaction could not make it fit)"),
            );
            e.code = Some("context_length_exceeded");
            e
        }
        AgentError::Model(Model::RateLimited { retry_after, .. }) => {
            let mut e = ApiError::new(StatusCode::TOO_MANY_REQUESTS, message);
            e.retry_after = Some(retry_after.map_or(1, |d| d.as_secs().max(1)));
            e
        }
        AgentError::Model(Model::Transient { status, .. } | Model::BadRequest { status, .. }) => {
            let status = status
                .and_then(|s| StatusCode::from_u16(s).ok())
                .filter(|s| s.is_client_error() || s.is_server_error())
                .unwrap_or(StatusCode::BAD_GATEWAY);
            ApiError::new(status, format!("upstream: {message}"))
        }
        AgentError::Model(_) => ApiError::new(StatusCode::BAD_GATEWAY, format!("upstream: {message}")),
        _ => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message),
    };
    if error.status == StatusCode::TOO_MANY_REQUESTS && error.retry_after.is_none() {
        error.retry_after = Some(1);
    }
    error
}

async fn health() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "no route {uri}: this server answers POST /v1/chat/completions, GET /v1/models and GET /health"
        ),
    )
}

async fn list_models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&shared, &headers)?;
    Ok(axum::Json(json!({
        "object": "list",
        "data": [{"id": shared.model, "object": "model", "created": 0, "owned_by": "phosphor"}],
    }))
    .into_response())
}

/// With a key configured, `Authorization: Bearer <key>`, compared in constant time.
fn authorize(shared: &Shared, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(key) = &shared.api_key else { return Ok(()) };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if constant_time_eq(given.as_bytes(), key.as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing or wrong API key: send `Authorization: Bearer <key>`",
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

/// A parsed chat-completions request.
struct ChatBody {
    exchange: Exchange,
    /// The non-system messages, in order (all of them: the session decides what is new).
    messages: Vec<Message>,
    stream: bool,
    include_usage: bool,
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message)
}

/// Reads the request body: what the proxy uses, checked, with errors that name the field.
fn parse_body(bytes: &[u8]) -> Result<ChatBody, ApiError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|err| bad_request(format!("the request body is not valid JSON: {err}")))?;
    let Value::Object(body) = value else {
        return Err(bad_request("the request body must be a JSON object"));
    };
    let Some(Value::Array(raw_messages)) = body.get("messages") else {
        return Err(bad_request("`messages` is required: an array of chat messages"));
    };
    if raw_messages.is_empty() {
        return Err(bad_request("`messages` is empty: send at least one message"));
    }
    if let Some(n) = body.get("n").and_then(Value::as_u64)
        && n != 1
    {
        return Err(bad_request(format!("`n` is {n}: this server returns one choice (n = 1)")));
    }
    let all = phosphor_core::openai::from_openai(raw_messages)
        .map_err(|err| bad_request(format!("`messages`: {err}")))?;
    let leading = all.iter().take_while(|m| m.role == Role::System).count();
    let system_prompt = all[..leading].iter().map(Message::text_content).collect::<Vec<_>>().join("\n\n");
    let messages = all[leading..].to_vec();
    if messages.is_empty() {
        return Err(bad_request("`messages` holds only system messages: send a user message"));
    }
    let tools = match body.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => {
            tools.iter().enumerate().map(|(i, t)| tool_spec(i, t)).collect::<Result<_, _>>()?
        }
        Some(_) => {
            return Err(bad_request(
                "`tools` must be an array of {\"type\": \"function\", \"function\": {...}}",
            ));
        }
    };
    let max_output_tokens = ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|key| body.get(*key).filter(|v| !v.is_null()).map(|v| (*key, v)))
        .map(|(key, v)| {
            v.as_u64()
                .filter(|n| *n > 0)
                .ok_or_else(|| bad_request(format!("`{key}` must be a positive integer")))
        })
        .transpose()?;
    let temperature = match body.get("temperature") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_f64()
                .filter(|t| (0.0..=2.0).contains(t))
                .ok_or_else(|| bad_request("`temperature` must be a number from 0 to 2"))? as f32,
        ),
    };
    let stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad_request("`stream` must be true or false")),
    };
    let include_usage = body
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(ChatBody {
        exchange: Exchange { system_prompt, tools, messages: Vec::new(), max_output_tokens, temperature },
        messages,
        stream,
        include_usage,
    })
}

fn tool_spec(index: usize, tool: &Value) -> Result<ToolSpec, ApiError> {
    let where_ = format!("`tools[{index}]`");
    if tool.get("type").and_then(Value::as_str) != Some("function") {
        return Err(bad_request(format!("{where_}: only tools of \"type\": \"function\" are supported")));
    }
    let function =
        tool.get("function").ok_or_else(|| bad_request(format!("{where_}: `function` is missing")))?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| bad_request(format!("{where_}.function.name is missing or empty")))?;
    Ok(ToolSpec {
        name: name.to_owned(),
        description: function.get("description").and_then(Value::as_str).unwrap_or("").to_owned(),
        parameters: function
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

/// The client's session name from [`SESSION_HEADER`], checked: letters, digits, `.`, `_`, `-`.
fn session_name(headers: &HeaderMap) -> Result<String, ApiError> {
    let Some(value) = headers.get(SESSION_HEADER) else { return Ok(String::new()) };
    let name = value.to_str().unwrap_or("");
    let valid = !name.is_empty()
        && name.len() <= MAX_SESSION_NAME
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if valid {
        Ok(name.to_owned())
    } else {
        Err(bad_request(format!(
            "{SESSION_HEADER} must be 1 to {MAX_SESSION_NAME} letters, digits, '.', '_' or '-'"
        )))
    }
}

async fn chat_completions(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Body) -> Response {
    match chat(shared, headers, body).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn chat(shared: Arc<Shared>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    authorize(&shared, &headers)?;
    let name = session_name(&headers)?;
    let bytes = axum::body::to_bytes(body, shared.max_body_bytes).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is over {} bytes (serve --max-body-bytes)", shared.max_body_bytes),
        )
    })?;
    let ChatBody { mut exchange, messages, stream, include_usage } = parse_body(&bytes)?;
    let Ok(permit) = shared.permits.clone().try_acquire_owned() else {
        let mut error = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too many requests in flight (serve --max-concurrent); retry shortly",
        );
        error.retry_after = Some(1);
        return Err(error);
    };
    let claim = shared.agent.claim(&name, messages).await.map_err(agent_error)?;
    let session_id = claim.session_id.clone();
    exchange.messages = claim.new.clone();
    let (events, received) = mpsc::unbounded_channel();
    let task = {
        let shared = shared.clone();
        let session_id = session_id.clone();
        // The request runs to its end even when the client goes away: what it stores stays
        // consistent, and the session is put back in the index either way.
        tokio::spawn(async move {
            let result = tokio::time::timeout(
                shared.timeout,
                shared.agent.respond(&session_id, exchange, Some(&events)),
            )
            .await;
            let result = match result {
                Ok(result) => result.map_err(agent_error),
                Err(_) => Err(ApiError::new(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!("no answer within {} s (serve --request-timeout)", shared.timeout.as_secs()),
                )),
            };
            if let Err(err) = shared.agent.finish(claim, result.as_ref().ok()).await {
                warn(format!(
                    "session {session_id}: where it stands was not recorded ({err}); its clients will branch"
                ));
            }
            drop(permit);
            result
        })
    };
    let completion = Completion::new(&shared.model, &session_id);
    if stream {
        return Ok(completion.stream(received, task, include_usage));
    }
    drop(received);
    let reply =
        task.await.map_err(|err| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()))??;
    let mut response = axum::Json(completion.whole(&reply)).into_response();
    completion.tag(&mut response);
    Ok(response)
}

/// What an answer carries besides its content: id, time, model, session.
struct Completion {
    id: String,
    created: u64,
    model: String,
    session_id: String,
}

impl Completion {
    fn new(model: &str, session_id: &str) -> Completion {
        Completion {
            id: format!("chatcmpl-{}", uuid::Uuid::now_v7().simple()),
            created: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            model: model.to_owned(),
            session_id: session_id.to_owned(),
        }
    }

    /// The session id, so that a client can name it next time (`X-Phosphor-Session` holds names,
    /// the id says which stored session answered).
    fn tag(&self, response: &mut Response) {
        if let Ok(value) = HeaderValue::from_str(&self.session_id) {
            response.headers_mut().insert("x-phosphor-session-id", value);
        }
    }

    /// The non-streaming answer: `chat.completion`.
    fn whole(&self, reply: &Reply) -> Value {
        let text = reply.message.text_content();
        let calls = tool_calls(&reply.message);
        let mut message = json!({
            "role": "assistant",
            "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::String(text) },
            "refusal": null,
        });
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": finish_reason(reply),
            }],
            "usage": usage(&reply.usage),
        })
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        })
    }

    /// The streaming answer: `chat.completion.chunk` events as the model writes, then the finish
    /// (and usage when asked for), then `[DONE]`. An error after the stream began is sent as an
    /// `{"error": ...}` event, as OpenAI's servers do.
    fn stream(
        self,
        mut received: mpsc::UnboundedReceiver<AgentEvent>,
        task: tokio::task::JoinHandle<Result<Reply, ApiError>>,
        include_usage: bool,
    ) -> Response {
        let (lines, body) = mpsc::channel::<Result<String, std::convert::Infallible>>(64);
        let tag = self.session_id.clone();
        tokio::spawn(async move {
            let send = |value: Value| format!("data: {value}\n\n");
            let _ = lines.send(Ok(send(self.chunk(json!({"role": "assistant", "content": ""}), None)))).await;
            let mut calls = 0usize;
            while let Some(event) = received.recv().await {
                let delta = match event {
                    AgentEvent::TextDelta { text } => json!({"content": text}),
                    AgentEvent::ReasoningDelta { text } => json!({"reasoning_content": text}),
                    AgentEvent::ToolCall(call) => {
                        calls += 1;
                        json!({"tool_calls": [{
                            "index": calls - 1,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        }]})
                    }
                    _ => continue,
                };
                // A client that went away stops the copying, not the request.
                let _ = lines.send(Ok(send(self.chunk(delta, None)))).await;
            }
            match task.await {
                Ok(Ok(reply)) => {
                    let _ = lines.send(Ok(send(self.chunk(json!({}), Some(finish_reason(&reply)))))).await;
                    if include_usage {
                        let mut last = self.chunk(json!({}), None);
                        last["choices"] = json!([]);
                        last["usage"] = usage(&reply.usage);
                        let _ = lines.send(Ok(send(last))).await;
                    }
                    let _ = lines.send(Ok("data: [DONE]\n\n".to_owned())).await;
                }
                Ok(Err(error)) => {
                    let _ = lines.send(Ok(send(error.body()))).await;
                }
                Err(err) => {
                    let error = ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, err.to_string());
                    let _ = lines.send(Ok(send(error.body()))).await;
                }
            }
        });
        let stream =
            futures::stream::unfold(
                body,
                |mut body| async move { body.recv().await.map(|line| (line, body)) },
            );
        let mut response = Response::new(Body::from_stream(stream));
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        if let Ok(value) = HeaderValue::from_str(&tag) {
            headers.insert("x-phosphor-session-id", value);
        }
        response
    }
}

fn tool_calls(message: &Message) -> Vec<Value> {
    message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::ToolCall(call) => Some(call),
            _ => None,
        })
        .map(|call| {
            json!({
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            })
        })
        .collect()
}

fn finish_reason(reply: &Reply) -> &'static str {
    let has_calls = reply.message.parts.iter().any(|p| matches!(p, Part::ToolCall(_)));
    match &reply.finish_reason {
        _ if has_calls => "tool_calls",
        Some(FinishReason::Length) => "length",
        Some(FinishReason::ContentFilter) => "content_filter",
        _ => "stop",
    }
}

fn usage(usage: &Usage) -> Value {
    json!({
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    })
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

    #[test]
    fn bad_bodies_say_what_is_wrong() {
        let error = |body: &str| parse_body(body.as_bytes()).err().map(|e| e.message).unwrap_or_default();
        assert!(error("{").contains("not valid JSON"));
        assert!(error("[]").contains("JSON object"));
        assert!(error("{}").contains("`messages` is required"));
        assert!(error(r#"{"messages": []}"#).contains("empty"));
        assert!(error(r#"{"messages": [{"role": "system", "content": "x"}]}"#).contains("only system"));
        assert!(error(r#"{"messages": [{"role": "user", "content": "x"}], "n": 2}"#).contains("one choice"));
        assert!(
            error(r#"{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web"}]}"#)
                .contains("tools[0]")
        );
        assert!(
            error(r#"{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}"#)
                .contains("max_tokens")
        );
        let ok = parse_body(br#"{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], "stream": true, "max_tokens": 5}"#).ok().unwrap();
        assert_eq!(ok.exchange.system_prompt, "be brief");
        assert_eq!(ok.messages.len(), 1);
        assert!(ok.stream);
        assert_eq!(ok.exchange.max_output_tokens, Some(5));
    }
}
