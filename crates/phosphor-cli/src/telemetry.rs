//! Logging to stderr (`-v`, `RUST_LOG`) and, with the `otel` feature, OTLP/HTTP export of the tracing
//! spans when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set.
//!
//! The two outputs filter separately: `-v` and `RUST_LOG` choose what is printed, while the exporter
//! always gets Phosphor's own spans at `info` and above (turns, compactions, model calls with their
//! `gen_ai.*` attributes) and warnings from everything else. Export runs on the SDK's batch thread
//! with the blocking HTTP client, so it never waits on the async runtime; [`Telemetry::shutdown`]
//! delivers what is left when the command ends, waiting at most [`SHUTDOWN_TIMEOUT`].

use std::io;
#[cfg(feature = "otel")]
use std::time::Duration;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The environment variables that switch OTLP export on (either one, non-empty).
pub const ENDPOINT_VARS: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];

/// The longest the command waits at exit for the last spans to be delivered.
#[cfg(feature = "otel")]
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// What [`init`] started; [`Telemetry::shutdown`] it before the process exits.
#[must_use = "shut it down at exit, or the last spans are lost"]
pub struct Telemetry {
    #[cfg(feature = "otel")]
    otlp: Option<otlp::Export>,
}

impl Telemetry {
    /// Delivers the spans not yet exported (waiting at most [`SHUTDOWN_TIMEOUT`]) and stops the exporter.
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(export) = self.otlp {
            export.shutdown();
        }
    }
}

/// Installs the global subscriber: the stderr log, and the OTLP exporter when the environment asks for it.
pub fn init(verbose: u8) -> Telemetry {
    let log = tracing_subscriber::fmt::layer()
        .with_writer(io::stderr)
        .with_target(verbose >= 2)
        .without_time()
        .with_filter(log_filter(verbose));
    let endpoint = configured_endpoint();

    #[cfg(feature = "otel")]
    {
        let export = endpoint.and_then(|(var, value)| otlp::Export::start(var, &value));
        let layer = export.as_ref().map(|export| export.layer().with_filter(EnvFilter::new(EXPORT_FILTER)));
        let _ = tracing_subscriber::registry().with(log).with(layer).try_init();
        Telemetry { otlp: export }
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = tracing_subscriber::registry().with(log).try_init();
        if let Some((var, _)) = endpoint {
            tracing::info!(
                "{var} is set, but this phosphor was built without the `otel` feature: no spans are exported"
            );
        }
        Telemetry {}
    }
}

/// What the exporter gets, whatever `-v` and `RUST_LOG` say.
#[cfg(feature = "otel")]
const EXPORT_FILTER: &str = "warn,phosphor=info";

/// What is printed on stderr: `RUST_LOG` when set, otherwise `-v` picks the level. Below `-vv`,
/// sqlx's warnings are not printed: its only one is a statement that took over a second, which a
/// busy machine's disk can cause and a user cannot act on (it broke tests that read stderr).
fn log_filter(verbose: u8) -> EnvFilter {
    match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => EnvFilter::new(directives),
        _ => EnvFilter::new(match verbose {
            0 => "warn,sqlx=error",
            1 => "warn,sqlx=error,phosphor=info",
            2 => "info,phosphor=debug",
            _ => "debug,phosphor=trace",
        }),
    }
}

/// The first of [`ENDPOINT_VARS`] that is set and not empty, and its value (an empty value counts as
/// unset, as the OpenTelemetry specification says).
fn configured_endpoint() -> Option<(&'static str, String)> {
    ENDPOINT_VARS.into_iter().find_map(|var| match std::env::var(var) {
        Ok(value) if !value.trim().is_empty() => Some((var, value)),
        _ => None,
    })
}

