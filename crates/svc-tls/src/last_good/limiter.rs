//! The rate limit on warnings: at most one per period (a minute by default), with a
//! count of the ones held back.
//!
//! Warnings go through a [`governor`] rate limiter, not an edge flag: an edge flag
//! ("warn on the first failure only") either goes quiet for good or, reset carelessly
//! under concurrency, swallows the next real failure. Failures that the limiter
//! suppresses are counted with an atomic and the next warning says how many there were.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::Clock as GovernorClock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use super::clock::MonotonicClock;

/// The default period of the stale-identity warning: at most one per minute.
pub const DEFAULT_WARNING_PERIOD: Duration = Duration::from_secs(60);

/// The longest warning period: longer ones are clamped to it. governor counts time in
/// `u64` nanoseconds and panics on periods that overflow its arithmetic; a failure
/// that is reported less than once a day is not reported anyway.
pub const MAX_WARNING_PERIOD: Duration = Duration::from_secs(24 * 60 * 60);

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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::last_good::clock::ManualClock;

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
