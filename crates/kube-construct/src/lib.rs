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
#![deny(missing_docs)]

pub mod cache;
pub mod client;
pub mod config;
mod display;
#[cfg(feature = "metrics")]
pub mod metrics;

pub mod registry;
pub mod types;

/// Which cluster a client reads, for the crates that keep state per cluster
/// ([`client::CachedClient::cluster_client`]).
pub use cluster_id::{ClusterClient, ClusterId, UnidentifiedCluster};
