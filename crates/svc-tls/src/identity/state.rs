//! What the identity resolver tells the outside world: its visible state, the event
//! of its own (an identity outside its validity period), and the [`Recorder`] that
//! receives its state changes (a service that exports metrics implements it; the
//! default records nothing). The stale warning and the recovery are the shared
//! [`StaleWarning`] and [`Recovery`] of [`crate::last_good`].

use std::fmt;
use std::time::{Duration, SystemTime};

use crate::last_good::{NoopRecorder, Recovery, StaleWarning, WatchHealthState};
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

/// Receives the resolver's state changes; implement it to export metrics.
///
/// Called on the handshake path: implementations must be cheap and must not block
/// (update atomics or a metrics facade; no I/O, no long locks). Every method has a
/// no-op default.
pub trait Recorder: Send + Sync + fmt::Debug + 'static {
    /// An identity is now served: at start-up, and each time a reload reads a new one
    /// (so `at` is the time of the last good reload; an unchanged Secret is not
    /// reported again).
    fn loaded(&self, source: &IdentityOrigin, identity: &Identity, at: SystemTime) {
        let _ = (source, identity, at);
    }

    /// A reload failed; `failures` is the total number of failed reloads so far.
    fn reload_failed(
        &self,
        source: &IdentityOrigin,
        error: &(dyn std::error::Error + 'static),
        failures: u64,
    ) {
        let _ = (source, error, failures);
    }

    /// A rate-limited stale-identity warning was logged (at `WARN` through `tracing`).
    fn stale_warning(&self, warning: &StaleWarning<'_, IdentityOrigin, Identity>) {
        let _ = warning;
    }

    /// The served identity is expired or not yet valid (at start-up, or as the last
    /// good identity after failed reloads). Rate-limited like the warnings; logged at
    /// `ERROR`.
    fn invalid_identity(&self, event: &InvalidIdentity<'_>) {
        let _ = event;
    }

    /// Reloads succeed again after an episode of failures (rate-limited; logged at
    /// `INFO`).
    fn recovered(&self, recovery: &Recovery<'_, IdentityOrigin, Identity>) {
        let _ = recovery;
    }

    /// The source's watch has been failing for `failing_for`, longer than the
    /// threshold (rate-limited; logged at `WARN`).
    fn watch_failing(
        &self,
        source: &IdentityOrigin,
        health: &WatchHealthState,
        failing_for: Duration,
    ) {
        let _ = (source, health, failing_for);
    }

    /// The source's watch receives changes again after it was seen failing.
    fn watch_recovered(&self, source: &IdentityOrigin, failed_for: Duration) {
        let _ = (source, failed_for);
    }
}

impl Recorder for NoopRecorder {}
