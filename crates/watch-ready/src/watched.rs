//! One watched store and the readiness wait.

use std::{
    fmt,
    future::Future,
    hash::Hash,
    sync::{Arc, OnceLock},
    time::Duration,
};

use futures::{FutureExt, StreamExt, future::BoxFuture};
use kube::{Api, Resource};
use kube_runtime::utils::{Backoff, ResetTimerBackoff};
use kube_runtime::{
    WatchStreamExt,
    reflector::{self, Store},
    watcher,
};
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::health::Health;
use crate::refusal::Refusal;
use crate::subscribe::{CHANGE_BUFFER, Change};
use kube_runtime::reflector::Lookup as _;

/// Why a store did not sync.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitError {
    /// The API server refused the list or watch before the first sync.
    Refused(Refusal),
    /// The watch task ended before the first sync (the runtime is shutting down).
    Stopped,
}

/// Why [`all_synced`] returned early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unsynced {
    /// The store at `index` (in the order given) could not sync.
    Failed {
        /// Position of the store.
        index: usize,
        /// Why.
        error: WaitError,
    },
    /// The timeout passed first; some stores had not synced.
    TimedOut,
}

/// Aborts the watch task when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A store fed by a running watch, with its [`Health`]. Dropping it stops the watch.
pub struct Watched<K>
where
    K: reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    health: Health,
    /// Counts the events applied to the store (the first list counts as one).
    applied: tokio::sync::watch::Receiver<u64>,
    /// What changed, for [`Watched::subscribe`] (object by object, or a whole list):
    /// made by the first subscriber, so a watch nobody follows (every Secret watch)
    /// allocates no buffer and sends nothing.
    changed: Arc<OnceLock<broadcast::Sender<Change<K>>>>,
    _task: AbortOnDrop,
}

impl<K> fmt::Debug for Watched<K>
where
    K: reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the objects (they may be Secrets).
        f.debug_struct("Watched")
            .field("health", &self.health)
            .field("objects", &self.store.len())
            .finish_non_exhaustive()
    }
}

/// The longest wait between two retries of a quick-retry watch (before jitter, which
/// adds at most as much again): a renewed Secret written during an API outage reaches
/// the cache within about two seconds of the API's return.
pub const QUICK_RETRY_MAX: Duration = Duration::from_millis(600);

/// 100 ms doubling to [`QUICK_RETRY_MAX`], jittered (so a fleet does not retry in
/// step), never giving up, back to 100 ms after two minutes without an error.
fn quick_backoff() -> ResetTimerBackoff<watcher::ExponentialBackoff> {
    let schedule = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(QUICK_RETRY_MAX)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    ResetTimerBackoff::new(schedule.into(), Duration::from_secs(120))
}

impl<K> Watched<K>
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// Starts a reflector over `api` and `config` (kube-runtime's default backoff),
    /// reporting to `health`. `api` is usually built on [`crate::observe`]`(client,
    /// &health)` so that an accepted WATCH also counts as recovery.
    ///
    /// Must be called within a Tokio runtime (the watch runs as a task on it).
    pub fn spawn(
        api: Api<K>,
        config: watcher::Config,
        dynamic_type: K::DynamicType,
        health: Health,
    ) -> Self {
        Self::start(api, config, dynamic_type, health, |_: &mut K| {}, false)
    }

    /// [`Watched::spawn`], with `modify` applied to every object before the store
    /// keeps it (kube-runtime's `WatchStreamExt::modify`): what the caller must not
    /// keep in memory (a trust Secret's private key) is dropped before caching.
    ///
    /// Retries are quick ([`QUICK_RETRY_MAX`]): a watch of one small object (a
    /// Secret) that failed during an API-server outage is back within about a second
    /// or two of the API's return, so a certificate renewed meanwhile is not held back
    /// by kube-runtime's default backoff (up to 30 s).
    pub fn spawn_modified(
        api: Api<K>,
        config: watcher::Config,
        dynamic_type: K::DynamicType,
        health: Health,
        modify: impl FnMut(&mut K) + Send + 'static,
    ) -> Self {
        Self::start(api, config, dynamic_type, health, modify, true)
    }

    fn start(
        api: Api<K>,
        config: watcher::Config,
        dynamic_type: K::DynamicType,
        health: Health,
        modify: impl FnMut(&mut K) + Send + 'static,
        quick_retry: bool,
    ) -> Self {
        let writer = reflector::store::Writer::new(dynamic_type.clone());
        let store = writer.as_reader();
        let backoff: Box<dyn Backoff> = if quick_retry {
            Box::new(quick_backoff())
        } else {
            Box::new(watcher::DefaultBackoff::default())
        };
        let stream = reflector::reflector(
            writer,
            watcher::watcher(api, config)
                .backoff(backoff)
                .modify(modify),
        );
        let task_health = health.clone();
        let (applied_tx, applied) = tokio::sync::watch::channel(0u64);
        let changed: Arc<OnceLock<broadcast::Sender<Change<K>>>> = Arc::default();
        let changed_tx = changed.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(watcher::Event::InitDone) => {
                        task_health.synced();
                        applied_tx.send_modify(|n| *n += 1);
                        if let Some(tx) = changed_tx.get() {
                            // No subscriber left is not an error.
                            let _ = tx.send(Change::Relisted);
                        }
                    }
                    Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {
                        task_health.recovered("event delivered");
                    }
                    Ok(watcher::Event::Apply(object)) => {
                        task_health.recovered("event delivered");
                        applied_tx.send_modify(|n| *n += 1);
                        if let Some(tx) = changed_tx.get() {
                            let key = object.to_object_ref(dynamic_type.clone());
                            let _ = tx.send(Change::Applied(key));
                        }
                    }
                    Ok(watcher::Event::Delete(_)) => {
                        task_health.recovered("event delivered");
                        applied_tx.send_modify(|n| *n += 1);
                    }
                    Err(error) => task_health.failed(&error),
                }
            }
            task_health.ended();
        });
        Self {
            store,
            health,
            applied,
            changed,
            _task: AbortOnDrop(task),
        }
    }
}

