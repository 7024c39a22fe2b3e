//! The task-local scope, its runners and accessors.
//!
//! One task-local holds an immutable, shared ([`Arc`]) scope value. A runner
//! (`with_*`) derives a copy with one value replaced and runs a future (or, for the
//! `sync_with_*` forms, a closure) with that copy installed; when the future
//! completes — or whenever it is not being polled — the outer value is in place
//! again. The copy is derived when the runner *starts running* (its first poll), so
//! runners compose in either nesting order: `with_namespace(ns, with_cluster(c, f))`
//! sees both.
//!
//! Task-locals do not cross `tokio::spawn`: use [`crate::spawn()`] / [`crate::spawn_in`].

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use cluster_id::{ClusterClient, ClusterId};
use tracing::Instrument;

use crate::error::{ScopeError, ScopeValue};
use crate::identifier::ResourceIdentifier;
use crate::remote::{Endpoint, endpoint};
use crate::vetted::Destinations;

tokio::task_local! {
    /// The one task-local. Never mutated in place: runners install a new `Arc`.
    pub(crate) static SCOPE: Arc<Scope>;
}

/// The values carried by the provisioning scope. Immutable once installed.
#[derive(Clone, Default)]
pub(crate) struct Scope {
    provisioner: Option<kube::Client>,
    cluster: Option<Arc<Cluster>>,
    namespace: Option<Arc<str>>,
    /// Where untrusted remote clusters may point ([`with_destinations`]).
    destinations: Option<Arc<Destinations>>,
    /// The management cluster's API server, as the root's configuration says.
    root: Option<Endpoint>,
}

/// The destinations in force and the root's API server (see [`with_destinations`]).
pub(crate) fn destinations() -> (Arc<Destinations>, Option<Endpoint>) {
    let scope = current();
    (
        scope.destinations.clone().unwrap_or_default(),
        scope.root.clone(),
    )
}

/// The scope installed on this task, or an empty one.
pub(crate) fn current() -> Arc<Scope> {
    SCOPE.try_with(Arc::clone).unwrap_or_default()
}

/// A copy of the current scope with `change` applied.
fn derive(change: impl FnOnce(&mut Scope)) -> Arc<Scope> {
    let mut next = Scope::clone(&current());
    change(&mut next);
    Arc::new(next)
}

fn read<T>(value: ScopeValue, get: impl FnOnce(&Scope) -> Option<T>) -> Result<T, ScopeError> {
    SCOPE
        .try_with(|scope| get(scope))
        .ok()
        .flatten()
        .ok_or(ScopeError::Missing(value))
}

/// The cluster a step acts on: a client for it and, for remote clusters, its
/// identifier and API endpoint.
///
/// The local cluster (the root of the tree) has no identifier, host or port.
#[derive(Clone)]
pub struct Cluster {
    /// A client for this cluster's API.
    pub client: kube::Client,
    /// The CD identifier of a remote cluster; `None` for the local one.
    pub id: Option<ResourceIdentifier>,
    /// The API server host of a remote cluster (no brackets for IPv6).
    pub host: Option<String>,
    /// The API server port of a remote cluster.
    pub port: Option<u16>,
    /// The client with its cluster's identity, when known (see [`Cluster::identified`]).
    identified: Option<ClusterClient>,
}

impl Cluster {
    /// The local cluster: no identifier, host or port.
    ///
    /// A bare `kube::Client` says nothing of its cluster: [`cluster_client_identified`]
    /// refuses it until it is named ([`Cluster::identified_as`]); prefer
    /// [`Cluster::identified`].
    pub fn local(client: kube::Client) -> Self {
        Self {
            client,
            id: None,
            host: None,
            port: None,
            identified: None,
        }
    }

    /// The local cluster, from a client that carries its cluster's identity
    /// (`kube_construct::CachedClient::cluster_client`, or
    /// [`ClusterClient::try_from_config`]).
    pub fn identified(client: ClusterClient) -> Self {
        Self {
            client: client.kube().clone(),
            id: None,
            host: None,
            port: None,
            identified: Some(client),
        }
    }

