//! What the trust verifier tells the outside world: its visible state. Its state
//! changes go to the shared [`ReloadRecorder`](crate::last_good::ReloadRecorder), for
//! `<TrustOrigin, TrustAnchors>`.

use std::time::SystemTime;

use crate::last_good::WatchHealthState;
use crate::origin::TrustOrigin;

/// The verifier's visible state, as returned by
/// [`TrustVerifier::state`](super::TrustVerifier::state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustState {
    /// Where the roots are read from. Was `source` before issue 53.
    pub origin: TrustOrigin,
    /// How many roots are used (the last good set).
    pub roots: usize,
    /// The earliest `notAfter` among the roots used, when known.
    pub not_after: Option<SystemTime>,
    /// Wall-clock time the roots used were loaded.
    pub last_good_reload: SystemTime,
    /// Failed reloads since the verifier was built (the readiness probe's failed
    /// reads are not counted).
    pub failures: u64,
    /// Whether the most recent read failed, a reload or the readiness probe's (the
    /// roots used are stale).
    pub stale: bool,
    /// The last error of the watch behind the source, if it is failing now.
    pub watch_error: Option<String>,
    /// The health of the source's watch (`None` for a source without one).
    pub watch: Option<WatchHealthState>,
    /// Whether the source's latest answer withdrew its trust (every server is
    /// refused until it trusts roots again).
    pub withdrawn: bool,
}
