//! The checks a process declares and the report `/readyz` serves.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use crate::identity::IdentityResolver;
use crate::trust::TrustVerifier;

use super::verdict::{Seconds, ago, identity_verdict, trust_verdict};

/// One check's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Loaded and fresh.
    Ready,
    /// Usable, with something an operator should know (counts as ready).
    Degraded {
        /// What is wrong.
        reason: String,
    },
    /// Not usable now.
    NotReady {
        /// Why.
        reason: String,
    },
}

impl Verdict {
    /// Whether this verdict counts as ready ([`Verdict::Ready`] or
    /// [`Verdict::Degraded`]).
    pub fn is_ready(&self) -> bool {
        !matches!(self, Self::NotReady { .. })
    }
}

/// One named check and its verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// The name given at registration (`identity`, `trust identity`, `caches`).
    pub name: String,
    /// Its verdict now.
    pub verdict: Verdict,
}

/// Every check's verdict at one moment; [`fmt::Display`] writes one line per check
/// (`ok <name>`, `degraded <name>: <reason>`, `not ready <name>: <reason>`), the
/// body of a `/readyz` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// In registration order.
    pub checks: Vec<Check>,
}

impl Report {
    /// Ready when every check is ready or degraded. A report with no check is
    /// ready: nothing was declared to wait for.
    pub fn is_ready(&self) -> bool {
        self.checks.iter().all(|check| check.verdict.is_ready())
    }

    /// The checks that are not ready.
    pub fn not_ready(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|check| !check.verdict.is_ready())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for check in &self.checks {
            match &check.verdict {
                Verdict::Ready => writeln!(f, "ok {}", check.name)?,
                Verdict::Degraded { reason } => writeln!(f, "degraded {}: {reason}", check.name)?,
                Verdict::NotReady { reason } => writeln!(f, "not ready {}: {reason}", check.name)?,
            }
        }
        Ok(())
    }
}

impl Report {
    /// One line per check without its reason (`ok <name>`, `degraded <name>`,
    /// `not ready <name>`): the body to answer `/readyz` with by default. The reasons
    /// name Secrets, serials, SPIFFE IDs and quote an API server's refusal (naming
    /// the service account): log them ([`Report`]'s `Display`), and show them to
    /// whoever can reach the probe port only where the operator turns it on.
    ///
    /// ```
    /// use svc_tls::readiness::Readiness;
    /// let readiness = Readiness::new();
    /// readiness.expect("identity", "the client certificate Secret unikorn/billing");
    /// let report = readiness.report();
    /// assert_eq!(report.summary().to_string(), "not ready identity\n");
    /// assert!(report.to_string().contains("unikorn/billing"));
    /// ```
    pub fn summary(&self) -> Summary<'_> {
        Summary(self)
    }
}

/// A [`Report`] without reasons ([`Report::summary`]).
#[derive(Clone, Copy, Debug)]
pub struct Summary<'a>(&'a Report);

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for check in &self.0.checks {
            match &check.verdict {
                Verdict::Ready => writeln!(f, "ok {}", check.name)?,
                Verdict::Degraded { .. } => writeln!(f, "degraded {}", check.name)?,
                Verdict::NotReady { .. } => writeln!(f, "not ready {}", check.name)?,
            }
        }
        Ok(())
    }
}

/// A check the caller supplies (a Kubernetes cache report, a database connection).
type CustomCheck = Arc<dyn Fn() -> Verdict + Send + Sync>;

/// What a registered check probes.
#[derive(Clone)]
enum Probe {
    /// Declared, not loaded yet: waiting for the named thing.
    Pending(String),
    Identity(IdentityResolver, StaleSince),
    Trust(TrustVerifier, StaleSince),
    Custom(CustomCheck),
}

/// When a check first saw its source stale in the current episode. The resolver's
/// and verifier's states give the load time of what they serve, not when reloading
/// it began to fail, so the check keeps that itself (to a probe period's accuracy).
#[derive(Clone, Default)]
struct StaleSince(Arc<Mutex<Option<SystemTime>>>);

