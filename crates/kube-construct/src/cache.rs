//! Declared, watch-driven caches, proven synced at construction, with health.
//!
//! A caller declares up front what it reads through the cache
//! ([`CacheDeclaration::typed`] / [`CacheDeclaration::dynamic`], each scoped by a
//! [`Selection`]: namespace, label selector, field selector). Each declaration
//! becomes one kube-runtime reflector: a `watcher` with those selectors feeding a
//! `reflector::store`.
//!
//! Construction ([`crate::client::ClientBuilder`]) races every store's
//! `wait_until_ready` against the watchers' errors and a timeout
//! ([`DEFAULT_SYNC_TIMEOUT`], 2 minutes as in controller-runtime):
//!
//! * every cache completed its initial list: success;
//! * a permanent error (401 Unauthorized, 403 Forbidden, 404 for an unknown
//!   resource) on any cache before it synced: failure at once, naming the cache;
//! * the timeout: failure naming every cache not yet synced and its last error.
//!
//! Transient errors (5xx, connection failures) are retried with kube-runtime's
//! default backoff. After construction, errors never stop a cache: it reports
//! [`CacheState::Degraded`] with its last error, logs through `tracing`, keeps
//! retrying, and reads keep serving the last known state (a re-list replaces the
//! store contents atomically when it completes). It is [`CacheState::Ready`]
//! again as soon as the API server accepts its WATCH again (each cache's requests
//! pass through a thin observer on the one shared client, because kube-runtime's
//! watcher resumes a watch silently), or the watch delivers an event.

use std::{
    any::Any,
    collections::BTreeMap,
    fmt,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use futures::{FutureExt, Stream, StreamExt, future::BoxFuture};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{ApiResource, DynamicObject, TypeMeta},
    core::{DynamicResourceScope, Selector, SelectorExt},
};
use kube_runtime::{
    WatchStreamExt,
    reflector::{self, ObjectRef, Store},
    watcher,
};
use serde::{Serialize, de::DeserializeOwned};
use thiserror::Error;
use tokio::{sync::mpsc, task::JoinHandle};

/// How long construction waits for every declared cache to sync, unless configured.
pub const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// Which objects of a resource a cache holds: a namespace (or all), and
/// optional label and field selectors, passed to the API server as given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Selection {
    namespace: Option<String>,
    labels: Option<String>,
    fields: Option<String>,
}

impl Selection {
    /// Every object: all namespaces (or a cluster-scoped kind).
    pub fn all() -> Self {
        Self::default()
    }

    /// Objects in one namespace.
    pub fn in_namespace(namespace: impl Into<String>) -> Self {
        Self {
            namespace: Some(namespace.into()),
            ..Self::default()
        }
    }

    /// Exactly one object, by namespace and name (a `metadata.name` field
    /// selector): needs RBAC on that object only. For a cluster-scoped kind pass
    /// `None`.
    pub fn object(namespace: Option<&str>, name: &str) -> Self {
        Self {
            namespace: namespace.map(str::to_owned),
            labels: None,
            fields: Some(format!("metadata.name={name}")),
        }
    }

    /// Restrict to objects matching a label selector (`app=x,tier!=db`).
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.labels = Some(selector.into());
        self
    }

    /// Restrict to objects matching a field selector (`metadata.name=x`).
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.fields = Some(selector.into());
        self
    }

    /// The namespace, if restricted to one.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The label selector, if any.
    pub fn label_selector(&self) -> Option<&str> {
        self.labels.as_deref()
    }

    /// The field selector, if any.
    pub fn field_selector(&self) -> Option<&str> {
        self.fields.as_deref()
    }

    fn watcher_config(&self) -> watcher::Config {
        let mut config = watcher::Config::default();
        if let Some(labels) = &self.labels {
            config = config.labels(labels);
        }
        if let Some(fields) = &self.fields {
            config = config.fields(fields);
        }
        config
    }

    /// Whether the object `namespace/name` could be in this cache. Label selectors
    /// cannot be judged without the object, so they do not exclude.
    pub(crate) fn covers_object(&self, namespace: Option<&str>, name: &str) -> bool {
        self.covers_namespace(namespace)
            && self
                .fields
                .as_deref()
                .and_then(|fields| field_equals(fields, "metadata.name"))
                .is_none_or(|wanted| wanted == name)
    }

    /// Whether every object of `namespace` (None: every namespace) could be in this cache.
    pub(crate) fn covers_namespace(&self, namespace: Option<&str>) -> bool {
        let fields_ns = self
            .fields
            .as_deref()
            .and_then(|fields| field_equals(fields, "metadata.namespace"));
        let scoped = self.namespace.as_deref().or(fields_ns);
        match (scoped, namespace) {
            (None, _) => true,
            (Some(own), Some(asked)) => own == asked,
            (Some(_), None) => false,
        }
    }
}

