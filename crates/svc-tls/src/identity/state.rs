//! What the identity resolver tells the outside world: its visible state, the event
//! of its own (an identity outside its validity period), and the [`Recorder`] that
//! receives its state changes (a service that exports metrics implements it; the
//! default records nothing). The rest of its events, the stale warning and the
//! recovery among them, are the shared ones of [`crate::last_good`].

use std::time::SystemTime;

use crate::last_good::{self, NoopRecorder, WatchHealthState};
use crate::material::{CertificateValidity, Identity};
use crate::origin::IdentityOrigin;

/// The served identity is outside its validity period: every peer refuses it.
#[derive(Debug)]
pub struct InvalidIdentity<'a> {
    /// Where the identity comes from.
    pub source: &'a IdentityOrigin,
    /// Serial number (hex) of the identity being served.
    pub serial_hex: &'a str,
    /// Expired or not yet valid.
    pub validity: CertificateValidity,
    /// Why the last reload failed, when the invalid identity is served as the last
    /// good one (`None` at start-up).
    pub reload_error: Option<&'a (dyn std::error::Error + 'static)>,
    /// Reports suppressed by the limiter since the previous one.
    pub suppressed: u64,
}

/// The resolver's visible state, as returned by
/// [`IdentityResolver::state`](crate::identity::IdentityResolver::state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityState {
    /// Where the identity is read from (the client-certificate Secret, or the SPIFFE
    /// Workload API).
    pub source: IdentityOrigin,
    /// Serial number (hex) of the identity currently served (the last good one).
    pub serial_hex: String,
    /// The served SVID's SPIFFE ID, when the identity comes from the SPIFFE
    /// Workload API.
    pub spiffe_id: Option<String>,
    /// When the served certificate expires.
    pub not_after: SystemTime,
    /// Wall-clock time of the last successful reload.
    pub last_good_reload: SystemTime,
    /// Failed reloads since the resolver was built.
    pub failures: u64,
    /// Whether the most recent reload failed (the served identity is stale).
    pub stale: bool,
    /// Whether the served certificate is inside its validity period now.
    pub validity: CertificateValidity,
    /// The health of the source's watch (`None` for a source without one).
    pub watch: Option<WatchHealthState>,
}

/// Receives the resolver's state changes; implement it to export metrics: the
/// shared [`last_good::Recorder`] for an identity, and the one event of the identity's
/// own, [`Recorder::invalid_identity`] (no-op by default: an implementation that does
/// not need it writes `impl identity::Recorder for MyRecorder {}`).
///
/// Called on the handshake path: implementations must be cheap and must not block.
pub trait Recorder: last_good::Recorder<IdentityOrigin, Identity> {
    /// The served identity is expired or not yet valid (at start-up, or as the last
    /// good identity after failed reloads). Rate-limited like the warnings; logged at
    /// `ERROR`.
    fn invalid_identity(&self, event: &InvalidIdentity<'_>) {
        let _ = event;
    }
}

impl Recorder for NoopRecorder {}
