//! The real-server tier: svc-tls and kube-construct reading through a real
//! kube-apiserver (and etcd), built by `cargo xtask real-peers`, one per test binary.
//! Without those binaries every test here fails, naming that command: the tier never
//! skips.
//!
//! - A kube-construct cache proven synced at construction, and a peer's trust and
//!   identity read from Secrets through svc-tls (`PeerTls::from_options`, the process's
//!   `WatchedObjects`), following a rotated identity.
//! - RBAC refusals run against both servers in `credentials/`; a periodic
//!   BOOKMARK in `handshake/bookmark.rs`.
//! - Two clusters in one process, one emulated and one real, holding same-named
//!   Secrets: each caller is served its own cluster's.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::core::Selector;
use kube_construct::cache::Selection;
use kube_construct::client::CachedClient;
use real_apiserver::ApiServerUnderTest;
use support::*;
use svc_tls::ClusterClient;
use svc_tls::client::{PeerClientError, PeerTls};
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::watch::WatchedObjects;

const TIMEOUT: Duration = Duration::from_secs(20);

/// The options of a peer at `url` trusting the CA Secret `ca` and presenting the
/// identity Secret `identity`, both in [`NS`].
fn options(url: &str, ca: &str, identity: &str) -> (PeerOptions, ClientIdentityOptions) {
    options_with(
        url,
        &[
            format!("--identity-ca-secret-namespace={NS}"),
            format!("--identity-ca-secret-name={ca}"),
            format!("--client-certificate-namespace={NS}"),
            format!("--client-certificate-name={identity}"),
        ],
    )
}

fn options_with(url: &str, source: &[String]) -> (PeerOptions, ClientIdentityOptions) {
    let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    let mut args = vec![
        "svc".to_owned(),
        format!("--identity-host={url}"),
        "--identity-pool-idle-timeout=0s".to_owned(),
    ];
    args.extend(source.iter().cloned());
    let m = cmd.try_get_matches_from(args).unwrap();
    (
        PeerOptions::from_matches(&m, "identity").unwrap(),
        ClientIdentityOptions::from_matches(&m, None).unwrap(),
    )
}

/// A CA Secret and an identity Secret named after `tag`, and a TLS server that
/// verifies the identity and answers with the serial it saw.
struct Peer {
    ca: String,
    identity: String,
    server: VerifyingServer,
    client_ca: TestCa,
}

async fn peer(api: &impl ApiServerUnderTest, tag: &str, serial: u64) -> Peer {
    let (server_ca, client_ca) = (TestCa::new("server CA"), TestCa::new("client CA"));
    let (ca, identity) = (format!("{tag}-ca"), format!("{tag}-identity"));
    // Opaque: the real API server refuses a `kubernetes.io/tls` Secret without a
    // `tls.key` (422), which the emulator accepts.
    api.apply(secret_with(
        &ca,
        "Opaque",
        &[("tls.crt", &server_ca.pem()), ("ca.crt", &server_ca.pem())],
    ))
    .await;
    let leaf = client_ca.client_leaf("region", serial);
    api.apply(tls_secret(&identity, &leaf.cert_pem, &leaf.key_pem))
        .await;
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    Peer {
        ca,
        identity,
        server,
        client_ca,
    }
}

async fn build(peer: &Peer, caller: &ClusterClient) -> Result<PeerTls, PeerClientError> {
    let (options, me) = options(&peer.server.url(), &peer.ca, &peer.identity);
    PeerTls::from_options(caller, &options, &me, TIMEOUT).await
}

/// One mTLS request: the serial the server saw.
async fn serial_seen(tls: &PeerTls, url: &str) -> String {
    let http = tls.private_client().unwrap();
    let response = http.send(http.get(url).unwrap()).await.unwrap();
    response.text().await.unwrap().trim().to_owned()
}

/// One process reading two clusters, the emulator and the real server, which hold
/// same-named Secrets with different CAs and leaves: the process's registry, keyed by
/// cluster, serves each caller its own cluster's identity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emulated_and_a_real_cluster_each_serve_their_own_secrets() {
    let emulated = kube_testbed::Testbed::start().await;
    let real = real_apiserver::shared();
    let on_emulator = peer(&emulated, "two-clusters", 101).await;
    let on_real = peer(real, "two-clusters", 202).await;
    let (emulated_client, real_client) = (emulated.cluster_client(), real.cluster_client());
    assert_ne!(
        emulated_client.cluster(),
        real_client.cluster(),
        "two clusters, two identities"
    );
    for _ in 0..2 {
        let tls = build(&on_emulator, &emulated_client).await.unwrap();
        assert_eq!(serial_seen(&tls, &on_emulator.server.url()).await, "101");
        let tls = build(&on_real, &real_client).await.unwrap();
        assert_eq!(serial_seen(&tls, &on_real.server.url()).await, "202");
    }
}

fn configmap(name: &str, value: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": NS, "name": name, "labels": {"tier": "real"}},
        "data": {"value": value},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synced_cache_and_a_rotated_identity_read_from_the_real_server() {
    let api = real_apiserver::shared();
    for i in 0..5 {
        api.apply(configmap(&format!("cached-{i}"), &i.to_string()))
            .await;
    }
    let peer = peer(api, "cached", 7).await;

    // kube-construct: construction returns only once every cache holds what existed.
    let client = CachedClient::builder()
        .cache::<ConfigMap>(Selection::in_namespace(NS))
        .cache::<Secret>(Selection::object(Some(NS), &peer.identity))
        .from_client(api.client())
        .await
        .unwrap();
    let selector: Selector = kube::core::Expression::Equal("tier".into(), "real".into()).into();
    let listed = client.list::<ConfigMap>(Some(NS), &selector).unwrap();
    assert!(listed.len() >= 5, "{} ConfigMaps cached", listed.len());
    assert!(
        client
            .get::<Secret>(Some(NS), &peer.identity)
            .unwrap()
            .is_some()
    );
    let health = client.health();
    assert!(health.is_ready(), "{health}");

    // svc-tls: the identity and trust Secrets through the process's registry.
    let tls = build(&peer, &api.cluster_client()).await.unwrap();
    let url = peer.server.url();
    assert_eq!(serial_seen(&tls, &url).await, "7");
    let identity = WatchedObjects::process()
        .watch(
            &api.cluster_client(),
            &svc_tls::SecretRef::new(NS, &peer.identity),
            TIMEOUT,
        )
        .await
        .unwrap();

    // A rotated identity reaches both through the real server's watch.
    let rotated = peer.client_ca.client_leaf("region", 8);
    api.apply(tls_secret(
        &peer.identity,
        &rotated.cert_pem,
        &rotated.key_pem,
    ))
    .await;
    poll_until("svc-tls's cache holds the rotated identity", || {
        cached_cert_is(identity.source(), &rotated.cert_pem)
    })
    .await;
    assert_eq!(serial_seen(&tls, &url).await, "8");
    poll_until("kube-construct's cache holds the rotated identity", || {
        client
            .get::<Secret>(Some(NS), &peer.identity)
            .unwrap()
            .and_then(|s| s.data.as_ref()?.get("tls.crt").cloned())
            .is_some_and(|c| c.0 == rotated.cert_pem.as_bytes())
    })
    .await;
}
