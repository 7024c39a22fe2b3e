//! The Workload API stream's reconnection backoff: full jitter under a ceiling that
//! doubles while failing and resets after a stable stream.

use std::time::Duration;

/// The first ceiling of the wait before reconnecting; doubled up to [`MAX_BACKOFF`]
/// while failing.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// The highest ceiling of the wait between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long a stream must have stayed up for the backoff to start again from
/// [`MIN_BACKOFF`]: an agent that accepts the stream and drops it at once (or
/// sends one message and dies) keeps the backoff growing.
const STABLE_PERIOD: Duration = Duration::from_secs(30);

/// Reconnection backoff with full jitter: each wait is drawn uniformly from zero to
/// a ceiling that doubles (up to [`MAX_BACKOFF`]) with every failure, and falls back
/// to [`MIN_BACKOFF`] only after a stream stayed up for [`STABLE_PERIOD`]. When an
/// agent restarts, the pods on its node therefore reconnect spread over the
/// ceiling rather than in lock step.
///
/// The randomness is `fastrand` (already in the graph through the `spiffe` crate),
/// seeded per stream from the OS-seeded thread generator.
pub(super) struct Backoff {
    ceiling: Duration,
    rng: fastrand::Rng,
}

impl Backoff {
    pub(super) fn new(rng: fastrand::Rng) -> Self {
        Self {
            ceiling: MIN_BACKOFF,
            rng,
        }
    }

    /// A stream that had been open for `up_for` failed (`None`: it never opened).
    pub(super) fn stream_ended(&mut self, up_for: Option<Duration>) {
        if up_for.is_some_and(|up| up >= STABLE_PERIOD) {
            self.ceiling = MIN_BACKOFF;
        }
    }

    /// The wait before the next attempt, drawn in `[0, ceiling]`; then the ceiling
    /// doubles.
    pub(super) fn next_delay(&mut self) -> Duration {
        let ceiling_ms = u64::try_from(self.ceiling.as_millis()).unwrap_or(u64::MAX);
        let delay = Duration::from_millis(self.rng.u64(0..=ceiling_ms));
        self.ceiling = (self.ceiling * 2).min(MAX_BACKOFF);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnect_waits_are_jittered_and_bounded() {
        // Many pods whose agent restarted at the same instant: their first waits
        // are spread over [0, 100 ms], not all equal.
        let first: Vec<Duration> = (0..64)
            .map(|seed| Backoff::new(fastrand::Rng::with_seed(seed)).next_delay())
            .collect();
        assert!(first.iter().all(|d| *d <= MIN_BACKOFF), "{first:?}");
        let mut distinct = first.clone();
        distinct.sort();
        distinct.dedup();
        assert!(distinct.len() > 32, "waits in lock step: {first:?}");

        // Failing on, the ceiling doubles up to MAX_BACKOFF, never beyond.
        let mut backoff = Backoff::new(fastrand::Rng::with_seed(7));
        let waits: Vec<Duration> = (0..20).map(|_| backoff.next_delay()).collect();
        assert!(waits.iter().all(|d| *d <= MAX_BACKOFF), "{waits:?}");
        assert_eq!(backoff.ceiling, MAX_BACKOFF);
        assert!(
            waits[10..].iter().any(|d| *d > MAX_BACKOFF / 2),
            "{waits:?}"
        );
    }

    #[test]
    fn the_backoff_resets_only_after_a_stable_stream() {
        let mut backoff = Backoff::new(fastrand::Rng::with_seed(1));
        for _ in 0..4 {
            backoff.next_delay();
        }
        let grown = backoff.ceiling;
        assert_eq!(grown, MIN_BACKOFF * 16);
        // Never opened, or open briefly (an agent that sends one message and
        // drops the stream): the ceiling keeps what it had.
        backoff.stream_ended(None);
        assert_eq!(backoff.ceiling, grown);
        backoff.stream_ended(Some(Duration::from_secs(1)));
        assert_eq!(backoff.ceiling, grown);
        // Up for the stable period: start again from the minimum.
        backoff.stream_ended(Some(STABLE_PERIOD));
        assert_eq!(backoff.ceiling, MIN_BACKOFF);
    }
}
