//! One way through the proxy for the three formats it speaks. A request of any of them is read into
//! an `Inbound` (`phosphor-wire`), its session claimed, the agent answers (compacting on the way),
//! and the answer is written back in the request's own format, whole or streamed as the model
//! writes. Errors too are written in the format's own shape, with one status and one kind per
//! cause, decided here ([`agent_failure`]).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use phosphor_agent::{AgentError, AgentEvent, Exchange, Reply};
use phosphor_base::Passthrough;
use phosphor_base::config::Api;
use phosphor_prune::PairingViolation;
use phosphor_wire::{
    Answer, Delta, Failure, FailureKind, Inbound, Meta, WireError, Writer, anthropic, chat, responses,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{Shared, authorize, forwarded_credential, session_name};
use crate::warn;

/// The header of every answer that names the stored session which answered it.
const SESSION_ID_HEADER: &str = "x-phosphor-session-id";

/// The API a request speaks, and so its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// OpenAI chat completions.
    Chat,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses.
    Responses,
}

impl Format {
    fn read(self, bytes: &[u8]) -> Result<Inbound, WireError> {
        match self {
            Format::Chat => chat::read_request(bytes),
            Format::Anthropic => anthropic::read_request(bytes),
            Format::Responses => responses::read_request(bytes),
        }
    }

    /// What the answer carries besides its content; `model` is the one that answered.
    fn meta(self, inbound: &Inbound, model: &str) -> Meta {
        let prefix = match self {
            Format::Chat => "chatcmpl-",
            Format::Anthropic => "msg_",
            Format::Responses => "resp_",
        };
        Meta {
            id: format!("{prefix}{}", uuid::Uuid::now_v7().simple()),
            model: model.to_owned(),
            created: phosphor_wire::now_secs(),
            stream_usage: inbound.stream_usage,
            show_reasoning: inbound.show_reasoning,
        }
    }

    fn whole(self, meta: &Meta, answer: &Answer<'_>) -> Value {
        match self {
            Format::Chat => chat::whole(meta, answer),
            Format::Anthropic => anthropic::whole(meta, answer),
            Format::Responses => responses::whole(meta, answer),
        }
    }

    fn writer(self, meta: Meta) -> Box<dyn Writer> {
        match self {
            Format::Chat => Box::new(chat::Stream::new(meta)),
            Format::Anthropic => Box::new(anthropic::Stream::new(meta)),
            Format::Responses => Box::new(responses::Stream::new(meta)),
        }
    }

    /// What a request of this format passes to an upstream of the same API: the body's fields its
    /// wire names (`PASSED_THROUGH`) and, for Anthropic, the `anthropic-beta` header. `None`
    /// when there is nothing to pass, and always for chat completions.
    fn passthrough(self, headers: &HeaderMap, fields: serde_json::Map<String, Value>) -> Option<Passthrough> {
        let (api, names) = match self {
            Format::Chat => return None,
            Format::Anthropic => (Api::Anthropic, anthropic::HEADERS_PASSED_THROUGH),
            Format::Responses => (Api::Responses, &[][..]),
        };
        let headers: Vec<(String, String)> = names
            .iter()
            .filter_map(|name| Some(((*name).to_owned(), headers.get(*name)?.to_str().ok()?.to_owned())))
            .collect();
        (!fields.is_empty() || !headers.is_empty()).then_some(Passthrough { api, fields, headers })
    }

