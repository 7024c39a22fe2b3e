//! Peer CA trust that follows its Secret: real TLS 1.3 servers whose certificate
//! moves between CAs, the CA Secret held in the API server, and svc-tls's
//! `TrustVerifier` verifying every handshake against the Secret's current roots. The
//! rotation, broken-Secret and delete-and-recreate bodies (`both.rs`) run against
//! kube-testbed and the real kube-apiserver alike (`real_apiserver::both!`); load and concurrent
//! flips, and start-up errors, against the emulator.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../support/mod.rs"]
mod support;

mod both;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube_testbed::Testbed;
use real_apiserver::ApiServerUnderTest;
use rustls::ClientConfig;
use support::*;
use svc_tls::client::{PeerClientError, TrustMode, client_config};
use svc_tls::last_good::{ReloadRecorder, StaleWarning};
use svc_tls::material::TrustAnchors;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::origin::SecretRef;
use svc_tls::origin::TrustOrigin;
use svc_tls::testing::ManualClock;
use svc_tls::trust::{TrustError, TrustReloadError, TrustVerifier};
use test_support::poll_until;

const CA_NAME: &str = "identity-ca";

/// A CA Secret as cert-manager writes it: `tls.crt` and `ca.crt`, PEM.
fn ca_secret(tls_crt: &str, ca_crt: &str) -> serde_json::Value {
    secret_with(
        CA_NAME,
        "kubernetes.io/tls",
        &[("tls.crt", tls_crt), ("ca.crt", ca_crt)],
    )
}

/// A TLS 1.3 server (no client certificate asked) whose server certificate is issued
/// by `ca`; `set_server_ca` switches it without restarting; it counts completed
/// handshakes.
async fn switching_server(ca: &TestCa) -> VerifyingServer {
    VerifyingServer::builder(ca, ca)
        .no_client_auth()
        .start()
        .await
}

/// One new TLS connection and one request: `Ok` when the server was trusted.
async fn call(config: Arc<ClientConfig>, addr: SocketAddr) -> Result<(), String> {
    let reply = test_support::tls_server::request(config, addr).await?;
    if reply.status == 200 {
        Ok(())
    } else {
        Err(format!("unexpected response {reply:?}"))
    }
}

fn watched(verifier: &TrustVerifier) -> Arc<ClientConfig> {
    Arc::new(client_config(provider(), TrustMode::Watched(verifier.clone()), None).unwrap())
}

async fn verifier(
    api: &impl ApiServerUnderTest,
    ns: &str,
    recorder: Arc<dyn ReloadRecorder<TrustOrigin, TrustAnchors>>,
    clock: &ManualClock,
) -> TrustVerifier {
    TrustVerifier::builder(api.admin_client(), SecretRef::new(ns, CA_NAME))
        .settings(svc_tls::trust::TrustSettings::default().sync_timeout(Duration::from_secs(10)))
        .recorder(recorder)
        .clock(Arc::new(clock.clone()))
        .build()
        .await
        .unwrap()
}

/// Whether the verifier's cache holds exactly this `ca.crt`.
fn cached_ca_is(verifier: &TrustVerifier, ca_crt: &str) -> bool {
    verifier
        .secret_source()
        .unwrap()
        .get()
        .and_then(|s| s.data.as_ref()?.get("ca.crt").cloned())
        .is_some_and(|b| b.0 == ca_crt.as_bytes())
}

/// Records the verifier's state changes.
#[derive(Debug, Default)]
struct Recorded {
    loads: Mutex<Vec<usize>>,
    failures: AtomicU64,
    probe_failures: AtomicU64,
    warnings: Mutex<Vec<(u64, Duration, usize)>>,
}

