//! OTLP export end to end: the built `phosphor` makes a real model call against the testkit's mock
//! server while `OTEL_EXPORTER_OTLP_ENDPOINT` points at a small collector written here, which records
//! every `POST /v1/traces` and answers `200`.
#![cfg(feature = "otel")]
// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use phosphor_testkit::{MockServer, sse_text};
use pretty_assertions::assert_eq;
use prost::Message as _;
use serde_json::json;

/// One request the collector received.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    content_type: String,
    body: Vec<u8>,
}

/// A minimal OTLP/HTTP collector on a loopback port: HTTP/1.1 with keep-alive, `Content-Length` bodies.
struct Collector {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Collector {
    fn start() -> Collector {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let sink = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let sink = sink.clone();
                std::thread::spawn(move || serve(stream, &sink));
            }
        });
        Collector { port, received }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// Answers every request on the connection with an empty `200` until the client closes it.
fn serve(stream: TcpStream, sink: &Mutex<Vec<Received>>) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line.split(' ').nth(1).unwrap_or_default().to_owned();
        let mut headers = BTreeMap::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
        assert!(!headers.contains_key("transfer-encoding"), "the collector reads Content-Length bodies only");
        let length: usize = headers.get("content-length").map_or(0, |v| v.parse().unwrap());
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let content_type = headers.get("content-type").cloned().unwrap_or_default();
        sink.lock().unwrap().push(Received { path, content_type: content_type.clone(), body });
        let response =
            format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: 0\r\n\r\n");
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// A workspace, database and configuration naming the mock server as the only model.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new(server: &MockServer) -> Env {
        let env = Env { dir: tempfile::tempdir().unwrap() };
        fs::create_dir_all(env.dir.path().join("workspace")).unwrap();
        let config = json!({
            "providers": { "mock": { "base_url": server.base_url(), "api_key_env": "PHOSPHOR_TEST_API_KEY" } },
            "models": { "large": { "provider": "mock", "model": "mock-large", "context_window": 100_000, "max_output_tokens": 100 } }
        });
        fs::write(env.config(), config.to_string()).unwrap();
        env
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("config.json")
    }

    /// `phosphor run <prompt>` with `vars` set and every other `OTEL_*` variable removed; returns its
    /// output and how long it took.
    async fn run(&self, prompt: &str, vars: &[(&str, String)]) -> (Output, Duration) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_phosphor"));
        command
            .current_dir(self.dir.path().join("workspace"))
            .env("HOME", self.dir.path())
            .env("XDG_CONFIG_HOME", self.dir.path().join(".config"))
            .env("XDG_DATA_HOME", self.dir.path().join(".local/share"))
            .env("PHOSPHOR_TEST_API_KEY", "sk-test")
            .env("HF_HUB_OFFLINE", "1")
            .env_remove("RUST_LOG")
            .args(["--db", self.dir.path().join("sessions.db").to_str().unwrap()])
            .args(["--config", self.config().to_str().unwrap(), "run", prompt])
            .stdin(Stdio::null());
        for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("OTEL_")) {
            command.env_remove(name);
        }
        for (name, value) in vars {
            command.env(name, value);
        }
        // On a blocking thread, so the mock server keeps serving.
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let output = command.output().unwrap();
            (output, started.elapsed())
        })
        .await
        .unwrap()
    }
}

#[track_caller]
fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Every span of every export request, each with its resource's `service.name`.
fn spans(requests: &[ExportTraceServiceRequest]) -> Vec<(String, Span)> {
    let mut spans = Vec::new();
    for request in requests {
        for resource_spans in &request.resource_spans {
            let service = resource_spans
                .resource
                .as_ref()
                .and_then(|resource| string_attribute(&resource.attributes, "service.name"))
                .unwrap_or_default();
            for scope in &resource_spans.scope_spans {
                spans.extend(scope.spans.iter().map(|span| (service.clone(), span.clone())));
            }
        }
    }
    spans
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?.value.as_ref()
}

fn string_attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    match attribute(attributes, key)? {
        AnyValue::StringValue(value) => Some(value.clone()),
        _ => None,
    }
}

/// The model call, the turn around it, and their usage attributes, as the collector received them.
fn check_trace(requests: &[ExportTraceServiceRequest], service_name: &str) {
    let spans = spans(requests);
    let names: Vec<&str> = spans.iter().map(|(_, span)| span.name.as_str()).collect();
    let find = |name: &str| {
        spans
            .iter()
            .find(|(_, span)| span.name == name)
            .unwrap_or_else(|| panic!("no {name} span in {names:?}"))
    };
    let (service, call) = find("chat mock-large");
    let (_, turn) = find("invoke_agent phosphor");
    assert_eq!(service, service_name);
    let usage = |key: &str| attribute(&call.attributes, key).cloned();
    assert_eq!(
        (
            usage("gen_ai.usage.input_tokens"),
            usage("gen_ai.usage.output_tokens"),
            usage("gen_ai.request.model"),
            usage("gen_ai.operation.name"),
        ),
        (
            Some(AnyValue::IntValue(120)),
            Some(AnyValue::IntValue(3)),
            Some(AnyValue::StringValue("mock-large".into())),
            Some(AnyValue::StringValue("chat".into())),
        )
    );
    // The model call is a client span inside the turn's span, in the same trace.
    assert_eq!(
        (call.trace_id.clone(), call.parent_span_id.clone()),
        (turn.trace_id.clone(), turn.span_id.clone())
    );
    assert_eq!(call.kind, opentelemetry_proto::tonic::trace::v1::span::SpanKind::Client as i32);
}

