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
#![deny(missing_docs)]

pub mod registry;
pub mod types;
