//! Per-handshake identity reload against a real TLS 1.3 server that requires and
//! verifies client certificates, with the Secret held in the API emulator: what needs
//! the emulator's cues (faults, a stopped API, a deleted Secret's warnings, many quick
//! flips). The rotations that read through either server are in `rotation_both.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls_pki_types::pem::PemObject;

use kube_testbed::Testbed;
use support::*;
use svc_tls::identity::{IdentityError, IdentityReloadError, IdentityResolver};
use svc_tls::last_good::{self, StaleWarning};
use svc_tls::material::Identity;
use svc_tls::origin::IdentityOrigin;
use svc_tls::origin::SecretRef;
use svc_tls::testing::ManualClock;
use svc_tls::watch::WatchError;

const NAME: &str = "region-client-certificate";

fn secret_ref() -> SecretRef {
    SecretRef {
        namespace: NS.to_string(),
        name: NAME.to_string(),
    }
}

async fn resolver(tb: &Testbed) -> IdentityResolver {
    IdentityResolver::builder(tb.client(), secret_ref())
        .settings(
            svc_tls::identity::IdentitySettings::default().sync_timeout(Duration::from_secs(10)),
        )
        .build()
        .await
        .unwrap()
}

/// [`resolver`] over a watch that applies every version at once (no coalescing):
/// for a test of handshakes racing each version of a Secret rewritten in a loop.
async fn uncoalesced_resolver(tb: &Testbed) -> IdentityResolver {
    let limits = svc_tls::watch::default_limits().coalesce(None);
    let source = svc_tls::watch::WatchedObject::<svc_tls::watch::Secret>::watch_within(
        tb.client(),
        secret_ref(),
        Duration::from_secs(10),
        &limits,
    )
    .await
    .unwrap();
    let source = svc_tls::identity::SecretIdentitySource::new(source, provider());
    IdentityResolver::source_builder(Arc::new(source))
        .build()
        .await
        .unwrap()
}

async fn get_serial(http: &reqwest::Client, url: &str) -> u64 {
    let body = http.get(url).send().await.unwrap().text().await.unwrap();
    body.trim().parse().unwrap()
}

/// Records warnings and failures for assertions.
#[derive(Debug, Default)]
struct Recorded {
    warnings: Mutex<Vec<(u64, Duration)>>,
    failures: AtomicU64,
    reloads: AtomicU64,
}

impl last_good::ReloadRecorder<IdentityOrigin, Identity> for Recorded {
    fn loaded(&self, _: &IdentityOrigin, _: &Identity, _: std::time::SystemTime) {
        self.reloads.fetch_add(1, Ordering::SeqCst);
    }
    fn reload_failed(&self, _: &IdentityOrigin, _: &IdentityReloadError, n: u64) {
        self.failures.store(n, Ordering::SeqCst);
    }
    fn stale_warning(&self, w: &StaleWarning<'_, IdentityOrigin, Identity>) {
        self.warnings
            .lock()
            .unwrap()
            .push((w.suppressed, w.stale_for));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_reload_serves_last_good_with_one_limited_warning() {
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let good = client_ca.client_leaf("svc", 301);
    let other = client_ca.client_leaf("svc", 302);
    tb.upsert(tls_secret(NAME, &good.cert_pem, &good.key_pem));
    let server = VerifyingServer::start(&server_ca, &client_ca).await;

    let clock = ManualClock::new();
    let recorded = Arc::new(Recorded::default());
    let resolver = IdentityResolver::builder(tb.client(), secret_ref())
        .clock(Arc::new(clock.clone()))
        .recorder(recorded.clone())
        .build()
        .await
        .unwrap();
    let config = Arc::new(trusting(&server_ca, Some(&resolver)));

    // A leaf with another leaf's key: rejected on reload, the last good one served.
    tb.upsert(tls_secret(NAME, &good.cert_pem, &other.key_pem));
    poll_until("the cache sees the broken Secret", || {
        resolver
            .secret_source()
            .unwrap()
            .get()
            .and_then(|s| s.data.as_ref()?.get("tls.key").cloned())
            .is_some_and(|k| k.0 == other.key_pem.as_bytes())
    })
    .await;
    for _ in 0..5 {
        clock.advance(Duration::from_secs(5));
        assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(301));
    }
    assert_eq!(recorded.failures.load(Ordering::SeqCst), 5);
    assert_eq!(
        recorded.warnings.lock().unwrap().clone(),
        vec![(0, Duration::from_secs(5))],
        "one warning for five failures within a minute"
    );
    let state = resolver.state();
    assert_eq!((state.failures, state.stale), (5, true));

    // After the window, the next failure is logged, counting the suppressed ones.
    clock.advance(Duration::from_secs(60));
    assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(301));
    assert_eq!(
        recorded.warnings.lock().unwrap().last().copied(),
        Some((4, Duration::from_secs(85)))
    );

