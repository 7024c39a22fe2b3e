//! A service reached by several names with certificates of their own: the identity a
//! handshake presents is chosen by the caller's SNI (exact names, then one-label
//! wildcards, else the default), each followed through its own Secret's rotations.

use svc_tls::serving::ServerNameError;

use super::*;

/// The serial of the leaf presented to a caller asking for `name` (`None`: no SNI,
/// dialled by IP), or the handshake's error.
async fn presented(
    port: u16,
    config: Arc<rustls::ClientConfig>,
    name: &str,
) -> Result<u64, String> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let name = ServerName::try_from(name.to_owned()).unwrap();
    let mut stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    stream.flush().await.map_err(|e| e.to_string())?;
    Ok(server_serial(&stream))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_name_is_presented_its_own_identity_and_any_other_the_default() {
    let s = serve(ClientAuth::Required).await;
    let api = server_leaf_for(&s.server_ca, &["api.example.test"], 3);
    let internal = server_leaf_for(&s.server_ca, &["*.internal.test"], 4);
    for (name, leaf) in [("api-identity", &api), ("internal-identity", &internal)] {
        s.tb.upsert(tls_secret(NS, name, &leaf.cert_pem, &leaf.key_pem));
    }
    let resolver = |name: &'static str| {
        let tb = s.tb.client();
        async move {
            IdentityResolver::builder(tb, SecretRef::new(NS, name))
                .build()
                .await
                .unwrap()
        }
    };
    let default = IdentityResolver::builder(s.tb.client(), SecretRef::new(NS, SERVER_IDENTITY))
        .build()
        .await
        .unwrap();
    let callers = TrustVerifier::builder(s.tb.client(), SecretRef::new(NS, CLIENT_CA))
        .build()
        .await
        .unwrap();

    // Names no SNI can carry, and a name given twice, are refused when building.
    let refused = ServerTls::builder(default.clone())
        .identity_for("127.0.0.1", resolver("api-identity").await)
        .unwrap_err();
    assert!(
        matches!(refused, ServerNameError::NotADnsName { .. }),
        "{refused}"
    );
    let refused = ServerTls::builder(default.clone())
        .identity_for("API.example.test", resolver("api-identity").await)
        .unwrap()
        .identity_for("api.example.test", resolver("api-identity").await)
        .unwrap_err();
    assert!(
        matches!(refused, ServerNameError::Duplicate { .. }),
        "{refused}"
    );

    let tls = ServerTls::builder(default)
        .identity_for("api.example.test", resolver("api-identity").await)
        .unwrap()
        .identity_for("*.internal.test", resolver("internal-identity").await)
        .unwrap()
        .callers(callers)
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        svc_tls::serving::serve(listener, tls, tower::service_fn(whoami_handler))
            .await
            .unwrap();
    });
    let caller = s.client_ca.client_leaf("region", 7);
    let config = client_config(&s.server_ca, Some(&caller));

    for (name, serial) in [
        ("api.example.test", 3),
        ("API.Example.TEST", 3),
        ("db.internal.test", 4),
        ("localhost", 1),
        ("127.0.0.1", 1),
    ] {
        assert_eq!(
            presented(port, config.clone(), name).await,
            Ok(serial),
            "the leaf presented for {name}"
        );
    }
    // A wildcard covers one label: a deeper name gets the default, which does not
    // name it (the client says which names it was presented).
    let deeper = presented(port, config.clone(), "a.b.internal.test")
        .await
        .unwrap_err();
    assert!(deeper.contains("localhost"), "{deeper}");

    // Each name follows its own Secret.
    let rotated = server_leaf_for(&s.server_ca, &["api.example.test"], 5);
    s.tb.upsert(tls_secret(
        NS,
        "api-identity",
        &rotated.cert_pem,
        &rotated.key_pem,
    ));
    test_support::poll_until("the api name's rotated leaf is presented", || {
        let config = config.clone();
        super::rotation::futures_ready(async move {
            presented(port, config, "api.example.test").await == Ok(5)
        })
    })
    .await;
    assert_eq!(
        presented(port, config.clone(), "db.internal.test").await,
        Ok(4)
    );
    assert_eq!(presented(port, config, "localhost").await, Ok(1));
    task.abort();
}
