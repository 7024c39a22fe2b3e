//! What the identity resolver tells the outside world through its state. Its events
//! (loaded, failed, stale, recovered, outside its validity period, watch health) are
//! the shared ones of [`crate::last_good`], received by a
//! [`ReloadRecorder<IdentityOrigin, Identity>`](crate::last_good::ReloadRecorder).

use std::time::SystemTime;

use crate::last_good::WatchHealthState;
use crate::material::CertificateValidity;
use crate::origin::IdentityOrigin;

/// The resolver's visible state, as returned by
/// [`IdentityResolver::state`](crate::identity::IdentityResolver::state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityState {
    /// Where the identity is read from (the client-certificate Secret, mounted
    /// files, or the SPIFFE Workload API). Was `source` before issue 53.
    pub origin: IdentityOrigin,
    /// Serial number (hex) of the identity currently served (the last good one).
    pub serial_hex: String,
    /// The served SVID's SPIFFE ID, when the identity comes from the SPIFFE
    /// Workload API.
    pub spiffe_id: Option<String>,
    /// When the served certificate expires.
    pub not_after: SystemTime,
    /// Wall-clock time of the last successful reload.
    pub last_good_reload: SystemTime,
    /// Failed reloads since the resolver was built (the readiness probe's failed
    /// reads are not counted).
    pub failures: u64,
    /// Whether the most recent read failed, a reload or the readiness probe's (the
    /// served identity is stale).
    pub stale: bool,
    /// Whether the served certificate is inside its validity period now.
    pub validity: CertificateValidity,
    /// The health of the source's watch (`None` for a source without one).
    pub watch: Option<WatchHealthState>,
}
