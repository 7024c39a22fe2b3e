//! svc-tls-inspect, the operator's command, run over the wire: its Secrets in the API
//! emulator, its peers real TLS servers that verify client certificates (and Debian's
//! nginx), the SPIFFE Workload API emulator. One test binary, one module a concern, so
//! the dependency graph is linked once.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

mod broken_secrets;
mod chain_and_peer;
mod configmap_trust;
mod files;
mod flags;
mod healthy;
mod hostile_text;
mod nginx_ingress;
mod prefixed_identity;
mod rbac;
mod spiffe_mode;
mod what_is_not_printed;
