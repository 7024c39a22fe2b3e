//! One trace across three hops, read back from a real OpenTelemetry Collector
//! (v0.148.0, built by `cargo xtask real-peers` from `xtask/real-peers/otelcol`, OTLP
//! receiver and file exporter): a Rust service calls a Go service (`benches/go/otelhop`,
//! otelhttp on its server and client side, Go 1.26), which calls a Rust service; every
//! hop over mTLS, every process exporting over OTLP/HTTP to the collector. The trace
//! the collector wrote has one trace id and the parent/child chain
//! caller → `svc_tls.peer.request` (client) → Go's server span → Go's client span →
//! `svc_tls.serve` (server) → the handler's span.
#![cfg(feature = "otel")]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod otel;

use std::collections::HashMap;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use opentelemetry::trace::TraceContextExt as _;
use test_support::poll_until;
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

const SERVICE: &str = "svc-tls-three-hops";

/// A child process killed when the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The collector `cargo xtask real-peers` built: the release our module requires.
fn collector_binary() -> PathBuf {
    let go_mod =
        std::fs::read_to_string(workspace().join("xtask/real-peers/otelcol/go.mod")).unwrap();
    let version = go_mod
        .lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("go.opentelemetry.io/collector/otelcol"))
                .then(|| words.next().map(str::to_owned))
                .flatten()
        })
        .expect("otelcol's go.mod requires go.opentelemetry.io/collector/otelcol");
    let root = std::env::var_os("PLATFORM_CLIENT_REAL_PEERS").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").expect("HOME"))
                .join(".cache/platform-client/real-peers")
        },
        PathBuf::from,
    );
    let binary = root.join(format!("otelcol-{version}/bin/otelcol"));
    assert!(
        binary.exists(),
        "the real OpenTelemetry Collector {version} is not built on this machine (no {}): \
         run cargo xtask real-peers",
        binary.display()
    );
    binary
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The collector on 127.0.0.1: OTLP/HTTP in, every batch written to `spans` as one
/// line of OTLP JSON (the file exporter), no telemetry endpoint of its own.
async fn start_collector(dir: &Path, spans: &Path) -> (Killed, u16) {
    let port = free_port();
    let config = dir.join("collector.yaml");
    std::fs::write(
        &config,
        format!(
            "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{port}\n\
             exporters:\n  file:\n    path: {}\n    flush_interval: 100ms\n  debug:\n    verbosity: basic\n\
             service:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    traces:\n      \
             receivers: [otlp]\n      exporters: [file, debug]\n",
            spans.display()
        ),
    )
    .unwrap();
    let log_path = dir.join("collector.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let child = Command::new(collector_binary())
        .arg(format!("--config=file:{}", config.display()))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut child = Killed(child);
    let deadline = std::time::Instant::now() + test_support::POLL_LIMIT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        let exited = child.0.try_wait().unwrap();
        assert!(
            exited.is_none() && std::time::Instant::now() < deadline,
            "the collector does not listen on 127.0.0.1:{port} ({exited:?}); its log:\n{}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (child, port)
}

/// `$GO`, else `go`: Go 1.26, as `cargo xtask test` provides.
fn go() -> PathBuf {
    std::env::var_os("GO").map_or_else(|| "go".into(), PathBuf::from)
}

/// Builds `benches/go/otelhop` (its modules from the Go module proxy, checked against
/// its go.sum; the environment's GOMODCACHE and GOCACHE, which `cargo xtask test`
/// points outside the repository).
fn build_go_hop() -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("otelhop");
    std::fs::create_dir_all(&out).unwrap();
    let binary = out.join("otelhop");
    let output = Command::new(go())
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(workspace().join("benches/go/otelhop"))
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=readonly")
        .env("GO111MODULE", "on")
        .output()
        .expect("Go 1.26 runs (cargo xtask test provides it as $GO)");
    assert!(
        output.status.success(),
        "go build benches/go/otelhop: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    binary
}

/// One span as the collector wrote it.
#[derive(Debug, Clone)]
struct Span {
    service: String,
    trace: String,
    id: String,
    parent: String,
    name: String,
    kind: u64,
}

/// Every span in the file exporter's output (one OTLP JSON request per line).
fn spans_written(path: &Path) -> Vec<Span> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut spans = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(request) = serde_json::from_str::<serde_json::Value>(line) else {
            continue; // a line being written
        };
        for resource in request["resourceSpans"].as_array().into_iter().flatten() {
            let service = resource["resource"]["attributes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["key"] == "service.name")
                .and_then(|a| a["value"]["stringValue"].as_str())
                .unwrap_or_default()
                .to_owned();
            for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                for span in scope["spans"].as_array().into_iter().flatten() {
                    let text = |key: &str| span[key].as_str().unwrap_or_default().to_owned();
                    spans.push(Span {
                        service: service.clone(),
                        trace: text("traceId"),
                        id: text("spanId"),
                        parent: text("parentSpanId"),
                        name: text("name"),
                        kind: span["kind"].as_u64().unwrap_or_default(),
                    });
                }
            }
        }
    }
    spans
}

