//! Why a token or a peer certificate was refused.

use super::*;

/// Why a token was rejected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The token's `jti` was accepted before: a captured token presented again.
    #[error("principal token was already used (its jti was accepted before)")]
    Replayed,
    /// The replay cache holds its bound of unexpired tokens: refused rather than
    /// evicting one early (which would let it be replayed).
    #[error("principal replay cache is full ({capacity} unexpired tokens)")]
    ReplayCacheFull {
        /// The bound.
        capacity: usize,
    },
    /// The receiver checks replays and the token carries no `jti` (a Go sender's, or
    /// an older sender's).
    #[error("principal token has no jti and this receiver refuses replays")]
    MissingJti,
    /// The `jti` is not a string of 1 to 64 visible ASCII characters.
    #[error("principal token's jti is malformed")]
    MalformedJti,
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

impl VerifyError {
    /// Why, as one of [`VERIFY_RESULTS`](crate::principal::VERIFY_RESULTS): a bounded label for metrics.
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
            Self::Replayed | Self::ReplayCacheFull { .. } => "replayed",
            Self::MissingJti | Self::MalformedJti => "malformed",
        }
    }
}