#[tokio::test(flavor = "multi_thread")]
async fn spans_reach_the_otlp_endpoint_as_protobuf_and_as_json() {
    let collector = Collector::start();
    let server = MockServer::start(vec![
        sse_text(&["Hello", " there."], Some((120, 3))),
        sse_text(&["Hello", " again."], Some((120, 3))),
    ])
    .await;
    let env = Env::new(&server);

    // The default protocol, http/protobuf, to OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces.
    let (output, _) = env.run("Say hello", &[("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())]).await;
    assert_success(&output);
    assert_eq!(
        (String::from_utf8_lossy(&output.stdout).as_ref(), output.stderr.as_slice()),
        ("Hello there.\n", &b""[..])
    );
    let received = collector.received();
    assert!(!received.is_empty(), "no export arrived");
    assert!(
        received.iter().all(|r| r.path == "/v1/traces" && r.content_type == "application/x-protobuf"),
        "{received:?}"
    );
    let decoded: Vec<ExportTraceServiceRequest> =
        received.iter().map(|r| ExportTraceServiceRequest::decode(r.body.as_slice()).unwrap()).collect();
    check_trace(&decoded, "phosphor");

    // http/json when asked for, to the traces endpoint as given; OTEL_SERVICE_NAME renames the service.
    let collected = received.len();
    let (output, _) = env
        .run(
            "Say hello again",
            &[
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", format!("{}/custom/traces", collector.endpoint())),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json".to_owned()),
                ("OTEL_SERVICE_NAME", "phosphor-ci".to_owned()),
            ],
        )
        .await;
    assert_success(&output);
    let received = collector.received().split_off(collected);
    assert!(!received.is_empty(), "no JSON export arrived");
    assert!(
        received.iter().all(|r| r.path == "/custom/traces" && r.content_type == "application/json"),
        "{received:?}"
    );
    let decoded: Vec<ExportTraceServiceRequest> =
        received.iter().map(|r| serde_json::from_slice(&r.body).unwrap()).collect();
    check_trace(&decoded, "phosphor-ci");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_collector_costs_one_warning_and_nothing_else() {
    // A port that was just free: nothing listens there.
    let closed = TcpListener::bind(("127.0.0.1", 0)).unwrap().local_addr().unwrap().port();
    let server = MockServer::start(vec![sse_text(&["Still answered."], Some((10, 2)))]).await;
    let env = Env::new(&server);

    let (output, took) =
        env.run("Hello?", &[("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://127.0.0.1:{closed}"))]).await;
    assert_success(&output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Still answered.\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("warning: OTLP export failed: "), "{stderr}");
    assert!(stderr.contains(&format!("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:{closed}")), "{stderr}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_an_endpoint_the_other_otel_variables_change_nothing() {
    let server = MockServer::start(vec![sse_text(&["Quiet."], None)]).await;
    let env = Env::new(&server);
    let vars = [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json".to_owned()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", " ".to_owned()),
    ];
    let (output, _) = env.run("Hello?", &vars).await;
    assert_success(&output);
    assert_eq!(
        (String::from_utf8_lossy(&output.stdout).as_ref(), String::from_utf8_lossy(&output.stderr).as_ref()),
        ("Quiet.\n", "")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collector_that_never_answers_delays_the_exit_by_the_shutdown_timeout_at_most() {
    // Accepts connections and reads nothing, answers nothing.
    let silent = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let held: Vec<TcpStream> = silent.incoming().flatten().collect();
        drop(held);
    });
    let server = MockServer::start(vec![sse_text(&["Answered anyway."], Some((10, 2)))]).await;
    let env = Env::new(&server);

    let (output, took) =
        env.run("Hello?", &[("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://127.0.0.1:{port}"))]).await;
    assert_success(&output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Answered anyway.\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("warning: OTLP export did not finish within 5s; the last spans are lost"),
        "{stderr}"
    );
    // The export itself would wait 10s (OTEL_EXPORTER_OTLP_TIMEOUT's default); the exit waits 5s.
    assert!(took >= Duration::from_secs(5) && took < Duration::from_secs(9), "took {took:?}");
}
