//! The slot of the value served, its failure episodes and its watch health: the
//! `LastGood` both halves keep behind their rustls adapters.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use arc_swap::{ArcSwap, Guard};

#[cfg(test)]
use super::ManualClock;
use super::{
    DEFAULT_WARNING_PERIOD, DEFAULT_WATCH_FAILURE_THRESHOLD, MonotonicClock, SystemClock,
    WarningLimiter, WatchHealthState, watch_health::WatchEvent, watch_health::WatchTracker,
};
use crate::origin::SourceHealth;

/// Who reads a source: a handshake (or a caller standing in for one: a follower, a
/// pooled client, `roots_now`), or the readiness probe. A probe's failed read marks
/// the value stale and opens the episode of failures as a handshake's does (so the
/// bounds on a gone source count from it), but is neither counted as a reload failure
/// nor warned about: the recorder hears of it through
/// [`ReloadRecorder::probe_read_failed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadBy {
    /// A TLS handshake, or a caller standing in for one.
    Handshake,
    /// The readiness probe ([`crate::readiness::Readiness::report`]).
    Probe,
}

/// A recorder that records nothing (the default of both halves).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopRecorder;

pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The settings both halves take from their builder.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) clock: Arc<dyn MonotonicClock>,
    pub(crate) warning_period: Duration,
    pub(crate) watch_threshold: Duration,
}

impl Default for Settings {
    /// The system's monotonic clock, [`DEFAULT_WARNING_PERIOD`],
    /// [`DEFAULT_WATCH_FAILURE_THRESHOLD`].
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock::new()),
            warning_period: DEFAULT_WARNING_PERIOD,
            watch_threshold: DEFAULT_WATCH_FAILURE_THRESHOLD,
        }
    }
}

/// The value being served, the version of the source it was read from, and when it
/// was loaded.
#[derive(Debug)]
pub(crate) struct Served<T> {
    pub(crate) value: T,
    pub(crate) version: Option<u64>,
    pub(crate) loaded_at: SystemTime,
    pub(crate) loaded_mono: Duration,
}

/// What became of a good read.
pub(crate) enum Accepted<T> {
    /// It is the value served: nothing written (the value read is handed back).
    Same(T),
    /// It is now served (the caller records the load).
    Installed(Arc<Served<T>>),
    /// It was read from an older version than the one served, which the caller
    /// presents instead.
    Older(Arc<Served<T>>),
}

/// A failed read: the last good value to present, and whether to say so.
pub(crate) struct Failure<T> {
    /// Failed handshake reads since the core was built.
    pub(crate) failures: u64,
    /// The last good value, still served.
    pub(crate) served: Arc<Served<T>>,
    /// `Some(n)`: report this failure, `n` reports were held back since the last one.
    pub(crate) report: Option<u64>,
    /// How long the served value has been stale (since it was loaded).
    pub(crate) stale_for: Duration,
    /// How long reads have been failing (since the episode of failures began).
    pub(crate) failing_for: Duration,
}

/// The end of an episode of failures, admitted for one line.
pub(crate) struct Episode {
    /// Failed reads during the episode.
    pub(crate) failures: u64,
    /// First failure to recovery (monotonic clock).
    pub(crate) duration: Duration,
    /// Recovery lines held back since the last one.
    pub(crate) suppressed: u64,
}

/// The current value, the last good one, failure episodes, stale age, watch health
/// and version ordering, for one source.
pub(crate) struct LastGood<T> {
    current: ArcSwap<Served<T>>,
    failures: AtomicU64,
    stale: AtomicBool,
    /// Failed reads in the current episode (since the last good read), a probe's
    /// included.
    episode_failures: AtomicU64,
    /// Monotonic nanoseconds of the episode's first failure.
    episode_start: AtomicU64,
    /// Stale warnings (and invalid-value errors).
    warnings: WarningLimiter,
    /// Recovery lines (a flapping source must not flood the log either).
    recoveries: WarningLimiter,
    watch: WatchTracker,
    clock: Arc<dyn MonotonicClock>,
}

impl<T> LastGood<T> {
    /// A core serving `value`, read from `version` of its source.
    pub(crate) fn new(value: T, version: Option<u64>, settings: Settings) -> Self {
        let Settings {
            clock,
            warning_period,
            watch_threshold,
        } = settings;
        Self {
            current: ArcSwap::from_pointee(Served {
                value,
                version,
                loaded_at: SystemTime::now(),
                loaded_mono: clock.elapsed(),
            }),
            failures: AtomicU64::new(0),
            stale: AtomicBool::new(false),
            episode_failures: AtomicU64::new(0),
            episode_start: AtomicU64::new(0),
            warnings: WarningLimiter::new(warning_period, clock.clone()),
            recoveries: WarningLimiter::new(warning_period, clock.clone()),
            watch: WatchTracker::new(watch_threshold, warning_period, clock.clone()),
            clock,
        }
    }

    /// The value served now (a pointer load).
    pub(crate) fn served(&self) -> Guard<Arc<Served<T>>> {
        self.current.load()
    }

