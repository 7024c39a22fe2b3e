//! The identity half's settings, in one place: what an
//! [`IdentityResolverBuilder`](super::IdentityResolverBuilder) (and the options-based
//! constructors) build a resolver with. Adding a setting is adding a field here, its
//! default and its setter.

use std::time::Duration;

use crate::last_good::{
    DEFAULT_WARNING_PERIOD, DEFAULT_WATCH_FAILURE_THRESHOLD, MonotonicClock, slot::Settings,
};
use crate::watch::DEFAULT_SYNC_TIMEOUT;

/// The identity half's settings, in the shape of kube-runtime's `watcher::Config`:
/// public fields, [`Default`], and a `#[must_use]` setter per field.
///
/// ```
/// use std::time::Duration;
/// use svc_tls::identity::IdentitySettings;
///
/// let settings = IdentitySettings::default().sync_timeout(Duration::from_secs(10));
/// assert_eq!(settings.warning_period, Duration::from_secs(60));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IdentitySettings {
    /// Bound on waiting for the Secret's cache to sync at build time (default
    /// [`DEFAULT_SYNC_TIMEOUT`], 120 s).
    pub sync_timeout: Duration,
    /// At most one stale warning per this period (default one minute,
    /// [`DEFAULT_WARNING_PERIOD`]); periods longer than
    /// [`MAX_WARNING_PERIOD`](crate::last_good::MAX_WARNING_PERIOD) (a day) are
    /// clamped to it.
    pub warning_period: Duration,
    /// How long the Secret's watch may fail before a (rate-limited) warning says that
    /// rotations are not being seen (default one minute,
    /// [`DEFAULT_WATCH_FAILURE_THRESHOLD`]).
    pub watch_failure_threshold: Duration,
}

impl Default for IdentitySettings {
    fn default() -> Self {
        Self {
            sync_timeout: DEFAULT_SYNC_TIMEOUT,
            warning_period: DEFAULT_WARNING_PERIOD,
            watch_failure_threshold: DEFAULT_WATCH_FAILURE_THRESHOLD,
        }
    }
}

impl IdentitySettings {
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

    /// The last-good core's part of these settings, over `clock`.
    pub(crate) fn core(&self, clock: std::sync::Arc<dyn MonotonicClock>) -> Settings {
        Settings {
            clock,
            warning_period: self.warning_period,
            watch_threshold: self.watch_failure_threshold,
        }
    }
}
