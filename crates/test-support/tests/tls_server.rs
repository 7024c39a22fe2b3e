//! The verifying TLS test server: it refuses client certificates from CAs it does
//! not trust (and counts the refusals), accepts several CAs during an overlap, and
//! presents a replaced server leaf with URI SANs.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;

use rustls::ClientConfig;
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject;
use test_support::pki::{Leaf, TestCa};
use test_support::tls_server::{VerifyingServer, request_serial};

fn client(server_ca: &TestCa, leaf: &Leaf) -> Arc<ClientConfig> {
    Arc::new(
        ClientConfig::builder_with_provider(
            Arc::new(rustls::crypto::aws_lc_rs::default_provider()),
        )
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(server_ca.roots())
        .with_client_auth_cert(
            vec![leaf.der.clone()],
            PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
        )
        .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verifies_client_cas_through_an_overlap_and_counts_refusals() {
    let (server_ca, old, new) = (TestCa::new("s"), TestCa::new("old"), TestCa::new("new"));
    let server = VerifyingServer::start(&server_ca, &old).await;
    let (a, b) = (old.client_leaf("a", 11), new.client_leaf("b", 12));

    assert_eq!(
        request_serial(client(&server_ca, &a), server.addr).await,
        Ok(11)
    );
    assert!(
        request_serial(client(&server_ca, &b), server.addr)
            .await
            .is_err()
    );
    assert_eq!((server.handshakes(), server.rejected()), (1, 1));
    assert!(
        server.rejection_reasons()[0].contains("UnknownIssuer"),
        "{:?}",
        server.rejection_reasons()
    );

    server.set_client_cas(&[&old, &new]);
    assert_eq!(
        request_serial(client(&server_ca, &a), server.addr).await,
        Ok(11)
    );
    assert_eq!(
        request_serial(client(&server_ca, &b), server.addr).await,
        Ok(12)
    );

    server.set_client_ca(&new);
    assert!(
        request_serial(client(&server_ca, &a), server.addr)
            .await
            .is_err()
    );
    assert_eq!(
        request_serial(client(&server_ca, &b), server.addr).await,
        Ok(12)
    );
    assert_eq!((server.handshakes(), server.rejected()), (4, 2));
    assert_eq!(server.last_leaf(), Some(b.der.clone()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presents_a_replaced_leaf_with_uri_sans() {
    let (server_ca, clients) = (TestCa::new("s"), TestCa::new("c"));
    let server = VerifyingServer::start(&server_ca, &clients).await;
    let other_ca = TestCa::new("spiffe");
    let id = "spiffe://example.org/ns/platform/sa/identity";
    server.set_server_leaf(&other_ca.server_leaf_with(&["127.0.0.1"], &[id]));

    let leaf = clients.client_leaf("a", 21);
    // The old server CA no longer verifies the server.
    let err = request_serial(client(&server_ca, &leaf), server.addr).await;
    assert!(err.unwrap_err().starts_with("handshake:"));

    let config = client(&other_ca, &leaf);
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(config.clone())
        .connect(
            rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap(),
            tcp,
        )
        .await
        .unwrap();
    let presented = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    let (_, cert) = x509_parser::parse_x509_certificate(&presented).unwrap();
    let sans = cert.subject_alternative_name().unwrap().unwrap();
    assert!(
        sans.value
            .general_names
            .iter()
            .any(|n| matches!(n, x509_parser::extensions::GeneralName::URI(u) if *u == id)),
        "{:?}",
        sans.value.general_names
    );
    drop(tls);
    assert_eq!(request_serial(config, server.addr).await, Ok(21));
}
