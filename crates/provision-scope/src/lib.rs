//! # provision-scope
//!
//! Which cluster a provisioning step acts on: the provisioner (local) client, the
//! current cluster and the namespace, carried through the call graph in task-local
//! scope.
//!
//! It deliberately does not own: building clients from flags or the in-cluster
//! environment (`kube-construct`). It is legacy machinery kept for the provisioners:
//! constrained and documented, not a pattern to spread.
//!
//! ## Why it exists
//!
//! Provisioning runs as a tree of steps. Control starts in the local control plane
//! and moves into remote clusters (control plane -> virtual cluster -> workload
//! cluster). Descendant steps act on the *currently scoped* cluster by default and
//! reach back to the local provisioner client explicitly. The Go implementation
//! carried this in `context.Context` values; this crate carries it in one Tokio
//! task-local, so the step functions' signatures need not change. New code should
//! prefer passing a client as an argument; use this only where the legacy tree of
//! steps needs it.
//!
//! ## The model
//!
//! - One task-local holds an immutable scope value behind an `Arc`: the provisioner
//!   client, the current [`Cluster`] (`client`, `id`, `host`, `port`) and the
//!   namespace. Nothing mutates it in place.
//! - Runners install a copy with one value replaced for the duration of a future
//!   ([`with_provisioner`], [`with_cluster`], [`with_namespace`]; [`with_root`] sets
//!   the provisioner client and the local cluster, identified, at once) or a synchronous closure
//!   (`sync_with_*`). Inner scopes override outer ones; the outer value is back
//!   afterwards (and whenever the inner future is not being polled).
//! - Accessors ([`provisioner`], [`cluster`], [`cluster_client`], [`namespace`])
//!   return [`ScopeError::Missing`] naming the missing value: Go's "context invalid".
//! - Tracing follows the scope: [`with_cluster`] (and [`with_root`],
//!   [`with_remote_cluster`]) run their future in a `cluster` span with `cluster.id`,
//!   `cluster.host` and `cluster.port`; [`with_namespace`] in a `namespace` span.
//! - `tokio::spawn` does not inherit task-locals or the current span: use [`spawn()`]
//!   and [`spawn_in`] (for a `JoinSet`), which carry both. Futures joined within one
//!   task (`tokio::join!`, `futures::join!`) need nothing: each keeps the scope its
//!   own runner installed.
//! - [`with_remote_cluster`] is the remote-cluster step: from the remote cluster's
//!   `kube::Config` (obtained by the caller *with the parent scope's client*) and its
//!   [`ResourceIdentifier`], it derives the host and port from the server URL (443
//!   for https, 80 for http when absent; other schemes are an error), builds the
//!   client and runs the children with that cluster current.
//! - A remote cluster's kubeconfig read from a Secret is untrusted input: turn it
//!   into the `kube::Config` with [`config_from_untrusted_kubeconfig`], which accepts
//!   an `https://` server, inline CA data, a token and inline client certificate data
//!   and refuses `exec`, `auth-provider`, file paths, `insecure-skip-tls-verify`,
//!   `http://` and the rest ([`UntrustedKubeconfigError`] names the field). Whoever
//!   can write that Secret could otherwise run commands in this process or have a
//!   credential of its disk sent to a server of their choosing.
//! - Steps that keep platform objects (application bundles, namespaces) always use
//!   [`provisioner`], whatever the current cluster.
//!
//! ## What it does not do
//!
//! It carries values; it does not decide anything. Registering a remote cluster with
//! the CD layer, reference-counting remotes, yielding until a kubeconfig exists and
//! Go's background-deletion flag stay with the provisioners. Values are not carried
//! across `std::thread::spawn` or `spawn_blocking` (wrap the closure in a
//! `sync_with_*` runner), nor by plain `tokio::spawn` (use [`spawn()`]).
//!
//! ## Example: a provisioner tree
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use kube::api::{Api, PostParams};
//! use provision_scope::{self as scope, ResourceIdentifier};
//! use provision_scope::{KUBERNETES_CLUSTER_LABEL, ORGANIZATION_LABEL, PROJECT_LABEL};
//!
//! type Error = Box<dyn std::error::Error + Send + Sync>;
//!
//! /// Reads a remote cluster's kubeconfig through the *current* cluster's client. It
//! /// comes from a cluster, so it is untrusted: inline data only, no `exec`, no file.
//! async fn remote_config(secret: &str) -> Result<scope::RemoteConfig, Error> {
//!     let secrets: Api<Secret> = Api::namespaced(scope::cluster_client()?, &scope::namespace()?);
//!     let data = secrets.get(secret).await?.data.unwrap_or_default();
//!     let yaml = data.get("value").ok_or("kubeconfig Secret has no value")?;
//!     Ok(scope::config_from_untrusted_kubeconfig(&yaml.0, None).await?)
//! }
//!
//! /// A leaf step: writes to whichever cluster is current.
//! async fn install(app: &'static str) -> Result<(), Error> {
//!     let apps: Api<ConfigMap> = Api::namespaced(scope::cluster_client()?, &scope::namespace()?);
//!     let mut cm = ConfigMap::default();
//!     cm.metadata.name = Some(app.into());
//!     apps.create(&PostParams::default(), &cm).await?;
//!     Ok(())
//! }
//!
//! /// `local`: the process's client with its cluster's identity
//! /// (`kube_construct::CachedClient::cluster_client()?`).
//! async fn provision(local: scope::ClusterClient) -> Result<(), Error> {
//!     let vc_id = ResourceIdentifier::new("vcluster")
//!         .with_label(PROJECT_LABEL, "proj")
//!         .with_label(ORGANIZATION_LABEL, "org");
//!     let wl_id = ResourceIdentifier::new("kubernetes")
//!         .with_label(KUBERNETES_CLUSTER_LABEL, "wl")
//!         .with_label(PROJECT_LABEL, "proj")
//!         .with_label(ORGANIZATION_LABEL, "org");
//!
//!     scope::with_root(local, scope::with_namespace("org-proj", async {
//!         install("control-plane-app").await?; // the local cluster
//!         let vc = remote_config("vcluster-kubeconfig").await?; // read with the local client
//!         scope::with_remote_cluster(vc, vc_id, async {
//!             install("virtual-cluster-app").await?; // the virtual cluster
//!             let wl = remote_config("wl-kubeconfig").await?; // read with the vcluster's client
//!             scope::with_remote_cluster(wl, wl_id, async {
//!                 // Concurrent children, each in the workload cluster's scope.
//!                 let cni = scope::spawn(install("cni"));
//!                 let (csi, cni) = tokio::join!(install("csi"), cni);
//!                 csi?;
//!                 cni??;
//!                 // Reach back: platform bookkeeping stays on the provisioner client.
//!                 let bundles: Api<ConfigMap> = Api::namespaced(scope::provisioner()?, "org-proj");
//!                 let mut done = ConfigMap::default();
//!                 done.metadata.name = Some("wl-provisioned".into());
//!                 bundles.create(&PostParams::default(), &done).await?;
//!                 Ok::<(), Error>(())
//!             })
//!             .await?
//!         })
//!         .await?
//!     }))
//!     .await
//! }
//! ```
#![deny(missing_docs)]

