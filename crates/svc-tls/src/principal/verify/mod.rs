//! Verifying: a token against the certificate a peer presented.
//!
//! PS512 has two paths. The fast one verifies through the aws-lc-rs provider
//! (`webpki::aws_lc_rs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY`), which requires
//! the PSS salt length to equal the hash length (64 bytes): what go-jose and
//! this crate produce, so nearly every token. When it rejects a token, the
//! general path (the `rsa` crate, salt length auto-detected as Go's verifier
//! does) decides, so tokens with another salt length still verify and a
//! tampered token is rejected by both.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rsa::pkcs8::DecodePublicKey as _;
use rsa::signature::Verifier as _;
use rsa::traits::PublicKeyParts as _;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;
use serde::de::DeserializeOwned;
use sha2::Sha512;
use x509_parser::oid_registry::{
    OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_NIST_EC_P384, OID_PKCS1_RSAENCRYPTION,
};
use x509_parser::prelude::FromDer as _;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use url::Url;

use super::jws::{
    Algorithm, AlgorithmPolicy, DEFAULT_CLOCK_SKEW, DEFAULT_MAX_PRINCIPAL_LIFETIME, Part,
    RawHeader, TokenTimes, ecdsa_raw_to_der, sender_text,
};

/// RSA keys shorter than this are refused when verifying.
pub const MIN_RSA_BITS: usize = 2048;

