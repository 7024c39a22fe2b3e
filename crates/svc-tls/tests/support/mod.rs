//! Test parts shared by the TLS integration tests: CAs and leaves generated with rcgen,
//! `kubernetes.io/tls` Secrets for the emulator; the TLS server the tests talk to is
//! kube-testbed's `VerifyingServer` (re-exported here).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use rustls::ClientConfig;
use rustls::crypto::CryptoProvider;
use svc_tls::client::{TrustMode, client_config};
use svc_tls::resolver::IdentityResolver;

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
#[allow(unused_imports)]
pub use kube_testbed::tls_server::VerifyingServer;

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

/// One raw TLS connection: handshake, one request, the serial the server saw.
pub async fn handshake_serial(
    config: Arc<rustls::ClientConfig>,
    addr: std::net::SocketAddr,
) -> Result<u64, String> {
    kube_testbed::tls_server::request_serial(config, addr).await
}

/// [`svc_tls::PeerTls::from_options`] over registries of this call's own, so that
/// tests running side by side against their own API emulators never share a watch
/// (the process's registry is keyed by Secret, not by cluster).
pub async fn from_options_scoped(
    client: &kube::Client,
    peer: &svc_tls::options::PeerOptions,
    me: &svc_tls::options::ClientIdentityOptions,
    timeout: Duration,
) -> Result<svc_tls::client::PeerTls, svc_tls::client::PeerClientError> {
    svc_tls::client::PeerTls::from_options_with(
        &svc_tls::watch::SecretWatches::new(),
        &svc_tls::spiffe::WorkloadApiStreams::new(),
        client,
        peer,
        me,
        timeout,
    )
    .await
}