/// The value of an equality term (`key=value` or `key==value`) in a field selector.
fn field_equals<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    fields.split(',').find_map(|term| {
        let term = term.trim();
        if term.contains("!=") {
            return None;
        }
        let (k, v) = term.split_once("==").or_else(|| term.split_once('='))?;
        (k.trim() == key).then(|| v.trim())
    })
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "in namespace {ns:?}")?,
            None => f.write_str("in all namespaces")?,
        }
        if let Some(labels) = &self.labels {
            write!(f, " with labels {labels:?}")?;
        }
        if let Some(fields) = &self.fields {
            write!(f, " with fields {fields:?}")?;
        }
        Ok(())
    }
}

/// Names one declared cache: the resource and its [`Selection`]. Used in errors,
/// logs and health reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheName {
    /// API group ("" for the core group).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name, as in the URL.
    pub plural: String,
    /// What the cache holds.
    pub selection: Selection,
}

impl CacheName {
    fn new(resource: &ApiResource, selection: Selection) -> Self {
        Self {
            group: resource.group.clone(),
            version: resource.version.clone(),
            kind: resource.kind.clone(),
            plural: resource.plural.clone(),
            selection,
        }
    }

    /// `plural.version.group` (or `plural.version` for the core group), as kubectl names resources.
    pub fn resource(&self) -> String {
        if self.group.is_empty() {
            format!("{}.{}", self.plural, self.version)
        } else {
            format!("{}.{}.{}", self.plural, self.version, self.group)
        }
    }

    pub(crate) fn same_kind(&self, group: &str, version: &str, kind: &str) -> bool {
        self.group == group && self.version == version && self.kind == kind
    }
}

impl fmt::Display for CacheName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}) {}", self.kind, self.resource(), self.selection)
    }
}

/// The state of one cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheState {
    /// The initial list has not completed.
    Syncing,
    /// Synced and watching.
    Ready,
    /// Synced earlier, but the watch is failing; reads serve the last known state.
    Degraded,
}

impl fmt::Display for CacheState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Syncing => "syncing",
            Self::Ready => "ready",
            Self::Degraded => "degraded",
        })
    }
}

/// The health of one cache.
#[derive(Clone, Debug)]
pub struct CacheHealth {
    /// Which cache.
    pub cache: CacheName,
    /// Its state.
    pub state: CacheState,
    /// The last watch error, until the watch recovers.
    pub last_error: Option<String>,
    /// Watch errors seen since construction started.
    pub errors: u64,
    /// Objects currently held.
    pub objects: usize,
}

/// A health/readiness report over every declared cache.
#[derive(Clone, Debug)]
pub struct HealthReport {
    /// One entry per declared cache, in declaration order.
    pub caches: Vec<CacheHealth>,
}

impl HealthReport {
    /// True when every cache is [`CacheState::Ready`].
    pub fn is_ready(&self) -> bool {
        self.caches
            .iter()
            .all(|cache| cache.state == CacheState::Ready)
    }

    /// The caches that are not ready.
    pub fn not_ready(&self) -> impl Iterator<Item = &CacheHealth> {
        self.caches
            .iter()
            .filter(|cache| cache.state != CacheState::Ready)
    }
}

impl fmt::Display for HealthReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for cache in &self.caches {
            write!(
                f,
                "{}: {}, {} objects",
                cache.cache, cache.state, cache.objects
            )?;
            if let Some(err) = &cache.last_error {
                write!(f, ", last error: {err}")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// A cache that was not ready when construction timed out.
#[derive(Clone, Debug)]
pub struct NotReady {
    /// Which cache.
    pub cache: CacheName,
    /// Its last error, if it saw one.
    pub last_error: Option<String>,
}

impl fmt::Display for NotReady {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.cache)?;
        match &self.last_error {
            Some(err) => write!(f, " (last error: {err})"),
            None => f.write_str(" (no response yet)"),
        }
    }
}

struct NotReadyList<'a>(&'a [NotReady]);

impl fmt::Display for NotReadyList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

