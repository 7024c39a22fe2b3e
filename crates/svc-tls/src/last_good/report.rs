//! The reporting both halves share, written once: what a good read, a failed read and
//! the watch's health become (which events, in which order, with which recorder
//! calls), over a half's [`Reporter`]. The half words its own lines (but for the
//! watch lines, worded here from its [`WatchWords`]) and decides what a reported
//! failure is; this file decides when, and records.

use super::{
    Recovery, ReloadOrigin, ReloadRecorder, StaleWarning, WatchHealthState, slot::Accepted,
    slot::Episode, slot::Failure, slot::LastGood, slot::ReadBy, slot::Served,
    watch_health::WatchEvent, watch_health::WatchWords,
};
use crate::origin::SourceHealth;

/// What seals [`ReloadOrigin`]: the halves implement it for their origins.
pub(crate) mod sealed {
    /// Implemented by the two halves' origins only.
    pub trait Sealed {}
}

/// One half (the identity resolver, the trust verifier) over its last-good core: its
/// source, its recorder and its words, implemented by the half; the shared runs
/// (serve, fail, watch health, and every call of the recorder's shared events) are the
/// provided methods.
pub(crate) trait Reporter<T> {
    /// Where the value is read from; its [`ReloadOrigin::Error`] is why a read failed,
    /// as the half and its recorder know it.
    type Origin: ReloadOrigin;
    /// What the recorder is shown of a value served.
    type Value: ?Sized + 'static;

    /// How the half names itself in the watch lines.
    const WATCH_WORDS: WatchWords;

    /// The half's last-good core.
    fn core(&self) -> &LastGood<T>;

    /// Where the value is read from.
    fn origin(&self) -> &Self::Origin;

    /// The health of the watch behind the source (`None` for a source without one).
    fn health(&self) -> Option<SourceHealth>;

    /// The half's recorder.
    fn recorder(&self) -> &dyn ReloadRecorder<Self::Origin, Self::Value>;

    /// What the recorder is shown of `value`.
    fn shown(value: &T) -> &Self::Value;

    /// A failed read admitted for a report (`suppressed` held back since the last
    /// one): log it, and record it (a stale warning is [`Reporter::record_stale`]).
    fn stale(
        &self,
        error: &<Self::Origin as ReloadOrigin>::Error,
        failure: &Failure<T>,
        suppressed: u64,
    );

    /// Logs the end of an episode of failures by a good read of `value` (then
    /// recorded by [`Reporter::recovered`]).
    fn log_recovery(&self, value: &T, episode: &Episode);

    /// A new value is served (at start-up, and each time a read installs one).
    fn loaded(&self, served: &Served<T>) {
        self.recorder()
            .loaded(self.origin(), Self::shown(&served.value), served.loaded_at);
    }

    /// Records the stale warning just logged: the last good value is still served.
    fn record_stale(
        &self,
        error: &<Self::Origin as ReloadOrigin>::Error,
        failure: &Failure<T>,
        suppressed: u64,
    ) {
        self.recorder().stale_warning(&StaleWarning {
            origin: self.origin(),
            error,
            serving: Self::shown(&failure.served.value),
            stale_for: failure.stale_for,
            suppressed,
        });
    }

    /// A good read of `value` ended an episode of failures, admitted for one line:
    /// logged by the half, then recorded.
    fn recovered(&self, value: &T, episode: &Episode) {
        self.log_recovery(value, episode);
        self.recorder().recovered(&Recovery {
            origin: self.origin(),
            serving: Self::shown(value),
            failures: episode.failures,
            duration: episode.duration,
        });
    }

    /// A good read of `value` from `version`: installed unless `same` says it is the
    /// value served or it is older than the one served (see [`LastGood::accept`]), an
    /// install reported as loaded, and the episode of failures it ends reported.
    fn serve(&self, value: T, version: Option<u64>, same: impl Fn(&T, &T) -> bool) -> Accepted<T>
    where
        T: Clone,
    {
        let accepted = self.core().accept(value, version, same);
        let value = match &accepted {
            Accepted::Same(value) => value,
            Accepted::Installed(served) => {
                self.loaded(served);
                &served.value
            }
            // Nothing installed, nothing ended: the newer value stays.
            Accepted::Older(_) => return accepted,
        };
        self.end_episode(value);
        accepted
    }

    /// After a good read of `value`: closes the episode of failures if one is open,
    /// reporting it when its line is admitted.
    fn end_episode(&self, value: &T) {
        if let Some(episode) = self.core().recover() {
            self.recovered(value, &episode);
        }
    }

    /// A failed read: a handshake's counted and recorded as a reload failure, reported
    /// when the limiter admits it; a probe's recorded as a probe read failure only
    /// (see [`ReadBy`]). The last good value is in the answer.
    fn fail(&self, error: &<Self::Origin as ReloadOrigin>::Error, by: ReadBy) -> Failure<T> {
        let failure = self.core().fail(by);
        match by {
            ReadBy::Handshake => {
                self.recorder()
                    .reload_failed(self.origin(), error, failure.failures);
            }
            ReadBy::Probe => self.recorder().probe_read_failed(self.origin(), error),
        }
        // Never `Some` for a probe's read.
        if let Some(suppressed) = failure.report {
            self.stale(error, &failure, suppressed);
        }
        failure
    }

    /// On a handshake, at most once a second (one clock read and one atomic load
    /// otherwise): looks at the source's watch and reports what changed.
    fn check_watch_health(&self) {
        if let Some((state, event)) = self.core().check_watch(|| self.health()) {
            self.report_watch(&state, event);
        }
    }

    /// For a state snapshot: the watch's health now (a recovery is still reported).
    fn watch_state(&self) -> Option<WatchHealthState> {
        self.core()
            .watch_state(self.health())
            .map(|(state, event)| {
                self.report_watch(&state, event);
                state
            })
    }

    /// Logs a watch event in the half's words, then records it.
    fn report_watch(&self, state: &WatchHealthState, event: Option<WatchEvent>) {
        let Some(event) = event else { return };
        event.log(self.origin(), state, Self::WATCH_WORDS);
        match event {
            WatchEvent::Recovered { failed_for } => {
                self.recorder().watch_recovered(self.origin(), failed_for);
            }
            WatchEvent::Failing { failing_for, .. } => {
                self.recorder()
                    .watch_failing(self.origin(), state, failing_for);
            }
        }
    }
}