    /// The value served now, as an owned `Arc`.
    pub(crate) fn served_full(&self) -> Arc<Served<T>> {
        self.current.load_full()
    }

    /// A good read of `value` from `version`: installed unless `same` says it is the
    /// value served, or it comes from an older version than the one served (so that a
    /// handshake working from an older snapshot cannot undo a rotation).
    pub(crate) fn accept(
        &self,
        value: T,
        version: Option<u64>,
        same: impl Fn(&T, &T) -> bool,
    ) -> Accepted<T>
    where
        T: Clone,
    {
        if same(&self.current.load().value, &value) {
            // The common path: nothing written, nothing allocated.
            return Accepted::Same(value);
        }
        let new = Arc::new(Served {
            value,
            version,
            loaded_at: SystemTime::now(),
            loaded_mono: self.clock.elapsed(),
        });
        let mut current = self.current.load_full();
        loop {
            if same(&current.value, &new.value) {
                // Another handshake installed the same value meanwhile.
                return Accepted::Same(new.value.clone());
            }
            if let (Some(new_version), Some(served_version)) = (version, current.version)
                && new_version < served_version
            {
                return Accepted::Older(current);
            }
            let previous = self.current.compare_and_swap(&current, new.clone());
            if Arc::ptr_eq(&*previous, &current) {
                return Accepted::Installed(new);
            }
            current = Guard::into_inner(previous);
        }
    }

    /// A failed read: an episode opened if none is, the last good value kept; a
    /// handshake's is also counted and admitted for a warning, a probe's is neither.
    pub(crate) fn fail(&self, by: ReadBy) -> Failure<T> {
        let failures = match by {
            ReadBy::Handshake => self.failures.fetch_add(1, Ordering::AcqRel) + 1,
            ReadBy::Probe => self.failures.load(Ordering::Acquire),
        };
        if !self.stale.swap(true, Ordering::AcqRel) {
            self.episode_start
                .store(nanos(self.clock.elapsed()), Ordering::Release);
            self.episode_failures.store(0, Ordering::Release);
        }
        self.episode_failures.fetch_add(1, Ordering::AcqRel);
        let served = self.current.load_full();
        let now = self.clock.elapsed();
        let stale_for = now.saturating_sub(served.loaded_mono);
        let began = Duration::from_nanos(self.episode_start.load(Ordering::Acquire));
        Failure {
            failures,
            served,
            report: match by {
                ReadBy::Handshake => self.warnings.admit(),
                ReadBy::Probe => None,
            },
            stale_for,
            failing_for: now.saturating_sub(began),
        }
    }

    /// After a good read: closes the episode of failures if one is open, and returns
    /// it when its line is admitted by the rate limit.
    pub(crate) fn recover(&self) -> Option<Episode> {
        if !self.stale.load(Ordering::Acquire) || !self.stale.swap(false, Ordering::AcqRel) {
            return None;
        }
        let failures = self.episode_failures.swap(0, Ordering::AcqRel);
        let started = Duration::from_nanos(self.episode_start.load(Ordering::Acquire));
        let duration = self.clock.elapsed().saturating_sub(started);
        self.warnings.end_episode();
        self.recoveries.admit().map(|suppressed| Episode {
            failures,
            duration,
            suppressed,
        })
    }

    /// Takes the warning limiter's slot for a report outside a failed read (the
    /// start-up report of an invalid value).
    pub(crate) fn admit_warning(&self) -> Option<u64> {
        self.warnings.admit()
    }

    /// Failed handshake reads since the core was built (a probe's are not counted).
    pub(crate) fn failures(&self) -> u64 {
        self.failures.load(Ordering::Acquire)
    }

    /// How long reads have been failing, while they are (atomics and a clock read:
    /// cheap enough for every request).
    pub(crate) fn failing_for(&self) -> Option<Duration> {
        if !self.stale.load(Ordering::Acquire) {
            return None;
        }
        let began = Duration::from_nanos(self.episode_start.load(Ordering::Acquire));
        Some(self.clock.elapsed().saturating_sub(began))
    }