/// Why the declared caches could not be proven synced.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CacheError {
    /// The API server refused access (403).
    #[error("cache {cache}: forbidden to list/watch {} (403): {message}", cache.resource())]
    Forbidden {
        /// Which cache.
        cache: CacheName,
        /// The API server's message.
        message: String,
    },
    /// The API server does not know the resource (404): wrong group/version, or the CRD is not installed.
    #[error("cache {cache}: the API server does not serve {} (404, is the CRD installed?): {message}", cache.resource())]
    UnknownResource {
        /// Which cache.
        cache: CacheName,
        /// The API server's message.
        message: String,
    },
    /// The credentials were rejected (401).
    #[error("cache {cache}: unauthorized (401), the credentials were rejected: {message}")]
    Unauthorized {
        /// Which cache.
        cache: CacheName,
        /// The API server's message.
        message: String,
    },
    /// Some caches did not complete their initial list in time.
    #[error("caches not synced within {timeout:?}: {}", NotReadyList(not_ready))]
    Timeout {
        /// The configured timeout.
        timeout: Duration,
        /// Every cache not synced, with its last error.
        not_ready: Vec<NotReady>,
    },
    /// A namespace was given for a cluster-scoped kind.
    #[error("cache {cache}: {} is cluster-scoped, a namespace cannot be selected", cache.kind)]
    NamespaceOnClusterScoped {
        /// Which cache.
        cache: CacheName,
    },
    /// A cache's task ended before its initial list completed.
    #[error("cache {cache} stopped before its initial list completed")]
    Stopped {
        /// Which cache.
        cache: CacheName,
    },
}

impl CacheError {
    /// The cache the error is about (for [`CacheError::Timeout`], the first not ready).
    pub fn cache(&self) -> Option<&CacheName> {
        match self {
            Self::Forbidden { cache, .. }
            | Self::UnknownResource { cache, .. }
            | Self::Unauthorized { cache, .. }
            | Self::NamespaceOnClusterScoped { cache }
            | Self::Stopped { cache } => Some(cache),
            Self::Timeout { not_ready, .. } => not_ready.first().map(|item| &item.cache),
        }
    }
}

/// A permanent error from a watcher error, if it is one.
fn permanent(cache: &CacheName, err: &watcher::Error) -> Option<CacheError> {
    let status = match err {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status))
        | watcher::Error::WatchError(status) => status,
        _ => return None,
    };
    let cache = cache.clone();
    let message = status.message.clone();
    match status.code {
        401 => Some(CacheError::Unauthorized { cache, message }),
        403 => Some(CacheError::Forbidden { cache, message }),
        404 => Some(CacheError::UnknownResource { cache, message }),
        _ => None,
    }
}

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

/// The bounds a typed cached object needs.
pub trait CachedType:
    Resource<DynamicType = (), Scope: KnownScope>
    + Clone
    + fmt::Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> CachedType for K where
    K: Resource<DynamicType = (), Scope: KnownScope>
        + Clone
        + fmt::Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// The mutable health of one cache, shared between its task and readers.
#[derive(Debug)]
struct HealthCell {
    state: CacheState,
    last_error: Option<String>,
    errors: u64,
}

type SharedHealth = Arc<Mutex<HealthCell>>;

fn lock(health: &SharedHealth) -> std::sync::MutexGuard<'_, HealthCell> {
    health.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Type-erased read access to one store.
pub(crate) trait Reader: Send + Sync {
    /// The object as JSON with apiVersion and kind set.
    fn get_json(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Result<serde_json::Value, serde_json::Error>>;
    /// Matching objects as JSON with apiVersion and kind set.
    fn list_json(
        &self,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Result<serde_json::Value, serde_json::Error>>;
    fn len(&self) -> usize;
    fn is_ready(&self) -> bool;
    fn wait_ready(&self) -> BoxFuture<'static, bool>;
    fn as_any(&self) -> &dyn Any;
}

pub(crate) struct TypedReader<K: Resource<DynamicType = ()> + 'static> {
    pub(crate) store: Store<K>,
}

impl<K: CachedType> TypedReader<K> {
    pub(crate) fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.store
            .get(&ObjectRef::<K>::new(name).within_opt(namespace))
    }

