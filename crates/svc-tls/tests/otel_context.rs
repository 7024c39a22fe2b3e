//! Trace context across a `PeerClient` request and the serving half (feature `otel`),
//! read from an in-memory span exporter (opentelemetry_sdk's `testing`):
//!
//! - a request sent in a span carries `traceparent` of its client span, and the
//!   handler's span is the caller's trace's child: caller → `svc_tls.peer.request`
//!   (client) → `svc_tls.serve` (server) → the handler's own span, one trace id;
//! - `PeerClient::execute` (the seam generated clients send through) does the same;
//! - a request sent outside any span carries no `traceparent`, and its server span
//!   starts a trace of its own;
//! - the ingress verifier, reached outside any traced request (a service behind the
//!   ingress with a server of its own), continues the trace its headers carry;
//! - work makes spans, the no-change path none: a rotation of the client identity's
//!   Secret makes one `svc_tls.identity.reload` span naming the Secret and the new
//!   serial, and the next request one `svc_tls.pool.retire` span; requests before it
//!   made neither;
//! - export: a malformed endpoint is refused naming it; a collector that never answers
//!   holds no span up, and what does not fit the bound is dropped and counted.
#![cfg(feature = "otel")]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod otel;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use opentelemetry::trace::{SpanKind, TraceContextExt as _, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use test_support::poll_until;
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

