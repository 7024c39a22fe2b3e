//! # platform-client-compat
//!
//! A thin facade over the crates that replace the legacy Go `pkg/client`, in the
//! manner of the `kube` facade over `kube-client`, `kube-runtime` and `kube-core`:
//! a service depends on this one crate during migration, then on the focused crates.
//!
//! It owns nothing of its own: every item is a re-export.
#![deny(missing_docs)]

pub use kube_construct;
pub use provision_scope;
pub use svc_tls;
