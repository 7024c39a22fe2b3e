//! The verdicts: how an identity's or a trust's state is judged ready, degraded or
//! not ready, with the reason.

use std::fmt;
use std::time::{Duration, SystemTime};

use super::Verdict;
use crate::identity::IdentityState;
use crate::last_good::WatchHealthState;
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
    let origin = &state.origin;
    let serial = &state.serial_hex;
    match state.validity {
        CertificateValidity::Expired { not_after } => {
            return Verdict::NotReady {
                reason: format!(
                    "{origin}: the certificate served (serial {serial}) expired {} ago; every peer refuses it{}",
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
                    "{origin}: the certificate served (serial {serial}) is not valid for another {}; every peer refuses it",
                    ago(not_before, now)
                ),
            };
        }
        CertificateValidity::Valid => {}
    }
    if let Some(stale_for) = stale_for {
        let serving = format!("serving the last good identity (serial {serial}); reloading it");
        return stale(origin, stale_for, &serving, error.as_deref(), grace);
    }
    watched(origin, state.watch.as_ref(), "a rotation")
}

/// The verdict on a trust's state.
pub(super) fn trust_verdict(
    state: &TrustState,
    error: Option<String>,
    stale_for: Option<Seconds>,
    grace: Duration,
    now: SystemTime,
) -> Verdict {
    let origin = &state.origin;
    if state.withdrawn {
        return Verdict::NotReady {
            reason: format!("{origin}: trust withdrawn; every server is refused"),
        };
    }
    if let Some(not_after) = state.not_after.filter(|t| *t < now) {
        return Verdict::NotReady {
            reason: format!(
                "{origin}: a root expired {} ago; servers chaining to it are refused",
                ago(now, not_after)
            ),
        };
    }
    if let Some(stale_for) = stale_for {
        let serving = format!("using the last good {} roots; reloading them", state.roots);
        return stale(origin, stale_for, &serving, error.as_deref(), grace);
    }
    watched(origin, state.watch.as_ref(), "a CA rotation")
}

/// A stale source, for both halves: degraded for the first `grace`, then not ready,
/// so replicas sharing a broken Secret keep serving for that long. `serving` says
/// what is served meanwhile and what fails to reload; `error` is the reload's error,
/// absent when it cleared between the probe's read and this verdict.
fn stale(
    origin: &dyn fmt::Display,
    stale_for: Seconds,
    serving: &str,
    error: Option<&str>,
    grace: Duration,
) -> Verdict {
    let reason = format!(
        "{origin}: stale for {stale_for}, {serving} fails: {}",
        error.unwrap_or("(the failure has just cleared)")
    );
    if stale_for < Seconds(grace.as_secs()) {
        Verdict::Degraded { reason }
    } else {
        Verdict::NotReady { reason }
    }
}

/// A fresh source's verdict from its watch, for both halves: a failing watch is only
/// degraded (an API server outage must not take every replica out of its Service),
/// saying that `change` would not be seen.
fn watched(origin: &dyn fmt::Display, watch: Option<&WatchHealthState>, change: &str) -> Verdict {
    match watch {
        Some(watch) if !watch.connected => Verdict::Degraded {
            reason: format!(
                "{origin}: its watch is failing ({}); {change} would not be seen",
                watch.last_error.as_deref().unwrap_or("no detail")
            ),
        },
        _ => Verdict::Ready,
    }
}
