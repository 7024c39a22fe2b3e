//! How long the watch (or stream) behind a source has been failing, and when to say
//! so: looked at by at most one handshake a second, warned about (rate-limited) once it
//! has failed for longer than a threshold, and one line when it receives changes again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::clock::MonotonicClock;
use super::limiter::WarningLimiter;
use super::slot::nanos;
use crate::origin::SourceHealth;

/// How long the watch of a Secret (or the SPIFFE stream) may fail before the resolver
/// or the verifier warns
/// (default of
/// [`IdentitySettings::watch_failure_threshold`](crate::identity::IdentitySettings::watch_failure_threshold)
/// and [`TrustSettings::watch_failure_threshold`](crate::trust::TrustSettings::watch_failure_threshold)).
/// Short outages (an API server rollout) heal on their own and only log at the
/// watch layer.
pub const DEFAULT_WATCH_FAILURE_THRESHOLD: Duration = Duration::from_secs(60);

/// The health of the watch (or stream) a value is read from, as shown in
/// [`IdentityState`](crate::identity::IdentityState) and
/// [`TrustState`](crate::trust::TrustState).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchHealthState {
    /// Whether the watch is receiving changes.
    pub connected: bool,
    /// The last watch error while it is failing.
    pub last_error: Option<String>,
    /// When the resolver or verifier first saw it failing (wall clock), while it is failing.
    pub failing_since: Option<SystemTime>,
}

/// How often, at most, a handshake looks at the source's watch health.
const HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// What changed in the watch's health, for the caller to log and record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchEvent {
    /// The watch receives changes again after it was seen failing for `failed_for`.
    Recovered {
        /// How long it failed.
        failed_for: Duration,
    },
    /// The watch has been failing for `failing_for`, longer than the threshold (this
    /// report was admitted by the rate limit; `suppressed` were held back before it).
    Failing {
        /// How long it has been failing.
        failing_for: Duration,
        /// Reports held back since the previous one.
        suppressed: u64,
    },
}

/// How a half names itself in the watch lines: the subject (`client certificate`,
/// `CA trust`) and what a failing watch means for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WatchWords {
    /// Whose source it is (e.g. `client certificate`).
    pub(crate) subject: &'static str,
    /// What is missed and what is used meanwhile.
    pub(crate) consequence: &'static str,
}

impl WatchEvent {
    /// Logs the event: `INFO` for a recovery, `WARN` for a failing watch.
    pub(crate) fn log(
        &self,
        origin: &dyn std::fmt::Display,
        state: &WatchHealthState,
        words: WatchWords,
    ) {
        let subject = words.subject;
        match *self {
            Self::Recovered { failed_for } => tracing::info!(
                source = %origin,
                failed_for_secs = failed_for.as_secs(),
                "the watch of the {subject}'s source receives changes again (it failed for {}s)",
                failed_for.as_secs(),
            ),
            Self::Failing {
                failing_for,
                suppressed,
            } => tracing::warn!(
                source = %origin,
                error = %watch_ready::excerpt::escaped(
                    state.last_error.as_deref().unwrap_or("none"),
                    watch_ready::excerpt::LOGGED_CHAIN_CHARS,
                ),
                failing_for_secs = failing_for.as_secs(),
                suppressed,
                "the watch of the {subject}'s source has been failing for {}s: {}",
                failing_for.as_secs(),
                words.consequence,
            ),
        }
    }
}

/// Since when the watch fails (lock-free), and the limit on saying so.
pub(crate) struct WatchTracker {
    threshold: Duration,
    /// Monotonic nanoseconds (plus one) when the watch was first seen failing; 0 while
    /// it is connected.
    failing_since: AtomicU64,
    /// The same instant on the wall clock (nanoseconds since the epoch).
    failing_since_wall: AtomicU64,
    /// Monotonic nanoseconds of the next look by a handshake.
    next_check: AtomicU64,
    warnings: WarningLimiter,
}

impl WatchTracker {
    pub(crate) fn new(
        threshold: Duration,
        period: Duration,
        clock: Arc<dyn MonotonicClock>,
    ) -> Self {
        Self {
            threshold,
            failing_since: AtomicU64::new(0),
            failing_since_wall: AtomicU64::new(0),
            next_check: AtomicU64::new(0),
            warnings: WarningLimiter::new(period, clock),
        }
    }

    /// Whether the handshake at `now` is the one that looks at the watch: at most one
    /// per [`HEALTH_CHECK_INTERVAL`] (one atomic load otherwise).
    pub(crate) fn due(&self, now: Duration) -> bool {
        let now_nanos = nanos(now);
        let next = self.next_check.load(Ordering::Relaxed);
        if now_nanos < next {
            return false;
        }
        self.next_check
            .compare_exchange(
                next,
                now_nanos.saturating_add(nanos(HEALTH_CHECK_INTERVAL)),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// The watch's state given its `health` at `now`, tracking since when it fails,
    /// and what to report: a recovery always, a failure only with `report` (and then
    /// past the threshold and within the rate limit).
    pub(crate) fn observe(
        &self,
        health: SourceHealth,
        now: Duration,
        report: bool,
    ) -> (WatchHealthState, Option<WatchEvent>) {
        let since = self.failing_since.load(Ordering::Acquire);
        if health.connected {
            let event = (since != 0
                && self
                    .failing_since
                    .compare_exchange(since, 0, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok())
            .then(|| {
                self.warnings.end_episode();
                WatchEvent::Recovered {
                    failed_for: now.saturating_sub(Duration::from_nanos(since - 1)),
                }
            });
            let state = WatchHealthState {
                connected: true,
                last_error: None,
                failing_since: None,
            };
            return (state, event);
        }
        let since = if since == 0 {
            let mine = nanos(now).saturating_add(1);
            match self
                .failing_since
                .compare_exchange(0, mine, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    let wall = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, nanos);
                    self.failing_since_wall.store(wall, Ordering::Release);
                    mine
                }
                Err(other) => other,
            }
        } else {
            since
        };
        let failing_for = now.saturating_sub(Duration::from_nanos(since - 1));
        let wall = self.failing_since_wall.load(Ordering::Acquire);
        let state = WatchHealthState {
            connected: false,
            last_error: health.last_error,
            failing_since: Some(UNIX_EPOCH + Duration::from_nanos(wall)),
        };
        let event = if report && failing_for >= self.threshold {
            self.warnings.admit().map(|suppressed| WatchEvent::Failing {
                failing_for,
                suppressed,
            })
        } else {
            None
        };
        (state, event)
    }
}
