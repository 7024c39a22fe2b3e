//! TLS session resumption cannot skip the reload. A resumed handshake does not
//! send a client certificate: the server takes the identity from the original
//! session. So a client that resumes after a rotation would still be seen with the
//! old leaf. The server here really offers resumption (TLS 1.3 tickets from a
//! ticketer, and a server-side session cache); a control client with resumption
//! on is resumed by it; the `svc_tls` client, with the Secret rotated between two
//! connections made from the same configuration, makes a full handshake and
//! presents the new leaf.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube_testbed::Testbed;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{ClientConfig, HandshakeKind, ServerConfig};
use support::*;
use svc_tls::options::SecretRef;
use svc_tls::resolver::IdentityResolver;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const NAME: &str = "resumption-client-certificate";

/// What the server saw on one connection.
#[derive(Clone, Debug)]
struct Seen {
    leaf: CertificateDer<'static>,
    kind: Option<HandshakeKind>,
}

/// A server that requires client certificates from `client_ca` and offers
/// resumption both ways: TLS 1.3 tickets and a stateful session cache.
async fn resuming_server(
    server_ca: &TestCa,
    client_ca: &TestCa,
) -> (u16, Arc<Mutex<Vec<Seen>>>, tokio::task::JoinHandle<()>) {
    let provider = provider();
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(client_ca.roots()), provider.clone())
            .build()
            .unwrap();
    let leaf = server_ca.server_leaf();
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![leaf.der.clone()],
            PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    config.session_storage = ServerSessionMemoryCache::new(256);
    config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new().unwrap();
    config.send_tls13_tickets = 4;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let task = tokio::spawn({
        let seen = seen.clone();
        async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let (_, conn) = tls.get_ref();
                    if let Some(leaf) = conn.peer_certificates().and_then(|c| c.first()) {
                        seen.lock().unwrap().push(Seen {
                            leaf: leaf.clone().into_owned(),
                            kind: conn.handshake_kind(),
                        });
                    }
                    // One line in, one line out, then close: the client reads the
                    // tickets sent after the handshake along with the answer.
                    let mut buf = [0u8; 64];
                    let _ = tls.read(&mut buf).await;
                    let _ = tls.write_all(b"ok\n").await;
                    let _ = tls.shutdown().await;
                });
            }
        }
    });
    (port, seen, task)
}

/// One connection: handshake, a line each way, read to the end.
async fn connect(config: &Arc<ClientConfig>, port: u16) {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(config.clone());
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    tls.write_all(b"hello\n").await.unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    assert_eq!(answer, b"ok\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumption_cannot_skip_the_reload() {
    let server_ca = TestCa::new("servers");
    let client_ca = TestCa::new("clients");
    let (port, seen, _server) = resuming_server(&server_ca, &client_ca).await;

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
    connect(&control, port).await;
    connect(&control, port).await;
    {
        let seen = seen.lock().unwrap();
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
        .sync_timeout(Duration::from_secs(10))
        .build()
        .await
        .unwrap();
    let config = Arc::new(trusting(&server_ca, Some(&resolver)));
    connect(&config, port).await;

    // Rotate the Secret; the same configuration connects again.
    let second = client_ca.client_leaf("svc", 2);
    tb.upsert(tls_secret(NAME, &second.cert_pem, &second.key_pem));
    let serial_before = resolver.state().serial_hex;
    wait_until("the resolver's cache holds the rotated Secret", || {
        resolver
            .secret_source()
            .is_some_and(|source| cached_cert_is(source, &second.cert_pem))
    })
    .await;
    connect(&config, port).await;

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[2].leaf, first.der);
    assert_eq!(seen[2].kind, Some(HandshakeKind::Full));
    assert_eq!(
        seen[3].kind,
        Some(HandshakeKind::Full),
        "the svc-tls client resumed a session"
    );
    assert_eq!(
        seen[3].leaf, second.der,
        "the second connection did not present the rotated leaf (serial before: {serial_before})"
    );
}
