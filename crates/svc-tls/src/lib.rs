//! # svc-tls
//!
//! Who this service is to its peers: CA trust and client identity from
//! `kubernetes.io/tls` Secrets or from the SPIFFE Workload API ([`spiffe`]), a rustls
//! client-certificate resolver that re-reads the identity on every handshake, and JWS
//! signing of the `X-Principal` payload with that identity's key (PS512 for RSA,
//! ES256/ES384 for ECDSA).
//!
//! It deliberately does not own: building the service's general Kubernetes client
//! (`kube-construct`; this crate takes a `kube::Client`), or server-side TLS.
#![deny(missing_docs)]

pub mod builder;
pub mod client;
pub mod duration;
pub mod error;
pub mod identity_source;
pub mod material;
pub mod options;
pub mod principal;
pub mod report;
pub mod resolver;
mod secret_ref;
pub mod source;
pub mod spiffe;
pub mod trust_source;
pub mod verifier;
