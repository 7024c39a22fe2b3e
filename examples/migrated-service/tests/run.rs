//! Runs the migrated service binary as a deployment would, with the flags the Helm
//! charts render, against the Kubernetes API emulator (kube-testbed, over HTTPS with
//! LIST and WATCH) and an in-process TLS 1.3 server that requires and verifies client
//! certificates and verifies the `X-Principal` token against the certificate the
//! client presented. The example cannot rot without this test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::write_kubeconfig;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use kube_testbed::Testbed;
use platform_client_compat::tls::principal::{
    AlgorithmPolicy, PRINCIPAL_HEADER, PeerCertificate, Principal,
};
use rcgen::{KeyPair, RsaKeySize};
use test_support::pki::{Leaf, TestCa};
use test_support::tls_server::{Handler, Reply, Seen, VerifyingServer};

// Real names: the emulator validates them as the API server does.
const NS: &str = "platform";
const RELEASE: &str = "billing";

/// A client leaf with an RSA 2048 key (PS512 principals need RSA, as in Go).
fn client_leaf(ca: &TestCa, serial: u64) -> Leaf {
    let key = KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_2048).unwrap();
    ca.client_leaf_with("platform client", serial, key)
}

fn secret(name: &str, data: &[(&str, &str)]) -> serde_json::Value {
    test_support::secret::secret_with(NS, name, "kubernetes.io/tls", data)
}

/// The identity service's answer: 200 `verified actor=<actor> serial=<serial>` when
/// the `X-Principal` token verifies against the presented certificate (PS512, ES256
/// or ES384 matched to its key, as the newest Go verifier), 401 with the reason
/// otherwise.
fn principal_handler() -> Handler {
    Arc::new(|seen: &Seen, req: &hyper::http::request::Parts| {
        let token = req
            .headers
            .get(PRINCIPAL_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let Some(presented) = seen.leaf.clone() else {
            return Reply {
                status: 401,
                body: "no client certificate".to_owned(),
            };
        };
        let verified = PeerCertificate::from_der(presented)
            .map_err(|e| e.to_string())
            .and_then(|cert| {
                cert.verify::<Principal>(token, AlgorithmPolicy::default())
                    .map_err(|e| e.to_string())
            });
        match verified {
            Ok(principal) => Reply {
                status: 200,
                body: format!(
                    "verified actor={} serial={}",
                    principal.actor.unwrap_or_default(),
                    seen.serial.unwrap_or_default()
                ),
            },
            Err(reason) => Reply {
                status: 401,
                body: reason,
            },
        }
    })
}

/// The identity service: test-support's verifying TLS 1.3 server, client
/// certificates from `client_ca` required, answering with [`principal_handler`].
async fn identity_service(server_ca: &TestCa, client_ca: &TestCa) -> VerifyingServer {
    VerifyingServer::builder(server_ca, client_ca)
        .handler(principal_handler())
        .start()
        .await
}

struct World {
    tb: Testbed,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    identity_url: String,
    _server: VerifyingServer,
}

const SERIAL: u64 = 4242;

async fn world() -> World {
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (
        TestCa::new("identity service"),
        TestCa::new("platform clients"),
    );
    let leaf = client_leaf(&client_ca, SERIAL);
    tb.upsert(secret(
        &format!("{RELEASE}-client-certificate"),
        &[("tls.crt", &leaf.cert_pem), ("tls.key", &leaf.key_pem)],
    ));
    tb.upsert(secret("identity-ca", &[("tls.crt", &server_ca.pem())]));
    let server = identity_service(&server_ca, &client_ca).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    World {
        tb,
        dir,
        kubeconfig,
        identity_url: server.url(),
        _server: server,
    }
}

impl World {
    /// The flags the charts render, then `extra`.
    fn args(&self, extra: &[String]) -> Vec<String> {
        let mut args = vec![
            format!("--kubeconfig={}", self.kubeconfig.display()),
            format!("--client-certificate-namespace={NS}"),
            format!("--client-certificate-name={RELEASE}-client-certificate"),
            // The Go timer's "disable" value, still rendered by charts.
            "--client-certificate-reload-interval=-1s".to_owned(),
            // Repeated: the last value wins, as with pflag.
            "--identity-host=https://stale.invalid".to_owned(),
            format!("--identity-host={}", self.identity_url),
            format!("--identity-ca-secret-namespace={NS}"),
            "--identity-ca-secret-name=identity-ca".to_owned(),
            // Rendered empty: audit is not configured.
            "--audit-host=".to_owned(),
        ];
        args.extend(extra.iter().cloned());
        args
    }

    async fn run(&self, extra: &[String]) -> Output {
        run_binary(self.args(extra), self.dir.path(), None).await
    }
}

/// Runs the service binary with `args`, `SPIFFE_ENDPOINT_SOCKET` set to `spiffe`
/// (removed when `None`).
async fn run_binary(args: Vec<String>, home: &Path, spiffe: Option<String>) -> Output {
    let home = home.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_migrated-service"));
        command
            .args(&args)
            .env_remove("KUBECONFIG")
            .env("HOME", &home);
        match spiffe {
            Some(endpoint) => command.env("SPIFFE_ENDPOINT_SOCKET", endpoint),
            None => command.env_remove("SPIFFE_ENDPOINT_SOCKET"),
        };
        command.output().unwrap()
    })
    .await
    .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Stdout and stderr of a run that must have succeeded (both shown when not).
