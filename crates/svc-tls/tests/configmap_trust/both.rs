//! The ConfigMap-trust bodies that run against kube-testbed and the real
//! kube-apiserver alike (`ApiServerUnderTest`): anchors verifying a chain, and a
//! replaced bundle followed on the next handshake.

use real_apiserver::ApiServerUnderTest;
use svc_tls::origin::{ConfigMapRef, TrustOrigin};
use svc_tls::trust::{TrustError, TrustVerifier};

use crate::support::{NS, TestCa, poll_until};
use crate::{BUNDLE, KEY, TIMEOUT, cached_bundle_is, call, configmap, server, watched};

/// `body` against the emulator (in [`NS`]) and the real API server (in a namespace
/// of its own: the server is shared by the binary's tests), as two tests.
macro_rules! both {
    ($body:ident) => {
        mod $body {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn kube_testbed() {
                let tb = kube_testbed::Testbed::start().await;
                super::$body(&tb, super::NS).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn kube_apiserver() {
                let ns = format!("cm-trust-{}", fastrand::u32(..));
                super::$body(real_apiserver::shared(), &ns).await;
            }
        }
    };
}

both!(configmap_anchors_verify_a_server_chain_in_a_handshake);
both!(a_replaced_bundle_is_followed_on_the_next_handshake);

async fn verifier_on(
    api: &impl ApiServerUnderTest,
    ns: &str,
    key: &str,
) -> Result<TrustVerifier, TrustError> {
    let client = kube::Client::try_from(api.config_for(&api.admin_token())).unwrap();
    TrustVerifier::configmap_builder(client, ConfigMapRef::new(ns, BUNDLE), key)
        .settings(svc_tls::trust::TrustSettings::default().sync_timeout(TIMEOUT))
        .build()
        .await
}

/// A ConfigMap in `ns` with `data`.
fn configmap_in(ns: &str, name: &str, data: &[(&str, &str)]) -> serde_json::Value {
    let mut object = configmap(name, data);
    object["metadata"]["namespace"] = serde_json::json!(ns);
    object
}

async fn configmap_anchors_verify_a_server_chain_in_a_handshake(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    let (ca, other) = (TestCa::new("bundle CA"), TestCa::new("not in the bundle"));
    // A bundle of two CAs, as trust-manager concatenates its sources, beside a key
    // that is not read.
    let unrelated = TestCa::new("unrelated");
    api.apply(configmap_in(
        ns,
        BUNDLE,
        &[
            (KEY, &format!("{}{}", unrelated.pem(), ca.pem())),
            ("ca.crt", &other.pem()),
        ],
    ))
    .await;
    let trusted = server(&ca).await;
    let untrusted = server(&other).await;

    let verifier = verifier_on(api, ns, KEY).await.unwrap();
    let state = verifier.state();
    assert_eq!(
        state.roots,
        2,
        "{}: both CAs of the bundle are roots",
        api.name()
    );
    assert_eq!(
        state.source,
        TrustOrigin::ConfigMap {
            configmap: Box::new(ConfigMapRef::new(ns, BUNDLE)),
            key: KEY.to_owned(),
        }
    );
    assert_eq!(
        state.source.to_string(),
        format!("CA ConfigMap {ns}/{BUNDLE} key {KEY}")
    );

    call(watched(&verifier), &trusted)
        .await
        .expect("a server chaining to a CA of the bundle is trusted");
    let refused = call(watched(&verifier), &untrusted).await.unwrap_err();
    assert!(
        refused.contains("handshake"),
        "a server of a CA outside the bundle (even one under another key) is refused: {refused}"
    );
    assert_eq!(untrusted.handshakes(), 0);
}

async fn a_replaced_bundle_is_followed_on_the_next_handshake(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    let (old, new) = (TestCa::new("old CA"), TestCa::new("new CA"));
    api.apply(configmap_in(ns, BUNDLE, &[(KEY, &old.pem())]))
        .await;
    let server = server(&old).await;
    let verifier = verifier_on(api, ns, KEY).await.unwrap();
    let config = watched(&verifier);
    call(config.clone(), &server).await.unwrap();

    // The bundle is replaced by the new CA and the server moves to it: the next
    // handshake on the same client configuration follows, without a rebuild.
    api.apply(configmap_in(ns, BUNDLE, &[(KEY, &new.pem())]))
        .await;
    poll_until("the new bundle in the cache", || {
        cached_bundle_is(&verifier, &new.pem())
    })
    .await;
    server.set_server_ca(&new);
    call(config.clone(), &server)
        .await
        .expect("the server of the new CA is trusted on the next handshake");
    assert_eq!(verifier.state().failures, 0);

    // The old CA is no longer trusted.
    let back = self::server(&old).await;
    assert!(call(config.clone(), &back).await.is_err());

    // A bundle that breaks after a good load keeps the last good roots (the
    // handshake still succeeds) and says why, naming the ConfigMap and the key.
    api.apply(configmap_in(ns, BUNDLE, &[(KEY, "not a bundle")]))
        .await;
    poll_until("the broken bundle in the cache", || {
        cached_bundle_is(&verifier, "not a bundle")
    })
    .await;
    call(config.clone(), &server).await.unwrap();
    assert!(verifier.state().failures > 0, "{:?}", verifier.state());
}
