//! Debian's nginx as the peer's ingress (`ssl_verify_client on`): nginx completes the
//! handshake and refuses a certificate of another CA with `400` "The SSL certificate
//! error" rather than a TLS alert. The command reports it refused (exit 5), and a
//! certificate of the CA nginx trusts accepted (exit 0).

use crate::common::nginx::Nginx;
use crate::common::*;
use kube_testbed::Testbed;
use test_support::pki::TestCa;
use test_support::secret::{secret_with, tls_secret};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_refusing_the_certificate_with_400_is_exit_5() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let (server_ca, clients) = (TestCa::new("server-ca"), TestCa::new("clients"));
    let nginx = Nginx::start(&server_ca.server_leaf(), &clients.pem());
    tb.upsert(secret_with(
        NS,
        "server-ca",
        "Opaque",
        &[("ca.crt", &server_ca.pem())],
    ));
    let mut args = identity_args(&kubeconfig, "svc-cert");
    args.extend(crate::common::args(&[
        ("region-host", &nginx.url()),
        ("region-ca-secret-namespace", NS),
        ("region-ca-secret-name", "server-ca"),
    ]));

    let stranger = TestCa::new("elsewhere").client_leaf("svc", 31);
    tb.upsert(tls_secret(
        NS,
        "svc-cert",
        &stranger.cert_pem,
        &stranger.key_pem,
    ));
    let (a, key) = (args.clone(), stranger.key_pem.clone());
    let refused = tokio::task::spawn_blocking(move || run(&a, &[], &[&key]))
        .await
        .unwrap();
    assert_eq!(
        refused.code,
        5,
        "{}\n{}\n{}",
        refused.stdout,
        refused.stderr,
        nginx.error_log()
    );
    let json = refused.json();
    let peer = &json["peers"][0];
    assert_eq!(peer["tls_version"], "TLSv1_3");
    assert!(peer["key_exchange_group"].is_string(), "{peer:#}");
    assert_eq!(peer["http_status"], 400);
    assert_eq!(peer["client_certificate_accepted"], false, "{peer:#}");
    assert_eq!(peer["error"]["kind"], "ClientCertificateRefused");

    let good = clients.client_leaf("svc", 32);
    tb.upsert(tls_secret(NS, "svc-cert", &good.cert_pem, &good.key_pem));
    let key = good.key_pem.clone();
    let run = tokio::task::spawn_blocking(move || run(&args, &[], &[&key]))
        .await
        .unwrap();
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, nginx.error_log());
    let json = run.json();
    assert_eq!(json["peers"][0]["http_status"], 200);
    assert_eq!(json["peers"][0]["client_certificate_accepted"], true);
}