impl StaleSince {
    /// How long the source has been stale as of `now` (`None` when it is not).
    fn observe(&self, stale: bool, now: SystemTime) -> Option<Seconds> {
        let mut since = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if stale {
            Some(ago(now, *since.get_or_insert(now)))
        } else {
            *since = None;
            None
        }
    }
}

/// The checks of one process. Cheap to clone (clones share the checks): hand one to
/// the probe server before construction starts and register into another.
#[derive(Clone, Default)]
pub struct Readiness {
    checks: Arc<RwLock<Vec<(String, Probe)>>>,
    stale_grace: Duration,
}

impl fmt::Debug for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let checks = self.checks.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Readiness")
            .field(
                "checks",
                &checks.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            )
            .field("stale_grace", &self.stale_grace)
            .finish()
    }
}

impl Readiness {
    /// No checks; a stale identity or trust is not ready at once.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tolerate a stale identity or trust for `grace` (reported as degraded meanwhile)
    /// before it is not ready: for services whose replicas should keep serving
    /// inbound traffic on the last good identity while a shared Secret is fixed.
    #[must_use]
    pub fn with_stale_grace(mut self, grace: Duration) -> Self {
        self.stale_grace = grace;
        self
    }

    /// Declares a check not ready until it is registered under the same `name`:
    /// "waiting for `what`".
    pub fn expect(&self, name: &str, what: &str) {
        self.set(name, Probe::Pending(what.to_owned()));
    }

    /// Judges `resolver`'s identity under `name` (replacing an [`expect`](Self::expect)
    /// or an earlier check of that name).
    pub fn identity(&self, name: &str, resolver: &IdentityResolver) {
        self.set(
            name,
            Probe::Identity(resolver.clone(), StaleSince::default()),
        );
    }

    /// Judges `verifier`'s roots under `name`.
    pub fn trust(&self, name: &str, verifier: &TrustVerifier) {
        self.set(name, Probe::Trust(verifier.clone(), StaleSince::default()));
    }

    /// Judges with `check` under `name` (called on every [`report`](Self::report)).
    pub fn check(&self, name: &str, check: impl Fn() -> Verdict + Send + Sync + 'static) {
        self.set(name, Probe::Custom(Arc::new(check)));
    }

    fn set(&self, name: &str, probe: Probe) {
        let mut checks = self.checks.write().unwrap_or_else(PoisonError::into_inner);
        match checks.iter_mut().find(|(existing, _)| existing == name) {
            Some(entry) => entry.1 = probe,
            None => checks.push((name.to_owned(), probe)),
        }
    }

