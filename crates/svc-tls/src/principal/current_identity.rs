//! What a signer signs with: the identity in force at the time of each signature.

use std::convert::Infallible;
use std::sync::Arc;

use crate::identity::IdentityResolver;
use crate::material::Identity;

/// A source of the identity in force *now* (the one the next handshake presents).
///
/// The TLS resolver implements it, so a [`PrincipalSigner`](super::PrincipalSigner) built over the resolver
/// signs with the same Secret as the handshake and follows rotations. An [`Identity`]
/// implements it for itself (a fixed identity).
pub trait CurrentIdentity {
    /// Why the identity is unavailable.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The identity in force at the time of the call.
    fn current(&self) -> Result<Identity, Self::Error>;
}

impl CurrentIdentity for Identity {
    type Error = Infallible;

    fn current(&self) -> Result<Identity, Infallible> {
        Ok(self.clone())
    }
}

impl<T: CurrentIdentity + ?Sized> CurrentIdentity for Arc<T> {
    type Error = T::Error;

    fn current(&self) -> Result<Identity, Self::Error> {
        (**self).current()
    }
}

impl<T: CurrentIdentity + ?Sized> CurrentIdentity for &T {
    type Error = T::Error;

    fn current(&self) -> Result<Identity, Self::Error> {
        (**self).current()
    }
}

/// The resolver's identity: the Secret is re-read from the watched cache now, exactly
/// as a handshake does ([`IdentityResolver::reload`]); when that fails, the last good
/// identity (the one handshakes keep presenting) signs. Go's `EncodeAndSign` also read
/// the Secret afresh for every principal.
///
/// A pooled connection keeps the identity it was opened with, so just after a
/// rotation a principal signed with the new key can travel on a connection that
/// presented the old certificate; Go's client behaves the same way.
impl CurrentIdentity for IdentityResolver {
    type Error = Infallible;

    fn current(&self) -> Result<Identity, Infallible> {
        Ok(self.reload())
    }
}
