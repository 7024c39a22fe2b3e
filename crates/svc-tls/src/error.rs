//! Errors of the configuration ([`options`](crate::options)) and material
//! ([`material`](crate::material)) layers.
//!
//! Every [`MaterialError`] names the Secret ([`SecretRef`]) and, where one is
//! involved, the data key (`tls.crt`, `tls.key`, `ca.crt`). None of them ever
//! carries key bytes, PEM text or parser output derived from key bytes: the
//! reasons they carry are fixed texts chosen by this crate.

use std::fmt;
use std::time::SystemTime;

use crate::secret_ref::SecretRef;

/// A start-up configuration error: flags that cannot describe a usable setup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
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
    /// A flag was given a value outside its fixed set.
    #[error("--{flag}={value:?} is not a valid value: expected one of {expected}")]
    InvalidValue {
        /// The flag (without the leading `--`).
        flag: String,
        /// The value given (as given).
        value: String,
        /// The values accepted, e.g. `secret, spiffe`.
        expected: &'static str,
    },
    /// `--client-certificate-source=spiffe` with a client-certificate Secret flag:
    /// the identity comes from one source or the other.
    #[error(
        "--{source_flag}=spiffe and --{secret_flag} are both set: the client certificate comes from the SPIFFE Workload API or from a Secret, set one or the other"
    )]
    SourceConflict {
        /// The source flag (without the leading `--`).
        source_flag: String,
        /// The Secret flag that is set.
        secret_flag: String,
    },
    /// `--spiffe-server-id` is not set in SPIFFE mode.
    #[error(
        "--{flag} is required with --{source_flag}=spiffe: give the SPIFFE ID the server must present (spiffe://<trust-domain>/<path>)"
    )]
    MissingSpiffeServerId {
        /// The server-ID flag (without the leading `--`).
        flag: String,
        /// The source flag (without the leading `--`).
        source_flag: String,
    },
    /// `--spiffe-server-id` does not parse as a SPIFFE ID.
    #[error("--{flag}={value:?} is not a SPIFFE ID: {reason}")]
    InvalidSpiffeId {
        /// The flag (without the leading `--`).
        flag: String,
        /// The value given.
        value: String,
        /// Why it does not parse.
        reason: String,
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

/// Why a Secret cannot serve as client identity or CA trust: which Secret, which
/// data key, and what is wrong ([`MaterialErrorKind`]).
///
/// `Display` never includes key material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaterialError {
    secret: SecretRef,
    data_key: Option<&'static str>,
    kind: MaterialErrorKind,
}

/// What is wrong with a Secret's material. Variants carry the detail a caller
/// may act on; the Secret and data key are on [`MaterialError`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MaterialErrorKind {
    /// The Secret's `type` is not `kubernetes.io/tls` (no data key).
    WrongType {
        /// The type found (`None` when unset).
        found: Option<String>,
    },
    /// A required data key is absent.
    MissingKey,
    /// A required data key is present but empty.
    EmptyKey,
    /// The value is not PEM, or a PEM section is malformed.
    NotPem {
        /// What is wrong (a fixed text, never the data).
        reason: &'static str,
    },
    /// The value is PEM but holds no `CERTIFICATE` section.
    NoCertificate,
    /// The first (leaf) certificate is not a parseable X.509 certificate.
    InvalidCertificate {
        /// The parser's explanation (certificates are public data).
        reason: String,
    },
    /// The value is PEM but holds no private-key section.
    NoPrivateKey,
    /// The private key is encrypted (PKCS#8 `EncryptedPrivateKeyInfo`, an
    /// `ENCRYPTED PRIVATE KEY` section, or a legacy `Proc-Type: 4,ENCRYPTED`
    /// header); services cannot supply a passphrase.
    EncryptedKey,
    /// The private key cannot be parsed or loaded.
    UnparseableKey {
        /// What is wrong (a fixed text, never the data).
        reason: &'static str,
    },
    /// The key algorithm or size is not supported (supported: RSA 2048 to 4096
    /// bits, ECDSA P-256, P-384 and P-521, Ed25519).
    UnsupportedAlgorithm {
        /// A description of the algorithm found (e.g. `RSA-1024`, `ECDSA curve 1.3.132.0.10`).
        algorithm: String,
    },
    /// The private key (in the error's data key) does not belong to the leaf
    /// certificate.
    KeyMismatch {
        /// The data key of the certificate.
        cert_key: &'static str,
        /// How they differ (key types, or "different public keys").
        detail: String,
    },
    /// The leaf certificate's `notAfter` has passed.
    CertificateExpired {
        /// The certificate's `notAfter`.
        not_after: SystemTime,
        /// `notAfter` as written in the certificate.
        not_after_text: String,
    },
    /// The leaf certificate's `notBefore` is still in the future.
    CertificateNotYetValid {
        /// The certificate's `notBefore`.
        not_before: SystemTime,
        /// `notBefore` as written in the certificate.
        not_before_text: String,
    },
    /// The value is larger than its cap (refused before parsing).
    TooLarge {
        /// The value's length in bytes.
        len: usize,
        /// The cap.
        max: usize,
    },
    /// A CA Secret holds certificates, but none is usable as a trust anchor.
    NoUsableRoot {
        /// The data keys read (e.g. `tls.crt, ca.crt`).
        keys: &'static str,
        /// How many certificates were rejected.
        ignored: usize,
    },
}

