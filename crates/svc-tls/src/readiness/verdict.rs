//! The verdicts: how an identity's or a trust's state is judged ready, degraded or
//! not ready, with the reason.

use std::fmt;
use std::time::{Duration, SystemTime};

use super::Verdict;
use crate::identity::IdentityState;
use crate::material::CertificateValidity;
use crate::trust::TrustState;

/// How long ago `then` was, for a reason, in whole seconds (`0s` when the clock went
/// back).
pub(super) fn ago(now: SystemTime, then: SystemTime) -> Seconds {
    Seconds(now.duration_since(then).map_or(0, |d| d.as_secs()))
}

/// Whole seconds, written `42s`.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub(super) struct Seconds(pub(super) u64);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0)
    }
}

/// The verdict on an identity's state. `error` is the source's error now (the
/// reason a stale identity is stale), `stale_for` how long it has been stale.
pub(super) fn identity_verdict(
    state: &IdentityState,
    error: Option<String>,
    stale_for: Option<Seconds>,
    grace: Duration,
    now: SystemTime,
) -> Verdict {
    let source = &state.source;
    let serial = &state.serial_hex;
    match state.validity {
        CertificateValidity::Expired { not_after } => {
            return Verdict::NotReady {
                reason: format!(
                    "{source}: the certificate served (serial {serial}) expired {} ago; every peer refuses it{}",
                    ago(now, not_after),
                    error
                        .map(|e| format!("; its reload fails: {e}"))
                        .unwrap_or_default()
                ),
            };
        }
        CertificateValidity::NotYetValid { not_before } => {
            return Verdict::NotReady {
                reason: format!(
                    "{source}: the certificate served (serial {serial}) is not valid for another {}; every peer refuses it",
                    ago(not_before, now)
                ),
            };
        }
        CertificateValidity::Valid => {}
    }
    if let Some(stale_for) = stale_for {
        let reason = format!(
            "{source}: stale for {stale_for}, serving the last good identity (serial {serial}); reloading it fails: {}",
            error.as_deref().unwrap_or("(the failure has just cleared)")
        );
        return if stale_for < Seconds(grace.as_secs()) {
            Verdict::Degraded { reason }
        } else {
            Verdict::NotReady { reason }
        };
    }
    match &state.watch {
        Some(watch) if !watch.connected => Verdict::Degraded {
            reason: format!(
                "{source}: its watch is failing ({}); a rotation would not be seen",
                watch.last_error.as_deref().unwrap_or("no detail")
            ),
        },
        _ => Verdict::Ready,
    }
}

/// The verdict on a trust's state.
pub(super) fn trust_verdict(
    state: &TrustState,
    error: Option<String>,
    stale_for: Option<Seconds>,
    grace: Duration,
    now: SystemTime,
) -> Verdict {
    let source = &state.source;
    if state.withdrawn {
        return Verdict::NotReady {
            reason: format!("{source}: trust withdrawn; every server is refused"),
        };
    }
    if let Some(not_after) = state.not_after.filter(|t| *t < now) {
        return Verdict::NotReady {
            reason: format!(
                "{source}: a root expired {} ago; servers chaining to it are refused",
                ago(now, not_after)
            ),
        };
    }
    if let Some(stale_for) = stale_for {
        let reason = format!(
            "{source}: stale for {stale_for}, using the last good {} roots; reloading them fails: {}",
            state.roots,
            error.as_deref().unwrap_or("(the failure has just cleared)")
        );
        return if stale_for < Seconds(grace.as_secs()) {
            Verdict::Degraded { reason }
        } else {
            Verdict::NotReady { reason }
        };
    }
    match (&state.watch, &state.watch_error) {
        (Some(watch), _) if !watch.connected => Verdict::Degraded {
            reason: format!(
                "{source}: its watch is failing ({}); a CA rotation would not be seen",
                watch.last_error.as_deref().unwrap_or("no detail")
            ),
        },
        _ => Verdict::Ready,
    }
}