/// The default cap on a principal token's length, in bytes, checked before the
/// token is split or decoded. A PS512 token for a [`Principal`](super::Principal)
/// with an RSA-4096 key is well under 2 KiB; 16 KiB leaves room for large
/// payloads while keeping a hostile sender from making the verifier decode,
/// parse and hash hundreds of kilobytes per request.
pub const DEFAULT_MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Why a token was rejected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The token is empty.
    #[error("principal token is empty")]
    Empty,
    /// The token is longer than the cap; refused before it is split or decoded.
    #[error("principal token is {len} bytes, more than the {max}-byte limit")]
    TooLarge {
        /// The token's length in bytes.
        len: usize,
        /// The cap in force.
        max: usize,
    },
    /// Not three dot-separated parts (JWS compact serialization); JWE (five parts),
    /// JSON serialization and appended segments land here.
    #[error("principal token is not a compact JWS: {found} dot-separated parts, expected 3")]
    SegmentCount {
        /// How many parts there were.
        found: usize,
    },
    /// A part is not unpadded base64url (this includes padding, whitespace, trailing
    /// data and non-canonical encodings).
    #[error("principal token {part} is not canonical unpadded base64url")]
    Base64 {
        /// Which part.
        part: Part,
    },
    /// The protected header is not a JSON object with unique member names.
    #[error("principal token header is not a valid JSON object")]
    MalformedHeader(#[source] serde_json::Error),
    /// The header has no `alg`.
    #[error("principal token header has no \"alg\"")]
    MissingAlgorithm,
    /// `alg` is `none` (an unsecured JWS).
    #[error("principal token is unsigned (alg \"none\")")]
    AlgorithmNone,
    /// `alg` is an HMAC algorithm (a shared-secret token, never a principal).
    #[error("principal token uses HMAC algorithm {alg:?}, which is never accepted")]
    Hmac {
        /// The algorithm named (as sent, truncated to 64 characters).
        alg: String,
    },
    /// `alg` is not accepted by the policy.
    #[error("principal token algorithm {alg:?} is not accepted (policy: {policy:?})")]
    AlgorithmNotAllowed {
        /// The algorithm named (as sent, truncated to 64 characters; shown
        /// Debug-escaped so control characters cannot forge log lines).
        alg: String,
        /// The policy in force.
        policy: AlgorithmPolicy,
    },
    /// `alg` is acceptable but does not fit the certificate's key.
    #[error("principal token algorithm {alg} does not match the peer certificate's {key} key")]
    AlgorithmKeyMismatch {
        /// The algorithm named.
        alg: Algorithm,
        /// The certificate key type.
        key: &'static str,
    },
    /// The header has `crit`: no JWS extension is understood here.
    #[error("principal token has critical header parameters that are not understood: {crit:?}")]
    UnsupportedCritical {
        /// The names listed (as far as they are strings; at most 8, each truncated
        /// to 64 characters; shown Debug-escaped).
        crit: Vec<String>,
    },
    /// The peer certificate's key cannot verify principals.
    #[error("peer certificate has an unsupported key type: {key}")]
    UnsupportedKeyType {
        /// The key type found.
        key: &'static str,
    },
    /// The peer certificate's RSA key is too short.
    #[error("peer certificate RSA key has {bits} bits, at least {MIN_RSA_BITS} are required")]
    WeakRsaKey {
        /// The modulus size.
        bits: usize,
    },
    /// The signature does not verify: wrong key, or header, payload or signature altered.
    #[error("principal token signature does not verify against the peer certificate")]
    BadSignature,
    /// The token expired: its `exp` plus the clock-skew allowance is in the past.
    #[error("principal token expired at {exp} (now {now}, clock skew allowed {skew}s)")]
    Expired {
        /// `exp`, seconds since the epoch.
        exp: u64,
        /// The verifier's time, seconds since the epoch.
        now: u64,
        /// The allowance, seconds.
        skew: u64,
    },
    /// The token was issued in the future: its `iat` minus the allowance is after now.
    #[error(
        "principal token issued in the future at {iat} (now {now}, clock skew allowed {skew}s)"
    )]
    IssuedInFuture {
        /// `iat`, seconds since the epoch.
        iat: u64,
        /// The verifier's time, seconds since the epoch.
        now: u64,
        /// The allowance, seconds.
        skew: u64,
    },
    /// `iat` or `exp` is not a non-negative integer, or `exp` is before `iat`.
    #[error("principal token header member {member:?} is not a valid time")]
    MalformedTime {
        /// `iat` or `exp`.
        member: &'static str,
    },
    /// [`TokenTimes::Required`] and the header lacks `iat` or `exp` (a Go sender's
    /// token, or one signed before times were added).
    #[error("principal token has no {member:?} in its protected header, and times are required")]
    MissingTimes {
        /// The first member missing.
        member: &'static str,
    },
    /// The token lives longer than the verifier's cap: `exp - iat` is over it, or
    /// (one of them missing) `exp` is further than the cap from now, or `iat`
    /// older than the cap.
    #[error("principal token lives {lifetime}s, more than the {max}s limit")]
    LifetimeTooLong {
        /// `exp - iat`, or what of it the token shows, seconds.
        lifetime: u64,
        /// The cap in force, seconds.
        max: u64,
    },
    /// `aud` is neither a string nor a non-empty array of strings.
    #[error("principal token header member \"aud\" is not a string or an array of strings")]
    MalformedAudience,
    /// The token was signed for another receiver: none of its audiences is one of
    /// this receiver's (a token captured on its way to another service, replayed
    /// here).
    #[error("principal token is for {aud:?}, not for this receiver ({expected:?})")]
    AudienceMismatch {
        /// The token's audiences (as sent: at most 4, each truncated to 64
        /// characters; shown Debug-escaped).
        aud: Vec<String>,
        /// This receiver's audiences.
        expected: Vec<String>,
    },
    /// [`TokenTimes::Required`] and the header has no `aud` (a Go sender's token,
    /// or one from a version of this crate before audiences).
    #[error("principal token has no \"aud\" in its protected header, and an audience is required")]
    MissingAudience,
    /// [`TokenTimes::Required`] on a receiver that names no audience
    /// ([`VerifyOptions::with_audiences`]): every token is refused, since the
    /// strict mode cannot check what it is told to require.
    #[error(
        "the strict mode requires the receiver's audiences (its own https:// origins) to be configured"
    )]
    AudienceNotConfigured,
    /// The verified payload is not JSON.
    #[error("principal token payload is not JSON")]
    PayloadNotJson(#[source] serde_json::Error),
    /// The verified payload is JSON but not of the expected shape.
    #[error("principal token payload does not have the expected structure")]
    PayloadType(#[source] serde_json::Error),
}

/// How a token is verified: the algorithm policy, the length cap, the time checks
/// (present times are always checked, against the clock and the lifetime cap) and
/// the audience check (a present `aud` must name one of `audiences`, when they are
/// given); [`TokenTimes::Required`] requires times and audience.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyOptions {
    /// The accepted algorithms.
    pub policy: AlgorithmPolicy,
    /// The cap on the token's length, checked before anything else.
    pub max_len: usize,
    /// Whether `iat` and `exp` are required.
    pub times: TokenTimes,
    /// The clock difference tolerated for `iat` and `exp`.
    pub clock_skew: Duration,
    /// The time to check against (`None`: the system clock at the call).
    pub now: Option<SystemTime>,
    /// The longest lifetime accepted (default [`DEFAULT_MAX_PRINCIPAL_LIFETIME`]).
    pub max_lifetime: Duration,
    /// This receiver's audiences: the origins (`https://host[:port]`) its senders
    /// call it at. Empty: a token's `aud` is not checked (and the strict mode
    /// refuses every token).
    pub audiences: Arc<[String]>,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        Self::new(AlgorithmPolicy::default())
    }
}

