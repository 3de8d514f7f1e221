//! A loopback HTTP/1.1 server that replays scripted OpenAI-style responses and records every request.
//!
//! Built directly on [`tokio::net::TcpListener`]: one request per connection, answered with
//! `Connection: close`. Event streams are sent with chunked transfer encoding, one HTTP chunk per
//! server-sent event, as OpenAI's servers do.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// The largest request head (request line and headers) the server reads.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// One request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The method (`POST`).
    pub method: String,
    /// The request target as sent (`/v1/chat/completions`).
    pub path: String,
    /// Every header in arrival order, names lowercased, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `Null` when empty, a JSON string holding the raw text when it is not JSON.
    pub body: serde_json::Value,
}

impl RecordedRequest {
    /// The first value of the header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum MockResponse {
    /// `200 OK`, `text/event-stream`: each payload sent as `data: {payload}\n\n` in its own HTTP
    /// chunk, then `data: [DONE]\n\n`.
    Sse(Vec<String>),
    /// Like [`MockResponse::Sse`], with a pause between consecutive events (none before the
    /// first), so a test can cancel mid-stream.
    SsePaced {
        /// The `data:` payloads.
        events: Vec<String>,
        /// The pause between two events.
        interval: Duration,
    },
    /// Sends the payloads, then closes the connection without `[DONE]` and without the final
    /// zero-length chunk: a stream that broke.
    SseCut(Vec<String>),
    /// `200 OK`, `text/event-stream`: each frame sent verbatim in its own HTTP chunk (whole
    /// events such as `event: message_start\ndata: {...}\n\n`, as Anthropic and the Responses API
    /// stream them), and no `[DONE]`.
    Events(Vec<String>),
    /// Any status with a `Content-Length` body. `Content-Type: application/json` is added when the
    /// headers name no content type; `Content-Length` and `Connection` are always added.
    Raw {
        /// The HTTP status.
        status: u16,
        /// Extra headers (`retry-after`, `content-type`, ...).
        headers: Vec<(String, String)>,
        /// The body, sent verbatim.
        body: String,
    },
    /// Waits, then sends the inner response.
    Delayed(Duration, Box<MockResponse>),
}

impl MockResponse {
    /// A JSON body with the given status and no extra headers.
    pub fn json(status: u16, body: impl Into<String>) -> MockResponse {
        MockResponse::Raw { status, headers: Vec::new(), body: body.into() }
    }

    /// This response, sent after `delay`.
    pub fn delayed(self, delay: Duration) -> MockResponse {
        MockResponse::Delayed(delay, Box::new(self))
    }
}

struct State {
    responses: Vec<MockResponse>,
    /// Answers every request instead of the script, when set.
    responder: Option<Responder>,
    requests: Vec<RecordedRequest>,
}

/// A function that answers a request by what it holds (see [`MockServer::start_responding`]).
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> MockResponse + Send + Sync>;

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic in a connection task cannot leave `State` half-written: keep serving.
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A local OpenAI-compatible server on `127.0.0.1` and a random port. It serves the scripted
/// responses in order, one per request, and stops when dropped.
///
/// A request past the end of the script gets a `500` whose JSON error says the script ran out.
pub struct MockServer {
    address: SocketAddr,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("MockServer")
            .field("address", &self.address)
            .field("scripted", &state.responses.len())
            .field("responding", &state.responder.is_some())
            .field("received", &state.requests.len())
            .finish()
    }
}

impl MockServer {
    /// Starts a server that answers with `responses`, in order.
    ///
    /// # Panics
    /// When no loopback port can be bound (the test cannot run then); see [`MockServer::try_start`].
    pub async fn start(responses: Vec<MockResponse>) -> MockServer {
        match MockServer::try_start(responses).await {
            Ok(server) => server,
            Err(error) => panic!("mock server: cannot listen on 127.0.0.1: {error}"),
        }
    }

    /// Starts a server that answers each request with what `responder` makes of it: an upstream
    /// for a real client, whose requests a test cannot script in order (side requests, retries).
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start_responding(responder: Responder) -> MockServer {
        match MockServer::bind(Vec::new(), Some(responder)).await {
            Ok(server) => server,
            Err(error) => panic!("mock server: cannot listen on 127.0.0.1: {error}"),
        }
    }

