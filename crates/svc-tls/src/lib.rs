//! # svc-tls
//!
//! Who this service is to its peers: CA trust and client identity from
//! `kubernetes.io/tls` Secrets or from the SPIFFE Workload API, a rustls
//! client-certificate resolver that re-reads the identity on every handshake, and JWS
//! signing of the `X-Principal` payload with that identity's key (PS512 for RSA,
//! ES256/ES384 for ECDSA).
//!
//! The crate is its two halves over one core:
//!
//! | module | what it is |
//! |---|---|
//! | [`identity`] | the identity seam, the handshake-time resolver, its Secret and SPIFFE sources |
//! | [`trust`] | the trust seam, the handshake-time verifier, its Secret and SPIFFE-bundle sources |
//! | [`last_good`] | the one last-good core both use: last good value, failure episodes, rate-limited warnings, watch health |
//! | [`watch`] | the watched Secret (one reflector per Secret) and the builder of both halves over it |
//! | [`spiffe`] | the SPIFFE Workload API stream |
//! | [`material`] | bytes to identities and root sets (no I/O) |
//! | [`origin`] | where a credential comes from |
//! | [`options`], [`client`], [`principal`] | flags, peer clients, signed principals |
//! | [`receiving`] | the ingress verifier over the process's watched CA Secret |
//! | `metrics` (feature `metrics`) | Prometheus metrics of identity, trust and watches |
//!
//! What a service names is re-exported here, as `kube` does for `Client` and `Config`:
//!
//! ```no_run
//! # async fn f(client: svc_tls::ClusterClient) -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use svc_tls::{ClientIdentityOptions, PeerOptions, PeerTls};
//!
//! let peer = PeerOptions::new("region").with_host_value("https://region.example");
//! let identity = ClientIdentityOptions::new(None).with_secret("unikorn", "region-client-cert");
//! let tls = PeerTls::from_options(&client, &peer, &identity, Duration::from_secs(30)).await?;
//! let peer = tls.client()?; // the process's pooled client for this peer
//! let response = peer.send(peer.get(tls.host()?.join("api/v1/regions")?)?).await?;
//! # let _ = response; Ok(()) }
//! ```
//!
//! The client passed in is a [`ClusterClient`]: a `kube::Client` that says which
//! cluster it reads (`kube_construct::CachedClient::cluster_client`,
//! `provision_scope::cluster_client_identified`, or
//! [`ClusterClient::try_from_config`]). The process's shared Secret watches are keyed
//! by it, so a client of a remote cluster never receives this cluster's Secrets, nor
//! this cluster's clients a remote one's.
//!
//! It deliberately does not own: building the service's general Kubernetes client
//! (`kube-construct`), or server-side TLS.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod client;
pub mod duration;
mod follow;
/// A kube client error as this crate's errors return it as their `source()`: an
/// escaped excerpt with the status code kept for matching.
pub use watch_ready::KubeError;
/// Outside text cut and escaped for logs: log an error that may quote a Secret, a
/// header or a plugin's output with `%svc_tls::excerpt::chain(&error)`.
pub use watch_ready::excerpt;
pub mod identity;
pub mod last_good;
pub mod material;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod options;
pub mod origin;
pub mod principal;
pub mod readiness;
pub mod receiving;
pub mod spiffe;
pub mod trust;
pub mod watch;
mod wiring;

pub use client::{PeerClient, PeerClientError, PeerRequestError, PeerTls, TrustMode};
/// Which cluster a client reads: the shared watches are keyed by it.
pub use cluster_id::{ClusterClient, ClusterId, UnidentifiedCluster};
pub use identity::{IdentityError, IdentityResolver, IdentitySource, IdentityState};
pub use options::{ClientIdentityOptions, OptionsError, PeerOptions};
pub use origin::{IdentityOrigin, SecretRef, TrustOrigin};
pub use principal::{Principal, PrincipalSigner, VerifyError};
pub use trust::{TrustError, TrustSource, TrustState, TrustVerifier};
