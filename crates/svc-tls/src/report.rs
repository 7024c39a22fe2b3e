//! What the identity resolver tells the outside world: rate-limited warnings about a
//! stale identity, and a small recorder trait for its state.
//!
//! Nothing here depends on a metrics backend. A service that exports metrics implements
//! [`StateRecorder`] (a few lines forwarding to the `metrics` facade or Prometheus) and
//! passes it to the resolver; the default records nothing.
//!
//! Warnings go through a [`governor`] rate limiter (at most one per period, a minute by
//! default, per identity), not an edge flag: an edge flag ("warn on the first failure
//! only") either goes quiet for good or, reset carelessly under concurrency, swallows
//! the next real failure. Failures that the limiter suppresses are counted with an
//! atomic and the next warning says how many there were.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use governor::clock::Clock as GovernorClock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use crate::identity_source::IdentityOrigin;
use crate::material::Identity;

/// The default period of the stale-identity warning: at most one per minute.
pub const DEFAULT_WARNING_PERIOD: Duration = Duration::from_secs(60);

/// The longest warning period: longer ones are clamped to it. governor counts time in
/// `u64` nanoseconds and panics on periods that overflow its arithmetic; a failure
/// that is reported less than once a day is not reported anyway.
pub const MAX_WARNING_PERIOD: Duration = Duration::from_secs(24 * 60 * 60);

/// How long the watch of the identity's Secret may fail before the resolver warns
/// (default of
/// [`IdentityResolverBuilder::watch_failure_threshold`](crate::resolver::IdentityResolverBuilder::watch_failure_threshold)).
/// Short outages (an API server rollout) heal on their own and only log at the
/// watch layer.
pub const DEFAULT_WATCH_FAILURE_THRESHOLD: Duration = Duration::from_secs(60);

/// A monotonic clock: the time elapsed since an arbitrary, fixed origin.
///
/// The resolver and its warning limiter read time only through this trait, so tests can
/// drive them with a [`ManualClock`].
pub trait MonotonicClock: Send + Sync + fmt::Debug + 'static {
    /// Time since this clock's origin; never decreases.
    fn elapsed(&self) -> Duration;
}

/// The real monotonic clock ([`std::time::Instant`]).
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl MonotonicClock for SystemClock {
    fn elapsed(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that moves only when told to (for tests). Clones share one time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock standing at its origin.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        // fetch_update never fails with a closure that always returns Some.
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                Some(now.saturating_add(by))
            });
    }
}

impl MonotonicClock for ManualClock {
    fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Acquire))
    }
}

/// Adapts a [`MonotonicClock`] to governor's clock trait.
#[derive(Debug, Clone)]
struct LimiterClock(Arc<dyn MonotonicClock>);

impl GovernorClock for LimiterClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// Admits at most one warning per period and counts the ones it holds back.
///
/// Concurrency: the limiter decision is governor's (lock-free GCRA); the count of
/// suppressed failures is an atomic that the admitted caller takes with `swap(0)`. A
/// failure racing with an admitted one is counted in the next warning instead of this
/// one; none is lost, and none can keep the next period's first failure from being
/// logged.
pub struct WarningLimiter {
    limiter: RateLimiter<NotKeyed, InMemoryState, LimiterClock, NoOpMiddleware<Duration>>,
    suppressed: AtomicU64,
    period: Duration,
}