fn succeeded(output: &Output) -> (String, String) {
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migrated_service_calls_its_peer_with_the_deployed_flags() {
    let world = world().await;
    let output = world
        .run(&["--actor=billing".to_owned(), "--requests=5".to_owned()])
        .await;
    let (stdout, stderr) = succeeded(&output);

    assert!(stdout.contains("kubernetes: caches synced"), "{stdout}");
    // A peer client per request, as a controller builds one per reconcile: the CA
    // Secret and the identity Secret are each listed and watched once.
    assert!(
        stdout.contains(&format!(
            "svc-tls: 2 Secret watches for 5 requests: {NS}/{RELEASE}-client-certificate, {NS}/identity-ca"
        )),
        "{stdout}"
    );
    assert_eq!(world.tb.requests("list"), 2, "one LIST per Secret");
    assert_eq!(world.tb.requests("watch"), 2, "one WATCH per Secret");
    assert!(stdout.contains("audit: not configured"), "{stdout}");
    // The peer saw the client certificate from the Secret, and the principal
    // verified against it.
    assert!(
        stdout.contains(&format!(
            "identity: GET {}api/v1/whoami -> 200 OK over HTTP/1.1: verified actor=billing serial={SERIAL}",
            world.identity_url
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "identity state: source=Secret {NS}/{RELEASE}-client-certificate serial="
        )),
        "{stdout}"
    );
    assert!(stdout.contains("failures=0 stale=false"), "{stdout}");
    // The deprecated flag is reported once.
    assert_eq!(
        stderr
            .matches("--client-certificate-reload-interval is deprecated")
            .count(),
        1,
        "{stderr}"
    );
}

/// `--otlp-endpoint` is real: each call of the service reaches the real collector as a
/// `migrated_service.call` span of service `migrated-service`, the parent of its peer
/// request's `svc_tls.peer.request` span (the request carried that trace to the peer);
/// what was queued is sent before the process exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_exports_its_calls_to_a_real_collector() {
    let world = world().await;
    let dir = tempfile::tempdir().unwrap();
    let (_collector, port, written) = common::start_collector(dir.path()).await;
    let output = world
        .run(&[
            format!("--otlp-endpoint=127.0.0.1:{port}"),
            "--requests=2".to_owned(),
        ])
        .await;
    let (_, stderr) = succeeded(&output);
    assert!(
        stderr.contains("spans are exported over OTLP/HTTP")
            && stderr.contains(&format!("http://127.0.0.1:{port}/v1/traces")),
        "{stderr}"
    );
    let ours = || -> Vec<common::WrittenSpan> {
        common::spans_written(&written)
            .into_iter()
            .filter(|s| s.0 == "migrated-service")
            .collect()
    };
    test_support::poll_until("the collector wrote both calls and their requests", || {
        let spans = ours();
        let calls: Vec<_> = spans
            .iter()
            .filter(|s| s.4 == "migrated_service.call")
            .collect();
        calls.len() == 2
            && calls.iter().all(|call| {
                spans
                    .iter()
                    .any(|s| s.4 == "svc_tls.peer.request" && s.3 == call.2 && s.1 == call.1)
            })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefixed_audit_identity_is_used_when_audit_is_configured() {
    let world = world().await;
    let other = client_leaf(&TestCa::new("audit clients"), 77);
    world.tb.upsert(secret(
        &format!("{RELEASE}-audit-client-certificate"),
        &[("tls.crt", &other.cert_pem), ("tls.key", &other.key_pem)],
    ));
    let output = world
        .run(&[
            "--audit-host=https://audit.example".to_owned(),
            format!("--audit-client-certificate-namespace={NS}"),
            format!("--audit-client-certificate-name={RELEASE}-audit-client-certificate"),
        ])
        .await;
    let (stdout, _) = succeeded(&output);
    assert!(
        stdout.contains(&format!(
            "audit: enabled at https://audit.example/ presenting Secret {NS}/{RELEASE}-audit-client-certificate"
        )),
        "{stdout}"
    );
}

/// Without `--audit-client-certificate-*` the audit peer presents no certificate,
/// as Go: the platform identity is never offered to the external collector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_peer_without_its_own_identity_presents_none() {
    let world = world().await;
    for extra in [
        vec!["--audit-host=https://audit.example".to_owned()],
        vec![
            "--audit-host=https://audit.example".to_owned(),
            "--audit-client-certificate-namespace=".to_owned(),
            "--audit-client-certificate-name=".to_owned(),
        ],
    ] {
        let output = world.run(&extra).await;
        let (stdout, _) = succeeded(&output);
        assert!(
            stdout.contains("audit: enabled at https://audit.example/ presenting none"),
            "{extra:?}: {stdout}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_host_port_starts_the_service_and_names_the_flag() {
    let world = world().await;
    let output = world.run(&["--audit-host=collector:443".to_owned()]).await;
    let (stdout, stderr) = succeeded(&output);
    let problem = r#"--audit-host="collector:443" is not a usable URL: the scheme is missing"#;
    // One WARN at start-up naming the flag and quoting the value.
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(problem))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    // The audit URL is the typed error when asked for; the service runs on.
    assert!(
        stdout.contains(&format!("audit: enabled, unusable: {problem}")),
        "{stdout}"
    );
    assert!(stdout.contains("identity: GET"), "{stdout}");
}

/// The newest Go client's second source: one identity service, trusted through its
/// CA Secret by a Secret-mode service and through the SPIFFE bundle by a SPIFFE-mode
/// service, accepting both services' certificates and principals (the Secret's key and the
/// SPIRE-style P-256 SVID's key each choosing its algorithm).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_mode_and_a_spiffe_mode_service_reach_the_same_server() {
    const SERVER_ID: &str = "spiffe://example.org/ns/unikorn/sa/identity";
    const CLIENT_ID: &str = "spiffe://example.org/ns/unikorn/sa/billing";
    let agent = spiffe_testbed::WorkloadApi::start("example.org").await;
    let svid = agent.set_workload_id(CLIENT_ID);

    let tb = Testbed::start().await;
    let client_ca = TestCa::new("platform clients");
    let leaf = client_leaf(&client_ca, SERIAL);
    tb.upsert(secret(
        &format!("{RELEASE}-client-certificate"),
        &[("tls.crt", &leaf.cert_pem), ("tls.key", &leaf.key_pem)],
    ));
    // The server's certificate is an SVID (URI SAN for SPIFFE clients, DNS
    // `localhost` for Secret-mode clients, which trust the agent's CA through the
    // CA Secret).
    let server_svid = agent.issue(SERVER_ID);
    tb.upsert(secret("identity-ca", &[("tls.crt", &agent.ca_pem())]));
    let server = VerifyingServer::builder(&client_ca, &client_ca)
        .server_chain(server_svid.chain.clone(), &server_svid.key_pem())
        .client_roots(vec![client_ca.der(), agent.ca_der()])
        .handler(principal_handler())
        .start()
        .await;
    let url = format!("https://localhost:{}/", server.addr.port());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let common = |extra: &[String]| {
        let mut args = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--identity-host={url}"),
            format!("--identity-ca-secret-namespace={NS}"),
            "--identity-ca-secret-name=identity-ca".to_owned(),
            "--audit-host=".to_owned(),
            "--actor=billing".to_owned(),
        ];
        args.extend(extra.iter().cloned());
        args
    };

    let output = run_binary(
        common(&[
            format!("--client-certificate-namespace={NS}"),
            format!("--client-certificate-name={RELEASE}-client-certificate"),
        ]),
        dir.path(),
        None,
    )
    .await;
    let (stdout, _) = succeeded(&output);
    assert!(
        stdout.contains(&format!(
            "-> 200 OK over HTTP/1.1: verified actor=billing serial={SERIAL}"
        )),
        "{stdout}"
    );

    let output = run_binary(
        common(&[
            "--client-certificate-source=spiffe".to_owned(),
            format!("--spiffe-server-id={SERVER_ID}"),
        ]),
        dir.path(),
        Some(agent.endpoint()),
    )
    .await;
    let (stdout, stderr) = succeeded(&output);
    assert!(
        stdout.contains(&format!(
            "-> 200 OK over HTTP/1.1: verified actor=billing serial={}",
            svid.serial
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "identity state: source=SPIFFE Workload API {} spiffe_id={CLIENT_ID} serial=",
            agent.endpoint()
        )),
        "{stdout}"
    );
    // The CA Secret flags do not apply in SPIFFE mode: said once.
    assert_eq!(
        stderr
            .matches("ca-secret-namespace/-name are set and ignored")
            .count(),
        1,
        "{stderr}"
    );

    // Without the socket variable, start-up stops and says why.
    let output = run_binary(
        common(&[
            "--client-certificate-source=spiffe".to_owned(),
            format!("--spiffe-server-id={SERVER_ID}"),
        ]),
        dir.path(),
        None,
    )
    .await;
    let stderr = text(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("SPIFFE_ENDPOINT_SOCKET, which is not set"),
        "{stderr}"
    );
    // Both services were seen by the one server.
    assert_eq!(server.rejected(), 0, "{:?}", server.rejection_reasons());
}