impl VerifyOptions {
    /// `policy`, the default cap [`DEFAULT_MAX_TOKEN_BYTES`], times checked when
    /// present with [`DEFAULT_CLOCK_SKEW`].
    pub fn new(policy: AlgorithmPolicy) -> Self {
        Self {
            policy,
            max_len: DEFAULT_MAX_TOKEN_BYTES,
            times: TokenTimes::default(),
            clock_skew: DEFAULT_CLOCK_SKEW,
            now: None,
            max_lifetime: DEFAULT_MAX_PRINCIPAL_LIFETIME,
            audiences: Arc::from(Vec::new()),
        }
    }

    /// Another lifetime cap: tokens whose `exp - iat` is longer are refused
    /// ([`VerifyError::LifetimeTooLong`]).
    #[must_use]
    pub fn with_max_lifetime(mut self, max: Duration) -> Self {
        self.max_lifetime = max;
        self
    }

    /// This receiver's audiences, as the URLs its senders call it at (only their
    /// origins count: `https://identity.example/api` is `https://identity.example`).
    /// A token whose `aud` names none of them is refused
    /// ([`VerifyError::AudienceMismatch`]).
    #[must_use]
    pub fn with_audiences<I: IntoIterator<Item = Url>>(mut self, audiences: I) -> Self {
        self.audiences = audiences_of(audiences);
        self
    }

    /// Another length cap.
    #[must_use]
    pub fn with_max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len;
        self
    }

    /// Whether times are required ([`TokenTimes::Required`]: strict mode).
    #[must_use]
    pub fn with_times(mut self, times: TokenTimes) -> Self {
        self.times = times;
        self
    }

    /// Another clock-skew allowance.
    #[must_use]
    pub fn with_clock_skew(mut self, skew: Duration) -> Self {
        self.clock_skew = skew;
        self
    }

    /// Checks times against `now` instead of the system clock.
    #[must_use]
    pub fn at(mut self, now: SystemTime) -> Self {
        self.now = Some(now);
        self
    }
}

/// Why a peer certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertificateError {
    /// The PEM could not be read.
    #[error("peer certificate PEM is malformed")]
    Pem(#[source] rustls_pki_types::pem::Error),
    /// The PEM holds no `CERTIFICATE` section.
    #[error("peer certificate PEM holds no CERTIFICATE")]
    NoCertificate,
    /// The DER is not an X.509 certificate.
    #[error("peer certificate is not a valid X.509 certificate: {0}")]
    X509(String),
    /// The certificate's RSA public key is invalid.
    #[error("peer certificate RSA public key is invalid: {0}")]
    RsaKey(String),
    /// The certificate's EC public key is invalid.
    #[error("peer certificate EC public key is invalid")]
    EcKey,
}

/// The public key of a peer certificate, prepared for verifying principals.
#[derive(Clone)]
enum PeerKey {
    Rsa {
        /// The provider's fast path (salt length 64).
        public_key: ProviderKey,
        /// The general path (any salt length).
        key: rsa::pss::VerifyingKey<Sha512>,
        bits: usize,
    },
    EcP256(ProviderKey),
    EcP384(ProviderKey),
    Unsupported(&'static str),
}

/// A public key for the crypto provider (aws-lc): parsed once, when the certificate
/// is, so that each verification skips the key parse (and, for RSA, the modulus's
/// Montgomery set-up, kept with the parsed key). When the provider refuses to parse
/// it, the bytes are verified unparsed, which fails as the parse did.
#[derive(Clone)]
struct ProviderKey {
    algorithm: &'static dyn aws_lc_rs::signature::VerificationAlgorithm,
    parsed: Option<aws_lc_rs::signature::ParsedPublicKey>,
    raw: Vec<u8>,
}

impl ProviderKey {
    fn new(
        algorithm: &'static dyn aws_lc_rs::signature::VerificationAlgorithm,
        raw: Vec<u8>,
    ) -> Self {
        Self {
            algorithm,
            parsed: aws_lc_rs::signature::ParsedPublicKey::new(algorithm, &raw).ok(),
            raw,
        }
    }

