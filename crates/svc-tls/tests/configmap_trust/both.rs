//! The ConfigMap-trust bodies that run against kube-testbed and the real
//! kube-apiserver alike (`ApiServerUnderTest`): anchors verifying a chain, a replaced
//! bundle followed on the next handshake, typed errors for unusable ConfigMaps, a
//! ConfigMaps-only service account served its trust (and refused a Secret), and a
//! receiving service verifying callers against a bundle.

use real_apiserver::ApiServerUnderTest;
use svc_tls::ClusterClient;
use svc_tls::client::TrustMode;
use svc_tls::material::{ConfigMapTrustError, ConfigMapTrustProblem};
use svc_tls::origin::{ConfigMapRef, TrustOrigin};
use svc_tls::trust::{TrustError, TrustReloadError, TrustVerifier};

use crate::support::{NS, TestCa, from_options_scoped, poll_until};
use crate::{BUNDLE, KEY, TIMEOUT, cached_bundle_is, call, configmap, parse, server, watched};

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
both!(unusable_configmaps_give_typed_errors_naming_the_configmap_and_key);
both!(from_options_with_configmap_flags_calls_the_server_without_secret_access);
both!(a_receiving_service_verifies_callers_against_a_configmap_bundle);

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
        state.origin,
        TrustOrigin::ConfigMap {
            configmap: Box::new(ConfigMapRef::new(ns, BUNDLE)),
            key: KEY.to_owned(),
        }
    );
    assert_eq!(
        state.origin.to_string(),
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

/// The typed error a build fails with when the ConfigMap cannot serve as trust.
async fn build_error(api: &impl ApiServerUnderTest, ns: &str, key: &str) -> ConfigMapTrustError {
    match verifier_on(api, ns, key).await {
        Err(TrustError::Unusable(TrustReloadError::ConfigMap(error))) => {
            let text = error.to_string();
            assert!(
                text.contains(&format!("{ns}/{BUNDLE}")) && text.contains(key),
                "{}: the error names the ConfigMap and the key: {text}",
                api.name()
            );
            assert_eq!(error.configmap, ConfigMapRef::new(ns, BUNDLE));
            assert_eq!(error.key, key);
            *error
        }
        other => panic!(
            "{}: expected a ConfigMap trust error, got {other:?}",
            api.name()
        ),
    }
}

async fn unusable_configmaps_give_typed_errors_naming_the_configmap_and_key(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    let ca = TestCa::new("CA");

    // No ConfigMap at all.
    assert_eq!(
        build_error(api, ns, KEY).await.problem,
        ConfigMapTrustProblem::NotFound
    );

    // The ConfigMap without the key: the error lists the keys it does hold.
    api.apply(configmap_in(ns, BUNDLE, &[("ca.crt", &ca.pem())]))
        .await;
    let missing = build_error(api, ns, KEY).await;
    assert_eq!(
        missing.problem,
        ConfigMapTrustProblem::MissingKey {
            present: vec!["ca.crt".to_owned()]
        }
    );
    assert!(missing.to_string().contains("ca.crt"), "{missing}");

    // PEM, but no CERTIFICATE section (a key pasted by mistake).
    let leaf = ca.server_leaf();
    api.apply(configmap_in(ns, BUNDLE, &[(KEY, &leaf.key_pem)]))
        .await;
    assert_eq!(
        build_error(api, ns, KEY).await.problem,
        ConfigMapTrustProblem::NoCertificate
    );

    // Not PEM at all, and a CERTIFICATE section that does not parse.
    api.apply(configmap_in(ns, BUNDLE, &[(KEY, "hello")])).await;
    assert!(matches!(
        build_error(api, ns, KEY).await.problem,
        ConfigMapTrustProblem::NotPem { .. }
    ));
    api.apply(configmap_in(
        ns,
        BUNDLE,
        &[(
            KEY,
            "-----BEGIN CERTIFICATE-----\n!!! not base64 !!!\n-----END CERTIFICATE-----\n",
        )],
    ))
    .await;
    assert!(matches!(
        build_error(api, ns, KEY).await.problem,
        ConfigMapTrustProblem::NotPem { .. }
    ));

    // Empty.
    api.apply(configmap_in(ns, BUNDLE, &[(KEY, "")])).await;
    assert_eq!(
        build_error(api, ns, KEY).await.problem,
        ConfigMapTrustProblem::EmptyKey
    );
}

async fn from_options_with_configmap_flags_calls_the_server_without_secret_access(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    let (ca, other) = (TestCa::new("bundle CA"), TestCa::new("other CA"));
    api.apply(configmap_in(ns, BUNDLE, &[(KEY, &ca.pem())]))
        .await;
    // A CA Secret of another CA, which the client must not be able to read (Opaque:
    // the real API server refuses a `kubernetes.io/tls` Secret without a key).
    api.apply(test_support::secret::secret_with(
        ns,
        "identity-ca",
        "Opaque",
        &[("tls.crt", &other.pem()), ("ca.crt", &other.pem())],
    ))
    .await;
    let server = server(&ca).await;
    // The service account: get, list and watch on ConfigMaps of its namespace; no
    // Secret access at all.
    let configmaps_only = api.reader_of(ns, "configmaps").await;
    let client = ClusterClient::try_from_config(api.config_for(&configmaps_only)).unwrap();

    let (peer, me) = parse(&[
        format!("--identity-host={}", server.url()),
        format!("--identity-ca-configmap-namespace={ns}"),
        format!("--identity-ca-configmap-name={BUNDLE}"),
        format!("--identity-ca-configmap-key={KEY}"),
        "--identity-pool-idle-timeout=0s".to_owned(),
    ])
    .unwrap();
    let tls = from_options_scoped(&client, &peer, &me, TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", api.name()));
    match tls.trust() {
        TrustMode::Watched(verifier) => assert_eq!(
            verifier.state().origin,
            TrustOrigin::ConfigMap {
                configmap: Box::new(ConfigMapRef::new(ns, BUNDLE)),
                key: KEY.to_owned(),
            }
        ),
        other => panic!("a ConfigMap CA is watched trust, got {other:?}"),
    }
    let http = tls.reqwest_client().unwrap();
    let response = http
        .get(tls.host().unwrap().clone())
        .send()
        .await
        .expect("the peer's server, issued by the bundle's CA, is trusted");
    assert!(response.status().is_success(), "{response:?}");
    assert_eq!(server.handshakes(), 1);

    // The control: the same service account cannot read the CA Secret, so the
    // call above needed no Secret.
    let (secret_peer, me) = parse(&[
        format!("--identity-host={}", server.url()),
        format!("--identity-ca-secret-namespace={ns}"),
        "--identity-ca-secret-name=identity-ca".to_owned(),
    ])
    .unwrap();
    let refused = from_options_scoped(&client, &secret_peer, &me, TIMEOUT)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("refused"),
        "{}: the token has no Secret access: {refused}",
        api.name()
    );
}

/// The forwarded client certificate as the nginx ingress sends it (escaped PEM).
fn ingress_headers(cert_pem: &str) -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("ssl-client-verify", "SUCCESS".parse().unwrap());
    let escaped = cert_pem.replace('\n', "%0A").replace(' ', "%20");
    headers.insert("ssl-client-cert", escaped.parse().unwrap());
    headers
}

async fn a_receiving_service_verifies_callers_against_a_configmap_bundle(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    use svc_tls::receiving::{IngressError, IngressVerifier};
    let (clients, other) = (TestCa::new("client CA"), TestCa::new("other CA"));
    api.apply(configmap_in(ns, BUNDLE, &[(KEY, &clients.pem())]))
        .await;
    let ingress = IngressVerifier::verified(verifier_on(api, ns, KEY).await.unwrap());

    let caller = clients.client_leaf("region", 7);
    let verified = ingress
        .peer_certificate(&ingress_headers(&caller.cert_pem))
        .expect("a caller under the bundle's CA is verified");
    assert_eq!(verified.der(), &caller.der);
    let stranger = other.client_leaf("region", 8);
    let refused = ingress
        .peer_certificate(&ingress_headers(&stranger.cert_pem))
        .unwrap_err();
    assert!(
        matches!(refused, IngressError::Untrusted(_)),
        "{}: a caller outside the bundle is refused: {refused:?}",
        api.name()
    );
}