    /// Starts a server that answers with `responses`, in order; fails when binding fails.
    pub async fn try_start(responses: Vec<MockResponse>) -> std::io::Result<MockServer> {
        MockServer::bind(responses, None).await
    }

    async fn bind(responses: Vec<MockResponse>, responder: Option<Responder>) -> std::io::Result<MockServer> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let address = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State { responses, responder, requests: Vec::new() }));
        let task = tokio::spawn(accept_loop(listener, state.clone()));
        Ok(MockServer { address, state, task })
    }

    /// The base URL an OpenAI client is given: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// The socket address the server listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state).requests.clone()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every open connection.
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<Mutex<State>>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    connections.spawn(serve(stream, state.clone()));
                }
            }
            // Reap finished connections so the set does not grow without bound.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve(mut stream: TcpStream, state: Arc<Mutex<State>>) {
    let request = match read_request(&mut stream).await {
        Ok(Some(request)) => request,
        Ok(None) => return,
        Err(error) => {
            let body = error_body(&format!("mock server: unreadable request: {error}"), "mock_bad_request");
            let _ = write_response(&mut stream, MockResponse::json(400, body)).await;
            let _ = stream.shutdown().await;
            return;
        }
    };
    let broken = broken_request(&request);
    let response = {
        let mut state = lock(&state);
        let index = state.requests.len();
        let scripted = state.responses.len();
        let answered = state.responder.as_ref().map(|respond| respond(&request));
        let response = answered.or_else(|| state.responses.get(index).cloned()).unwrap_or_else(|| {
            let message = format!(
                "mock server script ran out: request #{} ({} {}) has no scripted response; {scripted} were scripted",
                index + 1,
                request.method,
                request.path,
            );
            MockResponse::json(500, error_body(&message, "mock_script_exhausted"))
        });
        state.requests.push(request);
        match broken {
            // As OpenAI does: a request that breaks the protocol is rejected, whatever was scripted.
            Some(message) => MockResponse::json(400, error_body(&message, "mock_invalid_messages")),
            None => response,
        }
    };
    let _ = write_response(&mut stream, response).await;
    let _ = stream.shutdown().await;
}

fn error_body(message: &str, code: &str) -> String {
    serde_json::json!({"error": {"message": message, "type": code, "param": null, "code": code}}).to_string()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn invalid(message: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message.into())
}

/// Reads more bytes into `buf`; fails on EOF.
async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let mut chunk = [0u8; 16 * 1024];
    let n = stream.read(&mut chunk).await?;
    if n == 0 {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed mid-request"));
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

/// Reads one request; `None` when the client closed the connection before sending anything.
async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<RecordedRequest>> {
    let mut buf = Vec::with_capacity(8 * 1024);
    let head_end = loop {
        if let Some(pos) = find(&buf, b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(invalid(format!("request head longer than {MAX_HEAD_BYTES} bytes")));
        }
        match read_more(stream, &mut buf).await {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof && buf.is_empty() => {
                return Ok(None);
            }
            Err(error) => return Err(error),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut words = request_line.split(' ');
    let (Some(method), Some(path), Some(version)) = (words.next(), words.next(), words.next()) else {
        return Err(invalid(format!(
            "malformed request line {request_line:?}: expected `METHOD TARGET HTTP/1.1`"
        )));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(invalid(format!("unsupported protocol {version:?} in {request_line:?}: only HTTP/1.x")));
    }
    let mut headers = Vec::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(invalid(format!("malformed header line {line:?}: expected `name: value`")));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    let mut rest = buf[head_end + 4..].to_vec();
    let body = if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        read_chunked_body(stream, rest).await?
    } else {
        let length = match header("content-length") {
            Some(value) => value
                .parse::<usize>()
                .map_err(|_| invalid(format!("content-length {value:?} is not a number")))?,
            None => 0,
        };
        while rest.len() < length {
            read_more(stream, &mut rest).await?;
        }
        rest.truncate(length);
        rest
    };
    let body = if body.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&body).into_owned()))
    };
    Ok(Some(RecordedRequest { method: method.to_owned(), path: path.to_owned(), headers, body }))
}