/// OTLP's span kinds, as the collector's JSON writes them.
const SERVER: u64 = 2;
const CLIENT: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_crosses_rust_go_rust_and_the_collector_has_every_hop() {
    let dir = tempfile::tempdir().unwrap();
    let written = dir.path().join("spans.jsonl");
    let (_collector, collector_port) = start_collector(dir.path(), &written).await;

    // This process's two Rust services export to the collector through svc-tls's
    // one call, as the examples do with --otlp-endpoint.
    let telemetry = svc_tls::telemetry::Telemetry::builder(SERVICE)
        .schedule_delay(Duration::from_millis(100))
        .install(Some(&format!("127.0.0.1:{collector_port}")))
        .unwrap();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(telemetry.layer()))
        .unwrap();

    let mesh = otel::Mesh::start().await;
    // The last hop: a Rust service whose handler does some work in a span.
    let (last_port, _last) = mesh
        .serve(|_request| async {
            async { tokio::task::yield_now().await }
                .instrument(tracing::info_span!("downstream work"))
                .await;
            "served by the last hop".to_owned()
        })
        .await;

    // The Go hop between them: served to callers of the client CA, calling the last
    // hop with its own client certificate.
    let go_dir = dir.path().join("go");
    std::fs::create_dir_all(&go_dir).unwrap();
    let write = |name: &str, text: &str| {
        let path = go_dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let server_leaf = mesh.server_ca.server_leaf();
    let client_leaf = mesh.client_ca.client_leaf("otelhop", 21);
    let mut go = Command::new(build_go_hop())
        .arg("-cert")
        .arg(write("tls.crt", &server_leaf.cert_pem))
        .arg("-key")
        .arg(write("tls.key", &server_leaf.key_pem))
        .arg("-client-cert")
        .arg(write("client.crt", &client_leaf.cert_pem))
        .arg("-client-key")
        .arg(write("client.key", &client_leaf.key_pem))
        .arg("-callers-ca")
        .arg(write("callers-ca.crt", &mesh.client_ca.pem()))
        .arg("-upstream-ca")
        .arg(write("upstream-ca.crt", &mesh.server_ca.pem()))
        .arg("-upstream")
        .arg(format!("https://127.0.0.1:{last_port}/last"))
        .arg("-otlp-endpoint")
        .arg(format!("127.0.0.1:{collector_port}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(go.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let go_addr = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("the Go hop said {line:?}"))
        .to_owned();
    let mut go = Killed(go);

    // The first hop: a Rust service's request, in a span of its own.
    let url = format!("https://{go_addr}/first");
    let client = mesh.peer_client(&url).await;
    let root = tracing::info_span!("three hops");
    let trace = root.context().span().span_context().trace_id().to_string();
    let body = async {
        let response = client.send(client.get(&url).unwrap()).await.unwrap();
        assert_eq!(response.status(), 200);
        response.text().await.unwrap()
    }
    .instrument(root)
    .await;
    assert_eq!(body, "served by the last hop");

    // Everyone sends what is queued: this process, then the Go hop (its stdin closed,
    // it shuts its tracer provider down).
    tokio::task::block_in_place(|| telemetry.flush());
    drop(go.0.stdin.take());
    let _ = go.0.wait();

    let names = [
        "three hops",
        "svc_tls.peer.request",
        "svc_tls.serve",
        "downstream work",
    ];
    poll_until("the collector wrote every hop's spans of the trace", || {
        let spans = spans_written(&written);
        let ours: Vec<_> = spans.iter().filter(|s| s.trace == trace).collect();
        names.iter().all(|n| ours.iter().any(|s| s.name == *n))
            && [SERVER, CLIENT]
                .iter()
                .all(|k| ours.iter().any(|s| s.service == "otelhop" && s.kind == *k))
    })
    .await;
    let spans: Vec<Span> = spans_written(&written)
        .into_iter()
        .filter(|s| s.trace == trace)
        .collect();
    let by_name = |name: &str, service: &str, kind: Option<u64>| -> Span {
        let found: Vec<_> = spans
            .iter()
            .filter(|s| {
                (s.name == name || name.is_empty())
                    && s.service == service
                    && kind.is_none_or(|k| s.kind == k)
            })
            .collect();
        assert_eq!(found.len(), 1, "one {name:?} of {service}: {spans:#?}");
        found[0].clone()
    };
    let first = by_name("three hops", SERVICE, None);
    let sent = by_name("svc_tls.peer.request", SERVICE, Some(CLIENT));
    let go_server = by_name("", "otelhop", Some(SERVER));
    let go_client = by_name("", "otelhop", Some(CLIENT));
    let served = by_name("svc_tls.serve", SERVICE, Some(SERVER));
    let work = by_name("downstream work", SERVICE, None);
    let chain = [&first, &sent, &go_server, &go_client, &served, &work];
    assert!(first.parent.is_empty(), "{first:?}");
    for pair in chain.windows(2) {
        assert_eq!(
            pair[1].parent, pair[0].id,
            "{:?} under {:?}",
            pair[1], pair[0]
        );
    }
    let by_id: HashMap<&str, &Span> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    assert_eq!(by_id.len(), spans.len(), "span ids are unique");
    eprintln!(
        "trace {trace}: {}",
        chain
            .iter()
            .map(|s| format!("{} ({}, {})", s.name, s.service, s.id))
            .collect::<Vec<_>>()
            .join(" -> ")
    );
}
