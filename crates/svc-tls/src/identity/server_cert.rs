//! [`IdentityResolver`] as rustls's [`ResolvesServerCert`]: the serving half presents
//! the identity the client half calls with, read on every handshake the same way (one
//! snapshot, no lock, no I/O, the last good identity while the source fails).

use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::IdentityResolver;

impl ResolvesServerCert for IdentityResolver {
    /// Called by rustls once per full server handshake (resumption is off on the
    /// configurations [`crate::serving::ServerTls`] builds). The identity is the
    /// same whatever name the caller asked for: one service, one identity.
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.reload().certified_key().clone())
    }
}