    pub(crate) fn list(&self, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<K>> {
        self.store
            .state_filter(|obj| in_namespace(obj, namespace) && selector.matches(obj.labels()))
    }
}

pub(crate) struct DynamicReader {
    pub(crate) store: Store<DynamicObject>,
    pub(crate) resource: ApiResource,
}

pub(crate) fn in_namespace<K: Resource>(obj: &K, namespace: Option<&str>) -> bool {
    namespace.is_none_or(|ns| obj.meta().namespace.as_deref() == Some(ns))
}

impl<K: CachedType> Reader for TypedReader<K> {
    fn get_json(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Result<serde_json::Value, serde_json::Error>> {
        let key = ObjectRef::<K>::new(name).within_opt(namespace);
        self.store.get(&key).map(|obj| typed_json(obj.as_ref()))
    }

    fn list_json(
        &self,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Result<serde_json::Value, serde_json::Error>> {
        self.store
            .state_filter(|obj| in_namespace(obj, namespace) && selector.matches(obj.labels()))
            .iter()
            .map(|obj| typed_json(obj.as_ref()))
            .collect()
    }

    fn len(&self) -> usize {
        self.store.len()
    }

    fn is_ready(&self) -> bool {
        matches!(self.store.wait_until_ready().now_or_never(), Some(Ok(())))
    }

    fn wait_ready(&self) -> BoxFuture<'static, bool> {
        let store = self.store.clone();
        async move { store.wait_until_ready().await.is_ok() }.boxed()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn typed_json<K: CachedType>(obj: &K) -> Result<serde_json::Value, serde_json::Error> {
    let mut value = serde_json::to_value(obj)?;
    set_types(&mut value, &K::api_version(&()), &K::kind(&()));
    Ok(value)
}

fn set_types(value: &mut serde_json::Value, api_version: &str, kind: &str) {
    if let Some(map) = value.as_object_mut() {
        map.entry("apiVersion")
            .or_insert_with(|| serde_json::Value::String(api_version.to_owned()));
        map.entry("kind")
            .or_insert_with(|| serde_json::Value::String(kind.to_owned()));
    }
}

impl DynamicReader {
    /// The stored object with its apiVersion/kind filled in (LIST items may lack them).
    pub(crate) fn complete(&self, obj: &DynamicObject) -> DynamicObject {
        let mut obj = obj.clone();
        if obj.types.is_none() {
            obj.types = Some(TypeMeta {
                api_version: self.resource.api_version.clone(),
                kind: self.resource.kind.clone(),
            });
        }
        obj
    }

    pub(crate) fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<DynamicObject>> {
        let key = ObjectRef::new_with(name, self.resource.clone()).within_opt(namespace);
        self.store.get(&key).map(|obj| match obj.types {
            Some(_) => obj,
            None => Arc::new(self.complete(&obj)),
        })
    }

    pub(crate) fn list(
        &self,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Arc<DynamicObject>> {
        self.store
            .state_filter(|obj| in_namespace(obj, namespace) && selector.matches(obj.labels()))
            .into_iter()
            .map(|obj| match obj.types {
                Some(_) => obj,
                None => Arc::new(self.complete(&obj)),
            })
            .collect()
    }
}

impl Reader for DynamicReader {
    fn get_json(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Result<serde_json::Value, serde_json::Error>> {
        self.get(namespace, name)
            .map(|obj| serde_json::to_value(obj.as_ref()))
    }

    fn list_json(
        &self,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Result<serde_json::Value, serde_json::Error>> {
        self.list(namespace, selector)
            .iter()
            .map(|obj| serde_json::to_value(obj.as_ref()))
            .collect()
    }

    fn len(&self) -> usize {
        self.store.len()
    }

    fn is_ready(&self) -> bool {
        matches!(self.store.wait_until_ready().now_or_never(), Some(Ok(())))
    }

    fn wait_ready(&self) -> BoxFuture<'static, bool> {
        let store = self.store.clone();
        async move { store.wait_until_ready().await.is_ok() }.boxed()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

trait WithinOpt {
    fn within_opt(self, namespace: Option<&str>) -> Self;
}

impl<K: reflector::Lookup> WithinOpt for ObjectRef<K>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    fn within_opt(self, namespace: Option<&str>) -> Self {
        match namespace {
            Some(ns) => self.within(ns),
            None => self,
        }
    }
}

type Launch =
    Box<dyn FnOnce(Client, SharedHealth, mpsc::UnboundedSender<CacheError>) -> Launched + Send>;

struct Launched {
    reader: Box<dyn Reader>,
    task: BoxFuture<'static, ()>,
}

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
        let namespace = name.selection.namespace.clone();
        let task_name = name.clone();
        Self {
            name,
            namespaced: <K::Scope as KnownScope>::NAMESPACED,
            launch: Box::new(move |client, health, fatal| {
                let api = <K::Scope as KnownScope>::api::<K>(client, namespace.as_deref());
                let (store, writer) = reflector::store::<K>();
                let stream =
                    reflector::reflector(writer, watcher::watcher(api, config).default_backoff());
                Launched {
                    reader: Box::new(TypedReader { store }),
                    task: drive(task_name, stream, health, fatal).boxed(),
                }
            }),
        }
    }

    /// A cache of a resource known only at run time.
    pub fn dynamic(resource: ApiResource, selection: Selection) -> Self {
        let name = CacheName::new(&resource, selection);
        let config = name.selection.watcher_config();
        let namespace = name.selection.namespace.clone();
        let task_name = name.clone();
        Self {
            name,
            namespaced: None,
            launch: Box::new(move |client, health, fatal| {
                let api: Api<DynamicObject> = match namespace.as_deref() {
                    Some(ns) => Api::namespaced_with(client, ns, &resource),
                    None => Api::all_with(client, &resource),
                };
                let writer = reflector::store::Writer::new(resource.clone());
                let store = writer.as_reader();
                let stream =
                    reflector::reflector(writer, watcher::watcher(api, config).default_backoff());
                Launched {
                    reader: Box::new(DynamicReader { store, resource }),
                    task: drive(task_name, stream, health, fatal).boxed(),
                }
            }),
        }
    }

    /// The cache this declares.
    pub fn name(&self) -> &CacheName {
        &self.name
    }
}

/// The same client (connection pool, credentials), with one cache's requests
/// observed: an accepted WATCH proves the watch is back, which kube-runtime's
/// watcher does not report (it resumes silently and swallows bookmarks).
fn observed_client(client: &Client, health: SharedHealth, name: CacheName) -> Client {
    let default_namespace = client.default_namespace().to_owned();
    let inner = client.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        let health = health.clone();
        let name = name.clone();
        async move {
            let is_watch = request
                .uri()
                .query()
                .is_some_and(|query| query.split('&').any(|pair| pair == "watch=true"));
            let response = inner.send(request).await?;
            if is_watch && response.status().is_success() {
                let mut cell = lock(&health);
                if cell.state == CacheState::Degraded {
                    cell.state = CacheState::Ready;
                    cell.last_error = None;
                    tracing::info!(cache = %name, "cache recovered: watch re-established");
                }
            }
            Ok::<_, kube::Error>(response)
        }
    });
    Client::new(service, default_namespace)
}

/// Runs one reflector for the life of the client, keeping its health current.
async fn drive<K, S>(
    name: CacheName,
    stream: S,
    health: SharedHealth,
    fatal: mpsc::UnboundedSender<CacheError>,
) where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let mut stream = std::pin::pin!(stream);
    let mut synced = false;
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => {
                if !synced {
                    if matches!(event, watcher::Event::InitDone) {
                        synced = true;
                        let mut cell = lock(&health);
                        cell.state = CacheState::Ready;
                        cell.last_error = None;
                        tracing::info!(cache = %name, "cache synced");
                    }
                    continue;
                }
                let mut cell = lock(&health);
                if cell.state == CacheState::Degraded {
                    cell.state = CacheState::Ready;
                    cell.last_error = None;
                    tracing::info!(cache = %name, "cache recovered");
                }
            }
            Err(err) => {
                let message = err.to_string();
                {
                    let mut cell = lock(&health);
                    cell.errors = cell.errors.saturating_add(1);
                    cell.last_error = Some(message.clone());
                    if synced {
                        if cell.state != CacheState::Degraded {
                            tracing::warn!(cache = %name, error = %message, "cache degraded: serving last known state while the watch retries");
                        } else {
                            tracing::debug!(cache = %name, error = %message, "cache watch still failing");
                        }
                        cell.state = CacheState::Degraded;
                    }
                }
                if !synced {
                    match permanent(&name, &err) {
                        Some(permanent) => {
                            tracing::error!(cache = %name, error = %message, "cache cannot sync: permanent error");
                            // The receiver is gone once construction has returned.
                            let _ = fatal.send(permanent);
                        }
                        None => {
                            tracing::warn!(cache = %name, error = %message, "cache not synced yet, retrying");
                        }
                    }
                }
            }
        }
    }
    tracing::warn!(cache = %name, "cache watch stream ended");
}

