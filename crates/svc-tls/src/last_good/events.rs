//! The one recorder shape both halves report to, and its events, generic over where
//! the value is read from (`O`: an [`IdentityOrigin`](crate::origin::IdentityOrigin)
//! or a [`TrustOrigin`](crate::origin::TrustOrigin)) and over the value served (`T`:
//! an [`Identity`](crate::material::Identity) or
//! [`TrustAnchors`](crate::material::TrustAnchors)).

use std::fmt;
use std::time::{Duration, SystemTime};

use super::{NoopRecorder, WatchHealthState};

/// Receives a half's state changes; implement it to export metrics. The trust
/// verifier takes a `Recorder<TrustOrigin, TrustAnchors>`; the identity resolver an
/// [`identity::Recorder`](crate::identity::Recorder), which is a
/// `Recorder<IdentityOrigin, Identity>` with one event of its own. One type may
/// implement it for both halves.
///
/// Called on the handshake path: implementations must be cheap and must not block
/// (update atomics or a metrics facade; no I/O, no long locks). Every method has a
/// no-op default.
pub trait Recorder<O: ?Sized, T: ?Sized>: Send + Sync + fmt::Debug + 'static {
    /// A value is now served: at start-up, and each time a read finds a new one (an
    /// unchanged source is not reported again), so `at` is the time of the last good
    /// reload.
    fn loaded(&self, source: &O, value: &T, at: SystemTime) {
        let _ = (source, value, at);
    }

    /// A reload failed; `failures` is the total number of failed reloads so far.
    fn reload_failed(&self, source: &O, error: &(dyn std::error::Error + 'static), failures: u64) {
        let _ = (source, error, failures);
    }

    /// A rate-limited stale warning was logged (at `WARN` through `tracing`): the last
    /// good value is still served.
    fn stale_warning(&self, warning: &StaleWarning<'_, O, T>) {
        let _ = warning;
    }

    /// Reloads succeed again after an episode of failures (rate-limited; logged at
    /// `INFO`).
    fn recovered(&self, recovery: &Recovery<'_, O, T>) {
        let _ = recovery;
    }

    /// The source's watch has been failing for `failing_for`, longer than the
    /// threshold (rate-limited; logged at `WARN`).
    fn watch_failing(&self, source: &O, health: &WatchHealthState, failing_for: Duration) {
        let _ = (source, health, failing_for);
    }

    /// The source's watch receives changes again after it was seen failing.
    fn watch_recovered(&self, source: &O, failed_for: Duration) {
        let _ = (source, failed_for);
    }
}

impl<O: ?Sized, T: ?Sized> Recorder<O, T> for NoopRecorder {}

/// A warning that a read failed and the last good value is still served (logged at
/// `WARN`, rate-limited).
#[derive(Debug)]
pub struct StaleWarning<'a, O: ?Sized, T: ?Sized> {
    /// Where the value is read from.
    pub source: &'a O,
    /// Why this read failed.
    pub error: &'a (dyn std::error::Error + 'static),
    /// The value still served (the last good one).
    pub serving: &'a T,
    /// How long the value served has been stale (since it was loaded).
    pub stale_for: Duration,
    /// Failures not warned about since the previous warning.
    pub suppressed: u64,
}

/// The end of an episode of failed reads (logged at `INFO`, rate-limited).
#[derive(Debug)]
pub struct Recovery<'a, O: ?Sized, T: ?Sized> {
    /// Where the value is read from.
    pub source: &'a O,
    /// The value served now.
    pub serving: &'a T,
    /// Failed reads during the episode.
    pub failures: u64,
    /// How long the episode lasted (first failure to recovery, monotonic clock).
    pub duration: Duration,
}