impl MaterialError {
    /// An error about `secret`'s data key `data_key` (`None` when it is about
    /// the Secret as a whole).
    pub fn new(secret: SecretRef, data_key: Option<&'static str>, kind: MaterialErrorKind) -> Self {
        Self {
            secret,
            data_key,
            kind,
        }
    }

    /// The Secret this error is about.
    pub fn secret(&self) -> &SecretRef {
        &self.secret
    }

    /// The data key this error is about (`None` for
    /// [`MaterialErrorKind::WrongType`]; the key file for
    /// [`MaterialErrorKind::KeyMismatch`]; the first key read for
    /// [`MaterialErrorKind::NoUsableRoot`]).
    pub fn data_key(&self) -> Option<&'static str> {
        self.data_key
    }

    /// What is wrong.
    pub fn kind(&self) -> &MaterialErrorKind {
        &self.kind
    }

    /// Whether the error is only about time: the material is otherwise usable
    /// and may become valid later (`notBefore` in the future). A resolver may
    /// keep waiting for such an identity rather than fail for good.
    pub fn is_not_yet_valid(&self) -> bool {
        matches!(self.kind, MaterialErrorKind::CertificateNotYetValid { .. })
    }
}

impl fmt::Display for MaterialError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use MaterialErrorKind as K;
        let secret = &self.secret;
        let key = self.data_key.unwrap_or("");
        match &self.kind {
            K::WrongType { found } => write!(
                f,
                "secret {secret}: type is {found:?}, expected \"kubernetes.io/tls\""
            ),
            K::MissingKey => write!(f, "secret {secret}: data key {key} is missing"),
            K::EmptyKey => write!(f, "secret {secret}: data key {key} is empty"),
            K::NotPem { reason } => write!(
                f,
                "secret {secret}: data key {key} is not valid PEM: {reason}"
            ),
            K::NoCertificate => write!(
                f,
                "secret {secret}: data key {key} holds no PEM CERTIFICATE section"
            ),
            K::InvalidCertificate { reason } => write!(
                f,
                "secret {secret}: data key {key}: the leaf certificate cannot be parsed: {reason}"
            ),
            K::NoPrivateKey => write!(
                f,
                "secret {secret}: data key {key} holds no PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY section"
            ),
            K::EncryptedKey => write!(
                f,
                "secret {secret}: data key {key} holds an encrypted private key; store it unencrypted"
            ),
            K::UnparseableKey { reason } => write!(
                f,
                "secret {secret}: data key {key}: the private key cannot be loaded: {reason}"
            ),
            K::UnsupportedAlgorithm { algorithm } => write!(
                f,
                "secret {secret}: data key {key}: unsupported key algorithm {algorithm} (supported: RSA 2048-4096 bits, ECDSA P-256, ECDSA P-384, ECDSA P-521, Ed25519)"
            ),
            K::KeyMismatch { cert_key, detail } => write!(
                f,
                "secret {secret}: the private key in {key} does not match the certificate in {cert_key}: {detail}"
            ),
            K::CertificateExpired { not_after_text, .. } => write!(
                f,
                "secret {secret}: data key {key}: the certificate expired at {not_after_text}"
            ),
            K::CertificateNotYetValid {
                not_before_text, ..
            } => write!(
                f,
                "secret {secret}: data key {key}: the certificate is not valid before {not_before_text}"
            ),
            K::TooLarge { len, max } => write!(
                f,
                "secret {secret}: data key {key} is {len} bytes, more than the {max} bytes accepted"
            ),
            K::NoUsableRoot { keys, ignored } => write!(
                f,
                "secret {secret}: none of the {ignored} certificate(s) in {keys} is usable as a trust root"
            ),
        }
    }
}

impl std::error::Error for MaterialError {}