    /// Runs every check now. Identities and trusts are read from their sources as a
    /// handshake reads them, so the verdict is current even when no request is being
    /// made: a new value read is installed, and a failed read marks the value stale
    /// and begins the episode of failures (the trust's bound on a gone source counts
    /// from it). A probe's failed read is not a handshake's, though: it is not counted
    /// as a reload failure (`failures` in the states, `reload_failed` and the reload
    /// counters of the `metrics` module) nor warned about; the recorder hears of it
    /// through [`ReloadRecorder::probe_read_failed`](crate::last_good::ReloadRecorder::probe_read_failed)
    /// (the metric `svc_tls_{identity,trust}_probe_read_failures_total`), and the
    /// report's reason says why. So a probe every few seconds on a broken Secret
    /// neither inflates the reload-failure rate alerts watch nor fills the log.
    pub fn report(&self) -> Report {
        // Probes are cloned out so that no lock is held while they run.
        let probes = self
            .checks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let now = SystemTime::now();
        Report {
            checks: probes
                .into_iter()
                .map(|(name, probe)| Check {
                    verdict: match probe {
                        Probe::Pending(what) => Verdict::NotReady {
                            reason: format!("waiting for {what} to load"),
                        },
                        // One read each, as a handshake's but recorded as the probe's
                        // (not a reload failure, no WARN); its error words the reason.
                        Probe::Identity(resolver, since) => {
                            let (_, error) =
                                resolver.reload_reporting(crate::last_good::slot::ReadBy::Probe);
                            let error = error.map(|e| watch_ready::excerpt::chain(&e));
                            let state = resolver.state();
                            let stale_for = since.observe(state.stale, now);
                            identity_verdict(&state, error, stale_for, self.stale_grace, now)
                        }
                        Probe::Trust(verifier, since) => {
                            let error = verifier
                                .reload_reporting_error(crate::last_good::slot::ReadBy::Probe)
                                .map(|e| watch_ready::excerpt::chain(&e));
                            let state = verifier.state();
                            let stale_for = since.observe(state.stale, now);
                            trust_verdict(&state, error, stale_for, self.stale_grace, now)
                        }
                        Probe::Custom(check) => check(),
                    },
                    name,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_report_is_ready_and_a_pending_check_is_not() {
        let readiness = Readiness::new();
        assert!(readiness.report().is_ready());
        readiness.expect("identity", "the client certificate Secret platform/billing");
        let report = readiness.report();
        assert!(!report.is_ready());
        assert_eq!(
            report.to_string(),
            "not ready identity: waiting for the client certificate Secret platform/billing to load\n"
        );
        readiness.check("identity", || Verdict::Ready);
        let report = readiness.report();
        assert!(report.is_ready());
        assert_eq!(report.checks.len(), 1, "replaced, not added");
    }

    use crate::identity::IdentityState;
    use crate::last_good::WatchHealthState;
    use crate::material::CertificateValidity;
    use crate::origin::{IdentityOrigin, SecretRef, TrustOrigin};
    use crate::trust::TrustState;

    fn state(stale: bool, validity: CertificateValidity, connected: bool) -> IdentityState {
        let now = SystemTime::now();
        IdentityState {
            origin: IdentityOrigin::Secret(SecretRef::new("platform", "billing")),
            serial_hex: "07".to_owned(),
            spiffe_id: None,
            not_after: now + Duration::from_secs(3600),
            last_good_reload: now,
            failures: u64::from(stale),
            stale,
            validity,
            watch: Some(WatchHealthState {
                connected,
                last_error: (!connected).then(|| "connection refused".to_owned()),
                failing_since: None,
            }),
        }
    }

    #[test]
    fn the_identity_verdicts() {
        let now = SystemTime::now();
        let grace = Duration::from_secs(60);
        let fresh = state(false, CertificateValidity::Valid, true);
        assert_eq!(
            identity_verdict(&fresh, None, None, grace, now),
            Verdict::Ready
        );
        // A failing watch with a good identity: degraded, which is ready.
        let unwatched = state(false, CertificateValidity::Valid, false);
        let verdict = identity_verdict(&unwatched, None, None, grace, now);
        assert!(
            matches!(&verdict, Verdict::Degraded { reason } if reason.contains("connection refused")),
            "{verdict:?}"
        );
        // Stale: degraded within the grace, not ready after it, with the error.
        let stale = state(true, CertificateValidity::Valid, true);
        let error = || Some("the private key does not match".to_owned());
        let within = identity_verdict(&stale, error(), Some(Seconds(59)), grace, now);
        assert!(matches!(within, Verdict::Degraded { .. }), "{within:?}");
        let after = identity_verdict(&stale, error(), Some(Seconds(60)), grace, now);
        assert!(
            matches!(&after, Verdict::NotReady { reason }
                if reason.contains("Secret platform/billing: stale for 60s") && reason.contains("does not match")),
            "{after:?}"
        );
        // Expired: not ready whatever the grace.
        let expired = state(
            false,
            CertificateValidity::Expired {
                not_after: now - Duration::from_secs(5),
            },
            true,
        );
        let verdict = identity_verdict(&expired, None, None, Duration::MAX, now);
        assert!(
            matches!(&verdict, Verdict::NotReady { reason } if reason.contains("expired 5s ago")),
            "{verdict:?}"
        );
    }

    fn trust_state(stale: bool, connected: bool) -> TrustState {
        let now = SystemTime::now();
        TrustState {
            origin: TrustOrigin::Secret(SecretRef::new("platform", "ca")),
            roots: 3,
            not_after: Some(now + Duration::from_secs(3600)),
            last_good_reload: now,
            failures: u64::from(stale),
            stale,
            watch_error: (!connected).then(|| "connection refused".to_owned()),
            watch: Some(WatchHealthState {
                connected,
                last_error: (!connected).then(|| "connection refused".to_owned()),
                failing_since: None,
            }),
            withdrawn: false,
        }
    }

    /// The reasons operators read on `/readyz`, word for word, for both halves: a
    /// stale source within the grace and after it (with the error, or once it has
    /// cleared), and a failing watch.
    #[test]
    fn the_reason_texts() {
        let now = SystemTime::now();
        let grace = Duration::from_secs(60);
        let error = || Some("the private key does not match".to_owned());
        let degraded = |reason: &str| Verdict::Degraded {
            reason: reason.to_owned(),
        };
        let not_ready = |reason: &str| Verdict::NotReady {
            reason: reason.to_owned(),
        };

        let stale = state(true, CertificateValidity::Valid, true);
        assert_eq!(
            identity_verdict(&stale, error(), Some(Seconds(59)), grace, now),
            degraded(
                "Secret platform/billing: stale for 59s, serving the last good identity \
                 (serial 07); reloading it fails: the private key does not match"
            )
        );
        assert_eq!(
            identity_verdict(&stale, None, Some(Seconds(60)), grace, now),
            not_ready(
                "Secret platform/billing: stale for 60s, serving the last good identity \
                 (serial 07); reloading it fails: (the failure has just cleared)"
            )
        );
        let unwatched = state(false, CertificateValidity::Valid, false);
        assert_eq!(
            identity_verdict(&unwatched, None, None, grace, now),
            degraded(
                "Secret platform/billing: its watch is failing (connection refused); \
                 a rotation would not be seen"
            )
        );

        let stale = trust_state(true, true);
        assert_eq!(
            trust_verdict(&stale, error(), Some(Seconds(59)), grace, now),
            degraded(
                "CA Secret platform/ca: stale for 59s, using the last good 3 roots; \
                 reloading them fails: the private key does not match"
            )
        );
        assert_eq!(
            trust_verdict(&stale, None, Some(Seconds(60)), grace, now),
            not_ready(
                "CA Secret platform/ca: stale for 60s, using the last good 3 roots; \
                 reloading them fails: (the failure has just cleared)"
            )
        );
        assert_eq!(
            trust_verdict(&trust_state(false, true), None, None, grace, now),
            Verdict::Ready
        );
        assert_eq!(
            trust_verdict(&trust_state(false, false), None, None, grace, now),
            degraded(
                "CA Secret platform/ca: its watch is failing (connection refused); \
                 a CA rotation would not be seen"
            )
        );
    }

    #[test]
    fn staleness_is_timed_from_the_first_stale_observation() {
        let since = StaleSince::default();
        let t0 = SystemTime::now();
        assert_eq!(since.observe(true, t0), Some(Seconds(0)));
        let later = t0 + Duration::from_secs(42);
        assert_eq!(since.observe(true, later), Some(Seconds(42)));
        assert_eq!(since.observe(false, later), None);
        assert_eq!(
            since.observe(true, later),
            Some(Seconds(0)),
            "a new episode"
        );
    }

    #[test]
    fn degraded_counts_as_ready_and_is_said() {
        let readiness = Readiness::new();
        readiness.check("caches", || Verdict::Degraded {
            reason: "configmaps.v1 in platform: degraded".to_owned(),
        });
        readiness.check("database", || Verdict::Ready);
        let report = readiness.report();
        assert!(report.is_ready());
        assert_eq!(
            report.to_string(),
            "degraded caches: configmaps.v1 in platform: degraded\nok database\n"
        );
    }
}
