//! The client identity: the seam a source implements ([`IdentitySource`]), the
//! rustls resolver that reads it on every handshake ([`IdentityResolver`]), its
//! visible state and recorder, and the two sources: a watched `kubernetes.io/tls`
//! Secret ([`SecretIdentitySource`]) and the SPIFFE Workload API's X509-SVID
//! ([`SpiffeIdentitySource`]).
//!
//! ```text
//! handshake ─▶ IdentityResolver ─▶ dyn IdentitySource ─▶ SecretIdentitySource ─▶ watch::SecretSource
//!                    │                                 └▶ SpiffeIdentitySource ─▶ spiffe::WorkloadApiSource
//!                    └─▶ last_good::LastGood<Identity> (last good, episodes, watch health)
//! ```

mod from_secret;
mod from_spiffe;
mod resolver;
mod settings;
mod source;
mod state;

pub use from_secret::{IdentityObject, IdentityResolverBuilder, SecretIdentitySource};
pub use from_spiffe::SpiffeIdentitySource;
#[cfg(feature = "metrics")]
pub(crate) use resolver::WeakIdentityResolver;
pub use resolver::{IdentityError, IdentityResolver};
pub use settings::IdentitySettings;
pub use source::{IdentityReloadError, IdentitySource};
pub use state::IdentityState;