    /// A failure as this format's error response, with `Retry-After` where it has one.
    pub(super) fn failure(self, failure: &Failure) -> Response {
        let body = match self {
            Format::Chat => chat::error_body(failure),
            Format::Anthropic => anthropic::error_body(failure),
            Format::Responses => responses::error_body(failure),
        };
        let status = StatusCode::from_u16(failure.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(seconds) = failure.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// `POST /v1/chat/completions`.
pub(super) async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    answer(Format::Chat, shared, headers, body).await
}

/// `POST /v1/messages` (Claude Code adds `?beta=true`, which changes nothing here).
pub(super) async fn messages(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Body) -> Response {
    answer(Format::Anthropic, shared, headers, body).await
}

/// `POST /v1/responses`.
pub(super) async fn responses(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Body) -> Response {
    answer(Format::Responses, shared, headers, body).await
}

/// `POST /v1/messages/count_tokens`: `{"input_tokens": N}`, the tokens of the request Phosphor
/// would send upstream for this conversation (`SessionAgent::count_request`): after the
/// compactions its session has had, not the whole history the client holds.
pub(super) async fn count_tokens(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let counted = async {
        let inbound = read(Format::Anthropic, &shared, &headers, body).await?;
        let name = session_name(&headers, inbound.conversation_key.as_deref())?;
        shared
            .agent
            .count_request(&name, &inbound.system_prompt, &inbound.tools, &inbound.messages)
            .await
            .map_err(agent_failure)
    };
    match counted.await {
        Ok(tokens) => axum::Json(json!({"input_tokens": tokens})).into_response(),
        Err(failure) => Format::Anthropic.failure(&failure),
    }
}

async fn answer(format: Format, shared: Arc<Shared>, headers: HeaderMap, body: Body) -> Response {
    match respond(format, shared, headers, body).await {
        Ok(response) => response,
        Err(failure) => format.failure(&failure),
    }
}

/// Checks the key, reads the body within the limit, and reads it as `format`.
async fn read(format: Format, shared: &Shared, headers: &HeaderMap, body: Body) -> Result<Inbound, Failure> {
    authorize(shared, headers)?;
    let bytes = axum::body::to_bytes(body, shared.max_body_bytes).await.map_err(|_| {
        Failure::new(
            413,
            FailureKind::TooLarge,
            format!("the request body is over {} bytes (serve --max-body-bytes)", shared.max_body_bytes),
        )
    })?;
    let inbound = format.read(&bytes)?;
    // A result no earlier call asked for is the client's mistake, said as the APIs say it; a call
    // still waiting for its result is not (the agent answers it with an error result upstream).
    if let Err(orphan @ PairingViolation::OrphanResult { .. }) =
        phosphor_prune::check_tool_pairing(&inbound.messages)
    {
        return Err(Failure::new(
            400,
            FailureKind::InvalidRequest,
            format!(
                "the conversation breaks tool pairing: {orphan} (counting from its first non-system message)"
            ),
        ));
    }
    Ok(inbound)
}

async fn respond(
    format: Format,
    shared: Arc<Shared>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Failure> {
    let mut inbound = read(format, &shared, &headers, body).await?;
    let name = session_name(&headers, inbound.conversation_key.as_deref())?;
    let Ok(permit) = shared.permits.clone().try_acquire_owned() else {
        let mut failure = Failure::new(
            429,
            FailureKind::RateLimited,
            "too many requests in flight (serve --max-concurrent); retry shortly",
        );
        failure.retry_after = Some(1);
        return Err(failure);
    };
    let chosen =
        shared.upstreams.choose(inbound.model.as_deref(), forwarded_credential(&shared, &headers))?;
    let meta = format.meta(&inbound, &chosen.model.info().model);
    let passthrough = format.passthrough(&headers, std::mem::take(&mut inbound.passed_through));
    let Inbound { system_prompt, tools, messages, max_output_tokens, temperature, stream, .. } = inbound;
    let model = (!Arc::ptr_eq(&chosen.model, shared.agent.large_model())).then_some(chosen.model);
    let mut exchange =
        Exchange { system_prompt, tools, messages, max_output_tokens, temperature, model, passthrough };
    let (events, received) = mpsc::unbounded_channel();
    if !chosen.main && shared.agent.fits_as_sent(&exchange) {
        // Another model than the session's, on a request no compaction would touch: as it came.
        let shared = shared.clone();
        let task = tokio::spawn(async move {
            let answered = shared.agent.pass_through(exchange, Some(&events));
            let result = match tokio::time::timeout(shared.timeout, answered).await {
                Ok(result) => result.map_err(agent_failure),
                Err(_) => Err(timed_out(&shared)),
            };
            drop(permit);
            result
        });
        return finish(format, meta, stream, received, task, None).await;
    }
    let claim =
        shared.agent.claim(&name, std::mem::take(&mut exchange.messages)).await.map_err(agent_failure)?;
    let session_id = claim.session_id.clone();
    exchange.messages = claim.new.clone();
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
                Ok(result) => result.map_err(agent_failure),
                Err(_) => Err(timed_out(&shared)),
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
    finish(format, meta, stream, received, task, Some(&session_id)).await
}

/// The answer of a request whose work runs in `task`: streamed as its events arrive, or whole at
/// its end; tagged with the session that answered, when one did.
async fn finish(
    format: Format,
    meta: Meta,
    stream: bool,
    received: mpsc::UnboundedReceiver<AgentEvent>,
    task: tokio::task::JoinHandle<Result<Reply, Failure>>,
    session_id: Option<&str>,
) -> Result<Response, Failure> {
    if stream {
        return Ok(stream_response(format.writer(meta), received, task, session_id));
    }
    drop(received);
    let reply = task.await.map_err(|err| Failure::new(500, FailureKind::Internal, err.to_string()))??;
    let mut response = axum::Json(format.whole(&meta, &answer_of(&reply))).into_response();
    tag(&mut response, session_id);
    Ok(response)
}

fn timed_out(shared: &Shared) -> Failure {
    Failure::new(
        504,
        FailureKind::Timeout,
        format!("no answer within {} s (serve --request-timeout)", shared.timeout.as_secs()),
    )
}

fn answer_of(reply: &Reply) -> Answer<'_> {
    Answer { message: &reply.message, usage: reply.usage, finish_reason: reply.finish_reason.as_ref() }
}

/// Names the stored session that answered, so that a client can find it (`phosphor sessions`).
fn tag(response: &mut Response, session_id: Option<&str>) {
    if let Some(Ok(value)) = session_id.map(HeaderValue::from_str) {
        response.headers_mut().insert(SESSION_ID_HEADER, value);
    }
}

/// The streamed answer: the writer's frames as the agent's events arrive, then its end (or its
/// failure, when the request failed after the stream began).
fn stream_response(
    mut writer: Box<dyn Writer>,
    mut received: mpsc::UnboundedReceiver<AgentEvent>,
    task: tokio::task::JoinHandle<Result<Reply, Failure>>,
    session_id: Option<&str>,
) -> Response {
    let (lines, body) = mpsc::channel::<Result<String, std::convert::Infallible>>(64);
    tokio::spawn(async move {
        // A client that went away stops the copying, not the request.
        for frame in writer.begin() {
            let _ = lines.send(Ok(frame)).await;
        }
        while let Some(event) = received.recv().await {
            let frames = match &event {
                AgentEvent::TextDelta { text } => writer.delta(Delta::Text(text)),
                AgentEvent::ReasoningDelta { text } => writer.delta(Delta::Reasoning(text)),
                AgentEvent::ReasoningSealed(seal) => writer.delta(Delta::Seal(seal)),
                AgentEvent::ToolCall(call) => writer.delta(Delta::ToolCall(call)),
                _ => continue,
            };
            for frame in frames {
                let _ = lines.send(Ok(frame)).await;
            }
        }
        let frames = match task.await {
            Ok(Ok(reply)) => writer.end(&answer_of(&reply)),
            Ok(Err(failure)) => writer.fail(&failure),
            Err(err) => writer.fail(&Failure::new(500, FailureKind::Internal, err.to_string())),
        };
        for frame in frames {
            let _ = lines.send(Ok(frame)).await;
        }
    });
    let stream =
        futures::stream::unfold(body, |mut body| async move { body.recv().await.map(|line| (line, body)) });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    tag(&mut response, session_id);
    response
}

/// The status, kind and words of an agent error: a conversation that does not fit even after
/// compaction is the client's 400 (each format says it as its clients expect: OpenAI's
/// `context_length_exceeded`, Anthropic's `prompt is too long`), upstream errors keep their status
/// where they had one (502 otherwise), and the proxy's own failures are 500.
fn agent_failure(err: AgentError) -> Failure {
    use phosphor_base::Error as Model;
    let message = err.to_string();
    let too_long = |tokens, window| FailureKind::ContextTooLong { tokens, window };
    match &err {
        AgentError::MessageTooLarge { tokens, overhead, window, .. } => {
            Failure::new(400, too_long(Some(tokens + overhead), Some(*window)), message)
        }
        AgentError::StillOverflowing { tokens, window, .. } => {
            Failure::new(400, too_long(Some(*tokens), Some(*window)), message)
        }
        AgentError::Model(Model::ContextOverflow { requested_tokens, limit_tokens, .. }) => Failure::new(
            400,
            too_long(*requested_tokens, *limit_tokens),
            format!("{message} (and compaction could not make it fit)"),
        ),
        AgentError::Model(Model::RateLimited { retry_after, .. }) => {
            let mut failure = Failure::new(429, FailureKind::RateLimited, message);
            failure.retry_after = Some(retry_after.map_or(1, |d| d.as_secs().max(1)));
            failure
        }
        AgentError::Model(Model::Transient { status, .. } | Model::BadRequest { status, .. }) => {
            let status = status.filter(|s| (400..600).contains(s)).unwrap_or(502);
            let kind = if status == 429 { FailureKind::RateLimited } else { FailureKind::Upstream };
            let mut failure = Failure::new(status, kind, format!("upstream: {message}"));
            if status == 429 {
                failure.retry_after = Some(1);
            }
            failure
        }
        AgentError::Model(_) => Failure::new(502, FailureKind::Upstream, format!("upstream: {message}")),
        _ => Failure::new(500, FailureKind::Internal, message),
    }
}
