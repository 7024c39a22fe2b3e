//! A peer with an identity of its own (`--audit-client-certificate-*`, as the
//! example's audit peer): the handshake to `audit` presents that identity, not the
//! unprefixed one, as the service would.

use crate::common::*;
use kube_testbed::Testbed;
use test_support::pki::TestCa;
use test_support::secret::{secret_with, tls_secret};
use test_support::tls_server::VerifyingServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_peer_is_called_with_the_audit_identity() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let (server_ca, audit_clients) = (TestCa::new("server-ca"), TestCa::new("audit-clients"));
    // The unprefixed identity is of a CA the audit server does not trust.
    let main = TestCa::new("main-clients").client_leaf("svc", 21);
    let audit = audit_clients.client_leaf("svc-audit", 22);
    tb.upsert(tls_secret(NS, "svc-cert", &main.cert_pem, &main.key_pem));
    tb.upsert(tls_secret(
        NS,
        "svc-audit-cert",
        &audit.cert_pem,
        &audit.key_pem,
    ));
    tb.upsert(secret_with(
        NS,
        "server-ca",
        "Opaque",
        &[("ca.crt", &server_ca.pem())],
    ));
    let server = VerifyingServer::start(&server_ca, &audit_clients).await;
    let mut args = identity_args(&kubeconfig, "svc-cert");
    args.extend(crate::common::args(&[
        ("audit-host", &server.url()),
        ("audit-ca-secret-namespace", NS),
        ("audit-ca-secret-name", "server-ca"),
        ("audit-client-certificate-namespace", NS),
        ("audit-client-certificate-name", "svc-audit-cert"),
    ]));
    let keys = [main.key_pem.clone(), audit.key_pem.clone()];
    let run = tokio::task::spawn_blocking(move || run(&args, &[], &[&keys[0], &keys[1]]))
        .await
        .unwrap();
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let json = run.json();
    let names: Vec<&str> = json["secrets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["svc-cert", "svc-audit-cert", "server-ca"]);
    assert_eq!(
        json["secrets"][1]["named_by"],
        "--audit-client-certificate-namespace/-name"
    );
    let peer = &json["peers"][0];
    assert_eq!(peer["service"], "audit");
    assert_eq!(peer["identity"], "audit-client-certificate");
    assert_eq!(peer["client_certificate_accepted"], true, "{json:#}");
    assert_eq!(server.seen().last().and_then(|s| s.serial), Some(22));
}

/// The audit peer without `--audit-client-certificate-*`: as the Go services, it
/// presents no certificate, and never the platform identity, even to an audit
/// server that would accept it. The inspect command predicts exactly that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_peer_without_its_own_identity_presents_none() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let (server_ca, clients) = (TestCa::new("server-ca"), TestCa::new("platform-clients"));
    // The platform identity is one the audit server trusts: presenting it would
    // complete the handshake, and the server would record its serial.
    let main = clients.client_leaf("svc", 31);
    tb.upsert(tls_secret(NS, "svc-cert", &main.cert_pem, &main.key_pem));
    tb.upsert(secret_with(
        NS,
        "server-ca",
        "Opaque",
        &[("ca.crt", &server_ca.pem())],
    ));
    let server = VerifyingServer::start(&server_ca, &clients).await;
    for own_flags in [false, true] {
        let mut args = identity_args(&kubeconfig, "svc-cert");
        args.extend(crate::common::args(&[
            ("audit-host", &server.url()),
            ("audit-ca-secret-namespace", NS),
            ("audit-ca-secret-name", "server-ca"),
        ]));
        if own_flags {
            // Rendered empty, as a chart does for unset values.
            args.extend(crate::common::args(&[
                ("audit-client-certificate-namespace", ""),
                ("audit-client-certificate-name", ""),
            ]));
        }
        let key = main.key_pem.clone();
        let run = tokio::task::spawn_blocking(move || run(&args, &[], &[&key]))
            .await
            .unwrap();
        let json = run.json();
        let peer = &json["peers"][0];
        assert_eq!(peer["service"], "audit", "{json:#}");
        assert_eq!(peer["identity"], "none", "{json:#}");
        assert_eq!(peer["client_certificate_accepted"], false, "{json:#}");
    }
    assert!(server.leaves().is_empty(), "a certificate reached audit");
    assert!(server.rejected() >= 2, "the handshakes were tried");
}
