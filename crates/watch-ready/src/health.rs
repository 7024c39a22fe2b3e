//! The health of one watch, shared by its task, its observed client and its readers.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use kube::Client;
use kube_runtime::watcher;
use tokio::sync::watch;

use crate::limits::LimitError;
use crate::refusal::{Refusal, RefusalReason};

/// The state of one watched store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchState {
    /// The initial list has not completed.
    Syncing,
    /// Synced and watching.
    Ready,
    /// Synced earlier, but the watch is failing; the store keeps the last state seen.
    Degraded,
}

impl fmt::Display for WatchState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Syncing => "syncing",
            Self::Ready => "ready",
            Self::Degraded => "degraded",
        })
    }
}

/// A snapshot of a watch's health.
#[derive(Clone, Debug)]
pub struct WatchStatus {
    /// The state.
    pub state: WatchState,
    /// The last watch error, until the watch syncs or recovers.
    pub last_error: Option<String>,
    /// Watch errors seen since the watch started.
    pub errors: u64,
    /// Of those, the 410 Gone after the first sync (routine relists).
    pub relists: u64,
    /// A refusal seen before the first sync; it stays until the sync, so that a
    /// waiter cannot miss it.
    pub refusal: Option<Refusal>,
    /// Objects the API server sent that are not the one watched (another name or
    /// namespace, to a watch of one object): ignored, never kept.
    pub foreign_ignored: u64,
    /// Objects and response bodies refused by a cap of the watch's
    /// [`WatchLimits`](crate::WatchLimits).
    pub over_limit: u64,
    /// The last of those refusals, naming the object and the cap.
    pub last_limit_error: Option<LimitError>,
    /// Versions never applied because a newer one replaced them within the watch's
    /// coalescing interval ([`WatchLimits::coalesce`](crate::WatchLimits::coalesce)).
    pub coalesced: u64,
}

impl Default for WatchStatus {
    fn default() -> Self {
        Self {
            state: WatchState::Syncing,
            last_error: None,
            errors: 0,
            relists: 0,
            refusal: None,
            foreign_ignored: 0,
            over_limit: 0,
            last_limit_error: None,
            coalesced: 0,
        }
    }
}

/// The shared, cheap-to-clone health record of one watch. `label` names the watch in
/// logs (a cache name, a Secret's `namespace/name`).
#[derive(Clone)]
pub struct Health {
    tx: Arc<watch::Sender<WatchStatus>>,
    label: Arc<str>,
    /// The HTTP status (401 or 403) of the refusal the synced watch meets now, or 0:
    /// read without a lock on the handshake path ([`Health::refused_now`]).
    refused: Arc<AtomicU16>,
}

impl fmt::Debug for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Health")
            .field("label", &self.label)
            .field("status", &*self.tx.borrow())
            .finish()
    }
}

impl Health {
    /// A new record in [`WatchState::Syncing`].
    pub fn new(label: impl Into<String>) -> Self {
        Self {
            tx: Arc::new(watch::Sender::new(WatchStatus::default())),
            label: Arc::from(label.into()),
            refused: Arc::new(AtomicU16::new(0)),
        }
    }

    /// The name of the watch in logs.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The current status.
    pub fn status(&self) -> WatchStatus {
        self.tx.borrow().clone()
    }

    /// The last watch error, while the watch is failing or has not synced.
    pub fn last_error(&self) -> Option<String> {
        self.tx.borrow().last_error.clone()
    }

