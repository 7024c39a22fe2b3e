//! Where caches become ready: [`CacheDeclaration`]s are started as `watch-ready`
//! watches on the one client, and [`Caches::start`] returns only when every one of
//! them has completed its initial list.

use std::{
    collections::BTreeMap,
    fmt,
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

use futures::FutureExt as _;

use kube::{
    Api, Client, Resource,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use watch_ready::{Health, Unsynced, WaitError, WatchLimits, Watched};

use super::reader::{Reader, StoreReader};
use super::{
    CacheError, CacheHealth, CacheName, CachedType, HealthReport, KnownScope, NotReady, Selection,
};
use crate::registry::{Registry, RegistryError};

type Launch = Box<dyn FnOnce(Client, Health, WatchLimits) -> Box<dyn Reader> + Send>;

/// One declared cache: a resource and a [`Selection`].
pub struct CacheDeclaration {
    name: CacheName,
    namespaced: Option<bool>,
    launch: Launch,
}

impl fmt::Debug for CacheDeclaration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheDeclaration")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl CacheDeclaration {
    /// A cache of a typed resource (any `k8s_openapi` type, or a `kube::CustomResource`).
    pub fn typed<K: CachedType>(selection: Selection) -> Self {
        let name = CacheName::new(&ApiResource::erase::<K>(&()), selection);
        let config = name.selection.watcher_config();
        let namespace = name.selection.namespace().map(str::to_owned);
        Self {
            name,
            namespaced: <K::Scope as KnownScope>::NAMESPACED,
            launch: Box::new(move |client, health, limits| {
                let api = <K::Scope as KnownScope>::api::<K>(client, namespace.as_deref());
                Box::new(StoreReader::new(
                    Watched::spawn_bounded(api, config, (), health, limits),
                    (),
                ))
            }),
        }
    }

    /// A cache of a resource known only at run time. For a kind in a [`Registry`],
    /// [`CacheDeclaration::registered`] takes the resource (plural, scope) from it.
    pub fn dynamic(resource: ApiResource, selection: Selection) -> Self {
        Self::dynamic_scoped(resource, None, selection)
    }

    /// A dynamic cache of a kind registered in `registry`: its [`ApiResource`] (the
    /// registered plural, however irregular) and its scope come from the registry, so
    /// the caller names only the group, version and kind.
    ///
    /// Fails when the kind is not registered (declare it with
    /// [`CacheDeclaration::dynamic`] and an explicit resource then) or is a
    /// subresource.
    pub fn registered(
        registry: &Registry,
        gvk: &GroupVersionKind,
        selection: Selection,
    ) -> Result<Self, RegistryError> {
        let resource = registry.api_resource(gvk)?;
        Ok(Self::dynamic_scoped(
            resource,
            registry.is_namespaced(gvk),
            selection,
        ))
    }

    fn dynamic_scoped(
        resource: ApiResource,
        namespaced: Option<bool>,
        selection: Selection,
    ) -> Self {
        let name = CacheName::new(&resource, selection);
        let config = name.selection.watcher_config();
        let namespace = name.selection.namespace().map(str::to_owned);
        Self {
            name,
            namespaced,
            launch: Box::new(move |client, health, limits| {
                let api: Api<DynamicObject> = match namespace.as_deref() {
                    Some(ns) => Api::namespaced_with(client, ns, &resource),
                    None => Api::all_with(client, &resource),
                };
                let watched = Watched::spawn_bounded(api, config, resource.clone(), health, limits);
                Box::new(StoreReader::new(watched, resource))
            }),
        }
    }

    /// The cache this declares.
    pub fn name(&self) -> &CacheName {
        &self.name
    }
}

pub(crate) struct CacheEntry {
    pub(crate) name: CacheName,
    pub(crate) reader: Box<dyn Reader>,
    /// How long after construction started its initial list completed (set once).
    pub(crate) synced_after: Arc<OnceLock<Duration>>,
}

/// The running, synced caches. Dropping them stops their watches.
pub(crate) struct Caches {
    pub(crate) entries: Vec<CacheEntry>,
}

impl Caches {
    /// Start every declared cache and return once all have synced, or fail: at once
    /// on a refusal (401, 403, 404) of any cache, or after `timeout`. Each cache's
    /// watch is held within `limits` (object size and count, LIST and WATCH event
    /// bodies), each refusal a typed `LimitError` counted in its health.
    pub(crate) async fn start(
        client: &Client,
        declarations: Vec<CacheDeclaration>,
        timeout: Duration,
        limits: &WatchLimits,
    ) -> Result<Self, CacheError> {
        for declaration in &declarations {
            if declaration.namespaced == Some(false)
                && declaration.name.selection.namespace().is_some()
            {
                return Err(CacheError::NamespaceOnClusterScoped {
                    cache: declaration.name.clone(),
                });
            }
        }

        let entries: Vec<CacheEntry> = declarations
            .into_iter()
            .map(|declaration| {
                let health = Health::new(declaration.name.to_string());
                // Each cache's requests pass through an observer on the one client,
                // so that an accepted WATCH marks it ready again, and whose response
                // bodies are capped (a LIST, each WATCH event).
                let observed = watch_ready::observe_bounded(client, &health, limits);
                CacheEntry {
                    reader: (declaration.launch)(observed, health, limits.clone()),
                    name: declaration.name,
                    synced_after: Arc::default(),
                }
            })
            .collect();
        tracing::debug!(
            caches = entries.len(),
            ?timeout,
            "waiting for caches to sync"
        );

        let started = Instant::now();
        let waits = entries.iter().map(|entry| {
            let synced_after = entry.synced_after.clone();
            entry
                .reader
                .synced()
                .inspect(move |result| {
                    if result.is_ok() {
                        let _ = synced_after.set(started.elapsed());
                    }
                })
                .boxed()
        });
        match watch_ready::all_synced(waits, timeout).await {
            Ok(()) => Ok(Self { entries }),
            Err(Unsynced::Failed { index, error }) => {
                let cache = entries[index].name.clone();
                Err(match error {
                    WaitError::Refused(refusal) => CacheError::refused(cache, refusal),
                    // `WaitError` is non-exhaustive; the other reason is a stopped task.
                    _ => CacheError::Stopped { cache },
                })
            }
            Err(Unsynced::TimedOut) => {
                let not_ready = entries
                    .iter()
                    .filter(|entry| !entry.reader.is_synced())
                    .map(|entry| NotReady {
                        cache: entry.name.clone(),
                        last_error: entry.reader.health().last_error(),
                    })
                    .collect();
                Err(CacheError::Timeout { timeout, not_ready })
            }
        }
    }

    /// How long after construction started each cache's initial list completed.
    pub(crate) fn sync_times(&self) -> impl Iterator<Item = (&CacheName, Duration)> {
        self.entries
            .iter()
            .filter_map(|entry| Some((&entry.name, *entry.synced_after.get()?)))
    }

    pub(crate) fn health(&self) -> HealthReport {
        HealthReport {
            caches: self
                .entries
                .iter()
                .map(|entry| {
                    let status = entry.reader.health().status();
                    CacheHealth {
                        cache: entry.name.clone(),
                        state: status.state,
                        last_error: status.last_error,
                        errors: status.errors,
                        objects: entry.reader.len(),
                        over_limit: status.over_limit,
                        last_limit_error: status.last_limit_error,
                    }
                })
                .collect(),
        }
    }

    /// The caches holding `group/version/kind`.
    pub(crate) fn of_kind<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
        kind: &'a str,
    ) -> impl Iterator<Item = &'a CacheEntry> + 'a {
        self.entries
            .iter()
            .filter(move |entry| entry.name.same_kind(group, version, kind))
    }
}

/// Deduplicates list results from several caches by namespace/name.
pub(crate) fn dedupe<T: Resource>(items: Vec<Arc<T>>) -> Vec<Arc<T>> {
    let mut seen = BTreeMap::new();
    for item in items {
        let key = (item.meta().namespace.clone(), item.meta().name.clone());
        seen.entry(key).or_insert(item);
    }
    seen.into_values().collect()
}
