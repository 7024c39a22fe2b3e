//! What only a real control plane shows: its API server restarted under a running
//! watch, and etcd compacted so the resumed watch is answered `410 Gone` and must
//! relist (a kube-construct cache of the same Secret riding the same restart and
//! compaction: the real counterpart of the emulator's `drop_watches` and
//! `expire_history` in kube-construct's tests). One etcd with two kube-apiservers over it (an HA control plane's shape): the
//! watch reads through the first, and the second takes writes while the first is down.
//! And a grant withdrawn from a caller whose watch is open: a real API server
//! authorizes a request when it starts, so the open watch goes on serving it until
//! it must be re-established (here: the API server restarts; in production: the
//! watch's timeout), and only then is the caller refused and its trust fails closed
//! after the bound. The emulator compresses this: revoking a token ends every watch.
//! The tests share the binary's one control plane and run one at a time.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::sync::OnceLock;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, WatchEvent, WatchParams};
use kube_construct::cache::Selection;
use kube_construct::client::CachedClient;
use real_apiserver::{ApiServerUnderTest, Options, RealServer};
use support::*;
use svc_tls::SecretRef;
use svc_tls::watch::WatchedObject;

const TIMEOUT: Duration = Duration::from_secs(20);

fn control_plane() -> &'static RealServer {
    static CELL: OnceLock<RealServer> = OnceLock::new();
    real_apiserver::shared_in(&CELL, || Options {
        apiservers: 2,
        ..Options::default()
    })
}