    /// Whether the most recent read failed.
    pub(crate) fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Acquire)
    }

    /// On a handshake, at most once a second: the watch's health and what to report.
    pub(crate) fn check_watch(
        &self,
        health: impl FnOnce() -> Option<SourceHealth>,
    ) -> Option<(WatchHealthState, Option<WatchEvent>)> {
        let now = self.clock.elapsed();
        if !self.watch.due(now) {
            return None;
        }
        health().map(|h| self.watch.observe(h, now, true))
    }

    /// For a state snapshot: the watch's health now (a recovery is still reported).
    pub(crate) fn watch_state(
        &self,
        health: Option<SourceHealth>,
    ) -> Option<(WatchHealthState, Option<WatchEvent>)> {
        health.map(|h| self.watch.observe(h, self.clock.elapsed(), false))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn core(value: u32, version: Option<u64>) -> (LastGood<Arc<u32>>, ManualClock) {
        let clock = ManualClock::new();
        let settings = Settings {
            clock: Arc::new(clock.clone()),
            warning_period: Duration::from_secs(60),
            watch_threshold: Duration::from_secs(60),
        };
        (LastGood::new(Arc::new(value), version, settings), clock)
    }

    fn same(a: &Arc<u32>, b: &Arc<u32>) -> bool {
        Arc::ptr_eq(a, b)
    }

    #[test]
    fn a_failure_keeps_the_last_good_value_and_the_next_good_read_ends_the_episode() {
        let (core, clock) = core(1, Some(5));
        let first = core.fail(ReadBy::Handshake);
        assert_eq!(*first.served.value, 1, "the last good value is served");
        assert_eq!(first.report, Some(0), "the first failure is reported");
        clock.advance(Duration::from_secs(10));
        let second = core.fail(ReadBy::Handshake);
        assert_eq!(second.report, None, "within the period: held back");
        assert_eq!(second.stale_for, Duration::from_secs(10));
        assert!(core.is_stale());

        clock.advance(Duration::from_secs(5));
        assert!(matches!(
            core.accept(Arc::new(2), Some(6), same),
            Accepted::Installed(_)
        ));
        let episode = core.recover().expect("the episode's end is reported");
        assert_eq!(episode.failures, 2);
        assert_eq!(episode.duration, Duration::from_secs(15));
        assert!(!core.is_stale());
        assert!(core.recover().is_none(), "one line per episode");
        assert_eq!(core.failures(), 2, "the total stays");
    }

    #[test]
    fn a_probe_failure_opens_the_episode_but_is_neither_counted_nor_admitted() {
        let (core, clock) = core(1, None);
        let probe = core.fail(ReadBy::Probe);
        assert_eq!(
            probe.report, None,
            "a probe's failure takes no warning slot"
        );
        assert_eq!(probe.failures, 0);
        assert_eq!(core.failures(), 0, "not a reload failure");
        assert!(core.is_stale(), "the value is stale");
        clock.advance(Duration::from_secs(30));
        assert_eq!(
            core.failing_for(),
            Some(Duration::from_secs(30)),
            "the episode began at the probe's read"
        );
        let handshake = core.fail(ReadBy::Handshake);
        assert_eq!(
            handshake.report,
            Some(0),
            "the first handshake failure is warned"
        );
        assert_eq!(handshake.failures, 1);
        assert_eq!(handshake.failing_for, Duration::from_secs(30));
    }

    #[test]
    fn a_new_episode_does_not_carry_the_last_ones_suppressed_count() {
        let (core, clock) = core(1, None);
        assert_eq!(core.fail(ReadBy::Handshake).report, Some(0));
        assert_eq!(core.fail(ReadBy::Handshake).report, None);
        core.recover();
        clock.advance(Duration::from_secs(60));
        assert_eq!(
            core.fail(ReadBy::Handshake).report,
            Some(0),
            "nothing carried over"
        );
    }

    #[test]
    fn an_older_version_never_replaces_a_newer_one_and_the_same_value_writes_nothing() {
        let (core, _) = core(1, Some(10));
        let served = core.served().value.clone();
        assert!(matches!(
            core.accept(served.clone(), Some(10), same),
            Accepted::Same(_)
        ));
        match core.accept(Arc::new(0), Some(9), same) {
            Accepted::Older(current) => assert_eq!(*current.value, 1),
            _ => panic!("an older version must not be installed"),
        }
        assert!(matches!(
            core.accept(Arc::new(2), Some(11), same),
            Accepted::Installed(_)
        ));
        assert_eq!(*core.served().value, 2);
        // Unordered versions are installed as read.
        assert!(matches!(
            core.accept(Arc::new(3), None, same),
            Accepted::Installed(_)
        ));
        assert_eq!(*core.served().value, 3);
    }

    #[test]
    fn a_failing_watch_is_reported_past_the_threshold_and_its_recovery_once() {
        let (core, clock) = core(1, None);
        let down = || {
            Some(SourceHealth {
                connected: false,
                last_error: Some("connection refused".into()),
                errors: 1,
            })
        };
        let (state, event) = core.check_watch(down).unwrap();
        assert!(!state.connected && state.failing_since.is_some());
        assert_eq!(event, None, "below the threshold");
        assert!(core.check_watch(down).is_none(), "one look per second");
        clock.advance(Duration::from_secs(61));
        let (_, event) = core.check_watch(down).unwrap();
        assert!(matches!(
            event,
            Some(WatchEvent::Failing { suppressed: 0, .. })
        ));
        clock.advance(Duration::from_secs(2));
        let up = || {
            Some(SourceHealth {
                connected: true,
                last_error: None,
                errors: 1,
            })
        };
        let (state, event) = core.check_watch(up).unwrap();
        assert!(state.connected);
        assert_eq!(
            event,
            Some(WatchEvent::Recovered {
                failed_for: Duration::from_secs(63)
            })
        );
        clock.advance(Duration::from_secs(2));
        assert_eq!(core.check_watch(up).unwrap().1, None, "recovered once");
    }
}
