//! Reading a cache: one store reader for typed and dynamic objects.
//!
//! Like kube-runtime's `Store<K>`, which this wraps, there is one code path for both:
//! a typed resource is an [`Object`] whose `DynamicType` is `()`, a `DynamicObject`
//! one whose `DynamicType` is its `ApiResource`. Readers are type-erased behind
//! [`Reader`] so that one client holds caches of many kinds; a read of the kind the
//! cache holds downcasts to [`StoreReader<K>`] and shares the stored `Arc`s, any other
//! read (typed from a dynamic cache, or the reverse) converts through JSON.

use std::{any::Any, fmt, hash::Hash, sync::Arc};

use futures::{FutureExt, future::BoxFuture};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::{
    Api, Client, Resource, ResourceExt,
    core::{DynamicResourceScope, Selector, SelectorExt},
};
use kube_runtime::reflector::ObjectRef;
use serde::{Serialize, de::DeserializeOwned};
use watch_ready::{Health, WaitError, Watched};

mod sealed {
    pub trait Sealed {}
    impl Sealed for k8s_openapi::NamespaceResourceScope {}
    impl Sealed for k8s_openapi::ClusterResourceScope {}
    impl Sealed for kube::core::DynamicResourceScope {}
}

/// The resource scopes a typed cache or write can be built for (namespaced,
/// cluster-scoped, dynamic); sealed. Every `k8s_openapi` and `kube::CustomResource`
/// type has one of them.
pub trait KnownScope: sealed::Sealed {
    /// `Some(true)` namespaced, `Some(false)` cluster-scoped, `None` unknown.
    const NAMESPACED: Option<bool>;

    /// An `Api` for `K` in `namespace` (ignored for cluster-scoped kinds), or across all.
    #[doc(hidden)]
    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>;
}

impl KnownScope for NamespaceResourceScope {
    const NAMESPACED: Option<bool> = Some(true);

    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>,
    {
        match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }
}

impl KnownScope for ClusterResourceScope {
    const NAMESPACED: Option<bool> = Some(false);

    fn api<K>(client: Client, _namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>,
    {
        Api::all(client)
    }
}

impl KnownScope for DynamicResourceScope {
    const NAMESPACED: Option<bool> = None;

    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>,
    {
        match namespace {
            Some(ns) => Api::namespaced_with(client, ns, &()),
            None => Api::all(client),
        }
    }
}

/// An object a cache can hold, typed (`DynamicType = ()`) or dynamic
/// (`DynamicObject`, `DynamicType = ApiResource`): kube-runtime's `Store<K>` bounds,
/// plus JSON for reads that convert between the two.
pub trait CacheObject:
    Resource<DynamicType: Eq + Hash + Clone + Send + Sync>
    + Clone
    + fmt::Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> CacheObject for K where
    K: Resource<DynamicType: Eq + Hash + Clone + Send + Sync>
        + Clone
        + fmt::Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// The bounds a typed cached object needs: a [`CacheObject`] with no run-time type
/// information and a [`KnownScope`].
pub trait CachedType: CacheObject + Resource<DynamicType = (), Scope: KnownScope> {}

impl<K> CachedType for K where K: CacheObject + Resource<DynamicType = (), Scope: KnownScope> {}

/// What a read asks for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Query<'a> {
    /// One object by name.
    Get(&'a str),
    /// The objects matching a label selector.
    List(&'a Selector),
}

impl Query<'_> {
    /// The name asked for (None for a list).
    pub(crate) fn name(&self) -> Option<&str> {
        match self {
            Self::Get(name) => Some(name),
            Self::List(_) => None,
        }
    }
}

/// Type-erased access to one cache.
pub(crate) trait Reader: Send + Sync {
    /// Matching objects as JSON with apiVersion and kind set.
    fn read_json(
        &self,
        namespace: Option<&str>,
        query: Query<'_>,
    ) -> Vec<Result<serde_json::Value, serde_json::Error>>;
    /// Objects held.
    fn len(&self) -> usize;
    /// The watch's health.
    fn health(&self) -> &Health;
    /// Whether the initial list has completed.
    fn is_synced(&self) -> bool;
    /// Resolves when the initial list has completed (see [`Watched::synced`]).
    fn synced(&self) -> BoxFuture<'static, Result<(), WaitError>>;
    /// For the downcast to [`StoreReader<K>`].
    fn as_any(&self) -> &dyn Any;
}

/// One watched store of `K`, and the `DynamicType` its keys carry.
pub(crate) struct StoreReader<K: CacheObject> {
    watched: Watched<K>,
    dynamic_type: K::DynamicType,
}

impl<K: CacheObject> StoreReader<K> {
    pub(crate) fn new(watched: Watched<K>, dynamic_type: K::DynamicType) -> Self {
        Self {
            watched,
            dynamic_type,
        }
    }

    /// The watch behind the store (for a controller that shares it).
    pub(crate) fn watched(&self) -> &Watched<K> {
        &self.watched
    }

    /// The objects `query` selects in `namespace` (None: every namespace).
    pub(crate) fn read(&self, namespace: Option<&str>, query: Query<'_>) -> Vec<Arc<K>> {
        let store = self.watched.store();
        match query {
            Query::Get(name) => {
                let key = ObjectRef::<K>::new_with(name, self.dynamic_type.clone());
                let key = match namespace {
                    Some(ns) => key.within(ns),
                    None => key,
                };
                store.get(&key).into_iter().collect()
            }
            Query::List(selector) => store.state_filter(|obj| {
                namespace.is_none_or(|ns| obj.meta().namespace.as_deref() == Some(ns))
                    && selector.matches(obj.labels())
            }),
        }
    }
}

impl<K: CacheObject> Reader for StoreReader<K> {
    fn read_json(
        &self,
        namespace: Option<&str>,
        query: Query<'_>,
    ) -> Vec<Result<serde_json::Value, serde_json::Error>> {
        let api_version = K::api_version(&self.dynamic_type);
        let kind = K::kind(&self.dynamic_type);
        self.read(namespace, query)
            .iter()
            .map(|obj| {
                let mut value = serde_json::to_value(obj.as_ref())?;
                // LIST items, and typed objects, may lack them.
                if let Some(map) = value.as_object_mut() {
                    map.entry("apiVersion")
                        .or_insert_with(|| serde_json::Value::String(api_version.to_string()));
                    map.entry("kind")
                        .or_insert_with(|| serde_json::Value::String(kind.to_string()));
                }
                Ok(value)
            })
            .collect()
    }

    fn len(&self) -> usize {
        self.watched.store().len()
    }

    fn health(&self) -> &Health {
        self.watched.health()
    }

    fn is_synced(&self) -> bool {
        self.watched.is_synced()
    }

    fn synced(&self) -> BoxFuture<'static, Result<(), WaitError>> {
        self.watched.synced().boxed()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
