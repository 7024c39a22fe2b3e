//! Who may read what: the process's shared watches serve a caller only what its own
//! credentials may read. One cluster, two tokens: the admin's, and a restricted one
//! allowed the other kind only (ConfigMaps for the Secret cases, Secrets for the
//! ConfigMap case). Constructions go through the process's registry
//! (`PeerTls::from_options`), as a service's would, in both orders, for a cache hit
//! and for an object nobody had watched yet.
//!
//! The refusal bodies (`both.rs`) run against kube-testbed and the real
//! kube-apiserver alike (`real_apiserver::both!`: RBAC Roles on the real server, the
//! emulator's rules on the other); the ones here count requests or revoke a token
//! mid-watch, and are the emulator's alone (see docs/testing.md, "One suite, two servers").
//!
//! Before the registry keyed its entries by credential, the restricted caller was
//! served the admin's cached Secrets (private key included), its new watches ran
//! under the admin's token, and a refused first caller locked the admin out of the
//! cluster for the life of the process.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../support/mod.rs"]
mod support;

mod both;

use std::time::Duration;

use kube_testbed::{Rule, Testbed};
use support::*;
use svc_tls::ClusterClient;
use svc_tls::watch::WatchedObjects;

const CA: &str = "identity-ca";
const IDENTITY: &str = "region-client-certificate";
const OTHER_CA: &str = "other-ca";
const OTHER_IDENTITY: &str = "other-client-certificate";
const BUNDLE: &str = "platform-ca-bundle";
const TIMEOUT: Duration = Duration::from_secs(10);

fn client(tb: &Testbed, token: &str) -> ClusterClient {
    ClusterClient::try_from_config(tb.config_for_token(token)).unwrap()
}

fn admin(tb: &Testbed) -> ClusterClient {
    client(tb, &tb.token())
}

/// Two callers with the same credentials share one watch per Secret (the registry's
/// reason to exist); two with different credentials each have their own, under their
/// own token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_watch_per_secret_and_credential() {
    let tb = Testbed::start().await;
    let ca = TestCa::new("server CA");
    tb.upsert(secret_with(
        CA,
        "kubernetes.io/tls",
        &[("tls.crt", &ca.pem()), ("ca.crt", &ca.pem())],
    ));
    let watches = WatchedObjects::new();
    let secret = svc_tls::SecretRef::new(NS, CA);
    let reader = "token-secrets-reader-2";
    tb.add_token(
        reader,
        vec![Rule::new(&["get", "list", "watch"], "", "secrets").namespace(NS)],
    );
    let lists = tb.requests("list");
    for _ in 0..3 {
        watches
            .watch_trust(&admin(&tb), &secret, TIMEOUT)
            .await
            .unwrap();
    }
    assert_eq!(
        tb.requests("list"),
        lists + 1,
        "one watch for one credential"
    );
    poll_until("the admin's watch is open", || tb.open_watches() == 1).await;
    for _ in 0..3 {
        watches
            .watch_trust(&client(&tb, reader), &secret, TIMEOUT)
            .await
            .unwrap();
    }
    assert_eq!(
        tb.requests("list"),
        lists + 2,
        "a second credential, a second watch"
    );
    poll_until("both watches are open", || tb.open_watches() == 2).await;
}

/// The server certificate `ca` issued, checked by `trust` as a handshake would.
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

