//! What signing and verifying principals report: one event per token, with the
//! algorithm and a result from a fixed set, for metrics (feature `metrics`) or any
//! other recorder of the caller's.

use std::sync::Arc;

use super::jws::Algorithm;
use crate::last_good::NoopRecorder;

/// Receives one event per principal signed by a [`PrincipalSigner`](super::PrincipalSigner)
/// and per request verified by an [`IngressVerifier`](super::IngressVerifier).
///
/// Called on the request path, after the token was signed or judged: an
/// implementation must not block, do I/O or take a contended lock (count with
/// atomics). `algorithm` is `None` when no algorithm was settled (the key could not
/// sign; the token's `alg` was refused or never read). `result` is `"ok"` or one of
/// [`SIGN_RESULTS`] / [`VERIFY_RESULTS`]: static text chosen by this crate, never
/// text from the token, the headers or an error message.
pub trait TokenRecorder: Send + Sync {
    /// A principal was signed (`"ok"`) or could not be.
    fn signed(&self, algorithm: Option<Algorithm>, result: &'static str);
    /// A request's principal was accepted (`"ok"`) or refused.
    fn verified(&self, algorithm: Option<Algorithm>, result: &'static str);

    /// An accepted principal (reported as `"ok"` too) had no `iat` or no `exp`: a Go
    /// sender's token, or an older version of this crate's. While this counts,
    /// the strict mode ([`TokenTimes::Required`](super::TokenTimes::Required))
    /// would refuse some sender. The default does nothing.
    fn accepted_without_times(&self) {}

    /// An accepted principal had no `aud` (a Go sender's token, or one signed
    /// before audiences): the strict mode would refuse it. The default does
    /// nothing.
    fn accepted_without_audience(&self) {}

    /// An accepted principal was the unsigned form (a Go sender's base64url JSON,
    /// accepted in [`ReceivingMode::GoCompatible`](super::ReceivingMode::GoCompatible)
    /// only; it is counted as without times and without audience too). The strict
    /// mode would refuse it. The default does nothing.
    fn accepted_unsigned(&self) {}
}

impl TokenRecorder for NoopRecorder {
    fn signed(&self, _: Option<Algorithm>, _: &'static str) {}
    fn verified(&self, _: Option<Algorithm>, _: &'static str) {}
}

/// The recorder of a signer or verifier built without one.
pub(super) fn noop() -> Arc<dyn TokenRecorder> {
    Arc::new(NoopRecorder)
}

/// The label of an algorithm, or `unknown`.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) fn algorithm_label(algorithm: Option<Algorithm>) -> &'static str {
    algorithm.map_or("unknown", Algorithm::name)
}

/// Every `algorithm` label value.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) const ALGORITHMS: [&str; 4] = ["PS512", "ES256", "ES384", "unknown"];

/// Every `result` of signing: `ok`, then the reasons of [`SignError::reason`](super::SignError::reason), then
/// `other` (what a metrics recorder counts a result outside this list as).
pub const SIGN_RESULTS: [&str; 9] = [
    "ok",
    "identity_unavailable",
    "unsupported_key",
    "encode",
    "provider",
    "plaintext_url",
    "invalid_request",
    "audience_mismatch",
    "other",
];

/// Every `result` of verifying: `ok`, then the reasons of
/// [`RequestPrincipalError::reason`](super::RequestPrincipalError::reason), then `other`.
pub const VERIFY_RESULTS: [&str; 22] = [
    "ok",
    "certificate_missing",
    "certificate_not_verified",
    "certificate_invalid",
    "certificate_untrusted",
    "peer_not_allowed",
    "trust_unavailable",
    "too_large",
    "principal_missing",
    "malformed",
    "algorithm_refused",
    "key_refused",
    "bad_signature",
    "expired",
    "times",
    "lifetime",
    "audience",
    "payload",
    "unsigned",
    "replayed",
    "not_configured",
    "other",
];