/// Decodes a chunked request body whose first bytes are already in `buf`.
async fn read_chunked_body(stream: &mut TcpStream, mut buf: Vec<u8>) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(pos) = find(&buf, b"\r\n") {
                break pos;
            }
            read_more(stream, &mut buf).await?;
        };
        let size_text = String::from_utf8_lossy(&buf[..line_end]).into_owned();
        let size_hex = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| invalid(format!("chunk size {size_text:?} is not hexadecimal")))?;
        buf.drain(..line_end + 2);
        if size == 0 {
            return Ok(body);
        }
        while buf.len() < size + 2 {
            read_more(stream, &mut buf).await?;
        }
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
    }
}

/// The reason phrase for the status codes tests use.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

async fn write_response(stream: &mut TcpStream, mut response: MockResponse) -> std::io::Result<()> {
    while let MockResponse::Delayed(delay, inner) = response {
        tokio::time::sleep(delay).await;
        response = *inner;
    }
    match response {
        MockResponse::Sse(events) => write_sse(stream, &events, Duration::ZERO, true).await,
        MockResponse::SsePaced { events, interval } => write_sse(stream, &events, interval, true).await,
        MockResponse::SseCut(events) => write_sse(stream, &events, Duration::ZERO, false).await,
        MockResponse::Events(frames) => write_frames(stream, &frames).await,
        MockResponse::Raw { status, headers, body } => {
            let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
            if !body.is_empty() && !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-type")) {
                head.push_str("Content-Type: application/json\r\n");
            }
            for (name, value) in &headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()));
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
            stream.flush().await
        }
        // Unwrapped by the loop above.
        MockResponse::Delayed(..) => Ok(()),
    }
}

async fn write_chunk(stream: &mut TcpStream, data: &str) -> std::io::Result<()> {
    stream.write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes()).await?;
    stream.flush().await
}

async fn write_sse(
    stream: &mut TcpStream,
    events: &[String],
    interval: Duration,
    complete: bool,
) -> std::io::Result<()> {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await?;
    stream.flush().await?;
    for (i, event) in events.iter().enumerate() {
        if i > 0 && !interval.is_zero() {
            tokio::time::sleep(interval).await;
        }
        write_chunk(stream, &format!("data: {event}\n\n")).await?;
    }
    if complete {
        write_chunk(stream, "data: [DONE]\n\n").await?;
        stream.write_all(b"0\r\n\r\n").await?;
        stream.flush().await?;
    }
    Ok(())
}

async fn write_frames(stream: &mut TcpStream, frames: &[String]) -> std::io::Result<()> {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await?;
    for frame in frames {
        write_chunk(stream, frame).await?;
    }
    stream.write_all(b"0\r\n\r\n").await?;
    stream.flush().await
}

/// Why a request would be rejected by a strict provider, in the API its path names: Anthropic
/// Messages (`…/messages`), OpenAI Responses (`…/responses`), else chat completions. Not that
/// API's shape, or a tool call without its result, a result without its call
/// (`phosphor_prune::check_tool_pairing`); for Anthropic also a `tool_use` whose results are not
/// all in the user message right after it, as Anthropic requires. Every request the server
/// receives is checked, so no test can pass with an unpaired request.
fn broken_request(request: &RecordedRequest) -> Option<String> {
    let path = request.path.split('?').next().unwrap_or_default();
    let (api, parsed) = if path.ends_with("/messages") {
        let bytes = request.body.to_string();
        let parsed = phosphor_wire::anthropic::read_request(bytes.as_bytes()).map(|inbound| inbound.messages);
        if let Some(message) =
            anthropic_results_misplaced(&request.body).or_else(|| anthropic_thinking_refused(request))
        {
            return Some(format!("mock server: {message}"));
        }
        ("Anthropic Messages", parsed.map_err(|e| e.message))
    } else if path.ends_with("/responses") {
        let bytes = request.body.to_string();
        let parsed = phosphor_wire::responses::read_request(bytes.as_bytes()).map(|inbound| inbound.messages);
        if let Some(message) = responses_reasoning_refused(&request.body) {
            return Some(format!("mock server: {message}"));
        }
        ("OpenAI Responses", parsed.map_err(|e| e.message))
    } else {
        let messages = request.body.get("messages")?.as_array()?;
        ("OpenAI chat", phosphor_wire::chat::from_openai(messages).map_err(|e| e.to_string()))
    };
    match parsed {
        Err(error) => Some(format!("mock server: the request is not {api}: {error}")),
        Ok(parsed) => phosphor_prune::check_tool_pairing(&parsed)
            .err()
            .map(|violation| format!("mock server: the request breaks tool pairing: {violation}")),
    }
}