    fn verify(&self, message: &[u8], signature: &[u8]) -> Result<(), VerifyError> {
        match &self.parsed {
            Some(parsed) => parsed.verify_sig(message, signature),
            None => aws_lc_rs::signature::UnparsedPublicKey::new(self.algorithm, &self.raw)
                .verify(message, signature),
        }
        .map_err(|_| VerifyError::BadSignature)
    }
}

impl PeerKey {
    fn name(&self) -> &'static str {
        match self {
            Self::Rsa { .. } => "RSA",
            Self::EcP256(_) => "ECDSA P-256",
            Self::EcP384(_) => "ECDSA P-384",
            Self::Unsupported(name) => name,
        }
    }
}

/// A peer's certificate (what it presented in the TLS handshake), with its public
/// key parsed once for verifying any number of principals.
#[derive(Clone)]
pub struct PeerCertificate {
    der: CertificateDer<'static>,
    key: PeerKey,
}

impl fmt::Debug for PeerCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerCertificate")
            .field("key", &self.key.name())
            .field("der_len", &self.der.len())
            .finish()
    }
}

impl PeerCertificate {
    /// Loads a DER certificate.
    ///
    /// # Errors
    /// When it is not an X.509 certificate or its public key is malformed.
    pub fn from_der(der: impl Into<CertificateDer<'static>>) -> Result<Self, CertificateError> {
        let der = der.into();
        let key = peer_key(&der)?;
        Ok(Self { der, key })
    }

    /// Loads the first `CERTIFICATE` of a PEM text.
    ///
    /// # Errors
    /// [`CertificateError::Pem`] / [`CertificateError::NoCertificate`] for bad PEM,
    /// otherwise as [`PeerCertificate::from_der`].
    pub fn from_pem(pem: &[u8]) -> Result<Self, CertificateError> {
        let der = match CertificateDer::from_pem_slice(pem) {
            Ok(der) => der,
            Err(rustls_pki_types::pem::Error::NoItemsFound) => {
                return Err(CertificateError::NoCertificate);
            }
            Err(e) => return Err(CertificateError::Pem(e)),
        };
        Self::from_der(der)
    }