/// The tests here stop and start the shared API server: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Writes `object` through API server `index` (server-side apply, as the admin).
async fn write_through(server: &RealServer, index: usize, object: serde_json::Value) {
    let client = kube::Client::try_from(server.config_on(index, &server.token())).unwrap();
    let name = object["metadata"]["name"].as_str().unwrap().to_owned();
    Api::<Secret>::namespaced(client, NS)
        .patch(
            &name,
            &PatchParams::apply("disruption-tests").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap();
}

/// Polls `check` for up to a minute (an API server restart is seconds on 2 cores).
async fn within_a_minute(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn resource_version(source: &WatchedObject<Secret>) -> String {
    source
        .get()
        .and_then(|s| s.metadata.resource_version.clone())
        .expect("the cached Secret has a resourceVersion")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_recovers_from_an_api_server_restart() {
    let server = control_plane();
    let _one = ONE_AT_A_TIME.lock().await;
    let ca = TestCa::new("client CA");
    let (first, second) = (ca.client_leaf("a", 1), ca.client_leaf("a", 2));
    server
        .apply(tls_secret("restarted", &first.cert_pem, &first.key_pem))
        .await;
    let source =
        WatchedObject::<Secret>::watch(server.client(), SecretRef::new(NS, "restarted"), TIMEOUT)
            .await
            .unwrap();
    assert!(cached_cert_is(&source, &first.cert_pem));

    server.stop_apiserver(0).await;
    within_a_minute("the watch notices the API server is gone", || {
        source.last_watch_error().is_some()
    })
    .await;
    server.start_apiserver(0).await.unwrap();
    // Written through the restarted API server: only a watch that recovered sees it.
    write_through(
        server,
        0,
        tls_secret("restarted", &second.cert_pem, &second.key_pem),
    )
    .await;
    within_a_minute("the rotated Secret after the restart", || {
        cached_cert_is(&source, &second.cert_pem)
    })
    .await;
    within_a_minute("the watch reports healthy again", || {
        source.watch_health().connected
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumed_after_compaction_gets_410_and_relists() {
    let server = control_plane();
    let _one = ONE_AT_A_TIME.lock().await;
    let ca = TestCa::new("client CA");
    let (first, second) = (ca.client_leaf("b", 1), ca.client_leaf("b", 2));
    server
        .apply(tls_secret("compacted", &first.cert_pem, &first.key_pem))
        .await;
    let source =
        WatchedObject::<Secret>::watch(server.client(), SecretRef::new(NS, "compacted"), TIMEOUT)
            .await
            .unwrap();
    let seen = resource_version(&source);
    let relists = source.relists();
    // A kube-construct cache of the same Secret rides the same restart (what the
    // emulator's `drop_watches` and `expire_history` stand for in its own tests).
    let cache = CachedClient::builder()
        .cache::<Secret>(Selection::object(Some(NS), "compacted"))
        .from_client(server.client())
        .await
        .unwrap();

    // While the watch's API server is down: a rotation through the other one, then
    // etcd compacted past everything the watch has seen.
    server.stop_apiserver(0).await;
    write_through(
        server,
        1,
        tls_secret("compacted", &second.cert_pem, &second.key_pem),
    )
    .await;
    let compacted_to = server.compact_etcd().await.unwrap();
    assert!(
        compacted_to > seen.parse::<i64>().unwrap(),
        "compacted to {compacted_to}, past {seen}"
    );
    server.start_apiserver(0).await.unwrap();

    // The real server's answer to a watch from the compacted resourceVersion: 410.
    let secrets: Api<Secret> = Api::namespaced(server.client(), NS);
    let params = WatchParams::default().fields("metadata.name=compacted");
    let mut stream = secrets.watch(&params, &seen).await.unwrap().boxed();
    match stream.next().await {
        Some(Ok(WatchEvent::Error(status))) => assert_eq!(status.code, 410, "{status:?}"),
        Some(Err(kube::Error::Api(status))) => assert_eq!(status.code, 410, "{status:?}"),
        other => panic!("a watch from compacted resourceVersion {seen} got {other:?}"),
    }

    // Ours: the resumed watch is told the same, relists, and sees the rotation.
    within_a_minute("the rotated Secret after the relist", || {
        cached_cert_is(&source, &second.cert_pem)
    })
    .await;
    assert!(
        source.relists() > relists,
        "the watch relisted after 410 Gone ({} relists; last error {:?})",
        source.relists(),
        source.last_watch_error()
    );
    within_a_minute("kube-construct's cache serves the rotation, ready", || {
        cache.health().is_ready()
            && cache
                .get::<Secret>(Some(NS), "compacted")
                .unwrap()
                .and_then(|s| s.data.as_ref()?.get("tls.crt").cloned())
                .is_some_and(|c| c.0 == second.cert_pem.as_bytes())
    })
    .await;
    assert!(
        cache.health().caches[0].errors >= 1,
        "the cache counted its watch's failure while the API server was down: {}",
        cache.health()
    );
}

/// The server certificate `server` checked by `trust` as a handshake would.
fn verify(trust: &svc_tls::trust::TrustVerifier, server: &Leaf) -> Result<(), String> {
    use rustls::client::danger::ServerCertVerifier as _;
    use rustls_pki_types::pem::PemObject as _;
    let leaf =
        rustls_pki_types::CertificateDer::from_pem_slice(server.cert_pem.as_bytes()).unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    trust
        .verify_server_cert(&leaf, &[], &name, &[], rustls_pki_types::UnixTime::now())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withdrawn_grant_fails_trust_closed_once_the_watch_must_be_re_established() {
    use svc_tls::testing::ManualClock;
    use svc_tls::trust::TrustVerifier;

    let server = control_plane();
    let _one = ONE_AT_A_TIME.lock().await;
    let (ca_a, ca_b) = (TestCa::new("server CA A"), TestCa::new("server CA B"));
    let ca_secret = |ca: &TestCa| {
        secret_with(
            "withdrawn-ca",
            "Opaque",
            &[("tls.crt", &ca.pem()), ("ca.crt", &ca.pem())],
        )
    };
    server.apply(ca_secret(&ca_a)).await;
    let user = server.new_user();
    server
        .grant(
            &user,
            NS,
            vec![real_apiserver::rule(
                &["get", "list", "watch"],
                "",
                "secrets",
            )],
        )
        .await
        .unwrap();
    let caller = server.cluster_client_for(&user.token);
    let clock = ManualClock::new();
    let limit = Duration::from_secs(600);
    let trust = TrustVerifier::builder(caller.kube().clone(), SecretRef::new(NS, "withdrawn-ca"))
        .watches(&svc_tls::watch::WatchedObjects::new(), &caller)
        .clock(std::sync::Arc::new(clock.clone()))
        .settings(svc_tls::trust::TrustSettings::default().max_roots_without_source(limit))
        .build()
        .await
        .unwrap();
    let (server_a, server_b) = (ca_a.server_leaf(), ca_b.server_leaf());
    verify(&trust, &server_a).unwrap();

    server.withdraw(&user, NS).await.unwrap();
    // The open watch was authorized when it started: it still delivers a rotation.
    server.apply(ca_secret(&ca_b)).await;
    within_a_minute("the open watch delivers the rotation to CA B", || {
        verify(&trust, &server_b).is_ok()
    })
    .await;
    assert_eq!(
        trust.secret_source().and_then(|s| s.refused_now()),
        None,
        "not refused while its watch is open"
    );

    // The watch must be re-established: now the caller is refused.
    server.stop_apiserver(0).await;
    server.start_apiserver(0).await.unwrap();
    within_a_minute("the re-established watch is refused", || {
        trust.secret_source().and_then(|s| s.refused_now()) == Some(403)
    })
    .await;
    // Within the bound: the last good roots (CA B), counted as a failure.
    verify(&trust, &server_b).expect("the last good roots within the bound");
    assert!(trust.state().stale);
    assert!(trust.state().failures >= 1);
    // Past the bound: every server refused, saying why.
    clock.advance(limit + Duration::from_secs(1));
    let refused = verify(&trust, &server_b).expect_err("trust must fail closed past the bound");
    assert!(refused.contains("AccessRefused"), "{refused}");
    assert!(refused.contains("403"), "{refused}");
}
