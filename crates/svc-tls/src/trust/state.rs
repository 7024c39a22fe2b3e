//! What the trust verifier tells the outside world: its visible state and the
//! [`Recorder`] that receives its state changes (the stale warning and the recovery
//! are the shared [`StaleWarning`] and [`Recovery`] of [`crate::last_good`]).

use std::fmt;
use std::time::{Duration, SystemTime};

use crate::last_good::{NoopRecorder, Recovery, StaleWarning, WatchHealthState};
use crate::material::TrustAnchors;
use crate::origin::TrustOrigin;

/// The verifier's visible state, as returned by
/// [`TrustVerifier::state`](super::TrustVerifier::state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustState {
    /// Where the roots are read from.
    pub source: TrustOrigin,
    /// How many roots are used (the last good set).
    pub roots: usize,
    /// The earliest `notAfter` among the roots used, when known.
    pub not_after: Option<SystemTime>,
    /// Wall-clock time the roots used were loaded.
    pub last_good_reload: SystemTime,
    /// Failed reloads since the verifier was built.
    pub failures: u64,
    /// Whether the most recent reload failed (the roots used are stale).
    pub stale: bool,
    /// The last error of the watch behind the source, if it is failing now.
    pub watch_error: Option<String>,
    /// The health of the source's watch (`None` for a source without one).
    pub watch: Option<WatchHealthState>,
    /// Whether the source's latest answer withdrew its trust (every server is
    /// refused until it trusts roots again).
    pub withdrawn: bool,
}

/// Receives the trust verifier's state changes; implement it to export metrics.
///
/// Called on the handshake path: implementations must be cheap and must not block.
/// Every method has a no-op default. It has the shape and the names of the identity
/// resolver's [`Recorder`](crate::identity::Recorder); one type may implement both
/// (call such a type's methods through the trait, e.g. `trust::Recorder::loaded`).
pub trait Recorder: Send + Sync + fmt::Debug + 'static {
    /// A new root set is used (at start-up, and each time the roots change; an
    /// unchanged Secret is not reported again).
    fn loaded(&self, source: &TrustOrigin, anchors: &TrustAnchors, at: SystemTime) {
        let _ = (source, anchors, at);
    }

    /// A reload failed; `failures` is the total number of failed reloads so far.
    fn reload_failed(
        &self,
        source: &TrustOrigin,
        error: &(dyn std::error::Error + 'static),
        failures: u64,
    ) {
        let _ = (source, error, failures);
    }

    /// A rate-limited stale-trust warning was logged (at `WARN` through `tracing`).
    fn stale_warning(&self, warning: &StaleWarning<'_, TrustOrigin, TrustAnchors>) {
        let _ = warning;
    }

    /// Reloads succeed again after an episode of failures (rate-limited; logged at
    /// `INFO`).
    fn recovered(&self, recovery: &Recovery<'_, TrustOrigin, TrustAnchors>) {
        let _ = recovery;
    }

    /// The source's watch has been failing for `failing_for`, longer than the
    /// threshold (rate-limited; logged at `WARN`).
    fn watch_failing(
        &self,
        source: &TrustOrigin,
        health: &WatchHealthState,
        failing_for: Duration,
    ) {
        let _ = (source, health, failing_for);
    }

    /// The source's watch receives changes again after it was seen failing.
    fn watch_recovered(&self, source: &TrustOrigin, failed_for: Duration) {
        let _ = (source, failed_for);
    }
}

impl Recorder for NoopRecorder {}
