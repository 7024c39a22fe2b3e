//! The one recorder both halves report to, [`ReloadRecorder`], and its events, generic over where
//! the value is read from (`O`: an [`IdentityOrigin`](crate::origin::IdentityOrigin)
//! or a [`TrustOrigin`](crate::origin::TrustOrigin)) and over the value served (`T`:
//! an [`Identity`](crate::material::Identity) or
//! [`TrustAnchors`](crate::material::TrustAnchors)). A failed read is the half's own
//! error, [`ReloadOrigin::Error`], so a recorder matches on it rather than
//! downcasting.

use std::fmt;
use std::time::{Duration, SystemTime};

use super::report::sealed::Sealed;
use super::{NoopRecorder, WatchHealthState};
use crate::material::CertificateValidity;

/// Where a half's value is read from, and the error a failed read of it is: the
/// recorder's failure events carry that error typed.
///
/// Implemented for [`IdentityOrigin`](crate::origin::IdentityOrigin) (its failures
/// are [`IdentityReloadError`](crate::identity::IdentityReloadError)) and
/// [`TrustOrigin`](crate::origin::TrustOrigin) (its failures are
/// [`TrustReloadError`](crate::trust::TrustReloadError)) only.
///
/// ```
/// use svc_tls::identity::IdentityReloadError;
/// use svc_tls::last_good::ReloadRecorder;
/// use svc_tls::material::Identity;
/// use svc_tls::origin::IdentityOrigin;
///
/// #[derive(Debug)]
/// struct NotFoundAlarm;
///
/// impl ReloadRecorder<IdentityOrigin, Identity> for NotFoundAlarm {
///     fn reload_failed(&self, origin: &IdentityOrigin, error: &IdentityReloadError, _: u64) {
///         if let IdentityReloadError::NotFound { secret } = error {
///             eprintln!("{origin}: Secret {secret} is gone");
///         }
///     }
/// }
/// ```
pub trait ReloadOrigin: Sealed + fmt::Display + fmt::Debug + Send + Sync + 'static {
    /// Why one read of the half's source failed.
    type Error: std::error::Error + 'static;
}

/// Receives a half's state changes; implement it to export metrics. The trust
/// verifier takes a `ReloadRecorder<TrustOrigin, TrustAnchors>`, the identity resolver
/// a `ReloadRecorder<IdentityOrigin, Identity>`; one type may implement it for both
/// halves.
///
/// Called on the handshake path: implementations must be cheap and must not block
/// (update atomics or a metrics facade; no I/O, no long locks). Every method has a
/// no-op default.
pub trait ReloadRecorder<O: ReloadOrigin, T: ?Sized>: Send + Sync + fmt::Debug + 'static {
    /// A value is now served: at start-up, and each time a read finds a new one (an
    /// unchanged value is not reported again), so `at` is the time of the last good
    /// reload.
    fn loaded(&self, origin: &O, value: &T, at: SystemTime) {
        let _ = (origin, value, at);
    }

    /// A handshake's reload failed; `failures` is the total number of failed reloads
    /// so far (the readiness probe's are [`ReloadRecorder::probe_read_failed`]).
    fn reload_failed(&self, origin: &O, error: &O::Error, failures: u64) {
        let _ = (origin, error, failures);
    }

    /// The readiness probe's read of the source failed: the last good value is still
    /// served and the episode of failures has begun (the bounds on a gone source count
    /// from it), but it is not a handshake's reload failure, so
    /// [`ReloadRecorder::reload_failed`]'s count and the stale warnings leave it out.
    fn probe_read_failed(&self, origin: &O, error: &O::Error) {
        let _ = (origin, error);
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
    fn watch_failing(&self, origin: &O, health: &WatchHealthState, failing_for: Duration) {
        let _ = (origin, health, failing_for);
    }

    /// The source's watch receives changes again after it was seen failing.
    fn watch_recovered(&self, origin: &O, failed_for: Duration) {
        let _ = (origin, failed_for);
    }

    /// The value served is outside its validity period, so every peer refuses it: at
    /// start-up, or as the last good value after failed reloads (rate-limited like
    /// the warnings; logged at `ERROR`).
    ///
    /// Reported by the identity resolver, whose expired certificate is still
    /// presented. The trust verifier does not report it: once its last good roots
    /// have expired it refuses every server, and each refused handshake's error says
    /// so.
    fn outside_validity(&self, event: &OutsideValidity<'_, O, T>) {
        let _ = event;
    }
}

impl<O: ReloadOrigin, T: ?Sized> ReloadRecorder<O, T> for NoopRecorder {}

/// A warning that a read failed and the last good value is still served (logged at
/// `WARN`, rate-limited).
#[derive(Debug)]
pub struct StaleWarning<'a, O: ReloadOrigin, T: ?Sized> {
    /// Where the value is read from.
    pub origin: &'a O,
    /// Why this read failed.
    pub error: &'a O::Error,
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
    pub origin: &'a O,
    /// The value served now.
    pub serving: &'a T,
    /// Failed reads during the episode.
    pub failures: u64,
    /// How long the episode lasted (first failure to recovery, monotonic clock).
    pub duration: Duration,
}

/// The value served is outside its validity period: every peer refuses it.
#[derive(Debug)]
pub struct OutsideValidity<'a, O: ReloadOrigin, T: ?Sized> {
    /// Where the value is read from.
    pub origin: &'a O,
    /// The value served (for an identity, its serial number is
    /// [`Identity::serial_hex`](crate::material::Identity::serial_hex)).
    pub serving: &'a T,
    /// Expired or not yet valid.
    pub validity: CertificateValidity,
    /// Why the last reload failed, when the value is served as the last good one
    /// (`None` at start-up).
    pub reload_error: Option<&'a O::Error>,
    /// Reports suppressed by the limiter since the previous one.
    pub suppressed: u64,
}
