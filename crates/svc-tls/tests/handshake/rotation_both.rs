//! Identity rotation over a Secret watch, against kube-testbed and the real
//! kube-apiserver alike (`real_apiserver::both!`): a Secret rewritten through the API
//! server reaches the next handshake of the same client configuration, with no
//! restart and no new client (a renewed leaf, a P-521 identity rotating to P-256, a
//! leaf of a new client CA). And the watch needs rights on its one Secret only (an
//! RBAC rule naming it, on the real server a Role with `resourceNames`).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use real_apiserver::{ApiServerUnderTest, both};
use support::*;
use svc_tls::client::reqwest_client;
use svc_tls::identity::{IdentityError, IdentityResolver};
use svc_tls::origin::SecretRef;
use svc_tls::watch::WatchError;

const NAME: &str = "region-client-certificate";

both!(secret_update_makes_the_next_connection_present_the_new_leaf);
both!(a_p521_identity_completes_mtls_and_rotates_to_p256);
both!(ca_rotation_needs_no_client_restart);
both!(the_watch_needs_rights_on_the_one_secret_only);

fn identity(ns: &str, leaf: &Leaf) -> serde_json::Value {
    test_support::secret::tls_secret(ns, NAME, &leaf.cert_pem, &leaf.key_pem)
}

async fn resolver(api: &impl ApiServerUnderTest, ns: &str) -> IdentityResolver {
    IdentityResolver::builder(api.admin_client(), SecretRef::new(ns, NAME))
        .settings(
            svc_tls::identity::IdentitySettings::default().sync_timeout(Duration::from_secs(10)),
        )
        .build()
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", api.name()))
}

async fn get_serial(http: &reqwest::Client, url: &str) -> u64 {
    let body = http.get(url).send().await.unwrap().text().await.unwrap();
    body.trim().parse().unwrap()
}

async fn secret_update_makes_the_next_connection_present_the_new_leaf(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let (one, two) = (
        client_ca.client_leaf("svc", 101),
        client_ca.client_leaf("svc", 102),
    );
    api.apply(identity(ns, &one)).await;
    let server = VerifyingServer::start(&server_ca, &client_ca).await;

    let resolver = resolver(api, ns).await;
    let config = trusting(&server_ca, Some(&resolver));
    let http = reqwest_client(config).unwrap();
    assert_eq!(get_serial(&http, &server.url()).await, 101);

    api.apply(identity(ns, &two)).await;
    poll_until("the cache sees the new Secret", || {
        cached_cert_is(resolver.secret_source().unwrap(), &two.cert_pem)
    })
    .await;
    // The server closes every connection, so this is a new connection: no restart,
    // no new client, the new leaf.
    assert_eq!(
        get_serial(&http, &server.url()).await,
        102,
        "{}",
        api.name()
    );
    assert_eq!(server.last_leaf(), Some(two.der.clone()));
    let state = resolver.state();
    assert_eq!(state.failures, 0, "{}: {state:?}", api.name());
    assert!(!state.stale);
}

async fn a_p521_identity_completes_mtls_and_rotates_to_p256(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    // Go accepts P-521 client identities; rustls signs with ecdsa_secp521r1_sha512.
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let p521 = client_ca.client_leaf_with(
        "svc",
        151,
        rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512).unwrap(),
    );
    let p256 = client_ca.client_leaf("svc", 152);
    api.apply(identity(ns, &p521)).await;
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    let resolver = resolver(api, ns).await;
    assert_eq!(
        resolver.current().key_kind(),
        svc_tls::material::KeyKind::EcdsaP521
    );
    let config = Arc::new(trusting(&server_ca, Some(&resolver)));
    assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(151));
    assert_eq!(server.last_leaf(), Some(p521.der.clone()));

    api.apply(identity(ns, &p256)).await;
    poll_until("the cache sees the P-256 Secret", || {
        cached_cert_is(resolver.secret_source().unwrap(), &p256.cert_pem)
    })
    .await;
    assert_eq!(
        handshake_serial(config, server.addr).await,
        Ok(152),
        "{}",
        api.name()
    );
    assert_eq!(resolver.state().failures, 0);
}

async fn ca_rotation_needs_no_client_restart(api: &impl ApiServerUnderTest, ns: &str) {
    let server_ca = TestCa::new("server");
    let (ca_a, ca_b) = (TestCa::new("clients A"), TestCa::new("clients B"));
    let (leaf_a, leaf_b) = (ca_a.client_leaf("svc", 201), ca_b.client_leaf("svc", 202));
    api.apply(identity(ns, &leaf_a)).await;
    let server = VerifyingServer::start(&server_ca, &ca_a).await;

    let resolver = resolver(api, ns).await;
    let config = Arc::new(trusting(&server_ca, Some(&resolver)));
    assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(201));

    // The ingress now trusts only CA B: the old leaf is refused...
    server.set_client_ca(&ca_b);
    assert!(handshake_serial(config.clone(), server.addr).await.is_err());
    // ...until cert-manager writes the B-issued leaf; the same config then works.
    api.apply(identity(ns, &leaf_b)).await;
    poll_until("the cache sees the B-issued leaf", || {
        cached_cert_is(resolver.secret_source().unwrap(), &leaf_b.cert_pem)
    })
    .await;
    assert_eq!(
        handshake_serial(config, server.addr).await,
        Ok(202),
        "{}",
        api.name()
    );
}

async fn the_watch_needs_rights_on_the_one_secret_only(api: &impl ApiServerUnderTest, ns: &str) {
    let ca = TestCa::new("clients");
    let leaf = ca.client_leaf("svc", 501);
    let other = ca.client_leaf("other", 502);
    api.apply(identity(ns, &leaf)).await;
    api.apply(test_support::secret::tls_secret(
        ns,
        "someone-else",
        &other.cert_pem,
        &other.key_pem,
    ))
    .await;
    let narrow = api.reader_of_names(ns, "secrets", &[NAME]).await;
    let build = |token: &str| {
        let client = kube::Client::try_from(api.config_for(token)).unwrap();
        IdentityResolver::builder(client, SecretRef::new(ns, NAME))
            .settings(
                svc_tls::identity::IdentitySettings::default()
                    .sync_timeout(Duration::from_secs(10)),
            )
            .build()
    };
    let resolver = build(&narrow)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", api.name()));
    assert_eq!(
        resolver
            .secret_source()
            .unwrap()
            .get()
            .unwrap()
            .metadata
            .name
            .as_deref(),
        Some(NAME)
    );

    // Without the rights, construction fails fast with a refusal naming the Secret.
    let err = tokio::time::timeout(Duration::from_secs(30), build(&api.token_without_rights()))
        .await
        .expect("a refusal is not waited out")
        .expect_err("a caller without rights was served the Secret");
    assert!(
        matches!(
            err,
            IdentityError::Source(WatchError::Refused { code: 403, .. })
        ),
        "{}: {err:?}",
        api.name()
    );
    assert!(err.to_string().contains(&format!("{ns}/{NAME}")), "{err}");
}
