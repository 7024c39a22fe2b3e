//! The identity's event counters: their names, their `result` values and how a failed
//! reload maps to one (the recorder is the one of both halves, [`SourceRecorder`](super::SourceRecorder)).
//!
//! | family | type | labels |
//! |---|---|---|
//! | `svc_tls_identity_cert_refreshes_total` | counter | `source`, `name`, `result` (`ok`, `not_found`, `malformed`, `expired`, `not_yet_valid`, `unavailable`, `other`) |
//! | `svc_tls_identity_probe_read_failures_total` | counter | `source`, `name`, `cluster`, `result` (those of `cert_refreshes` but `ok`) |
//! | `svc_tls_identity_warnings_suppressed_total` | counter | `source`, `name` |
//!
//! `result="ok"` counts the identities installed (at start-up and at each rotation
//! seen); every other result counts the handshake-time reloads that failed for that
//! reason (the last good identity was served). The readiness probe's reads that
//! failed are counted apart, in `probe_read_failures`, by the same reasons: a probe
//! every few seconds on a broken Secret does not move the reload failures.

use super::counters::{MaterialResults, index_of};
use super::source::CountedSource;
use crate::identity::IdentityReloadError;
use crate::material::{Identity, MaterialErrorKind};
use crate::origin::IdentityOrigin;
use crate::spiffe::SpiffeError;

/// The values of the `result` label of `svc_tls_identity_cert_refreshes_total`.
pub const REFRESH_RESULTS: [&str; 7] = [
    "ok",
    "not_found",
    "malformed",
    "expired",
    "not_yet_valid",
    "unavailable",
    "other",
];

impl CountedSource for IdentityOrigin {
    type Value = Identity;
    const RESULTS_FAMILY: (&'static str, &'static str) = (
        "svc_tls_identity_cert_refreshes",
        "Client identity reloads by result: ok (a new identity installed) or the reason a handshake-time reload failed (the last good identity was served)",
    );
    const SUPPRESSED_FAMILY: (&'static str, &'static str) = (
        "svc_tls_identity_warnings_suppressed",
        "Stale or invalid identity reports held back by the rate limit",
    );
    const PROBE_FAMILY: (&'static str, &'static str) = (
        "svc_tls_identity_probe_read_failures",
        "Client identity reads by the readiness probe that failed, by reason (not counted as reloads; the last good identity was served)",
    );
    const RESULTS: &'static [&'static str] = &REFRESH_RESULTS;

    /// Classified by the half's reload error, at positions fixed at compile time.
    fn failure_index(error: &(dyn std::error::Error + 'static)) -> usize {
        const NOT_FOUND: usize = index_of(&REFRESH_RESULTS, "not_found");
        const MATERIAL: MaterialResults = MaterialResults::of(&REFRESH_RESULTS);
        const UNAVAILABLE: usize = index_of(&REFRESH_RESULTS, "unavailable");
        const OTHER: usize = index_of(&REFRESH_RESULTS, "other");
        match error.downcast_ref::<IdentityReloadError>() {
            Some(IdentityReloadError::NotFound { .. }) => NOT_FOUND,
            Some(IdentityReloadError::Material(e)) => MATERIAL.index(e),
            Some(IdentityReloadError::Unavailable(_)) => UNAVAILABLE,
            Some(IdentityReloadError::OutsideValidity(inner)) => validity_index(inner.as_ref()),
            _ => OTHER,
        }
    }
}

/// `not_yet_valid` for an SVID whose validity has not begun, `expired` otherwise.
fn validity_index(error: &(dyn std::error::Error + 'static)) -> usize {
    const EXPIRED: usize = index_of(&REFRESH_RESULTS, "expired");
    const NOT_YET_VALID: usize = index_of(&REFRESH_RESULTS, "not_yet_valid");
    match error.downcast_ref::<SpiffeError>() {
        Some(SpiffeError::Svid(svid)) => match svid.kind() {
            MaterialErrorKind::CertificateNotYetValid { .. } => NOT_YET_VALID,
            _ => EXPIRED,
        },
        _ => EXPIRED,
    }
}
