//! Test parts shared by the TLS integration tests, on top of test-support (re-exported
//! here: the test PKI, the `VerifyingServer` the tests talk to, `poll_until`):
//! svc-tls client configurations and Secrets in this suite's namespace.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls::crypto::CryptoProvider;
use svc_tls::client::{TrustMode, client_config};
use svc_tls::identity::IdentityResolver;

pub(crate) mod jws;
pub(crate) mod keys;
pub(crate) mod material;
pub(crate) mod nginx;

pub(crate) const NS: &str = "unikorn";

pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A TLS 1.3 client configuration trusting `server_ca`, presenting the resolver's
/// identity (or none).
pub(crate) fn trusting(server_ca: &TestCa, resolver: Option<&IdentityResolver>) -> ClientConfig {
    client_config(provider(), TrustMode::Roots(server_ca.roots()), resolver).unwrap()
}

#[allow(unused_imports)] // not every test binary names a Leaf
pub(crate) use test_support::pki::{Leaf, TestCa};
#[allow(unused_imports)]
pub(crate) use test_support::poll_until;
#[allow(unused_imports)]
pub(crate) use test_support::tls_server::VerifyingServer;
/// One raw TLS connection: handshake, one request, the serial the server saw.
#[allow(unused_imports)]
pub(crate) use test_support::tls_server::request_serial as handshake_serial;

/// A `kubernetes.io/tls` Secret in [`NS`] as the emulator stores it.
pub(crate) fn tls_secret(name: &str, cert_pem: &str, key_pem: &str) -> serde_json::Value {
    test_support::secret::tls_secret(NS, name, cert_pem, key_pem)
}

/// A Secret in [`NS`] of any type with the given data.
pub(crate) fn secret_with(name: &str, type_: &str, data: &[(&str, &str)]) -> serde_json::Value {
    test_support::secret::secret_with(NS, name, type_, data)
}

/// Whether the source's cached Secret holds exactly this `tls.crt`.
pub(crate) fn cached_cert_is(
    source: &svc_tls::watch::WatchedObject<svc_tls::watch::Secret>,
    cert_pem: &str,
) -> bool {
    source
        .get()
        .and_then(|s| s.data.as_ref()?.get("tls.crt").cloned())
        .is_some_and(|b| b.0 == cert_pem.as_bytes())
}

/// [`svc_tls::PeerTls::from_options`] over registries of this call's own, so that
/// tests running side by side never share a watch or a metric (the process's
/// registry is keyed by cluster and Secret, so sharing it would be safe, but a test's
/// counts would then depend on which test ran first).
pub(crate) async fn from_options_scoped(
    client: &svc_tls::ClusterClient,
    peer: &svc_tls::options::PeerOptions,
    me: &svc_tls::options::ClientIdentityOptions,
    timeout: Duration,
) -> Result<svc_tls::client::PeerTls, svc_tls::client::PeerClientError> {
    svc_tls::client::PeerTls::from_options_in(
        &svc_tls::watch::WatchedObjects::new(),
        &svc_tls::spiffe::WorkloadApiStreams::new(),
        client,
        peer,
        me,
        timeout,
    )
    .await
}
