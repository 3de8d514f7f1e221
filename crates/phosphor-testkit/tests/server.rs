//! The mock server checked byte for byte with a raw TCP client, and the chunk builders checked
//! against OpenAI's streaming format.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns unwrap too

use std::time::{Duration, Instant};

use phosphor_testkit::{
    ERROR_FIXTURES, MockResponse, MockServer, RecordedRequest, SseBuilder, argument_fragments, error_fixture,
    sse_reasoning_then_text, sse_text, sse_tool_calls,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends `request` verbatim and reads the whole response (the server closes the connection).
async fn exchange(server: &MockServer, request: &str) -> String {
    let mut stream = TcpStream::connect(server.address()).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    String::from_utf8(response).unwrap()
}

fn post(body: &str) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer sk-x\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Splits a response into its head and its body.
fn split(response: &str) -> (&str, &str) {
    response.split_once("\r\n\r\n").unwrap()
}

/// Decodes a chunked body into its chunks; the last one is the empty terminator.
fn chunks(mut body: &str) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let (size, rest) = body.split_once("\r\n").unwrap();
        let size = usize::from_str_radix(size, 16).unwrap();
        out.push(rest[..size].to_owned());
        assert_eq!(&rest[size..size + 2], "\r\n");
        body = &rest[size + 2..];
        if size == 0 {
            assert_eq!(body, "", "bytes after the last chunk");
            return out;
        }
    }
}

