//! The limits and names of the Secret data the loaders read.

/// The largest certificate value read (`tls.crt`, `ca.crt`): a leaf with its chain is
/// a few KiB, and even a CA bundle of every public root (about 220 KiB) fits. Larger
/// values are refused before any parsing ([`MaterialErrorKind::TooLarge`](super::MaterialErrorKind::TooLarge)).
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