impl fmt::Debug for WarningLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WarningLimiter")
            .field("suppressed", &self.suppressed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl WarningLimiter {
    /// A limiter admitting one warning per `period` (a zero period is taken as one
    /// nanosecond, one longer than [`MAX_WARNING_PERIOD`] as that), reading time
    /// from `clock`. Never panics, whatever the period.
    pub fn new(period: Duration, clock: Arc<dyn MonotonicClock>) -> Self {
        let period = period.clamp(Duration::from_nanos(1), MAX_WARNING_PERIOD);
        let quota = Quota::with_period(period).unwrap_or_else(|| Quota::per_minute(nonzero_one()));
        Self {
            limiter: RateLimiter::direct_with_clock(quota, LimiterClock(clock)),
            suppressed: AtomicU64::new(0),
            period,
        }
    }

    /// The period in effect (after clamping).
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Ends an episode of failures: the count of suppressed warnings is dropped, so
    /// that the first warning of the next episode does not report failures of this
    /// one. Returns the count dropped.
    pub fn end_episode(&self) -> u64 {
        self.suppressed.swap(0, Ordering::AcqRel)
    }

    /// Asks to emit one warning. `Some(n)`: emit it, `n` earlier warnings were
    /// suppressed since the last one; `None`: suppressed (and counted).
    pub fn admit(&self) -> Option<u64> {
        if self.limiter.check().is_ok() {
            Some(self.suppressed.swap(0, Ordering::AcqRel))
        } else {
            self.suppressed.fetch_add(1, Ordering::AcqRel);
            None
        }
    }
}

fn nonzero_one() -> std::num::NonZeroU32 {
    std::num::NonZeroU32::MIN
}

/// A warning that a reload failed and the last good identity is being served.
#[derive(Debug)]
pub struct StaleWarning<'a> {
    /// The client-certificate Secret.
    pub source: &'a IdentityOrigin,
    /// Why this reload failed.
    pub error: &'a (dyn std::error::Error + 'static),
    /// Serial number (hex) of the identity still being served.
    pub serving_serial_hex: String,
    /// How long the identity being served has been stale (since the last good reload).
    pub stale_for: Duration,
    /// Failures not warned about since the previous warning.
    pub suppressed: u64,
}

/// Whether the served certificate is inside its validity period, computed from the
/// served identity and the clock each time the state is read (so it clears by itself
/// when a renewed certificate is served).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertificateValidity {
    /// `notBefore <= now <= notAfter`.
    Valid,
    /// `notAfter` has passed: peers refuse the certificate.
    Expired {
        /// When it expired.
        not_after: SystemTime,
    },
    /// `notBefore` is in the future (issuer clock skew, or a clock behind).
    NotYetValid {
        /// When it becomes valid.
        not_before: SystemTime,
    },
}

/// A time for logs, as certificates write it (UTC).
pub(crate) fn time_text(t: SystemTime) -> String {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_secs()).map_or(i64::MIN, |s| -s),
    };
    x509_parser::time::ASN1Time::from_timestamp(secs)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| format!("{secs} (unix seconds)"))
}

impl CertificateValidity {
    /// The validity of `identity` at `now`.
    pub fn of(identity: &Identity, now: SystemTime) -> Self {
        if now < identity.not_before() {
            Self::NotYetValid {
                not_before: identity.not_before(),
            }
        } else if now > identity.not_after() {
            Self::Expired {
                not_after: identity.not_after(),
            }
        } else {
            Self::Valid
        }
    }

    /// Whether the certificate is valid.
    pub fn is_valid(&self) -> bool {
        matches!(self, Self::Valid)
    }
}

impl fmt::Display for CertificateValidity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Valid => f.write_str("valid"),
            Self::Expired { .. } => f.write_str("expired"),
            Self::NotYetValid { .. } => f.write_str("not yet valid"),
        }
    }
}

/// The health of the watch the identity is read from, as shown in [`IdentityState`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchHealthState {
    /// Whether the watch is receiving changes.
    pub connected: bool,
    /// The last watch error while it is failing.
    pub last_error: Option<String>,
    /// When the resolver first saw it failing (wall clock), while it is failing.
    pub failing_since: Option<SystemTime>,
}

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

/// The end of an episode of failed reloads.
#[derive(Debug)]
pub struct Recovery<'a> {
    /// Where the identity comes from.
    pub source: &'a IdentityOrigin,
    /// Serial number (hex) of the identity now served.
    pub serial_hex: &'a str,
    /// Failed reloads during the episode.
    pub failures: u64,
    /// How long the episode lasted (first failure to recovery, monotonic clock).
    pub duration: Duration,
}

