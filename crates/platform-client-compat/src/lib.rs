//! # platform-client-compat
//!
//! A thin facade over the crates that replace the legacy Go `pkg/client`, in the
//! manner of the `kube` facade over `kube-client`, `kube-runtime` and `kube-core`:
//! a service depends on this one crate while it migrates, then on the focused
//! crates it actually uses (see `docs/migration.md`).
//!
//! It owns nothing of its own: every item is a re-export, so a type reached through
//! the facade is the same type as through its own crate, and code can move from
//! one path to the other a module at a time.
//!
//! | Go `pkg/client` | here |
//! |---|---|
//! | `New()` (in-cluster client, informer cache) | [`construct::client::CachedClient`]`::builder()...in_cluster()` |
//! | `NewScheme(adders...)` | [`construct::registry::platform_registry`] |
//! | flags `--S-host`, `--S-ca-secret-*`, `--[P-]client-certificate-*` | [`tls::options`] |
//! | `GetClientCertificate` (per-handshake reload) | [`tls::resolver::IdentityResolver`] |
//! | HTTP client with mTLS | [`tls::client::PeerTls`] |
//! | `EncodeAndSign` / `VerifyAndDecode` | [`tls::principal::PrincipalSigner`] / [`tls::principal::verify`] |
//! | provisioner / cluster / namespace context values | [`scope`] |
//!
//! ```
//! // The facade and the focused crates name the same items.
//! fn same_type(_: Option<platform_client_compat::tls::options::SecretRef>) {}
//! same_type(None::<svc_tls::options::SecretRef>);
//! assert_eq!(platform_client_compat::tls::principal::PRINCIPAL_HEADER, "X-Principal");
//! ```
#![deny(missing_docs)]

/// Building the process's Kubernetes client with proven caches; the type registry
/// and platform types (the `kube-construct` crate).
pub use kube_construct as construct;
/// The provisioning scope carried through the call graph (the `provision-scope` crate).
pub use provision_scope as scope;
/// mTLS identity and trust from Secrets, signed principals (the `svc-tls` crate).
pub use svc_tls as tls;
