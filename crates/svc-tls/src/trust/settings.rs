//! The trust half's settings, in one place: what a [`TrustVerifierBuilder`](super::TrustVerifierBuilder)
//! (and the options-based constructors) build a verifier with. Adding a setting is
//! adding a field here, its default and its setter.

use std::time::Duration;

use crate::last_good::{
    DEFAULT_WARNING_PERIOD, DEFAULT_WATCH_FAILURE_THRESHOLD, MonotonicClock, slot::Settings,
};
use crate::watch::DEFAULT_SYNC_TIMEOUT;

/// How long a verifier keeps using the last good roots after their CA Secret (or
/// ConfigMap) was deleted or became unreadable, before it fails closed: one day. Long
/// enough to ride out a Secret being recreated (a GitOps sync, a cert-manager
/// re-issue, a hand-made mistake fixed the same day) without failing every call; no
/// longer than the Go client's first generation, which re-read trust once every 24
/// hours, kept trust from a deleted Secret. See
/// `docs/decisions/one-watch-per-secret.md`.
pub const DEFAULT_MAX_ROOTS_WITHOUT_SOURCE: Duration = Duration::from_secs(24 * 60 * 60);

/// The trust half's settings, in the shape of kube-runtime's `watcher::Config`:
/// public fields, [`Default`], and a `#[must_use]` setter per field.
///
/// ```
/// use std::time::Duration;
/// use svc_tls::trust::TrustSettings;
///
/// let settings = TrustSettings::default()
///     .sync_timeout(Duration::from_secs(10))
///     .max_roots_without_source(Duration::from_secs(3600));
/// assert_eq!(settings.warning_period, Duration::from_secs(60));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TrustSettings {
    /// Bound on waiting for the watched object's cache to sync at build time
    /// (default [`DEFAULT_SYNC_TIMEOUT`], 120 s).
    pub sync_timeout: Duration,
    /// At most one stale warning per this period (default one minute,
    /// [`DEFAULT_WARNING_PERIOD`]); periods longer than
    /// [`MAX_WARNING_PERIOD`](crate::last_good::MAX_WARNING_PERIOD) (a day) are
    /// clamped to it.
    pub warning_period: Duration,
    /// How long the watch may fail before a (rate-limited) warning says that
    /// rotations are not being seen (default one minute,
    /// [`DEFAULT_WATCH_FAILURE_THRESHOLD`]).
    pub watch_failure_threshold: Duration,
    /// How long the last good roots stay in use once the CA Secret or ConfigMap is
    /// deleted or unreadable (no usable root), or its watch is refused, before every
    /// server is refused (default [`DEFAULT_MAX_ROOTS_WITHOUT_SOURCE`], one day). A
    /// watch that is only down (the API server unreachable) keeps them.
    pub max_roots_without_source: Duration,
    /// How long the last good roots stay in use while the API server refuses the
    /// watch of the CA Secret or ConfigMap (401: the credentials were revoked; 403:
    /// the read grant was withdrawn), before every server is refused; `None` (the
    /// default): [`max_roots_without_source`](Self::max_roots_without_source), as for
    /// a deleted object. A shorter bound fails closed sooner when a revoked
    /// credential, not a recreated Secret, is the likelier cause.
    pub max_roots_while_refused: Option<Duration>,
}

impl Default for TrustSettings {
    fn default() -> Self {
        Self {
            sync_timeout: DEFAULT_SYNC_TIMEOUT,
            warning_period: DEFAULT_WARNING_PERIOD,
            watch_failure_threshold: DEFAULT_WATCH_FAILURE_THRESHOLD,
            max_roots_without_source: DEFAULT_MAX_ROOTS_WITHOUT_SOURCE,
            max_roots_while_refused: None,
        }
    }
}

impl TrustSettings {
    /// Sets [`sync_timeout`](Self::sync_timeout).
    #[must_use]
    pub fn sync_timeout(mut self, timeout: Duration) -> Self {
        self.sync_timeout = timeout;
        self
    }

    /// Sets [`warning_period`](Self::warning_period).
    #[must_use]
    pub fn warning_period(mut self, period: Duration) -> Self {
        self.warning_period = period;
        self
    }

    /// Sets [`watch_failure_threshold`](Self::watch_failure_threshold).
    #[must_use]
    pub fn watch_failure_threshold(mut self, threshold: Duration) -> Self {
        self.watch_failure_threshold = threshold;
        self
    }

    /// Sets [`max_roots_without_source`](Self::max_roots_without_source).
    #[must_use]
    pub fn max_roots_without_source(mut self, limit: Duration) -> Self {
        self.max_roots_without_source = limit;
        self
    }

    /// Sets [`max_roots_while_refused`](Self::max_roots_while_refused).
    #[must_use]
    pub fn max_roots_while_refused(mut self, limit: Duration) -> Self {
        self.max_roots_while_refused = Some(limit);
        self
    }

    /// The bound on the last good roots while the watch is refused.
    pub(crate) fn refused_bound(&self) -> Duration {
        self.max_roots_while_refused
            .unwrap_or(self.max_roots_without_source)
    }

    /// The last-good core's part of these settings, over `clock`.
    pub(crate) fn core(&self, clock: std::sync::Arc<dyn MonotonicClock>) -> Settings {
        Settings {
            clock,
            warning_period: self.warning_period,
            watch_threshold: self.watch_failure_threshold,
        }
    }
}