    /// This cluster, with the identity the caller says its client has.
    pub fn identified_as(mut self, cluster: ClusterId) -> Self {
        self.identified = Some(ClusterClient::new(self.client.clone(), cluster));
        self
    }

    /// The client with its cluster's identity.
    ///
    /// # Errors
    /// [`ScopeError::Unidentified`] when this cluster was built from a bare client.
    pub fn cluster_client(&self) -> Result<ClusterClient, ScopeError> {
        self.identified
            .clone()
            .ok_or(ScopeError::Unidentified(ScopeValue::Cluster))
    }

    /// A remote cluster.
    pub fn remote(
        client: kube::Client,
        id: ResourceIdentifier,
        host: impl Into<String>,
        port: u16,
    ) -> Self {
        Self {
            client,
            id: Some(id),
            host: Some(host.into()),
            port: Some(port),
            identified: None,
        }
    }

    /// A remote cluster from a client that carries its cluster's identity.
    pub fn remote_identified(
        client: ClusterClient,
        id: ResourceIdentifier,
        host: impl Into<String>,
        port: u16,
    ) -> Self {
        let mut cluster = Self::remote(client.kube().clone(), id, host, port);
        cluster.identified = Some(client);
        cluster
    }

    /// Whether this is the local cluster (it has no identifier).
    pub fn is_local(&self) -> bool {
        self.id.is_none()
    }

    fn span(&self) -> tracing::Span {
        let id = self.id.as_ref().map(ResourceIdentifier::cluster_name);
        tracing::info_span!(
            "cluster",
            cluster.id = id.as_deref().unwrap_or("local"),
            cluster.host = self.host.as_deref(),
            cluster.port = self.port,
        )
    }
}

/// Shows the identifier, host and port; the client (and its credentials) is elided.
impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("id", &self.id)
            .field("host", &self.host)
            .field("port", &self.port)
            .field(
                "cluster",
                &self.identified.as_ref().map(ClusterClient::cluster),
            )
            .finish_non_exhaustive()
    }
}

/// The provisioner (local control plane) client, whatever the current cluster.
///
/// Steps that keep platform objects (application bundles, namespaces) use this one.
pub fn provisioner() -> Result<kube::Client, ScopeError> {
    read(ScopeValue::Provisioner, |s| s.provisioner.clone())
}

/// The current cluster.
pub fn cluster() -> Result<Arc<Cluster>, ScopeError> {
    read(ScopeValue::Cluster, |s| s.cluster.clone())
}

/// The current cluster's client with its cluster's identity: what svc-tls's
/// constructors take (`PeerTls::from_options`), so that a step inside a remote
/// cluster reads that cluster's Secrets, never the local cluster's.
///
/// # Errors
/// [`ScopeError::Missing`] outside a cluster scope; [`ScopeError::Unidentified`] when
/// the cluster was put in the scope from a bare `kube::Client`.
pub fn cluster_client_identified() -> Result<ClusterClient, ScopeError> {
    cluster()?.cluster_client()
}

/// The current cluster's client: where a step's own writes go by default.
pub fn cluster_client() -> Result<kube::Client, ScopeError> {
    read(ScopeValue::Cluster, |s| {
        s.cluster.as_ref().map(|c| c.client.clone())
    })
}

/// The current namespace.
pub fn namespace() -> Result<Arc<str>, ScopeError> {
    read(ScopeValue::Namespace, |s| s.namespace.clone())
}

/// Runs `fut` with `client` as the provisioner client.
pub async fn with_provisioner<F: Future>(client: kube::Client, fut: F) -> F::Output {
    let next = derive(|s| s.provisioner = Some(client));
    SCOPE.scope(next, fut).await
}

/// Runs `fut` with `cluster` as the current cluster, inside a `cluster` span
/// carrying `cluster.id` (the CD cluster name, or `local`), `cluster.host` and
/// `cluster.port`.
pub async fn with_cluster<F: Future>(cluster: Cluster, fut: F) -> F::Output {
    let span = cluster.span();
    let next = derive(|s| s.cluster = Some(Arc::new(cluster)));
    SCOPE.scope(next, fut).instrument(span).await
}

