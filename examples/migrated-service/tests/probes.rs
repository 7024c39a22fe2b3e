//! The migrated service's `/readyz` and `/livez` against the API emulator: 503 with
//! the reason while its caches and Secrets load (the emulator answers slowly), 200
//! once they have, 503 naming the loader's error after its identity Secret breaks
//! (with no request being made: the probe reads the Secret itself), 200 again once
//! it is fixed; `/livez` 200 throughout.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{Running, free_port, write_kubeconfig};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kube_testbed::Testbed;
use test_support::pki::TestCa;
use test_support::poll_until;
use test_support::tls_server::VerifyingServer;

const NS: &str = "platform";
const SECRET: &str = "billing-client-certificate";

fn secret(name: &str, data: &[(&str, &str)]) -> serde_json::Value {
    test_support::secret::secret_with(NS, name, "kubernetes.io/tls", data)
}

/// `GET path`: the status and body, or `None` while nothing listens.
async fn get(http: &reqwest::Client, base: &str, path: &str) -> Option<(u16, String)> {
    let response = http.get(format!("{base}{path}")).send().await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.text().await.ok()?))
}

/// Polls `path` until `check` accepts its answer (60 s at most); returns it.
async fn wait_for(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    what: &str,
    check: impl Fn(u16, &str) -> bool,
) -> (u16, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = None;
    while Instant::now() < deadline {
        last = get(http, base, path).await;
        if let Some((status, body)) = &last
            && check(*status, body)
        {
            return (*status, body.clone());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}: {path} last answered {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_follows_the_secrets_and_livez_does_not() {
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (
        TestCa::new("identity service"),
        TestCa::new("platform clients"),
    );
    let leaf = client_ca.client_leaf("billing", 7);
    let good = [
        ("tls.crt", leaf.cert_pem.as_str()),
        ("tls.key", &leaf.key_pem),
    ];
    tb.upsert(secret(SECRET, &good));
    tb.upsert(secret("identity-ca", &[("tls.crt", &server_ca.pem())]));
    tb.upsert(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": NS, "name": "settings"}, "data": {"k": "v"},
    }));
    let server = VerifyingServer::builder(&server_ca, &client_ca)
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    // Every API answer takes 3 s while the service starts: its caches and Secret
    // watches are still loading when /readyz first answers.
    tb.set_delay(Duration::from_secs(3));
    let port = free_port();
    let _service = Running(
        Command::new(env!("CARGO_BIN_EXE_migrated-service"))
            .args([
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--client-certificate-namespace={NS}"),
                format!("--client-certificate-name={SECRET}"),
                format!("--identity-host={}", server.url()),
                format!("--identity-ca-secret-namespace={NS}"),
                "--identity-ca-secret-name=identity-ca".to_owned(),
                format!("--watch-configmaps-namespace={NS}"),
                format!("--health-probe-bind-address=127.0.0.1:{port}"),
                // No request while the test runs: only the probe reads the Secret.
                "--requests=0".to_owned(),
                "--serve-for=5m".to_owned(),
                "--request-interval=1h".to_owned(),
            ])
            .env_remove("KUBECONFIG")
            .env_remove("SPIFFE_ENDPOINT_SOCKET")
            .env("HOME", dir.path())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();

    let log = || std::fs::read_to_string(dir.path().join("stderr.log")).unwrap_or_default();

    // Loading: 503, naming the checks that wait (not the Secrets: the reasons are
    // logged, not told to whoever reaches the probe port).
    let (status, body) = wait_for(&http, &base, "/readyz", "a first answer", |_, _| true).await;
    assert_eq!(status, 503, "{body}");
    for check in ["not ready identity", "not ready caches"] {
        assert!(body.lines().any(|line| line == check), "{check}: {body}");
    }
    assert!(!body.contains(SECRET), "a Secret name in the body: {body}");
    poll_until("the reasons logged", || {
        log().contains(&format!(
            "not ready identity: waiting for the client certificate Secret {NS}/{SECRET} to load"
        ))
    })
    .await;
    assert_eq!(
        get(&http, &base, "/livez").await,
        Some((200, "ok\n".to_owned()))
    );

    // Loaded: 200, every check ok.
    tb.set_delay(Duration::ZERO);
    let (_, body) = wait_for(&http, &base, "/readyz", "ready", |status, _| status == 200).await;
    for check in ["ok caches", "ok identity", "ok identity-ca"] {
        assert!(body.lines().any(|line| line == check), "{check}: {body}");
    }

    // The identity Secret broken (a key that is not the certificate's), no request
    // made: 503 naming the check; the log names the Secret and the loader's error;
    // alive.
    let other = client_ca.client_leaf("billing", 8);
    tb.upsert(secret(
        SECRET,
        &[("tls.crt", &leaf.cert_pem), ("tls.key", &other.key_pem)],
    ));
    let (_, body) = wait_for(&http, &base, "/readyz", "not ready", |status, _| {
        status == 503
    })
    .await;
    println!("/readyz with the Secret broken:\n{body}");
    assert!(
        body.lines().any(|line| line == "not ready identity"),
        "{body}"
    );
    assert!(body.lines().any(|line| line == "ok identity-ca"), "{body}");
    assert!(
        !body.contains(SECRET) && !body.contains("does not match"),
        "{body}"
    );
    poll_until("the loader's error logged", || {
        log().lines().any(|line| {
            line.contains(&format!("{NS}/{SECRET}"))
                && line.contains("stale for")
                && line.contains("does not match")
        })
    })
    .await;
    assert!(!log().contains("PRIVATE KEY"));
    assert_eq!(
        get(&http, &base, "/livez").await,
        Some((200, "ok\n".to_owned()))
    );

    // Fixed: ready again.
    tb.upsert(secret(SECRET, &good));
    wait_for(&http, &base, "/readyz", "ready again", |status, _| {
        status == 200
    })
    .await;
    assert_eq!(
        get(&http, &base, "/livez").await,
        Some((200, "ok\n".to_owned()))
    );
}
