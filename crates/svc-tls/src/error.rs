//! Errors of the configuration ([`options`](crate::options)) and material
//! ([`material`](crate::material)) layers.
//!
//! Every [`MaterialError`] names the Secret (`namespace/name`) and, where one is
//! involved, the data key (`tls.crt`, `tls.key`, `ca.crt`). None of them ever
//! carries key bytes, PEM text or parser output derived from key bytes: the
//! reasons they carry are fixed texts chosen by this crate.

use std::time::SystemTime;

use crate::options::SecretRef;

/// A start-up configuration error: flags that cannot describe a usable setup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// One flag of a Secret reference is set and the other is not.
    ///
    /// One rule applies to CA and client-certificate references alike: both
    /// flags set, or neither (an empty value counts as unset).
    #[error("--{set} is set but --{missing} is not: set both flags or neither")]
    HalfSetReference {
        /// The flag that is set (without the leading `--`).
        set: String,
        /// The flag that is missing (without the leading `--`).
        missing: String,
    },
    /// A flag the caller requires was not given.
    #[error("--{flag} is required")]
    MissingFlag {
        /// The missing flag (without the leading `--`).
        flag: String,
    },
    /// The matches were not produced by a command augmented with these options
    /// (a programming error: `augment` and `from_matches` disagree on a name).
    #[error("flag --{flag} is not defined on this command: {reason}")]
    NotDefined {
        /// The flag that could not be read.
        flag: String,
        /// clap's explanation.
        reason: String,
    },
}

/// Why a Secret cannot serve as client identity or CA trust.
///
/// Each variant names the Secret and, where one is involved, the data key.
/// `Display` never includes key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MaterialError {
    /// The Secret's `type` is not `kubernetes.io/tls`.
    #[error("secret {secret}: type is {found:?}, expected \"kubernetes.io/tls\"")]
    WrongType {
        /// The Secret.
        secret: SecretRef,
        /// The type found (`None` when unset).
        found: Option<String>,
    },
    /// A required data key is absent.
    #[error("secret {secret}: data key {key} is missing")]
    MissingKey {
        /// The Secret.
        secret: SecretRef,
        /// The data key.
        key: &'static str,
    },
    /// A required data key is present but empty.
    #[error("secret {secret}: data key {key} is empty")]
    EmptyKey {
        /// The Secret.
        secret: SecretRef,
        /// The data key.
        key: &'static str,
    },
    /// The value is not PEM, or a PEM section is malformed.
    #[error("secret {secret}: data key {key} is not valid PEM: {reason}")]
    NotPem {
        /// The Secret.
        secret: SecretRef,
        /// The data key.
        key: &'static str,
        /// What is wrong (a fixed text, never the data).
        reason: &'static str,
    },
    /// The value is PEM but holds no `CERTIFICATE` section.
    #[error("secret {secret}: data key {key} holds no PEM CERTIFICATE section")]
    NoCertificate {
        /// The Secret.
        secret: SecretRef,
        /// The data key.
        key: &'static str,
    },
    /// The first (leaf) certificate is not a parseable X.509 certificate.
    #[error("secret {secret}: data key {key}: the leaf certificate cannot be parsed: {reason}")]
    InvalidCertificate {
        /// The Secret.
        secret: SecretRef,
        /// The data key.
        key: &'static str,
        /// The parser's explanation (certificates are public data).
        reason: String,
    },
    /// The value is PEM but holds no private-key section.
    #[error(
        "secret {secret}: data key {key} holds no PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY section"
    )]
    NoPrivateKey {
        /// The Secret.
        secret: SecretRef,
        /// The data key.
        key: &'static str,
    },
    /// The private key is encrypted (PKCS#8 `EncryptedPrivateKeyInfo`, an
    /// `ENCRYPTED PRIVATE KEY` section, or a legacy `Proc-Type: 4,ENCRYPTED`
    /// header); services cannot supply a passphrase.
    #[error("secret {secret}: data key {key} holds an encrypted private key; store it unencrypted")]
    EncryptedKey {
        /// The Secret.
        secret: SecretRef,
        /// The data key.
        key: &'static str,
    },
    /// The private key cannot be parsed or loaded.
    #[error("secret {secret}: data key {key}: the private key cannot be loaded: {reason}")]
    UnparseableKey {
        /// The Secret.
        secret: SecretRef,
        /// The data key.
        key: &'static str,
        /// What is wrong (a fixed text, never the data).
        reason: &'static str,
    },
    /// The key algorithm or size is not supported (supported: RSA 2048 to 4096
    /// bits, ECDSA P-256 and P-384, Ed25519).
    #[error(
        "secret {secret}: data key {key}: unsupported key algorithm {algorithm} (supported: RSA 2048-4096 bits, ECDSA P-256, ECDSA P-384, Ed25519)"
    )]
    UnsupportedAlgorithm {
        /// The Secret.
        secret: SecretRef,
        /// The data key.
        key: &'static str,
        /// A description of the algorithm found (e.g. `RSA-1024`, `ECDSA curve 1.3.132.0.35`).
        algorithm: String,
    },
    /// The private key does not belong to the leaf certificate.
    #[error(
        "secret {secret}: the private key in {key} does not match the certificate in {cert_key}: {detail}"
    )]
    KeyMismatch {
        /// The Secret.
        secret: SecretRef,
        /// The data key of the private key.
        key: &'static str,
        /// The data key of the certificate.
        cert_key: &'static str,
        /// How they differ (key types, or "different public keys").
        detail: String,
    },
    /// The leaf certificate's `notAfter` has passed.
    #[error("secret {secret}: data key {key}: the certificate expired at {not_after_text}")]
    CertificateExpired {
        /// The Secret.
        secret: SecretRef,
        /// The data key.
        key: &'static str,
        /// The certificate's `notAfter`.
        not_after: SystemTime,
        /// `notAfter` as written in the certificate.
        not_after_text: String,
    },
    /// The leaf certificate's `notBefore` is still in the future.
    #[error(
        "secret {secret}: data key {key}: the certificate is not valid before {not_before_text}"
    )]
    CertificateNotYetValid {
        /// The Secret.
        secret: SecretRef,
        /// The data key.
        key: &'static str,
        /// The certificate's `notBefore`.
        not_before: SystemTime,
        /// `notBefore` as written in the certificate.
        not_before_text: String,
    },
    /// A CA Secret holds certificates, but none is usable as a trust anchor.
    #[error(
        "secret {secret}: none of the {ignored} certificate(s) in {keys} is usable as a trust root"
    )]
    NoUsableRoot {
        /// The Secret.
        secret: SecretRef,
        /// The data keys read (e.g. `tls.crt, ca.crt`).
        keys: &'static str,
        /// How many certificates were rejected.
        ignored: usize,
    },
}