#[tokio::test]
async fn an_event_stream_is_chunked_one_event_per_chunk_and_ends_with_done() {
    let server =
        MockServer::start(vec![MockResponse::Sse(vec![r#"{"a":1}"#.into(), r#"{"b":2}"#.into()])]).await;
    let response = exchange(&server, &post(r#"{"model":"m","stream":true}"#)).await;
    let (head, body) = split(&response);
    assert_eq!(
        head,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
         Transfer-Encoding: chunked\r\nConnection: close"
    );
    assert_eq!(chunks(body), vec!["data: {\"a\":1}\n\n", "data: {\"b\":2}\n\n", "data: [DONE]\n\n", ""]);
}

#[tokio::test]
async fn requests_are_recorded_with_method_path_headers_and_json_body() {
    let server = MockServer::start(vec![sse_text(&["x"], None)]).await;
    exchange(&server, &post(r#"{"model":"m","messages":[]}"#)).await;
    assert_eq!(
        server.requests(),
        vec![RecordedRequest {
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            headers: vec![
                ("host".into(), "localhost".into()),
                ("authorization".into(), "Bearer sk-x".into()),
                ("content-type".into(), "application/json".into()),
                ("content-length".into(), "27".into()),
            ],
            body: json!({"model": "m", "messages": []}),
        }]
    );
    assert_eq!(server.requests()[0].header("Authorization"), Some("Bearer sk-x"));
}

#[tokio::test]
async fn chunked_request_bodies_and_non_json_bodies_are_read() {
    let server = MockServer::start(vec![sse_text(&["x"], None), sse_text(&["y"], None)]).await;
    let chunked = "POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
                   5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n";
    exchange(&server, chunked).await;
    exchange(&server, &post("plain text")).await;
    let bodies: Vec<Value> = server.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies, vec![json!({"a": 1}), json!("plain text")]);
}

#[tokio::test]
async fn a_request_past_the_script_gets_a_500_saying_so() {
    let server = MockServer::start(vec![sse_text(&["only"], None)]).await;
    exchange(&server, &post("{}")).await;
    let response = exchange(&server, &post("{}")).await;
    let (head, body) = split(&response);
    assert!(head.starts_with("HTTP/1.1 500 Internal Server Error\r\n"), "{head}");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        body,
        json!({"error": {
            "message": "mock server script ran out: request #2 (POST /v1/chat/completions) has no scripted response; 1 were scripted",
            "type": "mock_script_exhausted",
            "param": null,
            "code": "mock_script_exhausted",
        }})
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn raw_responses_carry_status_headers_and_body() {
    let raw = MockResponse::Raw {
        status: 429,
        headers: vec![("retry-after".into(), "3".into())],
        body: r#"{"error":{"message":"slow down"}}"#.into(),
    };
    let server = MockServer::start(vec![raw, error_fixture("nginx_413").response()]).await;
    let response = exchange(&server, &post("{}")).await;
    assert_eq!(
        response,
        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nretry-after: 3\r\n\
         Content-Length: 33\r\nConnection: close\r\n\r\n{\"error\":{\"message\":\"slow down\"}}"
    );
    let response = exchange(&server, &post("{}")).await;
    let (head, body) = split(&response);
    assert!(head.starts_with("HTTP/1.1 413 Payload Too Large\r\nContent-Type: text/html\r\n"), "{head}");
    assert_eq!(body, error_fixture("nginx_413").body);
}

#[tokio::test]
async fn delayed_paced_and_cut_responses() {
    let events = vec!["1".to_owned(), "2".to_owned(), "3".to_owned()];
    let server = MockServer::start(vec![
        sse_text(&["late"], None).delayed(Duration::from_millis(80)),
        MockResponse::SsePaced { events: events.clone(), interval: Duration::from_millis(40) },
        MockResponse::SseCut(events),
    ])
    .await;
    let started = Instant::now();
    exchange(&server, &post("{}")).await;
    assert!(started.elapsed() >= Duration::from_millis(80), "{:?}", started.elapsed());

    let started = Instant::now();
    exchange(&server, &post("{}")).await;
    assert!(started.elapsed() >= Duration::from_millis(80), "two pauses of 40 ms: {:?}", started.elapsed());

    let response = exchange(&server, &post("{}")).await;
    let body = split(&response).1;
    assert_eq!(
        body, "9\r\ndata: 1\n\n\r\n9\r\ndata: 2\n\n\r\n9\r\ndata: 3\n\n\r\n",
        "no [DONE], no last chunk"
    );
}

fn parse(events: &[String]) -> Vec<Value> {
    events.iter().map(|e| serde_json::from_str(e).unwrap()).collect()
}

fn payloads(response: MockResponse) -> Vec<String> {
    match response {
        MockResponse::Sse(events) => events,
        other => panic!("not an event stream: {other:?}"),
    }
}

#[test]
fn text_chunks_have_openai_shape_and_key_order() {
    let events = payloads(sse_text(&["Hel", "lo"], Some((9, 2))));
    let chunks = parse(&events);
    let id = chunks[0]["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("chatcmpl-") && id.len() == 38, "{id}");
    let fingerprint = chunks[0]["system_fingerprint"].as_str().unwrap().to_owned();
    let chunk = |delta: &str, finish: &str| {
        format!(
            r#"{{"id":"{id}","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"{fingerprint}","choices":[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}],"usage":null}}"#
        )
    };
    let usage = format!(
        r#"{{"id":"{id}","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"{fingerprint}","choices":[],"usage":{{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{{"cached_tokens":0,"audio_tokens":0}},"completion_tokens_details":{{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}}}}"#
    );
    assert_eq!(
        events,
        vec![
            chunk(r#"{"role":"assistant","content":"","refusal":null}"#, "null"),
            chunk(r#"{"content":"Hel"}"#, "null"),
            chunk(r#"{"content":"lo"}"#, "null"),
            chunk("{}", r#""stop""#),
            usage,
        ]
    );
    // Without usage there is neither a usage chunk nor a usage field.
    let events = payloads(sse_text(&["Hi"], None));
    assert_eq!(events.len(), 3);
    assert!(events.iter().all(|e| !e.contains("usage")), "{events:?}");
    // Each stream has its own id.
    assert_ne!(parse(&payloads(sse_text(&["Hi"], None)))[0]["id"], chunks[0]["id"]);
}

#[test]
fn tool_calls_stream_like_openai_parallel_calls() {
    let calls = [("call_a", "read_file", r#"{"path":"src/main.rs"}"#), ("call_b", "ls", "{}")];
    let chunks = parse(&payloads(sse_tool_calls(&calls, Some((50, 20)))));
    let deltas: Vec<&Value> =
        chunks.iter().filter_map(|c| c["choices"].get(0)).map(|c| &c["delta"]).collect();
    assert_eq!(deltas[0], &json!({"role": "assistant", "content": null, "refusal": null}));

    let mut rebuilt: Vec<(String, String, String)> = Vec::new();
    for delta in &deltas[1..deltas.len() - 1] {
        let calls = delta["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), 1);
        let call = &calls[0];
        let index = call["index"].as_u64().unwrap() as usize;
        if index == rebuilt.len() {
            // The opening delta: index, id, type, name and empty arguments.
            // serde_json keeps key order (preserve_order), so this checks OpenAI's byte order.
            let keys: Vec<&String> = call.as_object().unwrap().keys().collect();
            assert_eq!(keys, vec!["index", "id", "type", "function"]);
            assert_eq!((&call["type"], &call["function"]["arguments"]), (&json!("function"), &json!("")));
            rebuilt.push((
                call["id"].as_str().unwrap().into(),
                call["function"]["name"].as_str().unwrap().into(),
                String::new(),
            ));
        } else {
            // Later deltas: only the index and an argument fragment.
            assert_eq!(index + 1, rebuilt.len());
            assert_eq!(call.as_object().unwrap().keys().collect::<Vec<_>>(), vec!["index", "function"]);
            assert_eq!(call["function"].as_object().unwrap().len(), 1);
            rebuilt[index].2.push_str(call["function"]["arguments"].as_str().unwrap());
        }
    }
    let expected: Vec<(String, String, String)> =
        calls.iter().map(|(i, n, a)| ((*i).into(), (*n).into(), (*a).into())).collect();
    assert_eq!(rebuilt, expected);
    assert_eq!(chunks[chunks.len() - 2]["choices"][0]["finish_reason"], json!("tool_calls"));
    assert_eq!(chunks[chunks.len() - 1]["choices"], json!([]));
    assert_eq!(chunks[chunks.len() - 1]["usage"]["total_tokens"], json!(70));
}

#[test]
fn arguments_split_into_several_fragments_on_char_boundaries() {
    let arguments = r#"{"city":"Zürich","days":3}"#;
    let fragments = argument_fragments(arguments);
    assert!(fragments.len() > 3, "{fragments:?}");
    assert!(fragments.iter().all(|f| !f.is_empty() && f.len() <= 8), "{fragments:?}");
    assert_eq!(fragments.concat(), arguments);
    assert_eq!(argument_fragments(""), Vec::<&str>::new());
}

#[test]
fn reasoning_streams_like_deepseek() {
    let chunks = parse(&payloads(sse_reasoning_then_text(&["Think"], &["Answer"], None)));
    let deltas: Vec<(Value, Value)> = chunks
        .iter()
        .map(|c| (c["choices"][0]["delta"].clone(), c["choices"][0]["finish_reason"].clone()))
        .collect();
    assert_eq!(
        deltas,
        vec![
            (json!({"role": "assistant", "content": null, "reasoning_content": ""}), Value::Null),
            (json!({"content": null, "reasoning_content": "Think"}), Value::Null),
            (json!({"content": "Answer", "reasoning_content": null}), Value::Null),
            (json!({"content": "", "reasoning_content": null}), json!("stop")),
        ]
    );
    assert_eq!(chunks[0]["model"], json!("deepseek-reasoner"));
}

#[test]
fn builder_events_are_kept_verbatim() {
    let events =
        SseBuilder::new().usage_field(false).event(r#"{"error":{"message":"boom"}}"#).text("t").build();
    assert_eq!(events[0], r#"{"error":{"message":"boom"}}"#);
    assert!(!events[1].contains("usage"));
}

#[test]
fn error_fixtures_are_unique_and_json_where_they_say_so() {
    let mut names: Vec<&str> = ERROR_FIXTURES.iter().map(|f| f.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), ERROR_FIXTURES.len());
    for fixture in ERROR_FIXTURES {
        if fixture.content_type == "application/json" {
            let parsed: Result<Value, _> = serde_json::from_str(fixture.body);
            assert!(parsed.is_ok(), "{} is not JSON", fixture.name);
        }
    }
}
