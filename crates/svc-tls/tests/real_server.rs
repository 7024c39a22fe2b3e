//! The real-server tier: svc-tls and kube-construct reading through a real
//! kube-apiserver (and etcd), built by `cargo xtask real-peers`, one per test binary.
//! Without those binaries every test here fails, naming that command: the tier never
//! skips.
//!
//! - A kube-construct cache proven synced at construction, and a peer's trust and
//!   identity read from Secrets through svc-tls (`PeerTls::from_options`, the process's
//!   `SecretWatches`), following a rotated identity.
//! - RBAC, the same body against the emulator and the real server: a token allowed
//!   ConfigMaps only is refused the Secrets (a typed 403 naming the Secret and the
//!   cluster, never a token) while the admin is served, in both orders (as
//!   `credentials.rs` runs against the emulator alone); and a CA bundle ConfigMap
//!   served only to callers that may read ConfigMaps.
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
use svc_tls::watch::SecretWatches;

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

/// The options of a peer at `url` trusting the CA bundle ConfigMap `bundle` (in
/// [`NS`]), presenting no identity.
fn bundle_options(url: &str, bundle: &str) -> (PeerOptions, ClientIdentityOptions) {
    options_with(
        url,
        &[
            format!("--identity-ca-configmap-namespace={NS}"),
            format!("--identity-ca-configmap-name={bundle}"),
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
    server_ca: TestCa,
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
        server_ca,
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

fn chain_text(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        text.push('\n');
        text.push_str(&source.to_string());
        next = source.source();
    }
    text
}

/// The refusal a caller without read rights gets: the API server's 403, naming
/// `object` and the cluster, never a token.
fn assert_refused(
    api: &impl ApiServerUnderTest,
    result: Result<PeerTls, PeerClientError>,
    object: &str,
    tokens: &[&str],
) {
    let name = api.name();
    let error = match result {
        Ok(_) => panic!("{name}: a caller without read rights on {object} was served it"),
        Err(error) => error,
    };
    let shown = chain_text(&error);
    assert!(
        shown.contains(object),
        "{name}: the error names {object}: {shown}"
    );
    assert!(
        shown.contains("403"),
        "{name}: the API server's refusal: {shown}"
    );
    let label = api
        .cluster_client_for(&api.admin_token())
        .cluster()
        .label()
        .to_owned();
    assert!(
        shown.contains(&label),
        "{name}: the error names the cluster {label}: {shown}"
    );
    for token in tokens {
        assert!(
            !shown.contains(token),
            "{name}: a token in the error: {shown}"
        );
    }
}

/// RBAC in both orders, on any API server: permitted first (the restricted caller
/// then hits the watches the admin opened), and refused first (nothing it leaves
/// behind may lock the admin out).
async fn refused_in_both_orders(api: &impl ApiServerUnderTest, tag: &str) {
    let admin = api.cluster_client_for(&api.admin_token());
    let configmaps_only = api.reader_of(NS, "configmaps").await;
    let restricted = api.cluster_client_for(&configmaps_only);
    let tokens = [configmaps_only.as_str(), &api.admin_token()];

    // Permitted first.
    let first = peer(api, &format!("{tag}-permitted-first"), 11).await;
    let url = first.server.url();
    let permitted = build(&first, &admin).await.unwrap();
    assert_eq!(serial_seen(&permitted, &url).await, "11", "{}", api.name());
    assert_refused(api, build(&first, &restricted).await, &first.ca, &tokens);
    let identity_only = SecretWatches::process()
        .watch(
            &restricted,
            &svc_tls::SecretRef::new(NS, &first.identity),
            TIMEOUT,
        )
        .await;
    let refused =
        identity_only.expect_err("the identity Secret was served to a caller without rights");
    assert!(
        refused.to_string().contains("403"),
        "{}: {refused}",
        api.name()
    );
    let again = build(&first, &admin).await.unwrap();
    assert_eq!(serial_seen(&again, &url).await, "11", "{}", api.name());

    // Refused first.
    let second = peer(api, &format!("{tag}-refused-first"), 22).await;
    assert_refused(api, build(&second, &restricted).await, &second.ca, &tokens);
    let permitted = build(&second, &admin).await.unwrap();
    assert_eq!(
        serial_seen(&permitted, &second.server.url()).await,
        "22",
        "{}",
        api.name()
    );
    assert_refused(api, build(&second, &restricted).await, &second.ca, &tokens);
}

/// A CA bundle ConfigMap is served only to callers that may read ConfigMaps, in
/// either order: the admin, then a caller allowed Secrets only; and the other way.
async fn bundles_refused_in_both_orders(api: &impl ApiServerUnderTest, tag: &str) {
    let admin = api.cluster_client_for(&api.admin_token());
    let secrets_only = api.reader_of(NS, "secrets").await;
    let restricted = api.cluster_client_for(&secrets_only);
    let tokens = [secrets_only.as_str(), &api.admin_token()];
    for (order, permitted_first) in [("permitted-first", true), ("refused-first", false)] {
        let peer = peer(api, &format!("{tag}-bundle-{order}"), 1).await;
        let bundle = format!("{tag}-bundle-{order}");
        api.apply(serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"namespace": NS, "name": bundle},
            "data": {"ca.crt": peer.server_ca.pem()},
        }))
        .await;
        let (options, me) = bundle_options(&peer.server.url(), &bundle);
        let (first, second) = if permitted_first {
            (&admin, &restricted)
        } else {
            (&restricted, &admin)
        };
        for caller in [first, second] {
            let built = PeerTls::from_options(caller, &options, &me, TIMEOUT).await;
            if std::ptr::eq(caller, &admin) {
                built.unwrap();
            } else {
                assert_refused(api, built, &bundle, &tokens);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_refusals_on_the_emulator() {
    let testbed = kube_testbed::Testbed::start().await;
    refused_in_both_orders(&testbed, "emulated").await;
    bundles_refused_in_both_orders(&testbed, "emulated").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_refusals_on_the_real_server() {
    let api = real_apiserver::shared();
    refused_in_both_orders(api, "real").await;
    bundles_refused_in_both_orders(api, "real").await;
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
    let identity = SecretWatches::process()
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