/// The process's subscriber: `tracing` spans as OpenTelemetry spans, each exported
/// when it ends into memory; the W3C propagator.
fn spans() -> &'static InMemorySpanExporter {
    static EXPORTER: OnceLock<(InMemorySpanExporter, SdkTracerProvider)> = OnceLock::new();
    &EXPORTER
        .get_or_init(|| {
            let exporter = InMemorySpanExporter::default();
            let provider = SdkTracerProvider::builder()
                .with_simple_exporter(exporter.clone())
                .build();
            let subscriber = tracing_subscriber::registry()
                .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
            tracing::subscriber::set_global_default(subscriber).unwrap();
            opentelemetry::global::set_text_map_propagator(
                opentelemetry_sdk::propagation::TraceContextPropagator::new(),
            );
            (exporter, provider)
        })
        .0
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// The one finished span called `name` in trace `trace`.
fn one(spans: &[SpanData], name: &str, trace: opentelemetry::trace::TraceId) -> SpanData {
    let found: Vec<_> = named(spans, name)
        .into_iter()
        .filter(|s| s.span_context.trace_id() == trace)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {name} span in trace {trace}: {spans:#?}"
    );
    found[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handlers_span_is_a_child_of_the_callers_span() {
    let exporter = spans();
    let mesh = otel::Mesh::start().await;
    // What the handler saw: the traceparent header and its own span's trace.
    let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let (port, _server) = mesh
        .serve({
            let seen = seen.clone();
            move |request: http::Request<hyper::body::Incoming>| {
                let seen = seen.clone();
                async move {
                    let traceparent = request
                        .headers()
                        .get("traceparent")
                        .map(|v| v.to_str().unwrap().to_owned())
                        .unwrap_or_default();
                    let handler = tracing::info_span!("handler work");
                    let trace = handler.context().span().span_context().trace_id();
                    async {
                        tokio::task::yield_now().await;
                    }
                    .instrument(handler)
                    .await;
                    seen.lock().unwrap().push((traceparent, trace.to_string()));
                    "ok".to_owned()
                }
            }
        })
        .await;
    let url = format!("https://127.0.0.1:{port}/regions");
    let client = mesh.peer_client(&url).await;

    let caller = tracing::info_span!("caller");
    let trace = caller.context().span().span_context().trace_id();
    let status = async {
        client
            .send(client.get(&url).unwrap())
            .await
            .unwrap()
            .status()
    }
    .instrument(caller)
    .await;
    assert_eq!(status, 200);

    poll_until(
        "the caller's, client, server and handler spans are exported",
        || {
            let spans = exporter.get_finished_spans().unwrap();
            [
                "caller",
                "svc_tls.peer.request",
                "svc_tls.serve",
                "handler work",
            ]
            .iter()
            .all(|name| {
                named(&spans, name)
                    .iter()
                    .any(|s| s.span_context.trace_id() == trace)
            })
        },
    )
    .await;
    let spans = exporter.get_finished_spans().unwrap();
    let caller = one(&spans, "caller", trace);
    let request = one(&spans, "svc_tls.peer.request", trace);
    let served = one(&spans, "svc_tls.serve", trace);
    let handler = one(&spans, "handler work", trace);
    assert_eq!(request.parent_span_id, caller.span_context.span_id());
    assert_eq!(request.span_kind, SpanKind::Client);
    assert_eq!(served.parent_span_id, request.span_context.span_id());
    assert_eq!(served.span_kind, SpanKind::Server);
    assert_eq!(handler.parent_span_id, served.span_context.span_id());
    assert!(
        request
            .attributes
            .iter()
            .any(|kv| kv.key.as_str() == "http.response.status_code" && kv.value.as_str() == "200"),
        "{:?}",
        request.attributes
    );
    // On the wire: W3C trace context of the client span, sampled.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![(
            format!("00-{trace}-{}-01", request.span_context.span_id()),
            trace.to_string()
        )]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_carries_the_trace_context_as_send_does() {
    let exporter = spans();
    let mesh = otel::Mesh::start().await;
    let (port, _server) = mesh
        .serve(|request: http::Request<hyper::body::Incoming>| async move {
            request
                .headers()
                .get("traceparent")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default()
        })
        .await;
    let url = format!("https://127.0.0.1:{port}/generated");
    let client = mesh.peer_client(&url).await;
    let caller = tracing::info_span!("generated caller");
    let trace = caller.context().span().span_context().trace_id();
    let request = reqwest::Request::new(reqwest::Method::GET, url.parse().unwrap());
    let traceparent = async { client.execute(request).await.unwrap().text().await.unwrap() }
        .instrument(caller)
        .await;
    poll_until("the execute's client span is exported", || {
        named(
            &exporter.get_finished_spans().unwrap(),
            "svc_tls.peer.request",
        )
        .iter()
        .any(|s| s.span_context.trace_id() == trace)
    })
    .await;
    let request = one(
        &exporter.get_finished_spans().unwrap(),
        "svc_tls.peer.request",
        trace,
    );
    assert_eq!(
        traceparent,
        format!("00-{trace}-{}-01", request.span_context.span_id())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_outside_any_span_carries_no_trace_context() {
    let exporter = spans();
    let mesh = otel::Mesh::start().await;
    let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let (port, _server) = mesh
        .serve({
            let seen = seen.clone();
            move |request: http::Request<hyper::body::Incoming>| {
                let seen = seen.clone();
                async move {
                    let header = request
                        .headers()
                        .get("traceparent")
                        .map(|v| v.to_str().unwrap().to_owned());
                    let trace = tracing::Span::current()
                        .context()
                        .span()
                        .span_context()
                        .trace_id();
                    seen.lock().unwrap().push(header);
                    trace.to_string()
                }
            }
        })
        .await;
    let url = format!("https://127.0.0.1:{port}/unsampled");
    let client = mesh.peer_client(&url).await;
    let response = client.send(client.get(&url).unwrap()).await.unwrap();
    let served_trace = response.text().await.unwrap();
    assert_eq!(seen.lock().unwrap().clone(), vec![None]);
    // Its server span is a root of its own trace.
    poll_until("the server span is exported", || {
        named(&exporter.get_finished_spans().unwrap(), "svc_tls.serve")
            .iter()
            .any(|s| s.span_context.trace_id().to_string() == served_trace)
    })
    .await;
    let spans = exporter.get_finished_spans().unwrap();
    let served = spans
        .iter()
        .find(|s| s.span_context.trace_id().to_string() == served_trace)
        .unwrap();
    assert_eq!(served.parent_span_id, opentelemetry::trace::SpanId::INVALID);
    assert!(
        named(&spans, "svc_tls.peer.request")
            .iter()
            .all(|s| s.span_context.trace_id().to_string() != served_trace),
        "no client span without a current span"
    );
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_makes_reload_and_retirement_spans_and_requests_make_none() {
    let exporter = spans();
    let mesh = otel::Mesh::start().await;
    let (port, _server) = mesh.serve(|_| async { "ok".to_owned() }).await;
    let url = format!("https://127.0.0.1:{port}/");
    let client = mesh.peer_client(&url).await;
    let secret = format!("{}/{}", otel::NS, mesh.identity);
    let reloads_of_this_secret = || -> Vec<SpanData> {
        exporter
            .get_finished_spans()
            .unwrap()
            .into_iter()
            .filter(|s| {
                s.name == "svc_tls.identity.reload"
                    && attribute(s, "source").is_some_and(|source| source.contains(&secret))
            })
            .collect()
    };
    // Requests in traces of their own: what each made is told apart by trace id.
    let request = async |name: &'static str| {
        let root = tracing::info_span!("request", name);
        let trace = root.context().span().span_context().trace_id();
        let status = async {
            client
                .send(client.get(&url).unwrap())
                .await
                .unwrap()
                .status()
        }
        .instrument(root)
        .await;
        assert_eq!(status, 200);
        trace
    };
    let retirements_in = |trace| {
        exporter
            .get_finished_spans()
            .unwrap()
            .into_iter()
            .filter(|s| s.name == "svc_tls.pool.retire" && s.span_context.trace_id() == trace)
            .count()
    };
    let mut unchanged = Vec::new();
    for _ in 0..5 {
        let trace = request("unchanged").await;
        assert_eq!(retirements_in(trace), 0, "no retirement without a change");
        unchanged.push(trace);
    }
    // At most the initial load's (the loader may tell the resolver of the first
    // version after it was built), and none in a request's trace: a handshake or a
    // request on the no-change path makes no reload span.
    let reloads = reloads_of_this_secret();
    assert!(reloads.len() <= 1, "{reloads:#?}");
    assert!(
        reloads
            .iter()
            .all(|s| !unchanged.contains(&s.span_context.trace_id())),
        "{reloads:#?}"
    );

    mesh.rotate_identity(4242);
    poll_until("a reload span names the Secret and the new serial", || {
        reloads_of_this_secret()
            .iter()
            .any(|s| attribute(s, "serial").as_deref() == Some("1092"))
    })
    .await;
    let trace = request("after the rotation").await;
    poll_until(
        "the request after the rotation retired the pool in a span",
        || retirements_in(trace) == 1,
    )
    .await;
    let retired = exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .find(|s| s.name == "svc_tls.pool.retire" && s.span_context.trace_id() == trace)
        .unwrap();
    assert_eq!(
        attribute(&retired, "identity_changed").as_deref(),
        Some("true")
    );
    assert_eq!(attribute(&retired, "peer").as_deref(), Some("127.0.0.1"));
    // No attribute carries key material.
    for span in exporter.get_finished_spans().unwrap() {
        for kv in &span.attributes {
            let value = kv.value.as_str();
            assert!(!value.contains("PRIVATE KEY"), "{span:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ingress_verifier_continues_the_trace_its_headers_carry() {
    let exporter = spans();
    let mesh = otel::Mesh::start().await;
    let verifier = svc_tls::receiving::IngressVerifier::verified(mesh.callers_trust().await)
        .with_audiences(["https://region.example.com".parse().unwrap()]);
    // The caller's context as a Go sender's propagator writes it.
    let (trace, parent) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "traceparent",
        format!("00-{trace}-{parent}-01").parse().unwrap(),
    );
    // No forwarded certificate: refused, and the refusal is in the caller's trace.
    let refused = verifier.verify_request::<svc_tls::principal::Principal>(&headers);
    assert!(refused.is_err());
    poll_until("the verify span is exported", || {
        exporter.get_finished_spans().unwrap().iter().any(|s| {
            s.name == "svc_tls.principal.verify" && s.span_context.trace_id().to_string() == trace
        })
    })
    .await;
    let span = exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .find(|s| {
            s.name == "svc_tls.principal.verify" && s.span_context.trace_id().to_string() == trace
        })
        .unwrap();
    assert_eq!(span.parent_span_id.to_string(), parent);
    assert!(
        attribute(&span, "result").is_some_and(|r| r != "ok"),
        "{span:?}"
    );
}

#[test]
fn a_malformed_endpoint_is_refused_naming_it() {
    for bad in [
        "ftp://collector:4318",
        "collector:port",
        "collector:4318/v1/traces",
        "http://",
        "http://user:pw@collector:4318",
    ] {
        let error = svc_tls::telemetry::install(Some(bad), "test").unwrap_err();
        assert!(
            matches!(error, svc_tls::telemetry::TelemetryError::Endpoint { .. }),
            "{bad}: {error:?}"
        );
        assert!(error.to_string().contains(bad), "{error}");
    }
    // Unset or empty: off.
    assert!(!svc_tls::telemetry::install(None, "test").unwrap().is_on());
    assert!(
        !svc_tls::telemetry::install(Some(""), "test")
            .unwrap()
            .is_on()
    );
}

/// A "collector" that accepts connections and never answers.
fn silent_collector() -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let thread = std::thread::spawn(move || {
        let mut held = Vec::new();
        listener.set_nonblocking(false).unwrap();
        for stream in listener.incoming().take(16) {
            match stream {
                Ok(stream) => held.push(stream),
                Err(_) => break,
            }
        }
    });
    (addr, thread)
}

#[test]
fn a_silent_collector_holds_no_span_up_and_drops_past_the_bound_are_counted() {
    let (addr, _collector) = silent_collector();
    let telemetry = svc_tls::telemetry::Telemetry::builder("test")
        .max_queued_spans(8)
        .export_timeout(Duration::from_secs(3))
        .schedule_delay(Duration::from_millis(50))
        .install(Some(&addr.to_string()))
        .unwrap();
    assert!(telemetry.is_on());
    let subscriber = tracing_subscriber::registry().with(telemetry.layer());
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..500 {
            let _span = tracing::info_span!("work", i).entered();
        }
    });
    // 500 spans made while the exporter waits on a collector that never answers:
    // none waited for it. Had one waited, the export it waited on would have timed
    // out (3 s) and been counted failed before the loop ended.
    let stats = telemetry.stats();
    assert_eq!(stats.failed, 0, "spans waited for an export: {stats:?}");
    assert!(stats.queued <= 8, "{stats:?}");
    assert!(stats.dropped >= 500 - 8, "{stats:?}");
    assert_eq!(stats.exported, 0, "{stats:?}");
    assert_eq!(
        stats.queued + stats.dropped + stats.failed,
        500,
        "{stats:?}"
    );
}

#[test]
fn a_collector_that_is_down_fails_exports_counted() {
    // A port nothing listens on: connections are refused.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let telemetry = svc_tls::telemetry::Telemetry::builder("test")
        .export_timeout(Duration::from_secs(3))
        .install(Some(&addr.to_string()))
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(telemetry.layer());
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..5 {
            let _span = tracing::info_span!("work", i).entered();
        }
    });
    telemetry.flush();
    let stats = telemetry.stats();
    assert_eq!(stats.failed, 5, "{stats:?}");
    assert_eq!(
        (stats.queued, stats.dropped, stats.exported),
        (0, 0, 0),
        "{stats:?}"
    );
}