    /// The HTTP status (401 or 403) with which the API server refuses this synced
    /// watch now (a revoked token, a removed RBAC binding), until the watch lists or
    /// watches again with success. One atomic load: no lock, for the handshake path.
    /// A refusal before the first sync is [`WatchStatus::refusal`] instead.
    pub fn refused_now(&self) -> Option<u16> {
        match self.refused.load(Ordering::Acquire) {
            0 => None,
            code => Some(code),
        }
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<WatchStatus> {
        self.tx.subscribe()
    }

    /// The store completed its initial list.
    pub(crate) fn synced(&self) {
        self.refused.store(0, Ordering::Release);
        let label = &self.label;
        self.tx.send_if_modified(|status| {
            if status.state != WatchState::Syncing {
                return false;
            }
            status.state = WatchState::Ready;
            status.last_error = None;
            status.refusal = None;
            tracing::info!(watch = %label, "watch synced");
            true
        });
    }

    /// The watch delivered an event, or the API server accepted a WATCH: a degraded
    /// watch is ready again.
    pub(crate) fn recovered(&self, how: &'static str) {
        self.refused.store(0, Ordering::Release);
        let label = &self.label;
        self.tx.send_if_modified(|status| {
            if status.state != WatchState::Degraded {
                return false;
            }
            status.state = WatchState::Ready;
            status.last_error = None;
            tracing::info!(watch = %label, how, "watch recovered");
            true
        });
    }

    /// The watch failed; it retries with backoff.
    ///
    /// A 410 Gone after the first sync is routine, not a failure: the API server
    /// compacted the resourceVersion the watch resumed from, and the watcher
    /// relists at once. It is counted in `errors`, logged at debug, and leaves the
    /// state and `last_error` alone (if the relist then fails, that error degrades
    /// the watch).
    pub(crate) fn failed(&self, error: &watcher::Error) {
        let label = &self.label;
        // An exec credential plugin's error carries its command and whole output
        // (the token among it): a credential failure is kept and logged as a fixed
        // text naming its kind, anything else cut and escaped.
        let message = crate::excerpt::kube_watch_error(error);
        if is_gone(error) && self.tx.borrow().state != WatchState::Syncing {
            tracing::debug!(watch = %label, error = %message, "watch resourceVersion expired (410 Gone): relisting");
            // Counted (it is an error the watch saw), but neither degrading nor
            // kept as the last error.
            self.tx.send_modify(|status| {
                status.errors = status.errors.saturating_add(1);
                status.relists = status.relists.saturating_add(1);
            });
            return;
        }
        let refusal = Refusal::of(error);
        self.tx.send_modify(|status| {
            status.errors = status.errors.saturating_add(1);
            status.last_error = Some(message.clone());
            if status.state != WatchState::Syncing
                && let Some(refusal) = &refusal
                && matches!(
                    refusal.reason,
                    RefusalReason::Unauthorized | RefusalReason::Forbidden
                )
            {
                self.refused.store(refusal.code, Ordering::Release);
            }
            match status.state {
                WatchState::Syncing => match refusal {
                    Some(refusal) => {
                        tracing::error!(watch = %label, error = %message, "watch cannot sync: refused");
                        status.refusal.get_or_insert(refusal);
                    }
                    None => {
                        tracing::warn!(watch = %label, error = %message, "watch not synced yet, retrying");
                    }
                },
                WatchState::Ready => {
                    tracing::warn!(watch = %label, error = %message, "watch degraded: serving last known state while it retries");
                    status.state = WatchState::Degraded;
                }
                WatchState::Degraded => {
                    tracing::debug!(watch = %label, error = %message, "watch still failing");
                }
            }
        });
    }
}

impl Health {
    /// A cap refused an object or a body: counted, kept as the last limit error, and
    /// logged at WARN for the 1st, 2nd, 4th, 8th, ... refusal (a hostile server
    /// repeating it cannot flood the log), at DEBUG otherwise.
    pub(crate) fn limit_exceeded(&self, error: &LimitError) {
        let label = &self.label;
        let mut count = 0;
        self.tx.send_modify(|status| {
            status.over_limit = status.over_limit.saturating_add(1);
            status.last_limit_error = Some(error.clone());
            count = status.over_limit;
        });
        if count.is_power_of_two() {
            tracing::warn!(watch = %label, refused = count, error = %error, "watch: over a cap");
        } else {
            tracing::debug!(watch = %label, refused = count, error = %error, "watch: over a cap");
        }
    }

    /// The API server sent an object other than the one watched (`object`, escaped):
    /// ignored and counted, logged as [`Health::limit_exceeded`] is.
    pub(crate) fn foreign_ignored(&self, object: &str) {
        let label = &self.label;
        let mut count = 0;
        self.tx.send_modify(|status| {
            status.foreign_ignored = status.foreign_ignored.saturating_add(1);
            count = status.foreign_ignored;
        });
        if count.is_power_of_two() {
            tracing::warn!(watch = %label, object, ignored = count, "watch: the API server sent an object that is not the one watched (it ignores the field selector?): ignored");
        } else {
            tracing::debug!(watch = %label, object, ignored = count, "watch: ignored an object that is not the one watched");
        }
    }

    /// A version was replaced by a newer one before it was applied.
    pub(crate) fn coalesced(&self) {
        self.tx.send_modify(|status| {
            status.coalesced = status.coalesced.saturating_add(1);
        });
    }

    /// The watch stream ended (it is not restarted): the store keeps the last
    /// state seen but receives nothing more, so a synced watch is `Degraded`.
    pub(crate) fn ended(&self) {
        let label = &self.label;
        self.tx.send_modify(|status| {
            status.errors = status.errors.saturating_add(1);
            status.last_error = Some("watch stream ended".to_owned());
            if status.state == WatchState::Ready {
                status.state = WatchState::Degraded;
            }
        });
        tracing::warn!(watch = %label, "watch stream ended: serving the last known state, no further updates");
    }
}

/// A 410 Gone from the API server: the resourceVersion is too old, relist.
fn is_gone(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchError(status) => status.code == 410,
        watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status))
        | watcher::Error::InitialListFailed(kube::Error::Api(status)) => status.code == 410,
        _ => false,
    }
}

