//! The material layer's error: which Secret, which data key, what is wrong.
//!
//! Every [`MaterialError`] names what the material was read from
//! ([`MaterialOrigin`]: a Secret, or an X509-SVID) and, where one is involved, the
//! data key (`tls.crt`, `tls.key`, `ca.crt`). None of them ever
//! carries key bytes, PEM text or parser output derived from key bytes: the
//! reasons they carry are fixed texts chosen by this crate.

use std::fmt;
use std::time::SystemTime;

use crate::origin::{MaterialOrigin, SecretRef};

/// Why a Secret cannot serve as client identity or CA trust: which Secret, which
/// data key, and what is wrong ([`MaterialErrorKind`]).
///
/// `Display` never includes key material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaterialError {
    origin: MaterialOrigin,
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
    /// The key algorithm or size is not supported (supported: RSA 2048 to 8192
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
    /// An error about `origin`'s data key `data_key` (`None` when it is about
    /// the Secret as a whole); `origin` is a [`SecretRef`] or a [`MaterialOrigin`].
    pub fn new(
        origin: impl Into<MaterialOrigin>,
        data_key: Option<&'static str>,
        kind: MaterialErrorKind,
    ) -> Self {
        Self {
            origin: origin.into(),
            data_key,
            kind,
        }
    }

    /// What the material was read from.
    pub fn origin(&self) -> &MaterialOrigin {
        &self.origin
    }

    /// The Secret this error is about, when the material came from one.
    pub fn secret(&self) -> Option<&SecretRef> {
        match &self.origin {
            MaterialOrigin::Secret(secret) => Some(secret),
            MaterialOrigin::Svid { .. } | MaterialOrigin::Files { .. } => None,
        }
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
        let secret = &self.origin;
        let key = self.data_key.unwrap_or("");
        match &self.kind {
            K::WrongType { found } => write!(
                f,
                "{secret}: type is {found:?}, expected \"kubernetes.io/tls\""
            ),
            K::MissingKey => write!(f, "{secret}: data key {key} is missing"),
            K::EmptyKey => write!(f, "{secret}: data key {key} is empty"),
            K::NotPem { reason } => {
                write!(f, "{secret}: data key {key} is not valid PEM: {reason}")
            }
            K::NoCertificate => write!(
                f,
                "{secret}: data key {key} holds no PEM CERTIFICATE section"
            ),
            K::InvalidCertificate { reason } => write!(
                f,
                "{secret}: data key {key}: the leaf certificate cannot be parsed: {reason}"
            ),
            K::NoPrivateKey => write!(
                f,
                "{secret}: data key {key} holds no PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY section"
            ),
            K::EncryptedKey => write!(
                f,
                "{secret}: data key {key} holds an encrypted private key; store it unencrypted"
            ),
            K::UnparseableKey { reason } => write!(
                f,
                "{secret}: data key {key}: the private key cannot be loaded: {reason}"
            ),
            K::UnsupportedAlgorithm { algorithm } => write!(
                f,
                "{secret}: data key {key}: unsupported key algorithm {algorithm} (supported: RSA 2048-8192 bits, ECDSA P-256, ECDSA P-384, ECDSA P-521, Ed25519)"
            ),
            K::KeyMismatch { cert_key, detail } => write!(
                f,
                "{secret}: the private key in {key} does not match the certificate in {cert_key}: {detail}"
            ),
            K::CertificateExpired { not_after_text, .. } => write!(
                f,
                "{secret}: data key {key}: the certificate expired at {not_after_text}"
            ),
            K::CertificateNotYetValid {
                not_before_text, ..
            } => write!(
                f,
                "{secret}: data key {key}: the certificate is not valid before {not_before_text}"
            ),
            K::TooLarge { len, max } => write!(
                f,
                "{secret}: data key {key} is {len} bytes, more than the {max} bytes accepted"
            ),
            K::NoUsableRoot { keys, ignored } => write!(
                f,
                "{secret}: none of the {ignored} certificate(s) in {keys} is usable as a trust root"
            ),
        }
    }
}

impl std::error::Error for MaterialError {}
