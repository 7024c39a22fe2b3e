//! TLS session resumption cannot skip the reload. A resumed handshake does not
//! send a client certificate: the server takes the identity from the original
//! session. So a client that resumes after a rotation would still be seen with the
//! old leaf. The server here really offers resumption (TLS 1.3 tickets from a
//! ticketer, and a server-side session cache); a control client with resumption
//! on is resumed by it; the `svc_tls` client, with the Secret rotated between two
//! connections made from the same configuration, makes a full handshake and
//! presents the new leaf.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kube_testbed::Testbed;
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject as _;
use rustls::{ClientConfig, HandshakeKind};
use support::*;
use svc_tls::identity::IdentityResolver;
use svc_tls::origin::SecretRef;
use test_support::tls_server::request_as;

const NAME: &str = "resumption-client-certificate";

/// One connection: handshake, one request, read to the end (the client reads the
/// tickets sent after the handshake along with the answer).
async fn connect(config: &Arc<ClientConfig>, addr: SocketAddr) {
    let reply = request_as(config.clone(), addr, "localhost").await.unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumption_cannot_skip_the_reload() {
    let server_ca = TestCa::new("servers");
    let client_ca = TestCa::new("clients");
    // Requires client certificates from `client_ca` and offers resumption both
    // ways: TLS 1.3 tickets and a stateful session cache.
    let server = VerifyingServer::builder(&server_ca, &client_ca)
        .resumption(true)
        .start()
        .await;

    // Control: a plain rustls client with resumption on (its default) is resumed by
    // this server, so the server's offer is real.
    let fixed = client_ca.client_leaf("control", 90);
    let control = Arc::new(
        ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(server_ca.roots())
            .with_client_auth_cert(
                vec![fixed.der.clone()],
                PrivateKeyDer::from_pem_slice(fixed.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
    );
    connect(&control, server.addr).await;
    connect(&control, server.addr).await;
    {
        let seen = server.seen();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].kind, Some(HandshakeKind::Full));
        assert_eq!(
            seen[1].kind,
            Some(HandshakeKind::Resumed),
            "the server must offer resumption for this test to mean anything"
        );
    }

    // The svc-tls client over a watched Secret.
    let tb = Testbed::start().await;
    let first = client_ca.client_leaf("svc", 1);
    tb.upsert(tls_secret(NAME, &first.cert_pem, &first.key_pem));
    let resolver = IdentityResolver::builder(tb.client(), SecretRef::new(NS, NAME))
        .settings(
            svc_tls::identity::IdentitySettings::default().sync_timeout(Duration::from_secs(10)),
        )
        .build()
        .await
        .unwrap();
    let config = Arc::new(trusting(&server_ca, Some(&resolver)));
    connect(&config, server.addr).await;

    // Rotate the Secret; the same configuration connects again.
    let second = client_ca.client_leaf("svc", 2);
    tb.upsert(tls_secret(NAME, &second.cert_pem, &second.key_pem));
    let serial_before = resolver.state().serial_hex;
    poll_until("the resolver's cache holds the rotated Secret", || {
        resolver
            .secret_source()
            .is_some_and(|source| cached_cert_is(source, &second.cert_pem))
    })
    .await;
    connect(&config, server.addr).await;

    let seen = server.seen();
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[2].leaf, Some(first.der.clone()));
    assert_eq!(seen[2].kind, Some(HandshakeKind::Full));
    assert_eq!(
        seen[3].kind,
        Some(HandshakeKind::Full),
        "the svc-tls client resumed a session"
    );
    assert_eq!(
        seen[3].leaf,
        Some(second.der.clone()),
        "the second connection did not present the rotated leaf (serial before: {serial_before})"
    );
}
