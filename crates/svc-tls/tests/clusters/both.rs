//! The single-cluster trust bodies that run against kube-testbed and the real
//! kube-apiserver alike: a CA Secret holding its CA's key (the key never cached, one
//! WARN, the roots verify), an Opaque `ca.crt`-only Secret trusted (and one without
//! `ca.crt` refused, naming the key), and a trust-only cache that keeps no key however
//! the Secret carries it (on the real server: its own managedFields, which name
//! `tls.key`, dropped too).

use real_apiserver::{ApiServerUnderTest, both};
use svc_tls::SecretRef;
use svc_tls::client::PeerTls;
use svc_tls::watch::WatchedObjects;

use crate::support::*;
use crate::{TIMEOUT, base64_of, call, trusting_in};

both!(a_trust_secret_never_keeps_its_private_key);
both!(an_opaque_ca_crt_only_secret_is_trusted);
both!(a_trust_only_cache_keeps_no_key_however_the_secret_carries_it);

/// Anchors without any key: an Opaque Secret with `ca.crt` alone verifies a chain,
/// and refuses a server of another CA.
async fn an_opaque_ca_crt_only_secret_is_trusted(api: &impl ApiServerUnderTest, ns: &str) {
    let server_ca = TestCa::new("opaque bundle");
    api.apply(test_support::secret::secret_with(
        ns,
        "bundle",
        "Opaque",
        &[("ca.crt", &server_ca.pem())],
    ))
    .await;
    let server = VerifyingServer::builder(&server_ca, &server_ca)
        .no_client_auth()
        .start()
        .await;
    let other_ca = TestCa::new("not in the bundle");
    let other = VerifyingServer::builder(&other_ca, &other_ca)
        .no_client_auth()
        .start()
        .await;
    let (peer, me) = trusting_in(&server.url(), ns, "bundle");
    let tls = PeerTls::from_options_in(
        &WatchedObjects::new(),
        &svc_tls::spiffe::WorkloadApiStreams::new(),
        &api.cluster_client_for(&api.admin_token()),
        &peer,
        &me,
        TIMEOUT,
    )
    .await
    .unwrap();
    assert!(call(&tls, &server.url()).await.is_ok());
    assert!(call(&tls, &other.url()).await.is_err());
    assert_eq!(server.handshakes(), 1);

    // An Opaque Secret without ca.crt is refused, naming the key.
    api.apply(test_support::secret::secret_with(
        ns,
        "empty-bundle",
        "Opaque",
        &[("tls.crt", &server_ca.pem())],
    ))
    .await;
    let (peer, me) = trusting_in(&server.url(), ns, "empty-bundle");
    let err = PeerTls::from_options_in(
        &WatchedObjects::new(),
        &svc_tls::spiffe::WorkloadApiStreams::new(),
        &api.cluster_client_for(&api.admin_token()),
        &peer,
        &me,
        TIMEOUT,
    )
    .await
    .unwrap_err();
    // The cause is in the chain, not in the top message
    // (docs/decisions/errors-cause-in-source.md).
    let err = svc_tls::excerpt::chain(&err);
    assert!(
        err.contains("empty-bundle") && err.contains("ca.crt"),
        "{err}"
    );
}