    // A deleted Secret keeps the last good identity.
    tb.delete("v1", "Secret", Some(NS), NAME);
    poll_until("the cache sees the deletion", || {
        resolver.secret_source().unwrap().get().is_none()
    })
    .await;
    assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(301));
    assert_eq!(resolver.state().failures, 7);

    // A recreated one is used at once.
    tb.upsert(tls_secret(NAME, &other.cert_pem, &other.key_pem));
    poll_until("the cache sees the recreated Secret", || {
        cached_cert_is(resolver.secret_source().unwrap(), &other.cert_pem)
    })
    .await;
    assert_eq!(handshake_serial(config, server.addr).await, Ok(302));
    let state = resolver.state();
    assert!(!state.stale);
    assert_eq!(state.failures, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_handshakes_while_the_secret_flips_present_whole_identities() {
    let tb = Arc::new(Testbed::start().await);
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    // Two key types, so a certificate with the other identity's key cannot even sign
    // with the scheme the certificate announces: any mix fails the server's check.
    let a = client_ca.client_leaf("svc", 401);
    let b = client_ca.client_leaf_with(
        "svc",
        402,
        rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap(),
    );
    tb.upsert(tls_secret(NAME, &a.cert_pem, &a.key_pem));
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    let resolver = uncoalesced_resolver(&tb).await;
    let config = Arc::new(trusting(&server_ca, Some(&resolver)));

    let done = Arc::new(AtomicBool::new(false));
    let flipper = tokio::spawn({
        let (tb, done, a, b) = (tb.clone(), done.clone(), a.clone(), b.clone());
        async move {
            let mut flips = 0u32;
            while !done.load(Ordering::SeqCst) {
                let leaf = if flips.is_multiple_of(2) { &b } else { &a };
                tb.upsert(tls_secret(NAME, &leaf.cert_pem, &leaf.key_pem));
                flips += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            flips
        }
    });
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let config = config.clone();
            let addr = server.addr;
            tokio::spawn(async move {
                let mut serials = Vec::new();
                for _ in 0..40 {
                    serials.push(handshake_serial(config.clone(), addr).await);
                }
                serials
            })
        })
        .collect();
    let results = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(clients))
        .await
        .expect("no deadlock: all handshakes finish");
    done.store(true, Ordering::SeqCst);
    let flips = flipper.await.unwrap();
    assert!(flips > 1, "the Secret flipped during the run");

    let mut seen = HashSet::new();
    for serial in results.into_iter().flat_map(|r| r.unwrap()) {
        let serial = serial.expect("every handshake presents one whole, valid identity");
        seen.insert(serial);
    }
    assert_eq!(
        seen,
        HashSet::from([401, 402]),
        "both identities, nothing else"
    );
    assert_eq!(resolver.state().failures, 0, "no snapshot was ever a mix");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn construction_fails_on_a_missing_secret_naming_it() {
    let tb = Testbed::start().await;
    let err = build_error(tb.client(), Duration::from_secs(10)).await;
    assert!(
        matches!(
            err,
            IdentityError::Unusable(IdentityReloadError::NotFound { .. })
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("client certificate Secret {NS}/{NAME} not found")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn construction_times_out_when_the_api_is_unreachable() {
    let tb = Testbed::start().await;
    let client = tb.client();
    tb.stop().await;
    let err = build_error(client, Duration::from_millis(500)).await;
    assert!(
        matches!(
            err,
            IdentityError::Source(WatchError::SyncTimeout {
                last_error: Some(_),
                ..
            })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains(&format!("{NS}/{NAME}")), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls12_only_server_is_refused() {
    let server_ca = TestCa::new("server");
    let leaf = server_ca.server_leaf();
    let server_config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der.clone()],
            rustls_pki_types::PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        acceptor.accept(tcp).await.is_ok()
    });
    let config = Arc::new(trusting(&server_ca, None));
    let err = handshake_serial(config, addr).await.unwrap_err();
    assert!(err.starts_with("handshake:"), "{err}");
    assert!(
        !server.await.unwrap(),
        "the server saw no TLS 1.2 handshake succeed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_follows_the_secret_across_dropped_watches_expired_history_and_api_restarts() {
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let leaves: Vec<_> = (0..4)
        .map(|i| client_ca.client_leaf("svc", 600 + i))
        .collect();
    tb.upsert(tls_secret(NAME, &leaves[0].cert_pem, &leaves[0].key_pem));
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    let resolver = resolver(&tb).await;
    let config = Arc::new(trusting(&server_ca, Some(&resolver)));

    // The watch stream ends: the reflector watches again from where it was. (Synced
    // means listed: the WATCH that follows must be open to be dropped.)
    poll_until("the Secret's watch open", || tb.open_watches() == 1).await;
    tb.drop_watches();
    tb.upsert(tls_secret(NAME, &leaves[1].cert_pem, &leaves[1].key_pem));
    poll_until("the cache sees leaf 1 after a dropped watch", || {
        cached_cert_is(resolver.secret_source().unwrap(), &leaves[1].cert_pem)
    })
    .await;
    assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(601));

    // The watch's resourceVersion is too old (410 Gone): it lists again.
    tb.expire_history();
    tb.drop_watches();
    tb.upsert(tls_secret(NAME, &leaves[2].cert_pem, &leaves[2].key_pem));
    poll_until("the cache sees leaf 2 after a relist", || {
        cached_cert_is(resolver.secret_source().unwrap(), &leaves[2].cert_pem)
    })
    .await;
    assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(602));

    // The API server goes away: handshakes keep working from the cache...
    tb.stop().await;
    assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(602));
    assert_eq!(resolver.state().failures, 0);
    // ...and when it is back, changes flow again.
    tb.restart(true).await;
    tb.upsert(tls_secret(NAME, &leaves[3].cert_pem, &leaves[3].key_pem));
    poll_until("the cache sees leaf 3 after an API restart", || {
        cached_cert_is(resolver.secret_source().unwrap(), &leaves[3].cert_pem)
    })
    .await;
    assert_eq!(handshake_serial(config, server.addr).await, Ok(603));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_tls_from_options_calls_the_peer_with_the_watched_identity() {
    use svc_tls::client::PeerClientError;
    use svc_tls::options::{ClientIdentityOptions, PeerOptions};

    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let (one, two) = (
        client_ca.client_leaf("svc", 701),
        client_ca.client_leaf("svc", 702),
    );
    tb.upsert(secret_with(
        "region-ca",
        "kubernetes.io/tls",
        &[("tls.crt", &server_ca.pem()), ("ca.crt", &server_ca.pem())],
    ));
    tb.upsert(tls_secret(NAME, &one.cert_pem, &one.key_pem));
    let server = VerifyingServer::start(&server_ca, &client_ca).await;

    let peer = PeerOptions::new("region").with_ca_secret(NS, "region-ca");
    let me = ClientIdentityOptions::new(None).with_secret(NS, NAME);
    let tls = from_options_scoped(&tb.cluster_client(), &peer, &me, Duration::from_secs(10))
        .await
        .unwrap();
    // A client per "reconcile": each is built without waiting, all share the resolver.
    assert_eq!(
        get_serial(&tls.reqwest_client().unwrap(), &server.url()).await,
        701
    );
    tb.upsert(tls_secret(NAME, &two.cert_pem, &two.key_pem));
    poll_until("the cache sees the new Secret", || {
        cached_cert_is(
            tls.identity().unwrap().secret_source().unwrap(),
            &two.cert_pem,
        )
    })
    .await;
    let again = tls.clone();
    assert_eq!(
        get_serial(&again.reqwest_client().unwrap(), &server.url()).await,
        702
    );

    // A half-set CA reference is a configuration error naming the missing flag.
    let half = PeerOptions::new("region").with_ca_secret(NS, "");
    let err = from_options_scoped(&tb.cluster_client(), &half, &me, Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(matches!(err, PeerClientError::Config(_)), "{err:?}");
    assert!(err.to_string().contains("--region-ca-secret-name"), "{err}");
    // A missing CA Secret is named.
    let missing = PeerOptions::new("region").with_ca_secret(NS, "no-such-ca");
    let err = from_options_scoped(&tb.cluster_client(), &missing, &me, Duration::from_secs(10))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("CA Secret {NS}/no-such-ca not found")
    );
}

/// Builds a resolver of the test Secret that must fail, and returns why.
async fn build_error(client: kube::Client, timeout: Duration) -> IdentityError {
    IdentityResolver::builder(client, secret_ref())
        .settings(svc_tls::identity::IdentitySettings::default().sync_timeout(timeout))
        .build()
        .await
        .unwrap_err()
}