/// Anthropic's thinking rules: a `thinking` block comes back with the signature it was given
/// (the mock's own, [`crate::wires::signature`]) and its text unchanged; with thinking on, the
/// assistant message of a tool loop still going starts with its thinking; a `budget_tokens` is
/// under `max_tokens` (unless interleaved thinking is on).
fn anthropic_thinking_refused(request: &RecordedRequest) -> Option<String> {
    let body = &request.body;
    let messages = body.get("messages")?.as_array()?;
    let blocks =
        |m: &serde_json::Value| m.get("content").and_then(|c| c.as_array()).cloned().unwrap_or_default();
    for (index, message) in messages.iter().enumerate() {
        for (at, block) in blocks(message).iter().enumerate() {
            if block["type"] != "thinking" {
                continue;
            }
            let text = block["thinking"].as_str().unwrap_or_default();
            if block["signature"].as_str() != Some(crate::wires::signature(text).as_str()) {
                return Some(format!(
                    "messages.{index}.content.{at}: Invalid `signature` in `thinking` block"
                ));
            }
        }
    }
    let thinking = body.get("thinking").filter(|t| t["type"] == "enabled" || t["type"] == "adaptive")?;
    let interleaved =
        request.header("anthropic-beta").is_some_and(|beta| beta.contains("interleaved-thinking"));
    if let (Some(budget), Some(max)) = (thinking["budget_tokens"].as_u64(), body["max_tokens"].as_u64())
        && budget >= max
        && !interleaved
    {
        return Some("`max_tokens` must be greater than `thinking.budget_tokens`".to_owned());
    }
    let last = messages.iter().rposition(|m| m["role"] == "assistant")?;
    let content = blocks(&messages[last]);
    let results_only = messages[last + 1..]
        .iter()
        .all(|m| m["role"] == "user" && blocks(m).iter().all(|b| b["type"] == "tool_result"));
    let first = content.first().and_then(|b| b["type"].as_str()).unwrap_or_default();
    let uses_tools = content.iter().any(|b| b["type"] == "tool_use");
    (uses_tools && results_only && first != "thinking" && first != "redacted_thinking").then(|| {
        format!(
            "messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When \
             `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the \
             lastmost set of `tool_use` and `tool_result` blocks)."
        )
    })
}

/// OpenAI's rule for reasoning items sent back: their `encrypted_content` is what the provider
/// gave (here the mock's own [`crate::wires::signature`] of the summary), else it cannot be read.
fn responses_reasoning_refused(body: &serde_json::Value) -> Option<String> {
    let input = body.get("input")?.as_array()?;
    input.iter().enumerate().find_map(|(index, item)| {
        let encrypted =
            item.get("encrypted_content").and_then(|e| e.as_str()).filter(|_| item["type"] == "reasoning")?;
        let summary = phosphor_wire::responses::summary_text(item);
        (encrypted != crate::wires::signature(&summary)).then(|| {
            format!("input[{index}]: The encrypted content for item rs_{index} could not be verified.")
        })
    })
}

/// Anthropic's rule: each `tool_use` of an assistant message has its `tool_result` in the
/// message right after it, a user message.
fn anthropic_results_misplaced(body: &serde_json::Value) -> Option<String> {
    let messages = body.get("messages")?.as_array()?;
    for (index, message) in messages.iter().enumerate() {
        let blocks =
            |m: &serde_json::Value| m.get("content").and_then(|c| c.as_array()).cloned().unwrap_or_default();
        let of_type = |m: &serde_json::Value, kind: &str, key: &str| -> Vec<String> {
            blocks(m)
                .iter()
                .filter(|b| b["type"] == kind)
                .filter_map(|b| b[key].as_str().map(str::to_owned))
                .collect()
        };
        let uses = of_type(message, "tool_use", "id");
        if uses.is_empty() {
            continue;
        }
        let next = messages.get(index + 1);
        let answered = next.filter(|n| n["role"] == "user").map(|n| of_type(n, "tool_result", "tool_use_id"));
        let answered = answered.unwrap_or_default();
        if let Some(missing) = uses.iter().find(|id| !answered.contains(id)) {
            return Some(format!(
                "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}",
                index
            ));
        }
    }
    None
}