    /// The certificate, DER.
    pub fn der(&self) -> &CertificateDer<'static> {
        &self.der
    }

    /// The certificate's key type, e.g. `RSA` or `ECDSA P-256`.
    pub fn key_type(&self) -> &'static str {
        self.key.name()
    }

    /// Verifies `token` against this certificate and decodes its payload. Tokens
    /// longer than [`DEFAULT_MAX_TOKEN_BYTES`] are refused unread
    /// ([`VerifyError::TooLarge`]); [`PeerCertificate::verify_with_max_len`] sets
    /// another cap.
    ///
    /// # Errors
    /// A [`VerifyError`] naming why the token was rejected.
    pub fn verify<T: DeserializeOwned>(
        &self,
        token: &str,
        policy: AlgorithmPolicy,
    ) -> Result<T, VerifyError> {
        self.verify_with_max_len(token, policy, DEFAULT_MAX_TOKEN_BYTES)
    }

    /// As [`PeerCertificate::verify`], with a cap of `max_len` bytes on the token,
    /// checked before anything else.
    ///
    /// # Errors
    /// A [`VerifyError`] naming why the token was rejected.
    pub fn verify_with_max_len<T: DeserializeOwned>(
        &self,
        token: &str,
        policy: AlgorithmPolicy,
        max_len: usize,
    ) -> Result<T, VerifyError> {
        self.verify_with_options(token, &VerifyOptions::new(policy).with_max_len(max_len))
    }

    /// Verifies `token` as `options` say and decodes its payload.
    ///
    /// # Errors
    /// A [`VerifyError`] naming why the token was rejected.
    pub fn verify_with_options<T: DeserializeOwned>(
        &self,
        token: &str,
        options: &VerifyOptions,
    ) -> Result<T, VerifyError> {
        self.verify_settling(token, options, &mut Settled::default())
    }

    /// [`PeerCertificate::verify_with_options`], noting in `settled` the algorithm
    /// once the token's `alg` is accepted (for the recorder's label), and what
    /// bindings an accepted token lacked (for the readiness counters).
    pub(super) fn verify_settling<T: DeserializeOwned>(
        &self,
        token: &str,
        options: &VerifyOptions,
        settled: &mut Settled,
    ) -> Result<T, VerifyError> {
        if token.len() > options.max_len {
            return Err(VerifyError::TooLarge {
                len: token.len(),
                max: options.max_len,
            });
        }
        let payload = self.verify_bytes(token, options, settled)?;
        serde_json::from_slice(&payload).map_err(|e| match e.classify() {
            serde_json::error::Category::Data => VerifyError::PayloadType(e),
            _ => VerifyError::PayloadNotJson(e),
        })
    }

    fn verify_bytes(
        &self,
        token: &str,
        options: &VerifyOptions,
        settled: &mut Settled,
    ) -> Result<Vec<u8>, VerifyError> {
        let policy = options.policy;
        if token.is_empty() {
            return Err(VerifyError::Empty);
        }
        // No allocation per part: a token made of dots costs one pass.
        let mut parts = token.splitn(3, '.');
        let (Some(header_b64), Some(payload_b64), Some(signature_b64)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(VerifyError::SegmentCount {
                found: token.bytes().filter(|b| *b == b'.').count() + 1,
            });
        };
        if signature_b64.contains('.') {
            return Err(VerifyError::SegmentCount {
                found: token.bytes().filter(|b| *b == b'.').count() + 1,
            });
        }

        let header = decode_part(header_b64, Part::Header)?;
        let header: RawHeader =
            serde_json::from_slice(&header).map_err(VerifyError::MalformedHeader)?;
        let algorithm = accept_algorithm(&header, policy)?;
        settled.algorithm = Some(algorithm);
        let times = header_times(&header, options.times)?;
        let audience = header_audience(&header, options)?;
        if let Some(crit) = header.crit {
            return Err(VerifyError::UnsupportedCritical {
                crit: crit.iter().take(8).map(|c| sender_text(c)).collect(),
            });
        }
        let payload = decode_part(payload_b64, Part::Payload)?;
        let signature = decode_part(signature_b64, Part::Signature)?;

        // The signing input is the received ASCII, as is.
        let signing_input = &token[..header_b64.len() + 1 + payload_b64.len()];
        match (&self.key, algorithm) {
            (PeerKey::Rsa { bits, .. }, Algorithm::Ps512) if *bits < MIN_RSA_BITS => {
                return Err(VerifyError::WeakRsaKey { bits: *bits });
            }
            (
                PeerKey::Rsa {
                    public_key, key, ..
                },
                Algorithm::Ps512,
            ) => {
                if verify_ps512_fast(public_key, signing_input.as_bytes(), &signature).is_err() {
                    verify_ps512_general(key, signing_input.as_bytes(), &signature)?;
                }
            }
            (PeerKey::EcP256(point), Algorithm::Es256) => {
                verify_ecdsa(point, signing_input.as_bytes(), &signature, 32)?;
            }
            (PeerKey::EcP384(point), Algorithm::Es384) => {
                verify_ecdsa(point, signing_input.as_bytes(), &signature, 48)?;
            }
            (PeerKey::Unsupported(key), _) => return Err(VerifyError::UnsupportedKeyType { key }),
            (key, alg) => {
                return Err(VerifyError::AlgorithmKeyMismatch {
                    alg,
                    key: key.name(),
                });
            }
        }
        // After the signature: a time or audience error speaks of an authentic
        // token (a replay, here or from another receiver).
        check_times(times, options)?;
        check_audience(audience, options)?;
        settled.without_times = times.0.is_none() || times.1.is_none();
        settled.without_audience = header.aud.is_none();
        Ok(payload)
    }
}

/// Verifies `token` against `certificate` and decodes its payload into `T`.
///
/// # Errors
/// A [`VerifyError`] naming why the token was rejected.
pub fn verify<T: DeserializeOwned>(
    token: &str,
    certificate: &PeerCertificate,
    policy: AlgorithmPolicy,
) -> Result<T, VerifyError> {
    certificate.verify(token, policy)
}

