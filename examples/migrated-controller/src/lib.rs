//! A platform controller migrated off the Go `pkg/client`: a kube-runtime
//! [`Controller`] over the platform's `ManagedResource`, end to end.
//!
//! The Go controller it stands for did, per reconcile:
//!
//! ```text
//! cli := manager.GetClient()                           // the manager's cache
//! cli.Get(ctx, key, &resource)                         // from the cache (an informer)
//! cli.Get(ctx, kubeconfigKey, &secret)                 // a second informer, started lazily
//! ctx = client.NewContextWithCluster(ctx, remote)      // pkg/client: the remote cluster
//! tlsConfig, _ := client.TLSClientConfig(ctx, remoteClient, region, clientOptions)
//! http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}.Get(...)
//! cli.Status().Update(ctx, &resource)                  // the status subresource
//! ```
//!
//! Here, per reconcile ([`reconcile`]):
//! 1. **reads through kube-construct's caches**, and the controller's own watch *is*
//!    the cache's: [`run`] builds the controller over
//!    [`CachedClient::shared_watch`], so each kind is watched once, never twice;
//! 2. reads the remote cluster's kubeconfig from a cached Secret, vets it as
//!    untrusted input and **enters a provisioning scope** for that cluster
//!    (`provision_scope::with_root`, then `with_remote_cluster`);
//! 3. **calls the peer** with svc-tls's `PeerTls::client()` under the *remote*
//!    cluster's identity: `cluster_client_identified()` inside the scope is the remote
//!    cluster, so the identity and CA Secrets are read (and watched, once per process)
//!    there;
//! 4. **writes status** through the `/status` subresource
//!    ([`CachedClient::patch_status`]), only when the condition changed (a write
//!    that changes nothing would trigger the next reconcile for nothing).
//!
//! Around the reconcile, what the Go manager did ([`run_with`], [`Manager`]): leader
//! election through a `coordination.k8s.io/v1` Lease ([`leader`]), a bound on
//! concurrent reconciles, and panic recovery; the binary takes the Go manager's flags
//! ([`flags`]) and serves its metrics and probe endpoints ([`endpoints`]).
//!
//! The Go cache started an informer for any type on first use; here every read is
//! declared up front ([`client_builder`]) and an undeclared one is an error, listed by
//! [`CachedClient::undeclared_reads`]
//! (docs/decisions/undeclared-reads-stay-errors.md).

pub mod endpoints;
pub mod flags;
pub mod leader;
mod manager;
mod reconcile;

use std::{future::Future, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Secret;
use kube_construct::{
    cache::Selection,
    client::{CachedClient, ClientBuilder},
    types::fake::ManagedResource,
};
use svc_tls::options::{ClientIdentityOptions, PeerOptions};

pub use manager::{Counters, DEFAULT_MAX_CONCURRENCY, Manager, RunError, run_with};
pub use reconcile::{ReconcileError, error_policy, reconcile};

/// The label of a `ManagedResource` that names the remote cluster it is provisioned
/// in; that cluster's kubeconfig is the Secret `<cluster>-kubeconfig` (key `value`)
/// in the resource's namespace.
pub const CLUSTER_LABEL: &str = "unikorn-cloud.org/cluster";

/// The label that marks a Secret as a remote cluster's kubeconfig: the Secret cache
/// holds only these (not every Secret of the namespace).
pub const KUBECONFIG_LABEL: &str = "unikorn-cloud.org/kubeconfig";

/// How often a resource that reconciled is reconciled again without a change.
pub const RESYNC: Duration = Duration::from_secs(300);

/// What the controller is told at start-up.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The namespace whose `ManagedResource`s it reconciles, and where their
    /// clusters' kubeconfig Secrets are.
    pub namespace: String,
    /// The peer called per reconcile: its host, and its CA Secret **in the remote
    /// cluster** (`--region-host`, `--region-ca-secret-*`).
    pub peer: PeerOptions,
    /// The client identity presented: a Secret **in the remote cluster**
    /// (`--client-certificate-*`).
    pub identity: ClientIdentityOptions,
    /// The path called on the peer.
    pub path: String,
    /// How long a construction waits for its watches to sync.
    pub sync_timeout: Duration,
    /// Where the remote clusters' (untrusted) kubeconfigs may point:
    /// `provision_scope::Destinations::new()` in production (loopback, link-local
    /// and this cluster's own API server refused); tests allow loopback.
    pub destinations: provision_scope::Destinations,
}

/// What every reconcile shares.
pub struct Context {
    /// The local cluster's client: reads from its caches, writes to the API.
    pub client: CachedClient,
    /// The settings.
    pub settings: Settings,
    /// What the manager counts (reconciles, recovered panics).
    pub counters: Arc<Counters>,
}

/// The resources the controller reconciles.
pub fn resources(settings: &Settings) -> Selection {
    Selection::in_namespace(&settings.namespace)
}

/// The kubeconfig Secrets it reads.
pub fn kubeconfigs(settings: &Settings) -> Selection {
    Selection::in_namespace(&settings.namespace).labels(KUBECONFIG_LABEL)
}

/// Every cache the controller reads (the `ManagedResource` one is also the
/// controller's watch): construct the local client from it.
pub fn client_builder(settings: &Settings) -> ClientBuilder {
    CachedClient::builder()
        .sync_timeout(settings.sync_timeout)
        .cache::<ManagedResource>(resources(settings))
        .cache::<Secret>(kubeconfigs(settings))
}

/// Runs the controller until `shutdown` resolves (then lets running reconciles
/// finish): over the `ManagedResource` cache's watch of `client`, which must have
/// been built from [`client_builder`] (and identified: its cluster is the root of the
/// provisioning scope). No leader election and the Go manager's default bound on
/// concurrent reconciles: [`run_with`] for the rest.
///
/// # Errors
/// [`RunError::Client`] when `client` has no cache of the resources.
pub async fn run(
    client: CachedClient,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), RunError> {
    run_with(
        client,
        settings,
        Manager::default(),
        Arc::new(Counters::default()),
        shutdown,
        reconcile,
    )
    .await
}
