//! One watched store and the readiness wait.

use std::{
    collections::HashMap,
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
    reflector::{self, ObjectRef, Store},
    watcher,
};
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::health::Health;
use crate::limits::{LimitError, WatchLimits};
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
        Self::start(
            api,
            config,
            dynamic_type.clone(),
            health,
            |_: &mut K| {},
            false,
            Gate::unbounded(dynamic_type.clone()),
        )
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
        Self::start(
            api,
            config,
            dynamic_type.clone(),
            health,
            modify,
            true,
            Gate::unbounded(dynamic_type.clone()),
        )
    }

    /// [`Watched::spawn`] within `limits`: an object larger than
    /// [`WatchLimits::max_object_bytes`] is refused (its last good version kept), the
    /// store keeps at most [`WatchLimits::max_objects`], and versions are coalesced
    /// per [`WatchLimits::coalesce`]; each refusal is a [`LimitError`] counted in the
    /// [`Health`]. Build `api` on [`crate::observe_bounded`] for the body caps.
    pub fn spawn_bounded(
        api: Api<K>,
        config: watcher::Config,
        dynamic_type: K::DynamicType,
        health: Health,
        limits: WatchLimits,
    ) -> Self
    where
        K: serde::Serialize,
    {
        Self::start(
            api,
            config,
            dynamic_type.clone(),
            health,
            |_: &mut K| {},
            false,
            Gate::bounded(dynamic_type.clone(), None, limits),
        )
    }

    /// A watch of the one object `name` in `namespace` (a Secret, a ConfigMap),
    /// within `limits`, with quick retries and `modify` as [`Watched::spawn_modified`].
    ///
    /// The API server is asked for that object only (`fieldSelector=metadata.name=`),
    /// and anything else it sends anyway (another name or namespace: a server that
    /// ignores the selector, or a hostile one) is dropped before the store, counted in
    /// [`WatchStatus::foreign_ignored`](crate::WatchStatus::foreign_ignored). Build
    /// `api` on [`crate::observe_bounded`] for the body caps.
    pub fn spawn_one(
        api: Api<K>,
        namespace: &str,
        name: &str,
        dynamic_type: K::DynamicType,
        health: Health,
        limits: WatchLimits,
        modify: impl FnMut(&mut K) + Send + 'static,
    ) -> Self
    where
        K: serde::Serialize,
    {
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let only = ObjectRef::new_with(name, dynamic_type.clone()).within(namespace);
        Self::start(
            api,
            config,
            dynamic_type.clone(),
            health,
            modify,
            true,
            Gate::bounded(dynamic_type.clone(), Some(only), limits),
        )
    }

    /// A watch of the objects `config` selects (a field and label selector naming a
    /// small set: the `ClusterTrustBundle`s of one signer), within `limits`, with
    /// quick retries as [`Watched::spawn_one`] and `modify` applied before the store
    /// keeps an object. What the server sends beyond the selection is the caller's to
    /// drop when it reads the store (a server may ignore a field selector); at most
    /// [`WatchLimits::max_objects`] are kept. Build `api` on
    /// [`crate::observe_bounded`] for the body caps.
    pub fn spawn_selected(
        api: Api<K>,
        config: watcher::Config,
        dynamic_type: K::DynamicType,
        health: Health,
        limits: WatchLimits,
        modify: impl FnMut(&mut K) + Send + 'static,
    ) -> Self
    where
        K: serde::Serialize,
    {
        Self::start(
            api,
            config,
            dynamic_type.clone(),
            health,
            modify,
            true,
            Gate::bounded(dynamic_type.clone(), None, limits),
        )
    }

    fn start(
        api: Api<K>,
        config: watcher::Config,
        dynamic_type: K::DynamicType,
        health: Health,
        mut modify: impl FnMut(&mut K) + Send + 'static,
        quick_retry: bool,
        mut gate: Gate<K>,
    ) -> Self {
        let mut writer = reflector::store::Writer::new(dynamic_type.clone());
        let store = writer.as_reader();
        let backoff: Box<dyn Backoff> = if quick_retry {
            Box::new(quick_backoff())
        } else {
            Box::new(watcher::DefaultBackoff::default())
        };
        let stream = watcher::watcher(api, config).backoff(backoff);
        let task_health = health.clone();
        let (applied_tx, applied) = tokio::sync::watch::channel(0u64);
        let changed: Arc<OnceLock<broadcast::Sender<Change<K>>>> = Arc::default();
        let changed_tx = changed.clone();
        let task_store = store.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            // Tells the store's followers of an applied object.
            let applied_one = |object: &K| {
                applied_tx.send_modify(|n| *n += 1);
                if let Some(tx) = changed_tx.get() {
                    // No subscriber left is not an error.
                    let key = object.to_object_ref(dynamic_type.clone());
                    let _ = tx.send(Change::Applied(key));
                }
            };
            loop {
                let flush_at = gate.flush_at();
                let item = tokio::select! {
                    biased;
                    () = sleep_until(flush_at), if flush_at.is_some() => {
                        for object in gate.flush() {
                            writer.apply_watcher_event(&watcher::Event::Apply(object.clone()));
                            applied_one(&object);
                        }
                        continue;
                    }
                    item = stream.next() => item,
                };
                let Some(item) = item else { break };
                let event = match item {
                    Ok(event) => event,
                    Err(error) => {
                        task_health.failed(&error);
                        continue;
                    }
                };
                match event {
                    watcher::Event::InitDone => {
                        writer.apply_watcher_event(&watcher::Event::InitDone);
                        gate.relisted();
                        task_health.synced();
                        applied_tx.send_modify(|n| *n += 1);
                        if let Some(tx) = changed_tx.get() {
                            let _ = tx.send(Change::Relisted);
                        }
                    }
                    watcher::Event::Init => {
                        task_health.recovered("event delivered");
                        gate.list_started(&task_health);
                        writer.apply_watcher_event(&watcher::Event::Init);
                    }
                    watcher::Event::InitApply(mut object) => {
                        task_health.recovered("event delivered");
                        match gate.admit(&object, true, &task_store, &task_health) {
                            Admit::Keep => {
                                modify(&mut object);
                                writer.apply_watcher_event(&watcher::Event::InitApply(object));
                            }
                            Admit::KeepPrevious(previous) => {
                                writer.apply_watcher_event(&watcher::Event::InitApply(previous));
                            }
                            Admit::Drop => {}
                        }
                    }
                    watcher::Event::Apply(mut object) => {
                        task_health.recovered("event delivered");
                        match gate.admit(&object, false, &task_store, &task_health) {
                            Admit::Keep => {
                                modify(&mut object);
                                if let Some(object) = gate.defer(object, &task_health) {
                                    writer.apply_watcher_event(&watcher::Event::Apply(
                                        object.clone(),
                                    ));
                                    applied_one(&object);
                                }
                            }
                            Admit::KeepPrevious(_) | Admit::Drop => {}
                        }
                    }
                    watcher::Event::Delete(object) => {
                        task_health.recovered("event delivered");
                        if gate.is_foreign(&object, &task_health) {
                            continue;
                        }
                        gate.forget_pending(&object, &task_health);
                        writer.apply_watcher_event(&watcher::Event::Delete(object));
                        applied_tx.send_modify(|n| *n += 1);
                    }
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

/// Sleeps until `at`, or for ever without one (the branch is disabled then).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What becomes of an object the watch delivered.
enum Admit<K> {
    /// Keep it.
    Keep,
    /// Keep the version the store holds instead (the new one is over a cap).
    KeepPrevious(K),
    /// Drop it.
    Drop,
}

/// The checks and the coalescing between the watch stream and the store.
struct Gate<K: Resource>
where
    K::DynamicType: Eq + Hash + Clone,
{
    dyntype: K::DynamicType,
    /// The one object a single-object watch keeps.
    only: Option<ObjectRef<K>>,
    limits: Option<WatchLimits>,
    size: Option<fn(&K) -> usize>,
    /// Objects kept from the list in progress.
    listed: usize,
    /// Whether the list in progress already refused an object past the cap.
    list_capped: bool,
    /// Versions waiting for the coalescing interval's end, by object.
    pending: HashMap<ObjectRef<K>, K>,
    /// When a version was last applied.
    last_applied: Option<tokio::time::Instant>,
}

impl<K> Gate<K>
where
    K: Resource + Clone,
    K::DynamicType: Eq + Hash + Clone,
{
    fn unbounded(dyntype: K::DynamicType) -> Self {
        Self {
            dyntype,
            only: None,
            limits: None,
            size: None,
            listed: 0,
            list_capped: false,
            pending: HashMap::new(),
            last_applied: None,
        }
    }

    fn bounded(dyntype: K::DynamicType, only: Option<ObjectRef<K>>, limits: WatchLimits) -> Self
    where
        K: serde::Serialize,
    {
        Self {
            only,
            limits: Some(limits),
            size: Some(crate::limits::json_size::<K>),
            ..Self::unbounded(dyntype)
        }
    }

    /// The store's key of `object`.
    fn key(&self, object: &K) -> ObjectRef<K> {
        let key = ObjectRef::new_with(
            object.meta().name.as_deref().unwrap_or(""),
            self.dyntype.clone(),
        );
        match object.meta().namespace.as_deref() {
            Some(namespace) => key.within(namespace),
            None => key,
        }
    }

    fn name_of(object: &K) -> String {
        crate::limits::object_name(
            object.meta().namespace.as_deref(),
            object.meta().name.as_deref(),
        )
    }

    /// Whether `object` is not the one object watched (then ignored and counted).
    fn is_foreign(&self, object: &K, health: &Health) -> bool {
        let Some(only) = &self.only else {
            return false;
        };
        let meta = object.meta();
        let same = meta.name.as_deref() == Some(only.name.as_str())
            && meta.namespace.as_deref() == only.namespace.as_deref();
        if !same {
            health.foreign_ignored(&Self::name_of(object));
        }
        !same
    }

    /// A new list starts.
    fn list_started(&mut self, health: &Health) {
        self.listed = 0;
        self.list_capped = false;
        // The list supersedes every version waiting.
        for _ in self.pending.drain() {
            health.coalesced();
        }
    }

    /// A list completed: the store was replaced now. Not counted as an applied
    /// version: a rotation written right after a (re)start is applied at once.
    fn relisted(&mut self) {}

    /// Whether `object` (of a list when `listing`) may be kept.
    fn admit(&mut self, object: &K, listing: bool, store: &Store<K>, health: &Health) -> Admit<K> {
        if self.is_foreign(object, health) {
            return Admit::Drop;
        }
        let Some(limits) = &self.limits else {
            return Admit::Keep;
        };
        let size = self.size.map_or(0, |size| size(object));
        if size > limits.max_object_bytes {
            health.limit_exceeded(&LimitError::ObjectTooLarge {
                object: Self::name_of(object),
                size,
                cap: limits.max_object_bytes,
            });
            return match store.get(&self.key(object)) {
                Some(previous) if listing => Admit::KeepPrevious(K::clone(&previous)),
                _ => Admit::Drop,
            };
        }
        let over_cap = if listing {
            self.listed >= limits.max_objects
        } else {
            store.len() >= limits.max_objects && store.get(&self.key(object)).is_none()
        };
        if over_cap {
            if !(listing && self.list_capped) {
                health.limit_exceeded(&LimitError::TooManyObjects {
                    object: Self::name_of(object),
                    cap: limits.max_objects,
                });
            }
            self.list_capped |= listing;
            return Admit::Drop;
        }
        if listing {
            self.listed += 1;
        }
        Admit::Keep
    }

    /// `object` to apply now, or `None` when it waits for the coalescing interval's
    /// end (replacing any version of it waiting already, which is counted).
    fn defer(&mut self, object: K, health: &Health) -> Option<K> {
        let interval = self.limits.as_ref().and_then(|l| l.coalesce);
        let now = tokio::time::Instant::now();
        let Some(interval) = interval else {
            self.last_applied = Some(now);
            return Some(object);
        };
        let due = self.last_applied.is_some_and(|at| now < at + interval);
        if !due && self.pending.is_empty() {
            self.last_applied = Some(now);
            return Some(object);
        }
        if self.pending.insert(self.key(&object), object).is_some() {
            health.coalesced();
        }
        None
    }

    /// When the versions waiting are due.
    fn flush_at(&self) -> Option<tokio::time::Instant> {
        if self.pending.is_empty() {
            return None;
        }
        let interval = self.limits.as_ref().and_then(|l| l.coalesce)?;
        Some(
            self.last_applied
                .map_or_else(tokio::time::Instant::now, |at| at + interval),
        )
    }

    /// The versions waiting, now due.
    fn flush(&mut self) -> Vec<K> {
        self.last_applied = Some(tokio::time::Instant::now());
        self.pending.drain().map(|(_, object)| object).collect()
    }

    /// `object` was deleted: a version of it waiting is never applied.
    fn forget_pending(&mut self, object: &K, health: &Health) {
        if self.pending.remove(&self.key(object)).is_some() {
            health.coalesced();
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
        // The wait is work a trace shows: a span naming the watch (no span once
        // synced: `is_synced` is the no-wait path).
        let span = tracing::info_span!("watch_ready.sync", watch = %health.label());
        tracing::Instrument::instrument(
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
            },
            span,
        )
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