fn peer_key(der: &CertificateDer<'_>) -> Result<PeerKey, CertificateError> {
    let (rest, cert) = x509_parser::certificate::X509Certificate::from_der(der.as_ref())
        .map_err(|e| CertificateError::X509(e.to_string()))?;
    if !rest.is_empty() {
        return Err(CertificateError::X509(
            "trailing data after the certificate".into(),
        ));
    }
    let spki = cert.public_key();
    let algorithm = &spki.algorithm.algorithm;
    if *algorithm == OID_PKCS1_RSAENCRYPTION {
        let key = rsa::PublicKey::from_public_key_der(spki.raw)
            .map_err(|e| CertificateError::RsaKey(e.to_string()))?;
        let bits = key.n().bit_width() as usize;
        return Ok(PeerKey::Rsa {
            public_key: ProviderKey::new(
                &aws_lc_rs::signature::RSA_PSS_2048_8192_SHA512,
                spki.subject_public_key.data.to_vec(),
            ),
            key: rsa::pss::VerifyingKey::new_with_auto_salt_len(key),
            bits,
        });
    }
    if *algorithm == OID_KEY_TYPE_EC_PUBLIC_KEY {
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| x509_parser::der_parser::oid::Oid::try_from(p).ok())
            .ok_or(CertificateError::EcKey)?;
        let point = spki.subject_public_key.data.to_vec();
        return Ok(if curve == OID_EC_P256 {
            PeerKey::EcP256(ProviderKey::new(
                &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1,
                point,
            ))
        } else if curve == OID_NIST_EC_P384 {
            PeerKey::EcP384(ProviderKey::new(
                &aws_lc_rs::signature::ECDSA_P384_SHA384_ASN1,
                point,
            ))
        } else {
            PeerKey::Unsupported("ECDSA (curve other than P-256/P-384)")
        });
    }
    Ok(PeerKey::Unsupported(
        match algorithm.to_id_string().as_str() {
            "1.3.101.112" => "Ed25519",
            "1.3.101.113" => "Ed448",
            "1.2.840.113549.1.1.10" => "RSASSA-PSS",
            _ => "unknown",
        },
    ))
}

fn verify_ecdsa(
    point: &ProviderKey,
    message: &[u8],
    raw: &[u8],
    field_len: usize,
) -> Result<(), VerifyError> {
    let der = ecdsa_raw_to_der(raw, field_len).ok_or(VerifyError::BadSignature)?;
    point.verify(message, &der)
}

/// PS512 through the aws-lc-rs provider: salt length equal to the hash length
/// (64 bytes) only, as go-jose and this crate sign. Keys of 2048 to 8192 bits.
fn verify_ps512_fast(
    public_key: &ProviderKey,
    message: &[u8],
    signature: &[u8],
) -> Result<(), VerifyError> {
    public_key.verify(message, signature)
}

/// PS512 through the `rsa` crate, salt length auto-detected (Go's verifier
/// accepts any salt length too).
fn verify_ps512_general(
    key: &rsa::pss::VerifyingKey<Sha512>,
    message: &[u8],
    signature: &[u8],
) -> Result<(), VerifyError> {
    let signature =
        rsa::pss::Signature::try_from(signature).map_err(|_| VerifyError::BadSignature)?;
    key.verify(message, &signature)
        .map_err(|_| VerifyError::BadSignature)
}

/// `iat` and `exp` from the header, each checked to be a non-negative integer.
fn header_times(
    header: &RawHeader,
    required: TokenTimes,
) -> Result<(Option<u64>, Option<u64>), VerifyError> {
    let read = |value: &Option<serde_json::Value>, member: &'static str| match value {
        None => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or(VerifyError::MalformedTime { member }),
    };
    let (iat, exp) = (read(&header.iat, "iat")?, read(&header.exp, "exp")?);
    if required == TokenTimes::Required {
        if iat.is_none() {
            return Err(VerifyError::MissingTimes { member: "iat" });
        }
        if exp.is_none() {
            return Err(VerifyError::MissingTimes { member: "exp" });
        }
    }
    if let (Some(iat), Some(exp)) = (iat, exp)
        && exp < iat
    {
        return Err(VerifyError::MalformedTime { member: "exp" });
    }
    Ok((iat, exp))
}

/// Present times against now, with the allowance, and against the lifetime cap.
fn check_times(
    (iat, exp): (Option<u64>, Option<u64>),
    options: &VerifyOptions,
) -> Result<(), VerifyError> {
    if iat.is_none() && exp.is_none() {
        return Ok(());
    }
    let now = options
        .now
        .unwrap_or_else(SystemTime::now)
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let skew = options.clock_skew.as_secs();
    if let Some(exp) = exp
        && now > exp.saturating_add(skew)
    {
        return Err(VerifyError::Expired { exp, now, skew });
    }
    if let Some(iat) = iat
        && iat > now.saturating_add(skew)
    {
        return Err(VerifyError::IssuedInFuture { iat, now, skew });
    }
    // After expiry: an old token is refused as expired, which says more.
    let max = options.max_lifetime.as_secs();
    // The lifetime the token shows: exp - iat when both are there; with one only,
    // how far exp lies ahead of now, or how long ago iat was (less the skew
    // allowance, so a clock difference alone never exceeds the cap).
    let lifetime = match (iat, exp) {
        (Some(iat), Some(exp)) => exp.saturating_sub(iat),
        (None, Some(exp)) => exp.saturating_sub(now.saturating_add(skew)),
        (Some(iat), None) => now.saturating_sub(iat.saturating_add(skew)),
        (None, None) => 0,
    };
    if lifetime > max {
        return Err(VerifyError::LifetimeTooLong { lifetime, max });
    }
    Ok(())
}