/// The same client (connection pool, credentials), with one watch's requests
/// observed: an accepted WATCH proves a degraded watch is back, which kube-runtime's
/// watcher does not report (it resumes silently and swallows bookmarks).
pub fn observe(client: &Client, health: &Health) -> Client {
    let default_namespace = client.default_namespace().to_owned();
    let inner = client.clone();
    let health = health.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        let health = health.clone();
        async move {
            let is_watch = is_watch(&request);
            let response = inner.send(request).await?;
            if is_watch && response.status().is_success() {
                health.recovered("watch re-established");
            }
            Ok::<_, kube::Error>(response)
        }
    });
    Client::new(service, default_namespace)
}

/// Whether `request` is a WATCH (`watch=true` in its query).
pub(crate) fn is_watch<B>(request: &http::Request<B>) -> bool {
    request
        .uri()
        .query()
        .is_some_and(|query| query.split('&').any(|pair| pair == "watch=true"))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing::{Level, Subscriber};
    use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

    use super::*;

    /// Records the level of every event with the thread that emitted it, as this test
    /// binary's one global subscriber. A scoped subscriber (`with_default`) was not
    /// enough: tracing caches each callsite's interest when the callsite is first
    /// hit, and another test thread hitting `failed`'s WARN for the first time while
    /// this test's scoped dispatcher registered could cache "never" after the
    /// registration's rebuild (the WARN this test counts was dropped: 1 run of
    /// `cargo xtask test` in 3 on a loaded 2-core machine, issue 48). Every test here
    /// that reaches `failed` installs this first ([`Levels::global`]; the others
    /// wait for it on the `OnceLock`), so no callsite of this module registers
    /// before the subscriber exists.
    #[derive(Clone, Default)]
    struct Levels(Arc<Mutex<Vec<(std::thread::ThreadId, Level)>>>);

    impl<S: Subscriber> Layer<S> for Levels {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            if let Ok(mut levels) = self.0.lock() {
                levels.push((std::thread::current().id(), *event.metadata().level()));
            }
        }
    }

    impl Levels {
        /// The binary's one recorder, installed as the global default on first use.
        fn global() -> &'static Levels {
            static GLOBAL: std::sync::OnceLock<Levels> = std::sync::OnceLock::new();
            GLOBAL.get_or_init(|| {
                let levels = Levels::default();
                let subscriber = tracing_subscriber::registry().with(levels.clone());
                let _ = tracing::subscriber::set_global_default(subscriber);
                levels
            })
        }

        /// WARN and ERROR events emitted on the calling thread so far.
        fn warnings(&self) -> usize {
            let me = std::thread::current().id();
            self.0
                .lock()
                .map(|l| {
                    l.iter()
                        .filter(|(thread, level)| *thread == me && *level <= Level::WARN)
                        .count()
                })
                .unwrap_or(usize::MAX)
        }
    }

    fn status_error(code: u16) -> watcher::Error {
        watcher::Error::WatchError(Box::new(
            kube::core::Status::failure("too old resource version", "Expired").with_code(code),
        ))
    }

    #[test]
    fn a_410_relist_is_routine_and_other_errors_degrade() {
        let levels = Levels::global();
        {
            let health = Health::new("test/watch");
            health.synced();
            health.failed(&status_error(410));
            assert_eq!(health.status().state, WatchState::Ready);
            assert_eq!(health.last_error(), None);
            assert_eq!(health.status().errors, 1);
            assert_eq!(health.status().relists, 1, "the relist is counted apart");
            assert_eq!(
                levels.warnings(),
                0,
                "a 410 relist was logged at WARN or above"
            );

            health.failed(&status_error(500));
            assert_eq!(health.status().state, WatchState::Degraded);
            assert_eq!(health.status().relists, 1, "a 500 is no relist");
            assert_eq!(levels.warnings(), 1);
        }
    }

    #[test]
    fn a_synced_watch_refused_401_or_403_says_so_until_it_recovers() {
        Levels::global();
        let health = Health::new("test/watch");
        health.failed(&status_error(403));
        assert_eq!(
            health.refused_now(),
            None,
            "before the sync: the start-up refusal"
        );
        health.synced();
        health.failed(&status_error(500));
        assert_eq!(health.refused_now(), None, "a 500 is no refusal");
        health.failed(&status_error(401));
        assert_eq!(health.refused_now(), Some(401));
        health.failed(&status_error(403));
        assert_eq!(health.refused_now(), Some(403));
        health.recovered("watch re-established");
        assert_eq!(health.refused_now(), None);
    }

    #[test]
    fn an_ended_stream_leaves_a_synced_watch_degraded() {
        Levels::global();
        let health = Health::new("test/watch");
        health.synced();
        health.ended();
        let status = health.status();
        assert_eq!(status.state, WatchState::Degraded);
        assert_eq!(status.last_error.as_deref(), Some("watch stream ended"));
    }
}
