//! TLS helpers the handshake benchmarks share: svc-tls's provider, PEM certificates
//! and root stores, the server's configuration and the handshake server (handshake,
//! one byte, close).

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// svc-tls's crypto provider (its default key exchange first).
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(svc_tls::material::crypto_provider())
}

/// The server's TLS 1.3 configuration over the material's server identity,
/// requiring client certificates issued by the material's client CA.
pub(crate) fn server_config(material: &super::Material) -> ServerConfig {
    let verifier = WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots(&material.client_ca_pem)),
        provider(),
    )
    .build()
    .unwrap();
    ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            certs(&material.server_cert_pem),
            PrivateKeyDer::from_pem_slice(material.server_key_pem.as_bytes()).unwrap(),
        )
        .unwrap()
}

/// The certificates of a PEM bundle.
pub(crate) fn certs(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A root store of every certificate of a PEM bundle.
pub(crate) fn roots(pem: &str) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    for cert in certs(pem) {
        roots.add(cert).unwrap();
    }
    roots
}

/// The handshake server on a loopback port: each connection handshakes, gets one
/// byte and is closed.
pub(crate) async fn serve(config: Arc<ServerConfig>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            // As Go's net package does by default.
            let _ = tcp.set_nodelay(true);
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let _ = tls.write_all(b"k").await;
                    let _ = tls.shutdown().await;
                }
            });
        }
    });
    addr
}