/// A credential revoked while its watch runs: its callers keep the last good roots
/// for the bound a deleted CA Secret gets, then fail closed (typed, counted); a
/// permitted caller of the same cluster and Secret keeps following CA rotations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_credential_fails_trust_closed_after_the_bound_and_nobody_else() {
    use svc_tls::testing::ManualClock;
    use svc_tls::trust::TrustVerifier;

    let tb = Testbed::start().await;
    let (ca_a, ca_b) = (TestCa::new("server CA A"), TestCa::new("server CA B"));
    let ca_secret = |ca: &TestCa| {
        secret_with(
            CA,
            "kubernetes.io/tls",
            &[("tls.crt", &ca.pem()), ("ca.crt", &ca.pem())],
        )
    };
    tb.upsert(ca_secret(&ca_a));
    let doomed = "token-to-be-revoked-5d1e";
    tb.add_token(
        doomed,
        vec![Rule::new(&["get", "list", "watch"], "", "secrets").namespace(NS)],
    );
    let watches = WatchedObjects::new();
    let limit = Duration::from_secs(600);
    let build = |caller: ClusterClient, clock: ManualClock| {
        let watches = watches.clone();
        async move {
            TrustVerifier::builder(caller.kube().clone(), svc_tls::SecretRef::new(NS, CA))
                .watches(&watches, &caller)
                .clock(std::sync::Arc::new(clock))
                .settings(svc_tls::trust::TrustSettings::default().max_roots_without_source(limit))
                .build()
                .await
                .unwrap()
        }
    };
    let (revoked_clock, admin_clock) = (ManualClock::new(), ManualClock::new());
    let revoked = build(client(&tb, doomed), revoked_clock.clone()).await;
    let permitted = build(admin(&tb), admin_clock.clone()).await;
    let (server_a, server_b) = (ca_a.server_leaf(), ca_b.server_leaf());
    verify(&revoked, &server_a).unwrap();
    verify(&permitted, &server_a).unwrap();

    tb.revoke_token(doomed);
    poll_until("the revoked caller's watch is refused", || {
        revoked.secret_source().and_then(|s| s.refused_now()) == Some(401)
    })
    .await;
    assert_eq!(
        permitted.secret_source().and_then(|s| s.refused_now()),
        None,
        "the permitted caller's watch runs under its own token"
    );
    // Within the bound: the last good roots, counted as a failure.
    verify(&revoked, &server_a).expect("the last good roots within the bound");
    assert!(
        revoked.state().failures >= 1,
        "the refusal is a failed reload"
    );
    assert!(revoked.state().stale);
    // Past the bound: every server refused, saying why.
    revoked_clock.advance(limit + Duration::from_secs(1));
    let refused = verify(&revoked, &server_a).expect_err("trust must fail closed past the bound");
    assert!(refused.contains("AccessRefused"), "{refused}");
    assert!(refused.contains("401"), "{refused}");

    // The permitted caller follows a rotation to CA B all along.
    tb.upsert(ca_secret(&ca_b));
    poll_until("the permitted caller's cache sees CA B", || {
        verify(&permitted, &server_b).is_ok()
    })
    .await;
    assert!(
        verify(&permitted, &server_a).is_err(),
        "CA A is no longer trusted"
    );
    assert!(!permitted.state().stale);
}

/// A refused watch has a bound of its own when one is set
/// ([`TrustSettings::max_roots_while_refused`](svc_tls::trust::TrustSettings::max_roots_while_refused)):
/// past it every server is refused, though a deleted Secret would still be within
/// [`max_roots_without_source`](svc_tls::trust::TrustSettings::max_roots_without_source).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_watch_fails_closed_past_its_own_bound() {
    use svc_tls::testing::ManualClock;
    use svc_tls::trust::{TrustSettings, TrustVerifier};

    let tb = Testbed::start().await;
    let ca = TestCa::new("server CA");
    tb.upsert(secret_with(
        CA,
        "kubernetes.io/tls",
        &[("tls.crt", &ca.pem()), ("ca.crt", &ca.pem())],
    ));
    let doomed = "token-to-be-revoked-77a0";
    tb.add_token(
        doomed,
        vec![Rule::new(&["get", "list", "watch"], "", "secrets").namespace(NS)],
    );
    let watches = WatchedObjects::new();
    let caller = client(&tb, doomed);
    let clock = ManualClock::new();
    let refused_bound = Duration::from_secs(300);
    let trust = TrustVerifier::builder(caller.kube().clone(), svc_tls::SecretRef::new(NS, CA))
        .watches(&watches, &caller)
        .clock(std::sync::Arc::new(clock.clone()))
        .settings(
            TrustSettings::default()
                .max_roots_without_source(Duration::from_secs(24 * 60 * 60))
                .max_roots_while_refused(refused_bound),
        )
        .build()
        .await
        .unwrap();
    let server = ca.server_leaf();
    verify(&trust, &server).unwrap();

    tb.revoke_token(doomed);
    poll_until("the caller's watch is refused", || {
        trust.secret_source().and_then(|s| s.refused_now()) == Some(401)
    })
    .await;
    verify(&trust, &server).expect("the last good roots within the refusal bound");
    clock.advance(refused_bound + Duration::from_secs(1));
    let refused = verify(&trust, &server).expect_err("past the refusal bound");
    assert!(refused.contains("AccessRefused"), "{refused}");
    assert!(refused.contains("300s"), "{refused}");
}