#[cfg(feature = "otel")]
mod otlp {
    //! The OpenTelemetry SDK pipeline: OTLP/HTTP span exporter, batch processor, tracer provider.

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry::{Key, KeyValue, Value};
    use opentelemetry_otlp::{Protocol, WithExportConfig as _};
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData, SpanExporter};
    use tracing_opentelemetry::OpenTelemetryLayer;
    use tracing_subscriber::registry::LookupSpan;

    use super::SHUTDOWN_TIMEOUT;
    use crate::warn;

    /// The service name when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` names one.
    const SERVICE_NAME: &str = "phosphor";

    /// A running export pipeline.
    pub struct Export {
        provider: SdkTracerProvider,
        warning: Arc<OnceWarning>,
    }

    impl Export {
        /// Builds the pipeline from the `OTEL_*` environment (endpoint, protocol, headers, timeout,
        /// `OTEL_BSP_*`); `None` with one warning when it cannot be built, or when `OTEL_SDK_DISABLED=true`.
        pub fn start(var: &str, value: &str) -> Option<Export> {
            if std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true")) {
                return None;
            }
            let warning =
                Arc::new(OnceWarning { target: format!("{var}={value}"), shown: AtomicBool::new(false) });
            let protocol = match protocol() {
                Ok(protocol) => protocol,
                Err(message) => {
                    warning.show(&format!("OTLP export is off: {message}"));
                    return None;
                }
            };
            let exporter =
                match opentelemetry_otlp::SpanExporter::builder().with_http().with_protocol(protocol).build()
                {
                    Ok(exporter) => exporter,
                    Err(err) => {
                        warning.show(&format!("OTLP export is off: {err}"));
                        return None;
                    }
                };
            let provider = SdkTracerProvider::builder()
                .with_batch_exporter(Reporting { inner: exporter, warning: warning.clone() })
                .with_resource(resource())
                .build();
            Some(Export { provider, warning })
        }

        /// The `tracing` layer that turns spans into OpenTelemetry spans of this pipeline.
        pub fn layer<S>(&self) -> OpenTelemetryLayer<S, SdkTracer>
        where
            S: tracing::Subscriber + for<'span> LookupSpan<'span>,
        {
            tracing_opentelemetry::layer().with_tracer(self.provider.tracer("phosphor"))
        }

        /// Exports what is left and stops; one warning when that fails or takes too long.
        pub fn shutdown(self) {
            let started = Instant::now();
            let result = self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT);
            // The provider wraps its processor's `Timeout` in a generic error: tell it by the clock.
            let timed_out = started.elapsed() >= SHUTDOWN_TIMEOUT;
            match result {
                Ok(()) => {}
                Err(_) if timed_out => self.warning.show(&format!(
                    "OTLP export did not finish within {}s; the last spans are lost",
                    SHUTDOWN_TIMEOUT.as_secs()
                )),
                Err(err) => self.warning.show(&format!("OTLP export failed at exit: {err}")),
            }
        }
    }

    /// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`, the
    /// specification's default (the crate itself would pick JSON when both encodings are compiled in).
    fn protocol() -> Result<Protocol, String> {
        let set = ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"].into_iter().find_map(
            |var| std::env::var(var).ok().filter(|value| !value.trim().is_empty()).map(|value| (var, value)),
        );
        match set {
            None => Ok(Protocol::HttpBinary),
            Some((var, value)) => match value.trim().to_ascii_lowercase().as_str() {
                "http/protobuf" => Ok(Protocol::HttpBinary),
                "http/json" => Ok(Protocol::HttpJson),
                _ => Err(format!(
                    "{var}={value} is not supported; allowed: http/protobuf (the default), http/json"
                )),
            },
        }
    }

    /// The SDK's default resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), named `phosphor`
    /// and versioned when the environment does not say otherwise.
    fn resource() -> Resource {
        let detected = Resource::builder().build();
        let named = detected
            .get(&Key::from_static_str("service.name"))
            .is_some_and(|name| !name.as_str().starts_with("unknown_service"));
        let versioned = detected.get(&Key::from_static_str("service.version")).is_some();
        let mut builder = Resource::builder();
        if !named {
            builder = builder.with_service_name(SERVICE_NAME);
        }
        if !versioned {
            builder = builder.with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
        }
        builder.build()
    }

    /// The span fields Phosphor records as `u64`. tracing-opentelemetry 0.34 has no `record_u64`, so they
    /// arrive as decimal strings; the GenAI conventions and OTLP backends want integers. Recording them
    /// as `i64` where the spans are made would make this list unnecessary.
    const INTEGER_ATTRIBUTES: [&str; 5] = [
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.request.max_tokens",
        "phosphor.compaction.tokens_before",
        "phosphor.compaction.tokens_after",
    ];

    /// Turns the [`INTEGER_ATTRIBUTES`] of `span` that hold decimal strings back into integers.
    fn integer_attributes(span: &mut SpanData) {
        for attribute in &mut span.attributes {
            if !INTEGER_ATTRIBUTES.contains(&attribute.key.as_str()) {
                continue;
            }
            if let Value::String(text) = &attribute.value
                && let Ok(number) = text.as_str().parse::<i64>()
            {
                attribute.value = Value::I64(number);
            }
        }
    }

    /// Prints its first message as a warning, and nothing after: an unreachable collector is worth one line.
    struct OnceWarning {
        /// Which variable set the endpoint, and to what.
        target: String,
        shown: AtomicBool,
    }

    impl OnceWarning {
        fn show(&self, message: &str) {
            if !self.shown.swap(true, Ordering::SeqCst) {
                warn(format!("{message} ({}); telemetry only, the command is not affected", self.target));
            }
        }
    }

    /// The OTLP exporter, with failures reported through [`OnceWarning`] (the SDK's own logging is off).
    #[derive(Debug)]
    struct Reporting {
        inner: opentelemetry_otlp::SpanExporter,
        warning: Arc<OnceWarning>,
    }

    impl std::fmt::Debug for OnceWarning {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("OnceWarning").field("target", &self.target).finish_non_exhaustive()
        }
    }

    impl SpanExporter for Reporting {
        async fn export(&self, mut batch: Vec<SpanData>) -> OTelSdkResult {
            for span in &mut batch {
                integer_attributes(span);
            }
            let result = self.inner.export(batch).await;
            if let Err(err) = &result {
                self.warning.show(&format!("OTLP export failed: {err}"));
            }
            result
        }

        fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
            self.inner.shutdown_with_timeout(timeout)
        }

        fn force_flush(&self) -> OTelSdkResult {
            self.inner.force_flush()
        }

        fn set_resource(&mut self, resource: &Resource) {
            self.inner.set_resource(resource);
        }
    }
}