impl<K> Watched<K>
where
    K: reflector::Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// The store (reads are synchronous map look-ups).
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// The watch's health.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// A receiver that changes each time the store has changed: after each applied
    /// event, and after each complete (re)list. For work that should run once per
    /// change rather than once per read (loading what a Secret holds); it closes when
    /// the watch stops.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.applied.clone()
    }

    /// The objects of the store as they change, for a kube-runtime `Controller` that
    /// shares this watch (`Controller::for_shared_stream(watched.subscribe(),
    /// watched.store().clone())`) instead of starting a second one: every object the
    /// store holds when the subscription starts (once it has synced), then each object
    /// the watch applies, and every object again after each complete re-list, or when
    /// the subscriber fell more than a buffer behind (so nothing is missed; a
    /// controller's reconciles are idempotent). Deletions are not sent (the store no
    /// longer holds the object). The stream ends when the watch stops.
    pub fn subscribe(&self) -> impl futures::Stream<Item = Arc<K>> + Send + 'static {
        let changes = self
            .changed
            .get_or_init(|| broadcast::channel(CHANGE_BUFFER).0)
            .subscribe();
        crate::subscribe::subscription(self.store.clone(), changes)
    }

    /// Whether the initial list has completed.
    pub fn is_synced(&self) -> bool {
        matches!(self.store.wait_until_ready().now_or_never(), Some(Ok(())))
    }

    /// Resolves when the initial list has completed, or fails when the API server
    /// refused the watch before that (a [`Refusal`]) or the watch stopped. No
    /// timeout: see [`all_synced`] and [`Watched::synced_within`]. Cancel-safe, and
    /// independent of `self`'s lifetime.
    pub fn synced(&self) -> impl Future<Output = Result<(), WaitError>> + Send + 'static {
        let store = self.store.clone();
        let health = self.health.clone();
        let mut status = health.subscribe();
        async move {
            let refused = async {
                loop {
                    if let Some(refusal) = status.borrow_and_update().refusal.clone() {
                        return refusal;
                    }
                    if status.changed().await.is_err() {
                        // `health` holds the sender: unreachable, but never resolve.
                        std::future::pending::<()>().await;
                    }
                }
            };
            tokio::select! {
                biased;
                refusal = refused => Err(WaitError::Refused(refusal)),
                ready = store.wait_until_ready() => match ready {
                    Ok(()) => {
                        // The reflector applies the first list before the task sees
                        // `InitDone`: make the health agree now.
                        health.synced();
                        Ok(())
                    }
                    Err(_) => Err(WaitError::Stopped),
                },
            }
        }
    }

    /// [`Watched::synced`] bounded by `timeout` (`Err(None)` when it passed).
    pub async fn synced_within(&self, timeout: Duration) -> Result<(), Option<WaitError>> {
        match all_synced([self.synced().boxed()], timeout).await {
            Ok(()) => Ok(()),
            Err(Unsynced::Failed { error, .. }) => Err(Some(error)),
            Err(Unsynced::TimedOut) => Err(None),
        }
    }
}

/// The one readiness wait: every future from [`Watched::synced`] resolved `Ok`
/// within `timeout`; or the first to fail (at once, without waiting for the
/// others); or the timeout.
pub async fn all_synced<I>(synced: I, timeout: Duration) -> Result<(), Unsynced>
where
    I: IntoIterator<Item = BoxFuture<'static, Result<(), WaitError>>>,
{
    let indexed = synced.into_iter().enumerate().map(|(index, wait)| {
        wait.map(move |result| result.map_err(|error| Unsynced::Failed { index, error }))
    });
    match tokio::time::timeout(timeout, futures::future::try_join_all(indexed)).await {
        Ok(result) => result.map(drop),
        Err(_elapsed) => Err(Unsynced::TimedOut),
    }
}
