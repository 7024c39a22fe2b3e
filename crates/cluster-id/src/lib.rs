//! # cluster-id
//!
//! Which Kubernetes cluster a client reads from, as a value: [`ClusterId`], and a
//! `kube::Client` that carries it, [`ClusterClient`].
//!
//! ## Why it exists
//!
//! A `kube::Client` exposes nothing that tells its cluster apart from another's: no
//! server URL, no CA. Process-wide state keyed by a Secret's namespace and name alone
//! (one watch per Secret per process) then mixes clusters up: a provisioner that
//! reads `unikorn/client-ca` from a remote cluster must never be handed the local
//! cluster's Secret, nor may a tenant's same-named Secret in a remote cluster become
//! the trust of every client in the process. So the crates that share state per
//! Secret (`svc-tls`'s watched Secrets) take a [`ClusterClient`], and the crates that
//! build clients (`kube-construct`, `provision-scope`) hand one out. Where the
//! cluster cannot be told (a bare `kube::Client` adopted from elsewhere), the caller
//! names it ([`ClusterClient::new`]) or gets a typed error; nothing guesses.
//!
//! ## What a cluster is
//!
//! The API server a `kube::Config` points at, as the client reaches and
//! authenticates it: the server URL, the CA certificates it trusts for it (or the
//! file they are read from), the TLS server name, whether certificate checks are
//! off and the proxy it goes through. Two configurations that differ in any of these
//! are two clusters; the same cluster reached through two URLs is two entries too
//! (duplicate state, never mixed state).
//!
//! ## Who is asking
//!
//! Credentials are not part of the cluster, but they decide what a caller may read
//! there: a [`ClusterClient`] also carries its [`CredentialId`], a digest of what
//! authenticates it (never the secret itself). State shared per object is keyed by
//! both, so a caller is served only what its own credentials were allowed to read,
//! and a credential the API server refuses never stands in for another's.
//!
//! ```
//! use cluster_id::ClusterId;
//!
//! let mut a = kube::Config::new("https://10.0.0.1:6443".parse().unwrap());
//! a.root_cert = Some(vec![b"ca of cluster a".to_vec()]);
//! let mut b = a.clone();
//! b.root_cert = Some(vec![b"ca of cluster b".to_vec()]);
//! assert_ne!(ClusterId::of_config(&a), ClusterId::of_config(&b));
//! assert_eq!(ClusterId::of_config(&a), ClusterId::of_config(&a.clone()));
//! assert_eq!(ClusterId::of_config(&a).label(), "10.0.0.1:6443");
//! ```
#![deny(missing_docs)]

mod client;
mod credential;
mod id;
mod label;

pub use client::{ClusterClient, UnidentifiedCluster};
pub use credential::CredentialId;
pub use id::ClusterId;
