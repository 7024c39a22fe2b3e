//! Trust that is withdrawn is no longer trusted: a SPIFFE trust domain removed from
//! the Workload API's bundles (de-federation) is refused on the next handshake, while
//! a Workload API that is only unreachable leaves the last good roots in use. Against
//! two Workload API emulators (two trust domains, one federated into the other) and a
//! TLS server that verifies client certificates.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use spiffe_testbed::WorkloadApi;
use svc_tls::client::PeerTls;
use svc_tls::material::crypto_provider;
use svc_tls::spiffe::{SpiffeEndpoint, SpiffeId, WorkloadApiSource};
use test_support::pki::TestCa;
use test_support::poll_until;
use test_support::tls_server::VerifyingServer;

const CLIENT_ID: &str = "spiffe://example.org/ns/unikorn/sa/region";
const FOREIGN_SERVER: &str = "spiffe://other.org/ns/partner/sa/api";

async fn call(tls: &PeerTls) -> Result<String, String> {
    let http = tls.reqwest_client().map_err(|e| e.to_string())?;
    let response = http
        .get(tls.host().map_err(|e| e.to_string())?.clone())
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    Ok(response
        .text()
        .await
        .map_err(|e| e.to_string())?
        .trim()
        .to_owned())
}

struct Federation {
    home: WorkloadApi,
    foreign: WorkloadApi,
    _server: VerifyingServer,
    tls: PeerTls,
}

