//! Peer trust: the seam a source implements ([`TrustSource`]), the rustls verifier
//! that reads it on every handshake ([`TrustVerifier`]), how servers are authorized
//! ([`ServerAuthorization`]), its visible state and recorder, and the two sources: a
//! watched CA Secret ([`SecretTrustSource`]) and a SPIFFE trust domain's bundle
//! ([`SpiffeTrustSource`]).
//!
//! ```text
//! handshake ─▶ TrustVerifier ─▶ dyn TrustSource ─▶ SecretTrustSource ─▶ watch::SecretSource
//!                   │                            └▶ SpiffeTrustSource ─▶ spiffe::WorkloadApiSource
//!                   └─▶ last_good::LastGood<roots + webpki verifier>
//! ```

mod authorization;
mod error;
mod from_secret;
mod from_spiffe;
mod source;
mod state;
mod verifier;

pub use authorization::{ServerAuthorization, SpiffeIdMismatch};
pub use error::{TrustError, TrustFailure};
pub use from_secret::{SecretTrustSource, TrustVerifierBuilder};
pub use from_spiffe::SpiffeTrustSource;
pub use source::{ReloadError, TrustSource};
pub use state::{Recorder, TrustRecovery, TrustStaleWarning, TrustState};
pub use verifier::TrustVerifier;

/// The trust seam's reload error under the name it had before the two halves
/// shared one shape.
pub type TrustReloadError = ReloadError;