/// What a verification found, for the recorder: the algorithm once accepted, and
/// which bindings an accepted token lacked.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Settled {
    /// The token's algorithm, once its `alg` was accepted.
    pub(super) algorithm: Option<Algorithm>,
    /// The accepted token lacked `iat` or `exp` (the strict mode refuses it).
    pub(super) without_times: bool,
    /// The accepted token lacked `aud` (the strict mode refuses it).
    pub(super) without_audience: bool,
}

/// The origins of `urls`, as audiences are compared.
pub(super) fn audiences_of<I: IntoIterator<Item = Url>>(urls: I) -> Arc<[String]> {
    urls.into_iter()
        .map(|url| url.origin().ascii_serialization())
        .collect()
}

/// `aud` from the header: each audience named (a string, or a non-empty array of
/// strings, as JWT allows), or `None` when absent. Read before the signature is
/// checked, so that a malformed member is refused whatever the signature; what
/// it names is judged after ([`check_audience`]).
fn header_audience(
    header: &RawHeader,
    options: &VerifyOptions,
) -> Result<Option<Vec<String>>, VerifyError> {
    let strict = options.times == TokenTimes::Required;
    if strict && options.audiences.is_empty() {
        return Err(VerifyError::AudienceNotConfigured);
    }
    let audiences = match &header.aud {
        None if strict => return Err(VerifyError::MissingAudience),
        None => return Ok(None),
        Some(serde_json::Value::String(aud)) => vec![aud.clone()],
        Some(serde_json::Value::Array(values)) if !values.is_empty() => values
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or(VerifyError::MalformedAudience)?,
        Some(_) => return Err(VerifyError::MalformedAudience),
    };
    Ok(Some(audiences))
}

/// A present audience against this receiver's (not checked when it names none).
fn check_audience(
    audience: Option<Vec<String>>,
    options: &VerifyOptions,
) -> Result<(), VerifyError> {
    let Some(audience) = audience else {
        return Ok(());
    };
    if options.audiences.is_empty() || audience.iter().any(|a| options.audiences.contains(a)) {
        return Ok(());
    }
    Err(VerifyError::AudienceMismatch {
        aud: audience.iter().take(4).map(|a| sender_text(a)).collect(),
        expected: options.audiences.to_vec(),
    })
}

fn decode_part(part: &str, which: Part) -> Result<Vec<u8>, VerifyError> {
    URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| VerifyError::Base64 { part: which })
}

fn accept_algorithm(header: &RawHeader, policy: AlgorithmPolicy) -> Result<Algorithm, VerifyError> {
    let alg = match &header.alg {
        None => return Err(VerifyError::MissingAlgorithm),
        Some(serde_json::Value::String(alg)) => alg.as_str(),
        Some(other) => {
            return Err(VerifyError::AlgorithmNotAllowed {
                alg: sender_text(&other.to_string()),
                policy,
            });
        }
    };
    if alg.eq_ignore_ascii_case("none") {
        return Err(VerifyError::AlgorithmNone);
    }
    if alg
        .as_bytes()
        .get(..2)
        .is_some_and(|p| p.eq_ignore_ascii_case(b"HS"))
    {
        return Err(VerifyError::Hmac {
            alg: sender_text(alg),
        });
    }
    match Algorithm::from_name(alg) {
        Some(Algorithm::Ps512) => Ok(Algorithm::Ps512),
        Some(ecdsa) if policy.ecdsa() => Ok(ecdsa),
        _ => Err(VerifyError::AlgorithmNotAllowed {
            alg: sender_text(alg),
            policy,
        }),
    }
}