mod error;
mod identifier;
mod remote;
mod scope;
mod spawn;
mod untrusted;
mod vetted;

pub use error::{RemoteError, ScopeError, ScopeValue};
pub use identifier::{
    KUBERNETES_CLUSTER_LABEL, LABEL_PRIORITIES, Label, ORGANIZATION_LABEL, PROJECT_LABEL,
    ResourceIdentifier,
};
pub use remote::{Endpoint, endpoint, remote_cluster, with_remote_cluster};
pub use scope::{
    Cluster, cluster, cluster_client, cluster_client_identified, namespace, provisioner,
    sync_with_cluster, sync_with_namespace, sync_with_provisioner, with_cluster, with_destinations,
    with_namespace, with_provisioner, with_root,
};
pub use spawn::{carry, spawn, spawn_in};
pub use untrusted::{
    EntryKind, KubeconfigEntry, MAX_KUBECONFIG_BYTES, MESSAGE_CHARS, NAME_CHARS, RefusedField,
    UntrustedKubeconfigError, config_from_untrusted_kubeconfig,
};
pub use vetted::{DestinationProblem, Destinations, RemoteConfig};

/// Which cluster a client reads ([`cluster_client_identified`], [`Cluster::identified`]).
pub use cluster_id::{ClusterClient, ClusterId};
