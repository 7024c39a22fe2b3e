//! What the test binaries of the migrated service share: a kubeconfig for the API
//! emulator (as a service's deployment would mount one), whether a program is
//! installed, free ports and child processes that end with the test. Each binary
//! uses a part of it.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use kube_testbed::Testbed;
use platform_client_compat::tls::principal::{AlgorithmPolicy, Principal, sign_with_key};
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject as _;
use std::sync::Arc;
use test_support::pki::{Leaf, TestCa};

/// Writes a kubeconfig for `tb` (its CA and admin token) into `dir`.
pub(crate) fn write_kubeconfig(dir: &Path, tb: &Testbed) -> PathBuf {
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, tb.ca_pem()).unwrap();
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: testbed\nclusters:\n- name: testbed\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\ncontexts:\n- name: testbed\n  context:\n    cluster: testbed\n    user: admin\nusers:\n- name: admin\n  user:\n    token: {token}\n",
        server = tb.base_url(),
        ca = ca.display(),
        token = tb.token(),
    );
    let path = dir.join("kubeconfig");
    std::fs::write(&path, text).unwrap();
    path
}

/// Whether `program` runs; `false` skips the test (outside CI only).
pub(crate) fn have(program: &str) -> bool {
    let present = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !present {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{program} is not installed (CI installs it with `cargo xtask prepare`: apt package prometheus)"
        );
        eprintln!(
            "SKIPPED: {program} is not installed (apt-get install prometheus, or `cargo xtask prepare` as root)"
        );
    }
    present
}

pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed (by its own id) when dropped.
pub(crate) struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A caller of the service through the ingress, presenting `leaf` (or nothing).
pub(crate) fn caller(server_ca: &TestCa, leaf: Option<&Leaf>) -> reqwest::Client {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(server_ca.der()).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match leaf {
        Some(leaf) => builder
            .with_client_auth_cert(
                vec![leaf.der.clone()],
                PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    reqwest::Client::builder()
        .tls_backend_preconfigured(config)
        .build()
        .unwrap()
}

/// A principal signed with `leaf`'s key for `to` (its audience is `to`'s origin).
pub(crate) fn signed(leaf: &Leaf, to: &str, actor: &str) -> String {
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let key = rustls::crypto::aws_lc_rs::sign::any_supported_type(&key).unwrap();
    let who = Principal {
        actor: Some(actor.into()),
        ..Principal::default()
    };
    sign_with_key(
        key.as_ref(),
        &to.parse().unwrap(),
        &who,
        AlgorithmPolicy::default(),
    )
    .unwrap()
    .as_str()
    .to_owned()
}

/// The OpenTelemetry Collector `cargo xtask real-peers` built (the release
/// `xtask/real-peers/otelcol/go.mod` requires), running on a free loopback port with
/// its file exporter writing each batch as one line of OTLP JSON into `dir`; its
/// port and that file.
pub(crate) async fn start_collector(dir: &Path) -> (Running, u16, PathBuf) {
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
    let port = free_port();
    let written = dir.join("spans.jsonl");
    let config = dir.join("collector.yaml");
    std::fs::write(
        &config,
        format!(
            "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{port}\n\
             exporters:\n  file:\n    path: {}\n    flush_interval: 100ms\n\
             service:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    traces:\n      \
             receivers: [otlp]\n      exporters: [file]\n",
            written.display()
        ),
    )
    .unwrap();
    let log_path = dir.join("collector.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Running(
        Command::new(binary)
            .arg(format!("--config=file:{}", config.display()))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + test_support::POLL_LIMIT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        let exited = child.0.try_wait().unwrap();
        assert!(
            exited.is_none() && std::time::Instant::now() < deadline,
            "the collector does not listen on 127.0.0.1:{port} ({exited:?}); its log:\n{}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    (child, port, written)
}

/// One span as the collector's file exporter wrote it: (service.name, trace id, span
/// id, parent span id, name).
pub(crate) type WrittenSpan = (String, String, String, String, String);

/// Every span in the file exporter's output.
pub(crate) fn spans_written(path: &Path) -> Vec<WrittenSpan> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut spans = Vec::new();
    for line in text.lines() {
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
                    spans.push((
                        service.clone(),
                        text("traceId"),
                        text("spanId"),
                        text("parentSpanId"),
                        text("name"),
                    ));
                }
            }
        }
    }
    spans
}