impl VerifyError {
    /// Why, as one of [`VERIFY_RESULTS`](super::VERIFY_RESULTS): a bounded label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too_large",
            Self::Empty
            | Self::SegmentCount { .. }
            | Self::Base64 { .. }
            | Self::MalformedHeader(_)
            | Self::MissingAlgorithm => "malformed",
            Self::AlgorithmNone
            | Self::Hmac { .. }
            | Self::AlgorithmNotAllowed { .. }
            | Self::UnsupportedCritical { .. } => "algorithm_refused",
            Self::AlgorithmKeyMismatch { .. }
            | Self::UnsupportedKeyType { .. }
            | Self::WeakRsaKey { .. } => "key_refused",
            Self::BadSignature => "bad_signature",
            Self::Expired { .. } => "expired",
            Self::IssuedInFuture { .. }
            | Self::MalformedTime { .. }
            | Self::MissingTimes { .. } => "times",
            Self::LifetimeTooLong { .. } => "lifetime",
            Self::MalformedAudience
            | Self::AudienceMismatch { .. }
            | Self::MissingAudience
            | Self::AudienceNotConfigured => "audience",
            Self::PayloadNotJson(_) | Self::PayloadType(_) => "payload",
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{self, RsaKeyPair, RsaPssSaltLength, RsaSignatureEncoding};
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    use super::*;

    const SALT_64: RsaSignatureEncoding =
        signature::RSA_PSS_SHA512.with_pss_salt_length(RsaPssSaltLength::Custom(64));
    const SALT_32: RsaSignatureEncoding =
        signature::RSA_PSS_SHA512.with_pss_salt_length(RsaPssSaltLength::Custom(32));

    /// A compact PS512 token over `payload`, signed with the given salt length.
    fn token(key: &RsaKeyPair, encoding: &'static RsaSignatureEncoding, payload: &[u8]) -> String {
        let mut input = Algorithm::Ps512.encoded_header();
        input.push('.');
        URL_SAFE_NO_PAD.encode_string(payload, &mut input);
        let mut sig = vec![0; key.public_modulus_len()];
        key.sign(encoding, &SystemRandom::new(), input.as_bytes(), &mut sig)
            .unwrap();
        input.push('.');
        URL_SAFE_NO_PAD.encode_string(&sig, &mut input);
        input
    }

    fn parts(token: &str) -> (&str, Vec<u8>) {
        let (input, sig) = token.rsplit_once('.').unwrap();
        (input, URL_SAFE_NO_PAD.decode(sig).unwrap())
    }

    #[test]
    fn ps512_fast_and_general_paths_agree_and_other_salts_take_the_general_path() {
        let generated =
            rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048)
                .unwrap();
        let cert = rcgen::CertificateParams::new(vec!["peer.svc.test".into()])
            .unwrap()
            .self_signed(&generated)
            .unwrap();
        let peer = PeerCertificate::from_der(cert.der().clone()).unwrap();
        let PeerKey::Rsa {
            public_key, key, ..
        } = &peer.key
        else {
            panic!("not an RSA peer key");
        };
        assert!(
            public_key.parsed.is_some(),
            "the provider parses the key once, with the certificate"
        );
        let signer = RsaKeyPair::from_pkcs8(&generated.serialize_der()).unwrap();
        let payload = br#"{"actor":"a"}"#;

        // Salt 64 (what go-jose and this crate sign): both paths accept it.
        let good = token(&signer, &SALT_64, payload);
        let (input, sig) = parts(&good);
        verify_ps512_fast(public_key, input.as_bytes(), &sig).unwrap();
        verify_ps512_general(key, input.as_bytes(), &sig).unwrap();

        // Tampered payload: both paths reject it, and so does the whole verifier.
        let (header, _) = input.split_once('.').unwrap();
        let tampered_input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(br#"{"actor":"b"}"#));
        assert!(verify_ps512_fast(public_key, tampered_input.as_bytes(), &sig).is_err());
        assert!(verify_ps512_general(key, tampered_input.as_bytes(), &sig).is_err());
        let tampered = format!("{tampered_input}.{}", URL_SAFE_NO_PAD.encode(&sig));
        assert!(matches!(
            peer.verify::<serde_json::Value>(&tampered, AlgorithmPolicy::default()),
            Err(VerifyError::BadSignature)
        ));

        // Salt 32: the fast path cannot verify it, the general path does, and
        // the whole verifier accepts it.
        let other_salt = token(&signer, &SALT_32, payload);
        let (input, sig) = parts(&other_salt);
        assert!(verify_ps512_fast(public_key, input.as_bytes(), &sig).is_err());
        verify_ps512_general(key, input.as_bytes(), &sig).unwrap();
        let value: serde_json::Value = peer
            .verify(&other_salt, AlgorithmPolicy::default())
            .unwrap();
        assert_eq!(value["actor"], "a");
        let value: serde_json::Value = peer.verify(&good, AlgorithmPolicy::default()).unwrap();
        assert_eq!(value["actor"], "a");
    }
}
