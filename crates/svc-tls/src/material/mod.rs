//! Bytes to identity and trust: pure functions of a Secret's data, no I/O.
//!
//! [`load_identity`] turns a `kubernetes.io/tls` Secret into an [`Identity`]
//! (the certificate chain in `tls.crt`, leaf first, and the private key in
//! `tls.key`, as a rustls [`CertifiedKey`](rustls::sign::CertifiedKey)); [`load_trust`] turns a CA Secret
//! into a [`RootCertStore`](rustls::RootCertStore). Both return a typed [`MaterialError`] that names
//! the Secret and the data key, and never contains key material.
//!
//! The identity is re-loaded on every TLS handshake, so the loader is built to
//! be cheap: the PEM is decoded once, the leaf is parsed once (x509-parser,
//! without deep-parsing extensions), the key type is read from the DER before
//! the key is loaded, and the key is handed to the crypto provider in the form
//! that makes its loader succeed at the first attempt (see [`crypto_provider`]).
//! Loading a key is still the dominant cost, so the handshake path goes through an
//! [`IdentityCache`] (which says why):
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::Secret;
//! use svc_tls::material::{Identity, IdentityCache, MaterialError, crypto_provider};
//!
//! // Built once per client identity...
//! let cache = IdentityCache::new(Arc::new(crypto_provider()));
//! // ...and asked on every handshake with the Secret from the watch cache.
//! fn on_handshake(cache: &IdentityCache, secret: &Secret) -> Result<Identity, MaterialError> {
//!     cache.load(secret)
//! }
//! # let _ = on_handshake;
//! ```
//!
//! # What is checked
//!
//! - Secret type `kubernetes.io/tls`; `tls.crt` and `tls.key` present and non-empty,
//!   and no larger than [`MAX_CERTIFICATE_VALUE_BYTES`] / [`MAX_KEY_VALUE_BYTES`]
//!   (checked before any parsing).
//! - `tls.crt` is PEM with at least one `CERTIFICATE`; the first is the leaf and
//!   parses as X.509; the whole chain is presented as given.
//! - The leaf's key is RSA 2048 to 8192 bits, ECDSA P-256, P-384 or P-521, or Ed25519.
//!   RSA keys below 2048 bits are refused with an error naming the size
//!   (`RSA-1024`); see `docs/decisions.md`.
//! - The leaf is within its validity period (see below).
//! - `tls.key` is an unencrypted PKCS#8, PKCS#1 (RSA) or SEC1 (EC) key the
//!   provider can load, and its public key equals the leaf's.
//!
//! # Certificate validity
//!
//! A leaf outside its validity period is an **error**
//! ([`MaterialErrorKind::CertificateExpired`], [`MaterialErrorKind::CertificateNotYetValid`]),
//! not a warning. Peers reject such a certificate anyway, so presenting it can
//! only fail; refusing it at load time gives a clear error and, during
//! rotation, makes the handshake-time resolver keep the last good identity,
//! which is still valid because cert-manager renews well before expiry. At
//! start-up the resolver serves such a leaf anyway and reports it (see
//! `docs/decisions.md`, *Certificate validity*), through
//! [`IdentityCache::load_ignoring_validity`].

mod anchors;
mod cache;
pub(crate) mod der;
mod error;
mod identity;
mod key;
mod pem;
mod provider;
mod secret;
mod trust;
mod validity;

pub use anchors::{ConfigMapTrustCache, TrustAnchors, TrustCache};
pub use cache::{HandshakeLoad, IdentityCache};
pub use error::{MaterialError, MaterialErrorKind};
pub use identity::{
    Identity, load_identity, load_identity_at, load_identity_from_pem, load_identity_from_pem_at,
};
pub(crate) use identity::{KeyInput, build_identity};
pub use key::KeyKind;
pub use provider::crypto_provider;
pub use trust::{
    ConfigMapTrustError, ConfigMapTrustProblem, TrustRoots, configmap_value, load_configmap_trust,
    load_trust, load_trust_detailed,
};
pub use validity::{CertificateValidity, time_text};

/// The largest certificate value read (`tls.crt`, `ca.crt`): a leaf with its chain is
/// a few KiB, and even a CA bundle of every public root (about 220 KiB) fits. Larger
/// values are refused before any parsing ([`MaterialErrorKind::TooLarge`]).
pub const MAX_CERTIFICATE_VALUE_BYTES: usize = 512 * 1024;
/// The largest private-key value read (`tls.key`): an RSA-4096 key is about 3.3 KiB
/// of PEM.
pub const MAX_KEY_VALUE_BYTES: usize = 64 * 1024;

/// The Secret type both identity and CA Secrets must have.
pub const SECRET_TYPE_TLS: &str = "kubernetes.io/tls";
/// Data key of the certificate (chain), PEM.
pub const TLS_CRT: &str = "tls.crt";
/// Data key of the private key, PEM.
pub const TLS_KEY: &str = "tls.key";
/// Data key of the issuing CA written by cert-manager, PEM.
pub const CA_CRT: &str = "ca.crt";