/// A workload of example.org calling a server of other.org, whose bundle example.org's
/// agent sends as a federated bundle.
async fn federation() -> Federation {
    let home = WorkloadApi::start("example.org").await;
    home.set_workload_id(CLIENT_ID);
    let foreign = WorkloadApi::start("other.org").await;
    home.set_federated_bundle("other.org", foreign.bundle());
    let svid = foreign.issue(FOREIGN_SERVER);
    let unused = TestCa::new("unused");
    let server = VerifyingServer::builder(&unused, &unused)
        .server_chain(svid.chain.clone(), &svid.key_pem())
        .client_roots(home.bundle())
        .keep_alive(true)
        .start()
        .await;
    let workload = WorkloadApiSource::connect(
        SpiffeEndpoint::parse(&home.endpoint()).unwrap(),
        Arc::new(crypto_provider()),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let tls = PeerTls::for_spiffe_id(&workload, SpiffeId::new(FOREIGN_SERVER).unwrap())
        .unwrap()
        .with_host(server.url().parse().unwrap());
    Federation {
        home,
        foreign,
        _server: server,
        tls,
    }
}

async fn eventually_refused(tls: &PeerTls) {
    for _ in 0..200 {
        if call(tls).await.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server of the withdrawn trust domain is still accepted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_trust_domain_is_refused_at_once_and_trusted_again_when_it_returns() {
    let f = federation().await;
    assert!(call(&f.tls).await.is_ok(), "federated: accepted");

    // De-federation: the agent stops sending other.org's bundle.
    f.home.set_federated_bundle("other.org", Vec::new());
    eventually_refused(&f.tls).await;
    let state = f.tls.trust_verifier().unwrap().state();
    assert!(state.withdrawn, "{state:?}");
    assert!(state.stale);

    // Federated again: accepted on the next handshake.
    f.home.set_federated_bundle("other.org", f.foreign.bundle());
    for _ in 0..200 {
        if call(&f.tls).await.is_ok() {
            assert!(!f.tls.trust_verifier().unwrap().state().withdrawn);
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("re-federated trust domain still refused");
}

/// A withdrawn domain stays withdrawn while the agent's streams are down, while it
/// refuses reconnects and across its restart: the last good roots it withdrew never
/// come back from an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withdrawn_domain_stays_refused_through_stream_loss_and_agent_restart() {
    let f = federation().await;
    assert!(call(&f.tls).await.is_ok(), "federated: accepted");
    f.home.set_federated_bundle("other.org", Vec::new());
    eventually_refused(&f.tls).await;

    f.home.deny(true);
    f.home.drop_streams();
    poll_until("the stream is seen down", || {
        f.tls
            .trust_verifier()
            .unwrap()
            .state()
            .watch_error
            .is_some()
    })
    .await;
    for attempt in 0..5 {
        assert!(
            call(&f.tls).await.is_err(),
            "refused while down ({attempt})"
        );
    }
    assert!(f.tls.trust_verifier().unwrap().state().withdrawn);

    f.home.restart().await;
    for attempt in 0..5 {
        assert!(
            call(&f.tls).await.is_err(),
            "refused across a restart ({attempt})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(f.tls.trust_verifier().unwrap().state().withdrawn);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_workload_api_keeps_the_last_good_roots() {
    let f = federation().await;
    assert!(call(&f.tls).await.is_ok());
    // The agent refuses this workload and its stream ends: not an authoritative
    // removal, so the last good roots stay in use.
    f.home.deny(true);
    f.home.drop_streams();
    poll_until("the stream is seen down", || {
        f.tls
            .trust_verifier()
            .unwrap()
            .state()
            .watch_error
            .is_some()
    })
    .await;
    assert_eq!(
        call(&f.tls).await.map(|_| ()),
        Ok(()),
        "last good roots used"
    );
    assert!(!f.tls.trust_verifier().unwrap().state().withdrawn);
}

/// A CA Secret deleted while its watch is healthy keeps the last good roots (see
/// docs/decisions/trust-withdrawn.md), but never past the roots' own
/// `notAfter`: after that every server is refused, naming when they expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_good_roots_are_not_used_past_their_not_after() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyUsagePurpose};
    use svc_tls::client::{TrustMode, client_config};
    use svc_tls::{SecretRef, TrustVerifier};
    use test_support::tls_server::request;

    let tb = kube_testbed::Testbed::start().await;
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let expires = test_support::pki::valid_around_now(
        &mut params,
        Duration::from_secs(3600),
        Duration::from_secs(3),
    );
    let server_ca = TestCa::from_params(params);
    let server = VerifyingServer::builder(&server_ca, &server_ca)
        .no_client_auth()
        .start()
        .await;
    tb.upsert(test_support::secret::secret_with(
        "unikorn",
        "short-ca",
        "kubernetes.io/tls",
        &[("tls.crt", &server_ca.pem())],
    ));
    let trust = TrustVerifier::builder(tb.client(), SecretRef::new("unikorn", "short-ca"))
        .build()
        .await
        .unwrap();
    let config = Arc::new(
        client_config(
            Arc::new(crypto_provider()),
            TrustMode::Watched(trust.clone()),
            None,
        )
        .unwrap(),
    );
    request(config.clone(), server.addr).await.unwrap();

    // Deleted while the watch is healthy: the last good roots stay in use...
    tb.delete("v1", "Secret", "unikorn", "short-ca");
    poll_until("the cache sees the deletion", || {
        trust.secret_source().unwrap().get().is_none()
    })
    .await;
    request(config.clone(), server.addr).await.unwrap();
    assert!(trust.state().stale);

    // ...until they expire: the clock past their notAfter, by the second certificate
    // times are counted in.
    poll_until("the clock past the roots' notAfter", || {
        std::time::SystemTime::now() > expires + Duration::from_secs(1)
    })
    .await;
    let refused = request(config.clone(), server.addr).await.unwrap_err();
    assert!(refused.to_lowercase().contains("expired"), "{refused}");
}

/// A deleted CA Secret's roots have a bounded life: past the verifier's limit every
/// server is refused, naming the limit; the Secret coming back restores trust.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_of_a_deleted_ca_secret_fail_closed_after_the_limit() {
    use svc_tls::client::{TrustMode, client_config};
    use svc_tls::testing::ManualClock;
    use svc_tls::{SecretRef, TrustVerifier};
    use test_support::tls_server::request;

    let tb = kube_testbed::Testbed::start().await;
    let server_ca = TestCa::new("bounded");
    let server = VerifyingServer::builder(&server_ca, &server_ca)
        .no_client_auth()
        .start()
        .await;
    let secret = test_support::secret::secret_with(
        "unikorn",
        "bounded-ca",
        "kubernetes.io/tls",
        &[("tls.crt", &server_ca.pem())],
    );
    tb.upsert(secret.clone());
    let clock = ManualClock::new();
    let trust = TrustVerifier::builder(tb.client(), SecretRef::new("unikorn", "bounded-ca"))
        .clock(Arc::new(clock.clone()))
        .settings(
            svc_tls::trust::TrustSettings::default()
                .max_roots_without_source(Duration::from_secs(600)),
        )
        .build()
        .await
        .unwrap();
    let config = Arc::new(
        client_config(
            Arc::new(crypto_provider()),
            TrustMode::Watched(trust.clone()),
            None,
        )
        .unwrap(),
    );
    request(config.clone(), server.addr).await.unwrap();

    tb.delete("v1", "Secret", "unikorn", "bounded-ca");
    poll_until("the cache sees the deletion", || {
        trust.secret_source().unwrap().get().is_none()
    })
    .await;
    request(config.clone(), server.addr).await.unwrap();
    clock.advance(Duration::from_secs(599));
    request(config.clone(), server.addr)
        .await
        .expect("within the limit: the last good roots");
    clock.advance(Duration::from_secs(2));
    let refused = request(config.clone(), server.addr).await.unwrap_err();
    assert!(refused.contains("600s"), "{refused}");

    tb.upsert(secret);
    poll_until("the cache sees the Secret again", || {
        trust.secret_source().unwrap().get().is_some()
    })
    .await;
    request(config.clone(), server.addr)
        .await
        .expect("trusted again once readable");
}

/// A pooled client's kept-alive connection to a server of the withdrawn domain takes
/// no request once the de-federation reached the process: callers get
/// `TrustChanged`, withdrawn, and each request after it tries a new connection that
/// our client refuses at the handshake. (On an idle machine the Workload API stream
/// delivers it well within a second; the test waits for the delivery itself, not a
/// fixed second, because a loaded CI machine once took longer: what the pool owes is
/// to retire on the first request after it.)
///
/// Counted by requests the server received, not by handshakes it completed: hyper's
/// pool may finish a connection it started while the previous one was returning to
/// the pool (a request races the checkout against a connect and keeps the loser), so
/// a handshake verified under the old trust can complete after the warm-up; it takes
/// no request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_connection_to_a_withdrawn_domain_takes_no_request_once_it_is_delivered() {
    use svc_tls::client::PeerRequestError;
    let f = federation().await;
    let peer = f.tls.client().unwrap();
    let url = f.tls.host().unwrap().clone();
    let mut connections = Vec::new();
    for _ in 0..3 {
        // Read the body: hyper returns a connection to the pool only once its
        // response has been read to the end.
        let response = peer.send(peer.get(url.clone()).unwrap()).await.unwrap();
        connections.push(
            response.headers()["x-connection"]
                .to_str()
                .unwrap()
                .to_owned(),
        );
        response.text().await.unwrap();
    }
    let mut distinct = connections.clone();
    distinct.sort();
    distinct.dedup();
    assert!(
        distinct.len() < connections.len(),
        "kept alive: a connection carried two requests ({connections:?})"
    );
    assert_eq!(f._server.requests(), 3);

    f.home.set_federated_bundle("other.org", Vec::new());
    let verifier = f.tls.trust_verifier().unwrap();
    poll_until("the withdrawal delivered by the stream", || {
        verifier.is_withdrawn()
    })
    .await;
    let rejected = f._server.rejected();
    for _ in 0..5 {
        match peer.send(peer.get(url.clone()).unwrap()).await {
            Err(PeerRequestError::TrustChanged {
                withdrawn, trust, ..
            }) => {
                assert!(withdrawn, "{trust}");
                assert!(trust.to_string().contains("other.org"), "{trust}");
            }
            other => panic!("a request after the withdrawal: {other:?}"),
        }
    }
    assert_eq!(
        f._server.requests(),
        3,
        "no request reached the withdrawn server ({} pools retired)",
        peer.retired_pools()
    );
    poll_until("each request's new handshake refused by our client", || {
        f._server.rejected() >= rejected + 5
    })
    .await;
}

/// Readiness in SPIFFE mode judges the trust bundle as well as the SVID: the workload
/// is ready while the peer's domain is federated, not ready (saying the trust was
/// withdrawn) once the agent stops sending its bundle, and ready again when it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_a_withdrawn_and_returned_trust_domain() {
    use svc_tls::readiness::{Readiness, Verdict};
    let f = federation().await;
    // A grace for stale roots, so that only the withdrawal itself makes it not ready.
    let readiness = Readiness::new().with_stale_grace(Duration::from_secs(600));
    readiness.trust("trust", f.tls.trust_verifier().unwrap());
    let report = readiness.report();
    assert!(report.is_ready(), "federated: {report}");

    f.home.set_federated_bundle("other.org", Vec::new());
    poll_until("the withdrawal seen by readiness", || {
        !readiness.report().is_ready()
    })
    .await;
    let report = readiness.report();
    match &report.checks[0].verdict {
        Verdict::NotReady { reason } => {
            assert!(reason.contains("every server is refused"), "{reason}");
            assert!(reason.contains("other.org"), "{reason}");
        }
        other => panic!("withdrawn: {other:?}"),
    }

    f.home.set_federated_bundle("other.org", f.foreign.bundle());
    poll_until("the returned domain seen by readiness", || {
        readiness.report().is_ready()
    })
    .await;
}
