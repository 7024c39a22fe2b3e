//! The ClusterTrustBundle bodies that run against kube-testbed and the real
//! kube-apiserver alike (`ApiServerUnderTest`): a signer's bundles trusted together
//! and nothing else (with and without a label selector), a replaced bundle and an
//! added one followed on the next handshake through the flags and the registry, the
//! empty set keeping the last good roots for the bound and then refusing, and the
//! serving half verifying callers against a signer's bundles.

use std::sync::Arc;
use std::time::Duration;

use real_apiserver::ApiServerUnderTest;
use svc_tls::IdentityResolver;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::origin::{ClusterTrustBundlesRef, SecretRef, TrustOrigin};
use svc_tls::serving::{ClientAuth, ServerTls};
use svc_tls::testing::ManualClock;
use svc_tls::trust::{
    ClusterTrustBundleProblem, TrustError, TrustReloadError, TrustSettings, TrustVerifier,
};

use crate::support::{TestCa, from_options_scoped, poll_until};
use crate::{TIMEOUT, bundle, bundle_name, cached_bundle_holds, call, server, signer, watched};

/// `body` against the emulator and the real API server (shared by the binary's
/// tests: each body uses a signer of its own), as two tests.
macro_rules! both {
    ($body:ident) => {
        mod $body {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn kube_testbed() {
                let tb = kube_testbed::Testbed::start().await;
                super::$body(&tb, "ctb-trust").await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn kube_apiserver() {
                let ns = format!("ctb-trust-{:08x}", fastrand::u32(..));
                super::$body(real_apiserver::shared(), &ns).await;
            }
        }
    };
}

both!(a_signers_bundles_are_trusted_together_and_nothing_else);
both!(a_replaced_bundle_and_an_added_one_are_followed_on_the_next_handshake);
both!(an_empty_set_keeps_the_last_good_roots_for_the_bound_then_refuses);
both!(the_serving_half_verifies_callers_against_a_signers_bundles);

async fn verifier_on(
    api: &impl ApiServerUnderTest,
    bundles: ClusterTrustBundlesRef,
) -> Result<TrustVerifier, TrustError> {
    TrustVerifier::cluster_trust_bundles_builder(api.admin_client(), bundles)
        .settings(TrustSettings::default().sync_timeout(TIMEOUT))
        .build()
        .await
}

async fn a_signers_bundles_are_trusted_together_and_nothing_else(
    api: &impl ApiServerUnderTest,
    _ns: &str,
) {
    let (signer, other_signer) = (signer(), signer());
    let (a, b, c) = (
        TestCa::new("CA a"),
        TestCa::new("CA b"),
        TestCa::new("CA c"),
    );
    let other = TestCa::new("another signer's CA");
    api.apply(bundle(&signer, "a", &a.pem(), &[])).await;
    api.apply(bundle(&signer, "b", &b.pem(), &[("tier", "prod")]))
        .await;
    api.apply(bundle(&signer, "c", &c.pem(), &[("tier", "dev")]))
        .await;
    api.apply(bundle(
        &other_signer,
        "a",
        &other.pem(),
        &[("tier", "prod")],
    ))
    .await;

    let all = ClusterTrustBundlesRef::new(&signer).unwrap();
    let verifier = verifier_on(api, all.clone()).await.unwrap();
    let state = verifier.state();
    assert_eq!(state.roots, 3, "{}: the signer's three bundles", api.name());
    assert_eq!(
        state.origin,
        TrustOrigin::ClusterTrustBundles(Box::new(all))
    );
    assert_eq!(
        state.origin.to_string(),
        format!("ClusterTrustBundles signer={signer}")
    );
    let members = verifier
        .cluster_trust_bundles_source()
        .unwrap()
        .get()
        .unwrap()
        .metadata
        .annotations
        .clone()
        .unwrap()[svc_tls::watch::MEMBERS_ANNOTATION]
        .clone();
    assert_eq!(
        members,
        ["a", "b", "c"].map(|s| bundle_name(&signer, s)).join(","),
        "the members, in name order"
    );
    for ca in [&a, &b, &c] {
        call(watched(&verifier), &server(ca).await)
            .await
            .expect("a server of each of the signer's bundles is trusted");
    }
    let untrusted = server(&other).await;
    assert!(
        call(watched(&verifier), &untrusted).await.is_err(),
        "another signer's bundle is not trusted"
    );

    // With a label selector: the signer's matching bundles only.
    let prod = ClusterTrustBundlesRef::new(&signer)
        .unwrap()
        .with_label_selector("tier=prod")
        .unwrap();
    let verifier = verifier_on(api, prod).await.unwrap();
    assert_eq!(verifier.state().roots, 1);
    call(watched(&verifier), &server(&b).await).await.unwrap();
    assert!(call(watched(&verifier), &server(&a).await).await.is_err());
    assert!(call(watched(&verifier), &untrusted).await.is_err());

    // No bundle of a signer: a typed error naming the set, at build time.
    let none = ClusterTrustBundlesRef::new(self::signer()).unwrap();
    match verifier_on(api, none.clone()).await {
        Err(TrustError::Unusable(TrustReloadError::ClusterTrustBundles(error))) => {
            assert_eq!(error.bundles, none);
            assert_eq!(error.problem, ClusterTrustBundleProblem::NoneFound);
        }
        other => panic!("{}: {other:?}", api.name()),
    }
}

async fn a_replaced_bundle_and_an_added_one_are_followed_on_the_next_handshake(
    api: &impl ApiServerUnderTest,
    _ns: &str,
) {
    let signer = signer();
    let (old, new) = (TestCa::new("old CA"), TestCa::new("new CA"));
    api.apply(bundle(&signer, "a", &old.pem(), &[])).await;
    let server = server(&old).await;

    // Through the flags and the registry, as a service builds its peer client.
    let peer = PeerOptions::new("identity")
        .with_ca_cluster_trust_bundles(&signer, "")
        .with_pool_idle_timeout(Duration::ZERO);
    let client = api.cluster_client_for(&api.admin_token());
    let tls = from_options_scoped(&client, &peer, &ClientIdentityOptions::new(None), TIMEOUT)
        .await
        .unwrap();
    let trust = tls.trust_verifier().unwrap().clone();
    let config = watched(&trust);
    call(config.clone(), &server).await.unwrap();

    // The bundle is replaced (the old CA removed): the next handshake to a server of
    // the old CA is refused, one of the new CA trusted, on the same configuration.
    api.apply(bundle(&signer, "a", &new.pem(), &[])).await;
    poll_until("the replaced bundle in the cache", || {
        cached_bundle_holds(&trust, &[&new])
    })
    .await;
    let refused = call(config.clone(), &server).await.unwrap_err();
    assert!(refused.contains("handshake"), "{}: {refused}", api.name());
    server.set_server_ca(&new);
    call(config.clone(), &server)
        .await
        .expect("the server of the new CA is trusted on the next handshake");

    // A second bundle of the signer is added, holding the old CA: both are trusted.
    api.apply(bundle(&signer, "b", &old.pem(), &[])).await;
    poll_until("the added bundle in the cache", || {
        cached_bundle_holds(&trust, &[&new, &old])
    })
    .await;
    call(config.clone(), &server).await.unwrap();
    server.set_server_ca(&old);
    call(config.clone(), &server)
        .await
        .expect("the old CA, back in a second bundle, is trusted");
    assert_eq!(trust.state().roots, 2);
    assert_eq!(trust.state().failures, 0);
}

async fn an_empty_set_keeps_the_last_good_roots_for_the_bound_then_refuses(
    api: &impl ApiServerUnderTest,
    _ns: &str,
) {
    let signer = signer();
    let ca = TestCa::new("bundle CA");
    api.apply(bundle(&signer, "a", &ca.pem(), &[])).await;
    let server = server(&ca).await;
    let clock = ManualClock::new();
    let bound = Duration::from_secs(600);
    let trust = TrustVerifier::cluster_trust_bundles_builder(
        api.admin_client(),
        ClusterTrustBundlesRef::new(&signer).unwrap(),
    )
    .settings(
        TrustSettings::default()
            .sync_timeout(TIMEOUT)
            .max_roots_without_source(bound),
    )
    .clock(Arc::new(clock.clone()))
    .build()
    .await
    .unwrap();
    let config = watched(&trust);

    // The signer's last bundle deleted: no roots. The last good ones are used,
    // stale, within the bound of a deleted CA Secret.
    api.delete(
        "certificates.k8s.io/v1",
        "ClusterTrustBundle",
        "",
        &bundle_name(&signer, "a"),
    )
    .await;
    poll_until("the cache sees the set empty", || {
        trust
            .cluster_trust_bundles_source()
            .unwrap()
            .get()
            .is_none()
    })
    .await;
    call(config.clone(), &server).await.unwrap();
    let state = trust.state();
    assert_eq!((state.failures, state.stale), (1, true), "{}", api.name());

    // Past the bound: every server refused, fail closed.
    clock.advance(bound + Duration::from_secs(1));
    let refused = call(config.clone(), &server).await.unwrap_err();
    assert!(refused.contains("handshake"), "{refused}");

    // A bundle of the signer again: trusted on the next handshake.
    api.apply(bundle(&signer, "b", &ca.pem(), &[])).await;
    poll_until("the cache sees the new bundle", || {
        cached_bundle_holds(&trust, &[&ca])
    })
    .await;
    call(config, &server).await.unwrap();
    assert!(!trust.state().stale);
}

async fn the_serving_half_verifies_callers_against_a_signers_bundles(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    let signer = signer();
    let (server_ca, callers_ca, stranger_ca) = (
        TestCa::new("server CA"),
        TestCa::new("callers' CA"),
        TestCa::new("a stranger's CA"),
    );
    api.apply(bundle(&signer, "callers", &callers_ca.pem(), &[]))
        .await;
    let leaf = server_ca.server_leaf();
    api.apply(test_support::secret::tls_secret(
        ns,
        "server-identity",
        &leaf.cert_pem,
        &leaf.key_pem,
    ))
    .await;
    let identity =
        IdentityResolver::builder(api.admin_client(), SecretRef::new(ns, "server-identity"))
            .build()
            .await
            .unwrap();
    let callers = verifier_on(api, ClusterTrustBundlesRef::new(&signer).unwrap())
        .await
        .unwrap();
    let tls = ServerTls::builder(identity)
        .callers(callers)
        .client_auth(ClientAuth::Required)
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _ = svc_tls::serving::serve(
            listener,
            tls,
            tower::service_fn(|_request: http::Request<hyper::body::Incoming>| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
                    bytes::Bytes::from_static(b"ok"),
                )))
            }),
        )
        .await;
    });

    let caller = |leaf: &test_support::pki::Leaf| {
        Arc::new(
            rustls::ClientConfig::builder_with_provider(crate::provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(server_ca.roots())
                .with_client_auth_cert(
                    vec![leaf.der.clone()],
                    rustls_pki_types::pem::PemObject::from_pem_slice(leaf.key_pem.as_bytes())
                        .unwrap(),
                )
                .unwrap(),
        )
    };
    let reply =
        test_support::tls_server::request(caller(&callers_ca.client_leaf("caller", 7)), addr)
            .await
            .expect("a caller of a CA in the signer's bundles is served");
    assert_eq!(reply.status, 200, "{}", api.name());
    assert!(
        test_support::tls_server::request(caller(&stranger_ca.client_leaf("stranger", 8)), addr)
            .await
            .is_err(),
        "a caller of a CA outside the bundles is refused"
    );
    task.abort();
}
