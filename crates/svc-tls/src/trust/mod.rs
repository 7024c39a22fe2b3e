//! Peer trust: the seam a source implements ([`TrustSource`]), the rustls verifier
//! that reads it on every handshake ([`TrustVerifier`]), how servers are authorized
//! ([`ServerAuthorization`]), its visible state, and the two sources: a
//! watched CA Secret ([`SecretTrustSource`]), a watched CA ConfigMap's PEM bundle
//! ([`ConfigMapTrustSource`], trust-manager's default target) and a SPIFFE trust
//! domain's bundle ([`SpiffeTrustSource`]).
//!
//! ```text
//! handshake ─▶ TrustVerifier ─▶ dyn TrustSource ─▶ SecretTrustSource ─▶ watch::SecretSource
//!                   │                            ├▶ ConfigMapTrustSource ─▶ watch::ConfigMapSource
//!                   │                            └▶ SpiffeTrustSource ─▶ spiffe::WorkloadApiSource
//!                   └─▶ last_good::LastGood<roots + webpki verifier>
//! ```

mod authorization;
mod error;
mod from_configmap;
mod from_secret;
mod from_spiffe;
mod settings;
mod source;
mod state;
mod verifier;

pub use authorization::{ServerAuthorization, SpiffeIdMismatch};
pub use error::TrustError;
pub use from_configmap::{ConfigMapTrustSource, DEFAULT_CONFIGMAP_KEY};
pub use from_secret::{SecretTrustSource, TrustObject, TrustVerifierBuilder};
pub use from_spiffe::SpiffeTrustSource;
pub use settings::{DEFAULT_MAX_ROOTS_WITHOUT_SOURCE, TrustSettings};
pub use source::{TrustReloadError, TrustSource};
pub use state::TrustState;
pub use verifier::TrustVerifier;
#[cfg(feature = "metrics")]
pub(crate) use verifier::WeakTrustVerifier;