/// Runs `fut` with `namespace` as the current namespace, inside a `namespace` span.
pub async fn with_namespace<F: Future>(namespace: impl Into<Arc<str>>, fut: F) -> F::Output {
    let namespace: Arc<str> = namespace.into();
    let span = tracing::debug_span!("namespace", namespace = &*namespace);
    let next = derive(|s| s.namespace = Some(namespace));
    SCOPE.scope(next, fut).instrument(span).await
}

/// Runs `fut` at the root of a provisioning tree: `client` is both the provisioner
/// client and the current (local) cluster's client, identified, so that
/// [`cluster_client_identified`] at the root gives svc-tls the local cluster's
/// Secrets.
///
/// `client` is the process's client with its cluster's identity:
/// `kube_construct::CachedClient::cluster_client()?`, or, for a client adopted from
/// elsewhere, `ClusterClient::new(client, ClusterId::named("local"))`.
///
/// ```no_run
/// # async fn f(adopted: kube::Client) -> Result<(), provision_scope::ScopeError> {
/// use provision_scope::{self as scope, ClusterClient, ClusterId};
/// let root = ClusterClient::new(adopted, ClusterId::named("local"));
/// scope::with_root(root, async {
///     let local = scope::cluster_client_identified()?; // what PeerTls::from_options takes
///     assert_eq!(local.cluster(), &ClusterId::named("local"));
///     Ok(())
/// })
/// .await
/// # }
/// ```
pub async fn with_root<F: Future>(client: ClusterClient, fut: F) -> F::Output {
    let provisioner = client.kube().clone();
    let root = client
        .config()
        .and_then(|config| endpoint(&config.cluster_url.to_string()).ok());
    let cluster = Cluster::identified(client);
    let span = cluster.span();
    let next = derive(|s| {
        s.provisioner = Some(provisioner);
        s.cluster = Some(Arc::new(cluster));
        s.root = root;
    });
    SCOPE.scope(next, fut).instrument(span).await
}

/// Runs `fut` with `destinations` deciding where remote clusters from untrusted
/// kubeconfigs may point ([`remote_cluster`](crate::remote_cluster),
/// [`with_remote_cluster`](crate::with_remote_cluster)); without it, the strict
/// default ([`Destinations::new`]) applies.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use provision_scope::{self as scope, Destinations};
/// // A test whose API emulators listen on 127.0.0.1.
/// scope::with_destinations(Destinations::new().allow_loopback(), async {
///     // scope::with_remote_cluster(config, id, children).await ...
/// })
/// .await;
/// # }
/// ```
pub async fn with_destinations<F: Future>(destinations: Destinations, fut: F) -> F::Output {
    let next = derive(|s| s.destinations = Some(Arc::new(destinations)));
    SCOPE.scope(next, fut).await
}

/// Runs `f` with `client` as the provisioner client.
pub fn sync_with_provisioner<R>(client: kube::Client, f: impl FnOnce() -> R) -> R {
    let next = derive(|s| s.provisioner = Some(client));
    SCOPE.sync_scope(next, f)
}

/// Runs `f` with `cluster` as the current cluster, inside its `cluster` span.
pub fn sync_with_cluster<R>(cluster: Cluster, f: impl FnOnce() -> R) -> R {
    let span = cluster.span();
    let next = derive(|s| s.cluster = Some(Arc::new(cluster)));
    span.in_scope(|| SCOPE.sync_scope(next, f))
}

/// Runs `f` with `namespace` as the current namespace, inside a `namespace` span.
pub fn sync_with_namespace<R>(namespace: impl Into<Arc<str>>, f: impl FnOnce() -> R) -> R {
    let namespace: Arc<str> = namespace.into();
    let span = tracing::debug_span!("namespace", namespace = &*namespace);
    let next = derive(|s| s.namespace = Some(namespace));
    span.in_scope(|| SCOPE.sync_scope(next, f))
}
