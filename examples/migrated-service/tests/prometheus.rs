//! A real Prometheus server (Debian's `prometheus`, installed by `cargo xtask
//! prepare` as nginx is) scrapes the migrated service's `/metrics` on loopback, and
//! the test asks Prometheus's HTTP API what it scraped: the identity's expiry is the
//! leaf's `notAfter`; after a rotation in the API emulator the new `notAfter` and a
//! higher refresh counter appear; after the Secret is broken the failure counter rises
//! and the state reads stale; the principals the service signs are counted; its
//! ConfigMap cache reads ready, with its time to sync and an object count that follows
//! the emulator. And `promtool check rules` accepts `docs/alerts.yaml`.
//!
//! Without `prometheus` on the PATH the tests are skipped with a message, except under
//! CI (`CI=true`), where a missing binary fails them.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{Running, free_port, have, workspace, write_kubeconfig};

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};

use kube_testbed::Testbed;
use platform_client_compat::tls::material::{crypto_provider, load_identity_from_pem};
use platform_client_compat::tls::origin::SecretRef;
use test_support::pki::{Leaf, TestCa};
use test_support::tls_server::VerifyingServer;

const NS: &str = "platform";
const SECRET: &str = "billing-client-certificate";
const LABELS: &str = r#"source="secret",name="platform/billing-client-certificate""#;

fn secret(name: &str, data: &[(&str, &str)]) -> serde_json::Value {
    test_support::secret::secret_with(NS, name, "kubernetes.io/tls", data)
}

fn configmap(name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": NS, "name": name},
        "data": {"k": "v"},
    })
}