/// Aborts the cache tasks when the last client handle is dropped.
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

pub(crate) struct CacheEntry {
    pub(crate) name: CacheName,
    pub(crate) reader: Box<dyn Reader>,
    health: SharedHealth,
}

/// The running, synced caches.
pub(crate) struct Caches {
    pub(crate) entries: Vec<CacheEntry>,
    _tasks: Tasks,
}

impl Caches {
    /// Start every declared cache and return once all have synced, or fail.
    pub(crate) async fn start(
        client: &Client,
        declarations: Vec<CacheDeclaration>,
        timeout: Duration,
    ) -> Result<Self, CacheError> {
        for declaration in &declarations {
            if declaration.namespaced == Some(false)
                && declaration.name.selection.namespace.is_some()
            {
                return Err(CacheError::NamespaceOnClusterScoped {
                    cache: declaration.name.clone(),
                });
            }
        }

        let (fatal_tx, mut fatal_rx) = mpsc::unbounded_channel();
        let mut entries = Vec::with_capacity(declarations.len());
        let mut tasks = Tasks(Vec::with_capacity(declarations.len()));
        for declaration in declarations {
            let health = Arc::new(Mutex::new(HealthCell {
                state: CacheState::Syncing,
                last_error: None,
                errors: 0,
            }));
            let observed = observed_client(client, health.clone(), declaration.name.clone());
            let launched = (declaration.launch)(observed, health.clone(), fatal_tx.clone());
            tasks.0.push(tokio::spawn(launched.task));
            entries.push(CacheEntry {
                name: declaration.name,
                reader: launched.reader,
                health,
            });
        }
        drop(fatal_tx);
        tracing::debug!(
            caches = entries.len(),
            ?timeout,
            "waiting for caches to sync"
        );

        let all_ready =
            futures::future::join_all(entries.iter().map(|entry| entry.reader.wait_ready()));
        tokio::select! {
            biased;
            Some(err) = fatal_rx.recv() => return Err(err),
            ready = all_ready => {
                if let Some((entry, _)) = entries.iter().zip(ready).find(|(_, ok)| !ok) {
                    return Err(CacheError::Stopped { cache: entry.name.clone() });
                }
            }
            () = tokio::time::sleep(timeout) => {
                let not_ready = entries
                    .iter()
                    .filter(|entry| !entry.reader.is_ready())
                    .map(|entry| NotReady {
                        cache: entry.name.clone(),
                        last_error: lock(&entry.health).last_error.clone(),
                    })
                    .collect();
                return Err(CacheError::Timeout { timeout, not_ready });
            }
        }
        // The reflector applies InitDone before our task sees it: make the report agree.
        for entry in &entries {
            let mut cell = lock(&entry.health);
            if cell.state == CacheState::Syncing {
                cell.state = CacheState::Ready;
            }
        }
        Ok(Self {
            entries,
            _tasks: tasks,
        })
    }

