//! The SPIFFE Workload API stream: the X509-SVID (client identity) and the trust
//! bundles, streamed and rotated by the node agent (SPIRE, or the SPIFFE CSI driver's
//! socket). The seams' adapters over it live with the seams:
//! [`SpiffeIdentitySource`](crate::identity::SpiffeIdentitySource) and
//! [`SpiffeTrustSource`](crate::trust::SpiffeTrustSource).
//!
//! One [`WorkloadApiSource`] holds one `FetchX509SVID` stream (the `spiffe` crate's
//! client; nothing here speaks gRPC itself) for the life of the process. A background
//! task turns every message into a snapshot — the default SVID as a
//! loaded [`Identity`](crate::material::Identity) and each trust domain's bundle as
//! [`TrustAnchors`](crate::material::TrustAnchors) — and swaps it into a lock-free
//! slot. The two seams read that slot on the handshake path and never do I/O:
//!
//! - [`SpiffeIdentitySource`](crate::identity::SpiffeIdentitySource) is the resolver's
//!   [`IdentitySource`](crate::identity::IdentitySource):
//!   the SVID of the newest message is presented on the very next handshake. While the
//!   stream is down it reports the failure, so the resolver serves the last good SVID
//!   under its usual rate-limited warning (suppressed count, stale age).
//! - [`SpiffeTrustSource`](crate::trust::SpiffeTrustSource) is the verifier's
//!   [`TrustSource`](crate::trust::TrustSource):
//!   the bundle of one trust domain, so bundle updates apply at once.
//!
//! The server is then authorized by its exact SPIFFE ID
//! ([`ServerAuthorization::SpiffeId`](crate::trust::ServerAuthorization)), not by
//! host name: an SVID names a workload in a URI SAN, and the Workload API issues no DNS
//! names a client could check, so a host-name check would either fail on every SVID or
//! pass on a name nobody vouched for.
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use svc_tls::spiffe::{SpiffeEndpoint, WorkloadApiSource};
//!
//! let endpoint = SpiffeEndpoint::from_env()?; // SPIFFE_ENDPOINT_SOCKET
//! let provider = Arc::new(svc_tls::material::crypto_provider());
//! let source = WorkloadApiSource::connect(endpoint, provider, std::time::Duration::from_secs(30)).await?;
//! println!("this workload is {}", source.spiffe_id());
//! # Ok(()) }
//! ```

mod error;
mod stream;
mod streams;
mod svid;

pub use error::{BundleError, SpiffeError, SpiffeStartError, SvidError};
pub use stream::{SpiffeEndpoint, WorkloadApiSource};
pub use streams::WorkloadApiStreams;
pub(crate) use svid::check_validity;

/// The environment variable the SPIFFE specification defines for the Workload API
/// address (`unix:` path or `tcp:` address).
pub const SPIFFE_ENDPOINT_SOCKET: &str = "SPIFFE_ENDPOINT_SOCKET";

pub use ::spiffe::{SpiffeId, TrustDomain};
