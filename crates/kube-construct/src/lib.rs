//! # kube-construct
//!
//! The one sanctioned way for a platform service to get its Kubernetes client.
//!
//! It owns: building a [`kube::Client`] (in-cluster, from a `kube::Config`, or
//! adopting an existing client), the watch-driven caches (kube-runtime reflectors)
//! that back reads, proving at construction time that every declared cache has
//! synced, and the platform's type registry ("scheme").
//!
//! It deliberately does not own: TLS identities for service-to-service calls
//! (`svc-tls`), or which cluster a provisioning step acts on (`provision-scope`).
//!
//! ## Getting a client
//!
//! Declare what the process reads through the cache, then construct from one
//! source; every constructor returns only when every declared cache has synced
//! (a 403 or an unknown resource fails at once, naming the cache; anything else
//! is retried until the sync timeout, 2 minutes by default).
//!
//! ```no_run
//! use clap::Parser;
//! use k8s_openapi::api::core::v1::Secret;
//! use kube_construct::{
//!     cache::Selection,
//!     client::CachedClient,
//!     config::KubeOptions,
//! };
//!
//! #[derive(Parser)]
//! struct Options {
//!     #[command(flatten)]
//!     kube: KubeOptions, // --kubeconfig (KUBECONFIG), --master, --context
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let options = Options::parse();
//! let client = CachedClient::builder()
//!     // Exactly one Secret: needs RBAC on that object only.
//!     .cache::<Secret>(Selection::object(Some("unikorn"), "client-certificate"))
//!     // Out-of-cluster when a flag asks for it, otherwise in-cluster; never a silent fallback.
//!     .from_options(&options.kube)
//!     .await?;
//!
//! let secret = client.get::<Secret>(Some("unikorn"), "client-certificate")?;
//! println!("cached: {}", secret.is_some());
//! println!("{}", client.health());
//! # Ok(())
//! # }
//! ```
//!
//! See [`config`] for the configuration precedence, [`cache`] for declarations,
//! readiness and health, and [`client`] for reads and writes.
//!
//! The public tree is written out below, in this file, as svc-tls writes its own: the
//! files are private modules with one job each, and each public module is declared
//! here naming exactly what it exports, so that moving a file never moves a public
//! path.
#![deny(missing_docs)]

// Private file modules that no public path leads into.
mod display;

pub mod cache {
    //! Declared, watch-driven caches, proven synced at construction, with health.
    //!
    #![doc = include_str!("cache/overview.md")]

    mod health;
    pub(crate) mod reader;
    pub(crate) mod selection;
    pub(crate) mod start;

    pub use health::{CacheError, CacheHealth, CacheState, HealthReport, NotReady};
    pub use reader::{CacheObject, CachedType, KnownScope};
    pub use selection::{CacheName, Selection};
    pub use start::CacheDeclaration;

    /// How long construction waits for every declared cache to sync, unless configured:
    /// the workspace's one sync-timeout default (see
    /// `docs/decisions/one-watch-layer-and-sync-timeout.md`).
    pub use watch_ready::DEFAULT_SYNC_TIMEOUT;

    /// The bounds on what the API server can make a cache hold, and what a bound
    /// refused: `watch-ready`'s, set per client with
    /// [`ClientBuilder::watch_limits`](crate::client::ClientBuilder::watch_limits).
    pub use watch_ready::{LimitError, WatchLimits};
}

pub mod client {
    //! The cache-backed client: reads from the declared caches, writes to the API.
    //!
    #![doc = include_str!("client/overview.md")]

    mod cached;
    mod error;
    mod shared;
    mod status;
    mod undeclared;
    mod write;

    pub use cached::{CachedClient, ClientBuilder};
    pub use error::{ClientError, ConstructError};
    pub use shared::SharedWatch;
    pub use undeclared::{MAX_UNDECLARED_READS, UndeclaredRead};
}

pub mod config {
    //! Where the Kubernetes client configuration comes from.
    //!
    #![doc = include_str!("config/overview.md")]

    mod file_loader;
    mod incluster_config;
    mod master;
    mod options;

    pub use incluster_config::{InClusterError, InClusterProblem, InClusterSource};
    pub use options::{ConfigError, ConfigSource, Environment, KubeOptions, Resolved};
}

#[cfg(feature = "metrics")]
pub mod metrics {
    //! Prometheus metrics (feature `metrics`): whether each declared cache is ready, how
    //! long construction waited for it, and how constructions ended, on
    //! [`prometheus_client`], registered into a
    //! [`Registry`](prometheus_client::registry::Registry) the service owns and serves
    //! on its `/metrics` endpoint.
    //!
    #![doc = include_str!("metrics/overview.md")]

    mod cache_metrics;
    mod collector;

    pub use cache_metrics::{CONSTRUCTION_RESULTS, CacheMetrics, RegisterError, register};
}

pub mod registry {
    //! The platform's type registry (the Go code's "scheme").
    //!
    #![doc = include_str!("registry/overview.md")]

    mod builtins;
    mod codec;
    mod error;
    mod platform;
    mod scheme;
    #[cfg(test)]
    mod tests;

    pub use error::{DecodeError, EncodeError, KindConflict, RegistryError};
    pub use platform::{Addition, platform_registry};
    pub use scheme::{AnyObject, Registration, Registry, Scope, ScopeMarker, TypedObject, gvk_of};
}

pub mod types {
    //! Rust types for the platform's custom resources, with the exact JSON shapes the
    //! running Go services read and write.
    //!
    #![doc = include_str!("types/overview.md")]

    pub mod argo;
    mod condition;
    pub mod fake;
    // kube's `KubeSchema` derive (with `x_kube` validation rules) writes a private copy of
    // `HelmApplicationVersion` carrying its `pub`; the lint sees that copy, not the type,
    // which is re-exported below.
    #[allow(unreachable_pub)]
    mod helm;
    mod schema;
    mod serde_util;
    mod string_enum;
    mod values;

    pub use condition::{
        Condition, ConditionNotFound, ConditionReason, ConditionStatus, ConditionType,
        ManagableResource, ReconcilePauser, ResourceLabelError, ResourceLabeller,
        StatusConditionReader, StatusConditionWriter, get_condition, update_condition,
        update_condition_at,
    };
    pub use helm::{
        HelmApplication, HelmApplicationDependency, HelmApplicationList, HelmApplicationParameter,
        HelmApplicationRecommendation, HelmApplicationSpec, HelmApplicationStatus,
        HelmApplicationVersion, HelmApplicationVersionError, VersionNotFound, helm_application_crd,
    };
    pub use values::{
        ApplicationNamedReference, ApplicationReference, ApplicationReferenceKind, IPv4Address,
        IPv4Prefix, MachineGeneric, NetworkGeneric, SemanticVersion, SemanticVersionConstraints,
        SemanticVersionConstraintsError, SemanticVersionError, Tag, TagList, ValueParseError,
    };
}

/// Which cluster a client reads, for the crates that keep state per cluster
/// ([`client::CachedClient::cluster_client`]).
pub use cluster_id::{ClusterClient, ClusterId, UnidentifiedCluster};