fn not_after(leaf: &Leaf) -> i64 {
    let identity = load_identity_from_pem(
        &SecretRef::new(NS, SECRET),
        leaf.cert_pem.as_bytes(),
        leaf.key_pem.as_bytes(),
        &crypto_provider(),
    )
    .unwrap();
    i64::try_from(
        identity
            .not_after()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

/// Prometheus's answer to an instant query: the first sample's value, if any.
async fn query(http: &reqwest::Client, prometheus: &str, promql: &str) -> Option<f64> {
    let mut url = reqwest::Url::parse(&format!("{prometheus}/api/v1/query")).ok()?;
    url.query_pairs_mut().append_pair("query", promql);
    let response = http.get(url).send().await.ok()?;
    let body: serde_json::Value = response.json().await.ok()?;
    body["data"]["result"][0]["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
}

/// Polls `promql` until `check` accepts its value (60 s at most).
async fn wait_for(
    http: &reqwest::Client,
    prometheus: &str,
    promql: &str,
    what: &str,
    check: impl Fn(f64) -> bool,
) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = None;
    while Instant::now() < deadline {
        last = query(http, prometheus, promql).await;
        if let Some(value) = last.filter(|v| check(*v)) {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("timed out waiting for {what}: `{promql}` last answered {last:?}");
}

#[test]
fn promtool_accepts_the_alert_rules() {
    if !have("promtool") {
        return;
    }
    let rules = workspace().join("docs/alerts.yaml");
    let output = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "promtool check rules {}:\n{}{}",
        rules.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_scrapes_expiry_rotation_and_failures() {
    if !have("prometheus") {
        return;
    }
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (
        TestCa::new("identity service"),
        TestCa::new("platform clients"),
    );
    let first = client_ca.short_lived_client_leaf(1, Duration::from_secs(3 * 24 * 3600));
    tb.upsert(secret(
        SECRET,
        &[("tls.crt", &first.cert_pem), ("tls.key", &first.key_pem)],
    ));
    tb.upsert(secret("identity-ca", &[("tls.crt", &server_ca.pem())]));
    for name in ["settings", "features"] {
        tb.upsert(configmap(name));
    }
    let server = VerifyingServer::builder(&server_ca, &client_ca)
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);

    // The service: one request, then a request every 200 ms while serving /metrics.
    let metrics_port = free_port();
    let service = Running(
        Command::new(env!("CARGO_BIN_EXE_migrated-service"))
            .args([
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--client-certificate-namespace={NS}"),
                format!("--client-certificate-name={SECRET}"),
                format!("--identity-host={}", server.url()),
                format!("--identity-ca-secret-namespace={NS}"),
                "--identity-ca-secret-name=identity-ca".to_owned(),
                format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
                format!("--watch-configmaps-namespace={NS}"),
                "--serve-for=5m".to_owned(),
                "--request-interval=200ms".to_owned(),
            ])
            .env_remove("KUBECONFIG")
            .env("HOME", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // Prometheus, scraping it every second.
    let (_prometheus, prometheus) = start_prometheus(dir.path(), metrics_port);
    let http = reqwest::Client::new();

    // The expiry gauge is the leaf's notAfter.
    let expiry = format!("svc_tls_identity_cert_expiration_timestamp_seconds{{{LABELS}}}");
    let expected = not_after(&first) as f64;
    wait_for(&http, &prometheus, &expiry, "the first notAfter", |v| {
        v == expected
    })
    .await;
    let ok = format!("svc_tls_identity_cert_refreshes_total{{{LABELS},result=\"ok\"}}");
    let refreshes = wait_for(&http, &prometheus, &ok, "a refresh", |v| v >= 1.0).await;
    let fresh = format!("svc_tls_identity_state{{{LABELS},state=\"fresh\"}}");
    wait_for(&http, &prometheus, &fresh, "fresh", |v| v == 1.0).await;
    let healthy = format!("svc_tls_secret_watch_healthy{{secret=\"{NS}/{SECRET}\"}}");
    wait_for(&http, &prometheus, &healthy, "a healthy watch", |v| {
        v == 1.0
    })
    .await;

    // Every request's X-Principal was signed by the P-256 identity: ES256.
    let signed = r#"svc_tls_principal_signed_total{algorithm="ES256",result="ok"}"#;
    let first_signed = wait_for(&http, &prometheus, signed, "signed principals", |v| {
        v >= 1.0
    })
    .await;
    wait_for(&http, &prometheus, signed, "more signed principals", |v| {
        v > first_signed
    })
    .await;

    // The declared cache: ready, synced once, holding what the emulator holds, and
    // following it.
    let cache = format!(
        r#"resource="configmaps.v1",cache_namespace="{NS}",label_selector="",field_selector="""#
    );
    let ready = format!("kube_construct_cache_ready{{{cache}}}");
    wait_for(&http, &prometheus, &ready, "a ready cache", |v| v == 1.0).await;
    let synced = format!("kube_construct_cache_sync_duration_seconds_count{{{cache}}}");
    wait_for(&http, &prometheus, &synced, "one sync", |v| v == 1.0).await;
    let objects = format!("kube_construct_cache_objects{{{cache}}}");
    wait_for(&http, &prometheus, &objects, "two ConfigMaps", |v| v == 2.0).await;
    tb.upsert(configmap("added-later"));
    wait_for(&http, &prometheus, &objects, "three ConfigMaps", |v| {
        v == 3.0
    })
    .await;
    let constructions = r#"kube_construct_client_constructions_total{result="ok"}"#;
    wait_for(&http, &prometheus, constructions, "one construction", |v| {
        v == 1.0
    })
    .await;

    // The service's own answer, as Prometheus read it (shown with --nocapture).
    let scrape = http
        .get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        scrape.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = scrape.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    println!("{text}");

    // A rotation in the emulator: the new notAfter, one more refresh.
    let second = client_ca.short_lived_client_leaf(2, Duration::from_secs(5 * 24 * 3600));
    tb.upsert(secret(
        SECRET,
        &[("tls.crt", &second.cert_pem), ("tls.key", &second.key_pem)],
    ));
    let expected = not_after(&second) as f64;
    wait_for(&http, &prometheus, &expiry, "the rotated notAfter", |v| {
        v == expected
    })
    .await;
    wait_for(&http, &prometheus, &ok, "a higher refresh counter", |v| {
        v > refreshes
    })
    .await;

    // Broken: a key that does not match the certificate. Failures rise, the state is
    // stale, and the expiry is still the last good one's.
    let other = client_ca.short_lived_client_leaf(3, Duration::from_secs(3600));
    tb.upsert(secret(
        SECRET,
        &[("tls.crt", &second.cert_pem), ("tls.key", &other.key_pem)],
    ));
    let failed = format!("sum(svc_tls_identity_cert_refreshes_total{{{LABELS},result!=\"ok\"}})");
    let first_failures = wait_for(&http, &prometheus, &failed, "failures", |v| v >= 1.0).await;
    wait_for(&http, &prometheus, &failed, "rising failures", |v| {
        v > first_failures
    })
    .await;
    let malformed =
        format!("svc_tls_identity_cert_refreshes_total{{{LABELS},result=\"malformed\"}}");
    wait_for(&http, &prometheus, &malformed, "malformed failures", |v| {
        v >= 1.0
    })
    .await;
    let stale = format!("svc_tls_identity_state{{{LABELS},state=\"stale\"}}");
    wait_for(&http, &prometheus, &stale, "stale", |v| v == 1.0).await;
    assert_eq!(query(&http, &prometheus, &expiry).await, Some(expected));
    drop(service);
}

/// With a kept-alive connection and no request at all after start-up, a rotation in
/// the emulator reaches the expiry gauge Prometheus scrapes: the state follows what
/// the watch loaded, not what the last handshake served (there is none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_expiry_gauge_follows_a_rotation_without_a_handshake() {
    if !have("prometheus") {
        return;
    }
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("identity service"), TestCa::new("clients"));
    let first = client_ca.short_lived_client_leaf(1, Duration::from_secs(3 * 24 * 3600));
    tb.upsert(secret(
        SECRET,
        &[("tls.crt", &first.cert_pem), ("tls.key", &first.key_pem)],
    ));
    tb.upsert(secret("identity-ca", &[("tls.crt", &server_ca.pem())]));
    let server = VerifyingServer::builder(&server_ca, &client_ca)
        .keep_alive(true)
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let metrics_port = free_port();
    // Three requests at start-up on one kept-alive connection, then none for an hour.
    let _service = Running(
        Command::new(env!("CARGO_BIN_EXE_migrated-service"))
            .args([
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--client-certificate-namespace={NS}"),
                format!("--client-certificate-name={SECRET}"),
                format!("--identity-host={}", server.url()),
                format!("--identity-ca-secret-namespace={NS}"),
                "--identity-ca-secret-name=identity-ca".to_owned(),
                format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
                "--requests=3".to_owned(),
                "--serve-for=5m".to_owned(),
                "--request-interval=1h".to_owned(),
            ])
            .env_remove("KUBECONFIG")
            .env("HOME", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (_prometheus, prometheus) = start_prometheus(dir.path(), metrics_port);
    let http = reqwest::Client::new();
    let expiry = format!("svc_tls_identity_cert_expiration_timestamp_seconds{{{LABELS}}}");
    let expected = not_after(&first) as f64;
    wait_for(&http, &prometheus, &expiry, "the first notAfter", |v| {
        v == expected
    })
    .await;
    // hyper may open a spare connection beside the kept-alive one while the previous
    // response's connection goes back to the pool (the pooled-connection tests allow
    // it too), so the start-up count is bounded, not exact: what this test proves is
    // that it does not grow after the rotation.
    let handshakes = server.handshakes();
    assert!(
        (1..=3).contains(&handshakes),
        "three start-up requests made {handshakes} handshakes"
    );

    let second = client_ca.short_lived_client_leaf(2, Duration::from_secs(5 * 24 * 3600));
    tb.upsert(secret(
        SECRET,
        &[("tls.crt", &second.cert_pem), ("tls.key", &second.key_pem)],
    ));
    let rotated = Instant::now();
    let expected = not_after(&second) as f64;
    wait_for(&http, &prometheus, &expiry, "the rotated notAfter", |v| {
        v == expected
    })
    .await;
    // Loaded within a second, scraped every second, queried every 250 ms.
    assert!(
        rotated.elapsed() < Duration::from_secs(4),
        "the gauge took {:?}",
        rotated.elapsed()
    );
    assert_eq!(server.handshakes(), handshakes, "no handshake happened");
}

/// Prometheus scraping `127.0.0.1:metrics_port` every second, and its base URL.
fn start_prometheus(dir: &std::path::Path, metrics_port: u16) -> (Running, String) {
    let port = free_port();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n- job_name: migrated-service\n  static_configs:\n  - targets: ['127.0.0.1:{metrics_port}']\n"
        ),
    )
    .unwrap();
    let running = Running(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    (running, format!("http://127.0.0.1:{port}"))
}