impl ReloadRecorder<TrustOrigin, TrustAnchors> for Recorded {
    fn loaded(&self, _: &TrustOrigin, anchors: &TrustAnchors, _: std::time::SystemTime) {
        self.loads.lock().unwrap().push(anchors.len());
    }
    fn reload_failed(&self, _: &TrustOrigin, _: &TrustReloadError, n: u64) {
        self.failures.store(n, Ordering::SeqCst);
    }
    fn probe_read_failed(&self, _: &TrustOrigin, _: &TrustReloadError) {
        self.probe_failures.fetch_add(1, Ordering::SeqCst);
    }
    fn stale_warning(&self, w: &StaleWarning<'_, TrustOrigin, TrustAnchors>) {
        self.warnings
            .lock()
            .unwrap()
            .push((w.suppressed, w.stale_for, w.serving.len()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_rotation_under_continuous_load_fails_no_request() {
    let tb = Testbed::start().await;
    let (ca_a, ca_b) = (TestCa::new("server CA A"), TestCa::new("server CA B"));
    tb.upsert(ca_secret(&ca_a.pem(), &ca_a.pem()));
    let server = switching_server(&ca_a).await;

    // Through the flags, as a service builds it; no client certificate.
    let peer = PeerOptions::new("identity")
        .with_ca_secret(NS, CA_NAME)
        .with_pool_idle_timeout(Duration::ZERO);
    let tls = from_options_scoped(
        &tb.cluster_client(),
        &peer,
        &ClientIdentityOptions::new(None),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let trust = tls.trust_verifier().unwrap().clone();
    assert_eq!(trust.state().roots, 1);

    // Continuous load: a bounded loop of requests, each on a new connection (no idle
    // connection is kept and the server closes every connection).
    let done = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let load = tokio::spawn({
        let (http, url) = (tls.reqwest_client().unwrap(), server.url());
        let (done, ok, failed) = (done.clone(), ok.clone(), failed.clone());
        async move {
            for _ in 0..100_000 {
                if done.load(Ordering::SeqCst) {
                    break;
                }
                match http.get(&url).send().await {
                    Ok(r) if r.status().is_success() => {
                        ok.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(r) => failed.lock().unwrap().push(r.status().to_string()),
                    Err(e) => failed.lock().unwrap().push(format!("{e:?}")),
                }
            }
        }
    });
    let more = |n: u64| {
        let target = server.handshakes() + n;
        let server = &server;
        async move {
            poll_until("the load reaches the server", || {
                server.handshakes() >= target
            })
            .await;
        }
    };
    more(5).await;

    // cert-manager: ca.crt holds the old and the new CA.
    let both = format!("{}{}", ca_a.pem(), ca_b.pem());
    tb.upsert(ca_secret(&ca_a.pem(), &both));
    poll_until("the cache sees A+B", || cached_ca_is(&trust, &both)).await;
    more(5).await;
    // The server moves to a B-issued certificate.
    server.set_server_ca(&ca_b);
    more(10).await;
    assert_eq!(trust.state().roots, 2);
    // Then the new CA only.
    tb.upsert(ca_secret(&ca_b.pem(), &ca_b.pem()));
    poll_until("the cache sees B only", || {
        cached_ca_is(&trust, &ca_b.pem())
    })
    .await;
    more(10).await;
    done.store(true, Ordering::SeqCst);
    load.await.unwrap();

    assert_eq!(failed.lock().unwrap().clone(), Vec::<String>::new());
    assert!(ok.load(Ordering::SeqCst) >= 30);
    let state = trust.state();
    assert_eq!((state.roots, state.failures, state.stale), (1, 0, false));

    // Afterwards only the new CA: an A-issued server is refused.
    server.set_server_ca(&ca_a);
    let config = Arc::new(tls.config().unwrap());
    let err = call(config.clone(), server.addr).await.unwrap_err();
    assert!(err.starts_with("handshake:"), "{err}");
    server.set_server_ca(&ca_b);
    call(config, server.addr).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_handshakes_while_the_ca_secret_flips_verify_against_whole_root_sets() {
    let tb = Arc::new(Testbed::start().await);
    let (ca_a, ca_b) = (TestCa::new("server CA A"), TestCa::new("server CA B"));
    // Both versions trust A and B (ca.crt; with it, tls.crt is no root), the second
    // a third CA too, each with another tls.crt: a set mixing parts of two versions,
    // or taking tls.crt as a root, would not be one whole version's set.
    let ca_c = TestCa::new("server CA C");
    let (ab, abc) = (
        format!("{}{}", ca_a.pem(), ca_b.pem()),
        format!("{}{}{}", ca_a.pem(), ca_b.pem(), ca_c.pem()),
    );
    let v1 = ca_secret(&ca_c.pem(), &ab);
    let v2 = ca_secret(&ca_a.pem(), &abc);
    tb.upsert(v1.clone());
    let (server_a, server_b) = (switching_server(&ca_a).await, switching_server(&ca_b).await);
    let clock = ManualClock::new();
    let recorded = Arc::new(Recorded::default());
    let trust = verifier(&*tb, NS, recorded.clone(), &clock).await;
    let config = watched(&trust);

    let done = Arc::new(AtomicBool::new(false));
    let flipper = tokio::spawn({
        let (tb, done) = (tb.clone(), done.clone());
        async move {
            let mut flips = 0u32;
            while !done.load(Ordering::SeqCst) {
                let version = if flips.is_multiple_of(2) { &v2 } else { &v1 };
                tb.upsert(version.clone());
                flips += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            flips
        }
    });
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let config = config.clone();
            let addrs = [server_a.addr, server_b.addr];
            tokio::spawn(async move {
                let mut results = Vec::new();
                for n in 0..40 {
                    results.push(call(config.clone(), addrs[(i + n) % 2]).await);
                }
                results
            })
        })
        .collect();
    let results = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(clients))
        .await
        .expect("no deadlock: all handshakes finish");
    done.store(true, Ordering::SeqCst);
    let flips = flipper.await.unwrap();
    assert!(flips > 1, "the Secret flipped during the run");
    for result in results.into_iter().flat_map(|r| r.unwrap()) {
        result.expect("every handshake verifies against one whole root set");
    }
    assert!(
        recorded.loads.lock().unwrap().len() > 1,
        "the roots were rebuilt during the run"
    );
    assert!(
        recorded
            .loads
            .lock()
            .unwrap()
            .iter()
            .all(|n| *n == 2 || *n == 3)
    );
    assert_eq!(trust.state().failures, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_fails_on_a_missing_or_malformed_ca_secret_naming_it() {
    let tb = Testbed::start().await;
    let me = ClientIdentityOptions::new(None);
    let peer = PeerOptions::new("identity").with_ca_secret(NS, CA_NAME);
    let client = tb.cluster_client();
    let start = || from_options_scoped(&client, &peer, &me, Duration::from_secs(10));

    let err = start().await.unwrap_err();
    assert!(
        matches!(
            err,
            PeerClientError::CaTrust(TrustError::Unusable(TrustReloadError::NotFound { .. }))
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("CA Secret {NS}/{CA_NAME} not found")
    );

    tb.upsert(secret_with(
        CA_NAME,
        "kubernetes.io/tls",
        &[("ca.crt", "x")],
    ));
    let err = start().await.unwrap_err();
    assert!(
        matches!(
            err,
            PeerClientError::CaTrust(TrustError::Unusable(TrustReloadError::Material(_)))
        ),
        "{err:?}"
    );
    let text = svc_tls::excerpt::chain(&err);
    assert!(text.contains(&format!("{NS}/{CA_NAME}")), "{text}");
    // With ca.crt present it alone is read (issue 50): the error names it.
    assert!(text.contains("ca.crt"), "{text}");

    let ca = TestCa::new("server CA");
    tb.upsert(ca_secret(&ca.pem(), ""));
    let tls = start().await.unwrap();
    assert!(matches!(tls.trust(), TrustMode::Watched(_)));
    // Platform trust when no CA Secret is configured: unchanged.
    let tls = from_options_scoped(
        &tb.cluster_client(),
        &PeerOptions::new("identity"),
        &me,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert!(matches!(tls.trust(), TrustMode::Platform));
}

/// Readiness over a CA Secret reads it once per report, as a handshake does, and its
/// reason quotes that read's error: with the Secret broken and no handshake made, the
/// check is degraded within the grace and not ready after it, naming the Secret and
/// why its roots are unusable; restored, it is ready. The probe's failed read is
/// recorded as the probe's, not as a reload failure, and warns nothing, but it begins
/// the episode the bound on the last good roots counts from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_names_a_broken_ca_secrets_error_with_no_handshake() {
    use svc_tls::readiness::{Readiness, Verdict};
    let tb = Testbed::start().await;
    let ca = TestCa::new("server CA");
    tb.upsert(ca_secret(&ca.pem(), &ca.pem()));
    let clock = ManualClock::new();
    let recorded = Arc::new(Recorded::default());
    let trust = verifier(&tb, NS, recorded.clone(), &clock).await;
    let readiness = Readiness::new().with_stale_grace(Duration::ZERO);
    readiness.trust("identity-ca", &trust);
    assert!(readiness.report().is_ready(), "{}", readiness.report());

    tb.upsert(ca_secret("not a certificate", "not a certificate"));
    poll_until("the cache sees the broken Secret", || {
        cached_ca_is(&trust, "not a certificate")
    })
    .await;
    let failures_before = trust.state().failures;
    let report = readiness.report();
    assert_eq!(
        trust.state().failures,
        failures_before,
        "the probe's read is not a handshake's reload failure"
    );
    assert!(trust.state().stale, "but the roots are stale");
    assert_eq!(
        recorded.probe_failures.load(Ordering::SeqCst),
        1,
        "one read per report"
    );
    assert_eq!(recorded.failures.load(Ordering::SeqCst), 0);
    assert!(
        recorded.warnings.lock().unwrap().is_empty(),
        "no stale warning"
    );
    match &report.checks[0].verdict {
        Verdict::NotReady { reason } => {
            assert!(reason.contains(&format!("{NS}/{CA_NAME}")), "{reason}");
            assert!(reason.contains("reloading them fails: CA"), "{reason}");
            assert!(!reason.contains("the failure has just cleared"), "{reason}");
        }
        other => panic!("a broken CA Secret past the grace: {other:?}"),
    }
    // The probe's read began the episode of failures: the bound on the last good roots
    // counts from it, so the first handshake-time read a day later is refused.
    clock.advance(svc_tls::trust::DEFAULT_MAX_ROOTS_WITHOUT_SOURCE + Duration::from_secs(1));
    let refused = trust.roots_now().unwrap_err().to_string();
    assert!(
        refused.contains("SourceGone { failing_for: 86401s"),
        "refused, gone since the probe's read: {refused}"
    );
    assert_eq!(
        recorded.failures.load(Ordering::SeqCst),
        1,
        "that read counted"
    );

    tb.upsert(ca_secret(&ca.pem(), &ca.pem()));
    poll_until("the cache sees the restored Secret", || {
        cached_ca_is(&trust, &ca.pem())
    })
    .await;
    assert!(readiness.report().is_ready(), "{}", readiness.report());
}
