//! A leaf from another CA, inspected over the wire: the chain check against the
//! ingress's CA fails (exit 4, by Secret or by PEM file), and a verifying TLS server
//! that trusts only the ingress's CA refuses it in a real handshake (exit 5).

use crate::common::*;
use kube_testbed::Testbed;
use test_support::pki::{Leaf, TestCa};
use test_support::secret::{secret_with, tls_secret};
use test_support::tls_server::VerifyingServer;

struct World {
    tb: Testbed,
    dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
    server_ca: TestCa,
    clients: TestCa,
    stranger: Leaf,
}

/// The ingress trusts `clients`; the Secret holds a leaf of `elsewhere`.
async fn world() -> World {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let (server_ca, clients) = (TestCa::new("server-ca"), TestCa::new("clients"));
    let stranger = TestCa::new("elsewhere").client_leaf("svc", 11);
    tb.upsert(tls_secret(
        NS,
        "svc-cert",
        &stranger.cert_pem,
        &stranger.key_pem,
    ));
    tb.upsert(secret_with(
        NS,
        "ingress-ca",
        "Opaque",
        &[("ca.crt", &clients.pem())],
    ));
    tb.upsert(secret_with(
        NS,
        "server-ca",
        "Opaque",
        &[("ca.crt", &server_ca.pem())],
    ));
    World {
        tb,
        dir,
        kubeconfig,
        server_ca,
        clients,
        stranger,
    }
}

async fn run_async(args: Vec<String>, key: String) -> Run {
    tokio::task::spawn_blocking(move || run(&args, &[], &[&key]))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_of_another_ca_fails_the_chain_check_with_exit_4() {
    let w = world().await;
    let mut args = identity_args(&w.kubeconfig, "svc-cert");
    args.push(format!("--chain-ca-secret={NS}/ingress-ca"));
    let run = run_async(args, w.stranger.key_pem.clone()).await;
    assert_eq!(run.code, 4, "{}\n{}", run.stdout, run.stderr);
    let json = run.json();
    assert_eq!(json["failed"], serde_json::json!(["chain"]));
    // The Secret itself loads: only the chain is wrong.
    assert_eq!(json["secrets"][0]["loader_error"], serde_json::Value::Null);
    assert_eq!(
        json["secrets"][0]["certificates"][0]["issuer"],
        "CN=elsewhere"
    );
    let chain = &json["chains"][0];
    assert_eq!(chain["ok"], false);
    assert_eq!(chain["error"]["kind"], "UnknownIssuer", "{json:#}");
    assert_eq!(chain["roots"], serde_json::json!(["CN=clients"]));

    // The same CA from a PEM file: the same verdict. A leaf of that CA passes.
    let ca_file = w.dir.path().join("ingress-ca.pem");
    std::fs::write(&ca_file, w.clients.pem()).unwrap();
    let mut args = identity_args(&w.kubeconfig, "svc-cert");
    args.push(format!("--chain-ca-file={}", ca_file.display()));
    let run = run_async(args.clone(), w.stranger.key_pem.clone()).await;
    assert_eq!(run.code, 4, "{}", run.stdout);
    assert_eq!(
        run.json()["chains"][0]["ca"],
        format!("file {}", ca_file.display())
    );
    let good = w.clients.client_leaf("svc", 12);
    w.tb.upsert(tls_secret(NS, "svc-cert", &good.cert_pem, &good.key_pem));
    let run = run_async(args, good.key_pem.clone()).await;
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(run.json()["chains"][0]["ok"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_refuses_the_certificate_exits_5() {
    let w = world().await;
    let server = VerifyingServer::start(&w.server_ca, &w.clients).await;
    let mut args = identity_args(&w.kubeconfig, "svc-cert");
    args.extend(crate::common::args(&[
        ("region-host", &server.url()),
        ("region-ca-secret-namespace", NS),
        ("region-ca-secret-name", "server-ca"),
    ]));
    let run = run_async(args, w.stranger.key_pem.clone()).await;
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    let json = run.json();
    assert_eq!(json["failed"], serde_json::json!(["peer"]));
    let peer = &json["peers"][0];
    assert_eq!(peer["service"], "region");
    assert_eq!(peer["ok"], false);
    // The handshake completed on the client's side, then the server refused.
    assert_eq!(peer["tls_version"], "TLSv1_3");
    assert_eq!(peer["server_chain"][0]["issuer"], "CN=server-ca");
    assert_eq!(peer["client_certificate_accepted"], false, "{json:#}");
    assert_eq!(peer["error"]["kind"], "UnknownCA", "{json:#}");
    assert_eq!(peer["http_status"], serde_json::Value::Null);
    // The server counts the refusal after it sent the alert the client acted on:
    // under load the client can exit first (seen once), so wait for the count.
    test_support::poll_until("the server counts the refused handshake", || {
        server.rejected() >= 1
    })
    .await;
    // The principal is a check of its own: it still signs and verifies.
    assert_eq!(json["principal"]["verified"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_whose_server_is_not_trusted_exits_5() {
    let w = world().await;
    // The server presents a leaf of a CA the service's CA Secret does not hold.
    let server = VerifyingServer::start(&TestCa::new("rogue"), &w.clients).await;
    let good = w.clients.client_leaf("svc", 13);
    w.tb.upsert(tls_secret(NS, "svc-cert", &good.cert_pem, &good.key_pem));
    let mut args = identity_args(&w.kubeconfig, "svc-cert");
    args.extend(crate::common::args(&[
        ("region-host", &server.url()),
        ("region-ca-secret-namespace", NS),
        ("region-ca-secret-name", "server-ca"),
    ]));
    let run = run_async(args, good.key_pem.clone()).await;
    assert_eq!(run.code, 5, "{}", run.stdout);
    let peer = &run.json()["peers"][0];
    assert_eq!(peer["error"]["kind"], "UnknownIssuer", "{peer:#}");
    assert_eq!(peer["client_certificate_accepted"], serde_json::Value::Null);
    assert_eq!(peer["tls_version"], serde_json::Value::Null);
}
