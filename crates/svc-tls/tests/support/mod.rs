//! Test parts shared by the TLS integration tests: CAs and leaves generated with rcgen,
//! `kubernetes.io/tls` Secrets for the emulator, and an in-process TLS 1.3 server that
//! requires and verifies client certificates and reports the leaf it saw.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, missing_docs)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use svc_tls::client::{TrustMode, client_config};
use svc_tls::resolver::IdentityResolver;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub mod jws;
pub mod keys;
pub mod material;
pub mod nginx;

pub const NS: &str = "unikorn";

pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A TLS 1.3 client configuration trusting `server_ca`, presenting the resolver's
/// identity (or none).
pub fn trusting(server_ca: &TestCa, resolver: Option<&IdentityResolver>) -> ClientConfig {
    client_config(provider(), TrustMode::Roots(server_ca.roots()), resolver).unwrap()
}

pub use kube_testbed::pki::{Leaf, TestCa};

/// A `kubernetes.io/tls` Secret as the emulator stores it.
pub fn tls_secret(name: &str, cert_pem: &str, key_pem: &str) -> serde_json::Value {
    secret_with(
        name,
        "kubernetes.io/tls",
        &[("tls.crt", cert_pem), ("tls.key", key_pem)],
    )
}

/// A Secret of any type with the given data.
pub fn secret_with(name: &str, type_: &str, data: &[(&str, &str)]) -> serde_json::Value {
    let b64 = base64::engine::general_purpose::STANDARD;
    let data: serde_json::Map<String, serde_json::Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_string(), b64.encode(v).into()))
        .collect();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": name, "namespace": NS },
        "type": type_,
        "data": data,
    })
}

/// Polls `cond` every 10 ms for at most 10 s; panics naming `what` if it never holds.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether the source's cached Secret holds exactly this `tls.crt`.
pub fn cached_cert_is(source: &svc_tls::source::SecretSource, cert_pem: &str) -> bool {
    source
        .get()
        .and_then(|s| s.data.as_ref()?.get("tls.crt").cloned())
        .is_some_and(|b| b.0 == cert_pem.as_bytes())
}

/// The serial of a DER certificate as a u64 (test certificates use small serials).
pub fn serial_of(der: &[u8]) -> u64 {
    let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
    cert.tbs_certificate
        .raw_serial()
        .iter()
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
}

/// An in-process TLS 1.3 server that requires a client certificate issued by its
/// current client CA (swappable without restarting), answers every connection with a
/// minimal HTTP response whose body is the client leaf's serial, and records the leaves.
pub struct TestServer {
    pub addr: SocketAddr,
    config: Arc<Mutex<Arc<ServerConfig>>>,
    server_leaf: Leaf,
    pub seen: Arc<Mutex<Vec<CertificateDer<'static>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn server_config(server_leaf: &Leaf, client_ca: &TestCa) -> Arc<ServerConfig> {
    let provider = provider();
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(client_ca.roots()), provider.clone())
            .build()
            .unwrap();
    let config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![server_leaf.der.clone()],
            PrivateKeyDer::from_pem_slice(server_leaf.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    Arc::new(config)
}

impl TestServer {
    pub async fn start(server_ca: &TestCa, client_ca: &TestCa) -> Self {
        let server_leaf = server_ca.server_leaf();
        let config = Arc::new(Mutex::new(server_config(&server_leaf, client_ca)));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn({
            let config = config.clone();
            let seen = seen.clone();
            async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        continue;
                    };
                    let acceptor = tokio_rustls::TlsAcceptor::from(config.lock().unwrap().clone());
                    let seen = seen.clone();
                    tokio::spawn(async move {
                        let Ok(mut tls) = acceptor.accept(tcp).await else {
                            return;
                        };
                        let Some(leaf) = tls
                            .get_ref()
                            .1
                            .peer_certificates()
                            .and_then(|c| c.first())
                            .cloned()
                        else {
                            return;
                        };
                        let body = serial_of(&leaf).to_string();
                        seen.lock().unwrap().push(leaf.into_owned());
                        // Read the request head (or EOF), then answer and close.
                        let mut buf = Vec::new();
                        let mut chunk = [0u8; 1024];
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match tls.read(&mut chunk).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let response = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = tls.write_all(response.as_bytes()).await;
                        let _ = tls.shutdown().await;
                    });
                }
            }
        });
        Self {
            addr,
            config,
            server_leaf,
            seen,
            task,
        }
    }

    /// Trust client certificates from `client_ca` only, from the next connection on.
    pub fn set_client_ca(&self, client_ca: &TestCa) {
        *self.config.lock().unwrap() = server_config(&self.server_leaf, client_ca);
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}/", self.addr.port())
    }
}

/// One raw TLS connection: handshake, one request, the serial the server saw.
pub async fn handshake_serial(
    config: Arc<rustls::ClientConfig>,
    addr: SocketAddr,
) -> Result<u64, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let connector = tokio_rustls::TlsConnector::from(config);
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tls.write_all(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    tls.read_to_string(&mut response)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let body = response
        .split("\r\n\r\n")
        .nth(1)
        .ok_or_else(|| format!("no body in {response:?}"))?;
    body.trim()
        .parse()
        .map_err(|e| format!("serial {body:?}: {e}"))
}