impl MaterialError {
    /// The Secret this error is about.
    pub fn secret(&self) -> &SecretRef {
        match self {
            Self::WrongType { secret, .. }
            | Self::MissingKey { secret, .. }
            | Self::EmptyKey { secret, .. }
            | Self::NotPem { secret, .. }
            | Self::NoCertificate { secret, .. }
            | Self::InvalidCertificate { secret, .. }
            | Self::NoPrivateKey { secret, .. }
            | Self::EncryptedKey { secret, .. }
            | Self::UnparseableKey { secret, .. }
            | Self::UnsupportedAlgorithm { secret, .. }
            | Self::KeyMismatch { secret, .. }
            | Self::CertificateExpired { secret, .. }
            | Self::CertificateNotYetValid { secret, .. }
            | Self::NoUsableRoot { secret, .. } => secret,
        }
    }

    /// The data key this error is about (`None` for [`MaterialError::WrongType`];
    /// the key file for [`MaterialError::KeyMismatch`]; the first key read for
    /// [`MaterialError::NoUsableRoot`]).
    pub fn data_key(&self) -> Option<&'static str> {
        match self {
            Self::WrongType { .. } => None,
            Self::NoUsableRoot { .. } => Some(crate::material::TLS_CRT),
            Self::MissingKey { key, .. }
            | Self::EmptyKey { key, .. }
            | Self::NotPem { key, .. }
            | Self::NoCertificate { key, .. }
            | Self::InvalidCertificate { key, .. }
            | Self::NoPrivateKey { key, .. }
            | Self::EncryptedKey { key, .. }
            | Self::UnparseableKey { key, .. }
            | Self::UnsupportedAlgorithm { key, .. }
            | Self::KeyMismatch { key, .. }
            | Self::CertificateExpired { key, .. }
            | Self::CertificateNotYetValid { key, .. } => Some(key),
        }
    }

    /// Whether the error is only about time: the material is otherwise usable
    /// and may become valid later (`notBefore` in the future). A resolver may
    /// keep waiting for such an identity rather than fail for good.
    pub fn is_not_yet_valid(&self) -> bool {
        matches!(self, Self::CertificateNotYetValid { .. })
    }
}