/// A CA Secret as `kubectl apply` leaves it (the whole Secret, `tls.key` included, in
/// the last-applied-configuration annotation, plus managedFields), and an Opaque
/// bundle with `ca.key`: read as trust only, the cached object holds no key bytes
/// anywhere (serialized whole and searched), one WARN each, the flag the metric
/// reads set; the roots still verify.
async fn a_trust_only_cache_keeps_no_key_however_the_secret_carries_it(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    let logs = test_support::logs::CapturedLogs::global();
    let ca = TestCa::new("applied CA");
    let key = ca.client_leaf("unused", 9).key_pem;
    let key_line = key.lines().nth(1).unwrap().to_owned();
    let mut applied = test_support::secret::secret_with(
        ns,
        "applied-ca",
        "kubernetes.io/tls",
        &[
            ("tls.crt", &ca.pem()),
            ("tls.key", &key),
            ("ca.crt", &ca.pem()),
        ],
    );
    applied["metadata"]["annotations"] = serde_json::json!({
        "kubectl.kubernetes.io/last-applied-configuration":
            serde_json::to_string(&applied).unwrap(),
    });
    applied["metadata"]["managedFields"] = serde_json::json!([{
        "manager": "kubectl-client-side-apply",
        "operation": "Update",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {"f:tls.key": {}}},
    }]);
    if api.name() != "kube-testbed" {
        // The real server keeps managedFields to itself (it records its own, which
        // name the keys, never their values).
        applied["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
    }
    api.apply(applied).await;
    api.apply(test_support::secret::secret_with(
        ns,
        "opaque-ca",
        "Opaque",
        &[("ca.crt", &ca.pem()), ("ca.key", &key)],
    ))
    .await;
    let watches = WatchedObjects::new();
    let client = api.cluster_client_for(&api.admin_token());
    for name in ["applied-ca", "opaque-ca"] {
        let shared = watches
            .watch_trust(&client, &SecretRef::new(ns, name), TIMEOUT)
            .await
            .unwrap();
        let cached = serde_json::to_string(&*shared.source().get().unwrap()).unwrap();
        let encoded = base64_of(&key);
        for needle in [
            key_line.as_str(),
            "PRIVATE KEY",
            "tls.key",
            "ca.key",
            encoded.as_str(),
        ] {
            assert!(
                !cached.contains(needle),
                "{name}: the cache holds {needle:?}: {cached}"
            );
        }
        assert!(cached.contains("ca.crt"), "{name}: the roots are kept");
        assert!(
            shared.source().dropped_private_key(),
            "{name}: the metric's flag"
        );
        let warnings = logs
            .text()
            .lines()
            .filter(|l| {
                l.contains("WARN")
                    && l.contains("holds a private key")
                    && l.contains(&format!("{ns}/{name}"))
            })
            .count();
        assert_eq!(warnings, 1, "{}: {name}: one WARN", api.name());
    }
}

/// A CA Secret that also holds the CA's private key (the issuer's Secret, as docs once
/// suggested): the key never reaches the cache, one WARN and the metric say so, and
/// the roots still verify a handshake.
async fn a_trust_secret_never_keeps_its_private_key(api: &impl ApiServerUnderTest, ns: &str) {
    let logs = test_support::logs::CapturedLogs::global();
    let server_ca = TestCa::new("issuer with key");
    let key = server_ca.client_leaf("stand-in key", 5).key_pem;
    let with_key = |version: &str| {
        test_support::secret::secret_with(
            ns,
            "issuer-ca",
            "kubernetes.io/tls",
            &[
                ("tls.crt", &server_ca.pem()),
                ("tls.key", &key),
                ("ca.crt", &server_ca.pem()),
                ("version", version),
            ],
        )
    };
    api.apply(with_key("1")).await;
    let server = VerifyingServer::builder(&server_ca, &server_ca)
        .no_client_auth()
        .start()
        .await;
    let watches = WatchedObjects::new();
    let client = api.cluster_client_for(&api.admin_token());
    let (peer, me) = trusting_in(&server.url(), ns, "issuer-ca");
    let tls = PeerTls::from_options_in(
        &watches,
        &svc_tls::spiffe::WorkloadApiStreams::new(),
        &client,
        &peer,
        &me,
        TIMEOUT,
    )
    .await
    .unwrap();
    assert!(call(&tls, &server.url()).await.is_ok(), "the roots verify");

    let shared = watches
        .watch_trust(&client, &SecretRef::new(ns, "issuer-ca"), TIMEOUT)
        .await
        .unwrap();
    let cached = shared.source().get().unwrap();
    let data = cached.data.as_ref().unwrap();
    assert!(data.contains_key("ca.crt"));
    assert!(!data.contains_key("tls.key"), "the CA key is not cached");
    assert!(shared.source().dropped_private_key());

    let first_version = cached.metadata.resource_version.clone();
    api.apply(with_key("2")).await;
    poll_until("the new version is cached", || {
        shared
            .source()
            .get()
            .is_some_and(|s| s.metadata.resource_version != first_version)
    })
    .await;
    let cached = shared.source().get().unwrap();
    assert!(!cached.data.as_ref().unwrap().contains_key("tls.key"));
    let warnings = logs
        .text()
        .lines()
        .filter(|l| {
            l.contains("WARN")
                && l.contains("holds a private key")
                && l.contains(&format!("{ns}/issuer-ca"))
        })
        .count();
    assert_eq!(warnings, 1, "said once:\n{}", logs.text());
    assert!(!logs.text().contains("PRIVATE KEY"));
}
