//! Settings passed alongside the options reach what the options build: the flags path
//! assembles its verifiers and resolvers through the halves' builders (issue 53), so a
//! service configured by flags sets what flags do not say.

use std::sync::Arc;
use std::time::Duration;

use svc_tls::SecretRef;
use svc_tls::client::{PeerTls, PeerTlsSettings, TrustMode, client_config};
use svc_tls::material::crypto_provider;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::spiffe::WorkloadApiStreams;
use svc_tls::trust::TrustSettings;
use svc_tls::watch::WatchedObjects;
use test_support::pki::TestCa;
use test_support::poll_until;
use test_support::tls_server::{VerifyingServer, request};

/// The same `--region-ca-secret-*` flags built twice: once with a bound of zero on
/// roots without their Secret, once with the default settings (a day). The two are
/// two verifiers (settings are part of what the registry keeps one of); once the CA
/// Secret is deleted, the bounded one refuses every server, naming its bound, and the
/// default one keeps the last good roots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trust_settings_reach_a_verifier_built_from_flags() {
    let tb = kube_testbed::Testbed::start().await;
    let server_ca = TestCa::new("flags");
    let server = VerifyingServer::builder(&server_ca, &server_ca)
        .no_client_auth()
        .start()
        .await;
    tb.upsert(test_support::secret::secret_with(
        "unikorn",
        "flags-ca",
        "kubernetes.io/tls",
        &[("tls.crt", &server_ca.pem())],
    ));
    let peer = PeerOptions::new("region")
        .with_host_value(server.url())
        .with_ca_secret("unikorn", "flags-ca");
    let me = ClientIdentityOptions::new(None);
    let (watches, streams, cluster) = (
        WatchedObjects::new(),
        WorkloadApiStreams::new(),
        tb.cluster_client(),
    );
    let timeout = Duration::from_secs(10);
    let build = |settings: PeerTlsSettings| {
        let (watches, streams, cluster, peer, me) = (&watches, &streams, &cluster, &peer, &me);
        async move {
            PeerTls::from_options_in_with(watches, streams, cluster, peer, me, &settings)
                .await
                .unwrap()
                .trust_verifier()
                .cloned()
                .unwrap()
        }
    };
    let mut bounded = PeerTlsSettings::default().sync_timeout(timeout);
    bounded.trust = bounded.trust.max_roots_without_source(Duration::ZERO);
    let bounded = build(bounded).await;
    let defaults = build(PeerTlsSettings::default().sync_timeout(timeout)).await;
    assert!(
        !bounded.ptr_eq(&defaults),
        "other settings, another verifier"
    );
    let again = build(PeerTlsSettings::default().sync_timeout(timeout)).await;
    assert!(defaults.ptr_eq(&again), "the same settings share one");
    assert_eq!(
        TrustSettings::default().max_roots_without_source,
        Duration::from_secs(24 * 60 * 60)
    );

    let config = |trust| {
        Arc::new(
            client_config(Arc::new(crypto_provider()), TrustMode::Watched(trust), None).unwrap(),
        )
    };
    request(config(bounded.clone()), server.addr).await.unwrap();
    request(config(defaults.clone()), server.addr)
        .await
        .unwrap();

    // The entry both verifiers follow: its loader has told them of the deletion once
    // its count moves.
    let shared = watches
        .watch_trust(&cluster, &SecretRef::new("unikorn", "flags-ca"), timeout)
        .await
        .unwrap();
    let loaded = shared.loaded_changes();
    tb.delete("v1", "Secret", "unikorn", "flags-ca");
    poll_until("the deletion loaded", || shared.loaded_changes() > loaded).await;
    assert!(bounded.secret_source().unwrap().get().is_none());

    let refused = request(config(bounded), server.addr).await.unwrap_err();
    assert!(
        refused.contains("SourceGone") && refused.contains("limit: 0ns"),
        "{refused}"
    );
    request(config(defaults), server.addr)
        .await
        .expect("the default settings keep the last good roots");
}

/// A builder over a source of the caller's reads no object: a registry set on it is
/// refused with a typed error naming the source, not silently left unused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_on_a_source_builder_is_an_error_not_ignored() {
    use svc_tls::trust::{ServerAuthorization, TrustError, WatchedTrustSource};
    use svc_tls::watch::{Secret, WatchedObject};
    use svc_tls::{TrustOrigin, TrustVerifier};

    let tb = kube_testbed::Testbed::start().await;
    let ca = TestCa::new("source");
    tb.upsert(test_support::secret::secret_with(
        "unikorn",
        "source-ca",
        "kubernetes.io/tls",
        &[("tls.crt", &ca.pem())],
    ));
    let secret = SecretRef::new("unikorn", "source-ca");
    let watched =
        WatchedObject::<Secret>::watch(tb.client(), secret.clone(), Duration::from_secs(10))
            .await
            .unwrap();
    let source = Arc::new(WatchedTrustSource::<Secret>::new(watched));
    let err = TrustVerifier::source_builder(source.clone(), ServerAuthorization::HostName)
        .watches(&WatchedObjects::new(), &tb.cluster_client())
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, TrustError::SharedSource { origin } if *origin == TrustOrigin::Secret(secret)),
        "{err:?}"
    );
    assert!(err.to_string().contains(".watches("), "{err}");
    // The same source without a registry builds.
    let trust = TrustVerifier::source_builder(source, ServerAuthorization::HostName)
        .build()
        .await
        .unwrap();
    assert_eq!(trust.state().roots, 1);
}