    pub(crate) fn health(&self) -> HealthReport {
        HealthReport {
            caches: self
                .entries
                .iter()
                .map(|entry| {
                    let cell = lock(&entry.health);
                    CacheHealth {
                        cache: entry.name.clone(),
                        state: cell.state,
                        last_error: cell.last_error.clone(),
                        errors: cell.errors,
                        objects: entry.reader.len(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_selector_terms() {
        assert_eq!(field_equals("metadata.name=x", "metadata.name"), Some("x"));
        assert_eq!(
            field_equals("type=a, metadata.name==y", "metadata.name"),
            Some("y")
        );
        assert_eq!(field_equals("metadata.name!=x", "metadata.name"), None);
        assert_eq!(field_equals("type=a", "metadata.name"), None);
    }

    #[test]
    fn coverage() {
        let one = Selection::object(Some("ns"), "x");
        assert!(one.covers_object(Some("ns"), "x"));
        assert!(!one.covers_object(Some("ns"), "y"));
        assert!(!one.covers_object(Some("other"), "x"));
        assert!(!one.covers_namespace(None));
        let all = Selection::all().labels("a=b");
        assert!(all.covers_object(Some("any"), "thing"));
        assert!(all.covers_namespace(None));
        let by_field = Selection::all().fields("metadata.namespace=ns");
        assert!(by_field.covers_namespace(Some("ns")));
        assert!(!by_field.covers_namespace(Some("other")));
    }

    #[test]
    fn names_read_like_kubectl() {
        let name = CacheName::new(
            &ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
            Selection::object(Some("ns"), "x"),
        );
        assert_eq!(name.resource(), "secrets.v1");
        assert_eq!(
            name.to_string(),
            "Secret (secrets.v1) in namespace \"ns\" with fields \"metadata.name=x\""
        );
    }
}