#[cfg(feature = "metrics")]
#[test]
fn drops_and_failures_are_scraped_as_metrics() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let telemetry = svc_tls::telemetry::Telemetry::builder("test")
        .max_queued_spans(2)
        .export_timeout(Duration::from_secs(3))
        .schedule_delay(Duration::from_secs(60))
        .install(Some(&addr.to_string()))
        .unwrap();
    let mut registry = prometheus_client::registry::Registry::default();
    telemetry.register_metrics(&mut registry);
    let subscriber = tracing_subscriber::registry().with(telemetry.layer());
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..5 {
            let _span = tracing::info_span!("work", i).entered();
        }
    });
    let scrape = || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    };
    // Two queued (the bound), three dropped, before any export.
    let text = scrape();
    assert!(text.contains("svc_tls_trace_spans_queued 2"), "{text}");
    assert!(
        text.contains("svc_tls_trace_spans_total{result=\"dropped\"} 3"),
        "{text}"
    );
    // The collector is down: the queued two fail.
    telemetry.flush();
    let text = scrape();
    assert!(
        text.contains("svc_tls_trace_spans_total{result=\"failed\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("svc_tls_trace_spans_total{result=\"exported\"} 0"),
        "{text}"
    );
    assert!(text.contains("svc_tls_trace_spans_queued 0"), "{text}");
}