/// The resolver's visible state, as returned by
/// [`IdentityResolver::state`](crate::resolver::IdentityResolver::state).
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
pub trait StateRecorder: Send + Sync + fmt::Debug + 'static {
    /// A reload succeeded; `identity` is now served. Called on every successful
    /// handshake-time reload (so `at` is the time of the last good reload).
    fn reloaded(&self, source: &IdentityOrigin, identity: &Identity, at: SystemTime) {
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
    fn stale_warning(&self, warning: &StaleWarning<'_>) {
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
    fn recovered(&self, recovery: &Recovery<'_>) {
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

/// A recorder that records nothing (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopRecorder;

impl StateRecorder for NoopRecorder {}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn one_warning_per_period_with_suppressed_count() {
        let clock = ManualClock::new();
        let limiter = WarningLimiter::new(Duration::from_secs(60), Arc::new(clock.clone()));
        assert_eq!(limiter.admit(), Some(0));
        for _ in 0..5 {
            clock.advance(Duration::from_secs(5));
            assert_eq!(limiter.admit(), None);
        }
        clock.advance(Duration::from_secs(35));
        assert_eq!(limiter.admit(), Some(5), "the window has passed");
        assert_eq!(limiter.admit(), None);
    }

    #[test]
    fn the_default_warning_period_is_exactly_one_minute() {
        assert_eq!(DEFAULT_WARNING_PERIOD, Duration::from_secs(60));
        let clock = ManualClock::new();
        let limiter = WarningLimiter::new(DEFAULT_WARNING_PERIOD, Arc::new(clock.clone()));
        assert_eq!(limiter.period(), Duration::from_secs(60));
        assert_eq!(limiter.admit(), Some(0));
        clock.advance(Duration::from_secs(60) - Duration::from_nanos(1));
        assert_eq!(limiter.admit(), None, "one nanosecond short of a minute");
        clock.advance(Duration::from_nanos(1));
        assert_eq!(limiter.admit(), Some(1), "exactly a minute");
    }

    #[test]
    fn a_very_long_period_is_clamped_instead_of_panicking() {
        for period in [
            Duration::MAX,
            Duration::from_secs(u64::MAX / 2),
            MAX_WARNING_PERIOD * 400,
        ] {
            let clock = ManualClock::new();
            let limiter = WarningLimiter::new(period, Arc::new(clock.clone()));
            assert_eq!(limiter.period(), MAX_WARNING_PERIOD);
            assert_eq!(limiter.admit(), Some(0));
            clock.advance(MAX_WARNING_PERIOD - Duration::from_secs(1));
            assert_eq!(limiter.admit(), None);
            clock.advance(Duration::from_secs(1));
            assert_eq!(limiter.admit(), Some(1));
        }
    }

    #[test]
    fn a_new_episode_does_not_report_the_last_ones_suppressed_count() {
        let clock = ManualClock::new();
        let limiter = WarningLimiter::new(Duration::from_secs(60), Arc::new(clock.clone()));
        assert_eq!(limiter.admit(), Some(0));
        for _ in 0..3 {
            assert_eq!(limiter.admit(), None);
        }
        assert_eq!(limiter.end_episode(), 3);
        clock.advance(Duration::from_secs(60));
        assert_eq!(limiter.admit(), Some(0), "nothing carried over");
    }

    #[test]
    fn concurrent_failures_lose_no_count_and_block_no_next_warning() {
        let clock = ManualClock::new();
        let limiter = Arc::new(WarningLimiter::new(
            Duration::from_secs(60),
            Arc::new(clock.clone()),
        ));
        let admitted = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let limiter = limiter.clone();
                    s.spawn(move || (0..250).filter_map(|_| limiter.admit()).collect::<Vec<_>>())
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        });
        assert_eq!(admitted, vec![0], "exactly one warning in the window");
        clock.advance(Duration::from_secs(60));
        assert_eq!(
            limiter.admit(),
            Some(999),
            "every suppressed failure counted"
        );
    }
}
