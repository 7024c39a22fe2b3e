//! Leader election through a `coordination.k8s.io/v1` Lease, as client-go's
//! `leaderelection` package does it
//! (docs/decisions/controller-example-elects-its-leader.md).
//!
//! - Every write of the Lease is a `replace` carrying the `resourceVersion` that was
//!   read (optimistic concurrency): of two replicas writing at once, one gets 409 and
//!   has written nothing.
//! - A Lease held by another is taken only after it was seen **unchanged** for the
//!   lease duration, timed by this process's monotonic clock from when it saw the
//!   change (the holder's `renewTime` is only compared, never trusted as a time: the
//!   clocks of two nodes need not agree).
//! - The leader counts itself leader only until the renew deadline after the **send**
//!   of its last successful renewal; past it, it stops leading at once. The deadline is
//!   shorter than the lease duration, and the others start timing no earlier than that
//!   send, so the leader has stopped before any other may take the Lease.
//! - On graceful shutdown the leader releases the Lease (no holder), so another takes
//!   it at its next retry instead of after the lease duration.

use std::{
    future::Future,
    hash::{BuildHasher as _, Hasher as _},
    time::Duration,
};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::api::{Api, PostParams};
use thiserror::Error;
use tokio::time::Instant;

/// client-go's default lease duration (`--leader-elect-lease-duration`).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// client-go's default renew deadline (`--leader-elect-renew-deadline`).
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// client-go's default retry period (`--leader-elect-retry-period`).
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);
/// client-go's jitter on the retry period while waiting to acquire.
const JITTER: f64 = 1.2;

/// How a replica takes part in the election.
#[derive(Clone, Debug)]
pub struct LeaderElection {
    /// The Lease's name (`--leader-election-id`).
    pub lease_name: String,
    /// The Lease's namespace (`--leader-election-namespace`).
    pub lease_namespace: String,
    /// This replica's name in `holderIdentity`: unique per process.
    pub identity: String,
    /// How long a Lease not renewed stays another's (`--leader-elect-lease-duration`).
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal
    /// (`--leader-elect-renew-deadline`).
    pub renew_deadline: Duration,
    /// How often the Lease is tried and renewed (`--leader-elect-retry-period`).
    pub retry_period: Duration,
}

impl LeaderElection {
    /// The Lease `namespace/name`, client-go's defaults, and [`default_identity`].
    pub fn new(lease_namespace: impl Into<String>, lease_name: impl Into<String>) -> Self {
        LeaderElection {
            lease_name: lease_name.into(),
            lease_namespace: lease_namespace.into(),
            identity: default_identity(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// The same with other timings.
    #[must_use]
    pub fn with_timings(
        mut self,
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Self {
        self.lease_duration = lease_duration;
        self.renew_deadline = renew_deadline;
        self.retry_period = retry_period;
        self
    }

    /// The same with another identity.
    #[must_use]
    pub fn with_identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// Checks the timings as client-go does: lease duration > renew deadline >
    /// 1.2 × retry period > 0, and a lease duration of at most `i32::MAX` seconds.
    ///
    /// # Errors
    /// [`LeaderElectionError::Timings`] naming the flags.
    pub fn validate(&self) -> Result<(), LeaderElectionError> {
        let timings = |why: &'static str| LeaderElectionError::Timings {
            why,
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        };
        if self.retry_period.is_zero() {
            return Err(timings("--leader-elect-retry-period must be positive"));
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER) {
            return Err(timings(
                "--leader-elect-renew-deadline must be longer than 1.2 × --leader-elect-retry-period",
            ));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(timings(
                "--leader-elect-lease-duration must be longer than --leader-elect-renew-deadline",
            ));
        }
        if lease_seconds(self.lease_duration).is_none() {
            return Err(timings("--leader-elect-lease-duration is too long"));
        }
        if self.identity.is_empty() {
            return Err(LeaderElectionError::NoIdentity);
        }
        Ok(())
    }
}

/// `$POD_NAME` or `$HOSTNAME` (else `migrated-controller`), `_`, and 16 random hex
/// digits, as client-go's `hostname_uuid`: unique even when a pod restarts in place.
pub fn default_identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "migrated-controller".to_owned());
    format!("{host}_{:016x}", random_u64())
}

/// A random 64-bit value from the standard library's per-process random keys.
fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    hasher.finish()
}

/// The lease duration in whole seconds, rounded up (what `leaseDurationSeconds` holds).
fn lease_seconds(duration: Duration) -> Option<i32> {
    let whole = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    i32::try_from(whole).ok()
}

/// Why a replica stopped taking part, or could not start.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LeaderElectionError {
    /// The timings do not make a safe election.
    #[error(
        "{why} (lease duration {lease_duration:?}, renew deadline {renew_deadline:?}, retry period {retry_period:?})"
    )]
    Timings {
        /// Which rule, naming the flags.
        why: &'static str,
        /// `--leader-elect-lease-duration`.
        lease_duration: Duration,
        /// `--leader-elect-renew-deadline`.
        renew_deadline: Duration,
        /// `--leader-elect-retry-period`.
        retry_period: Duration,
    },
    /// No identity to hold the Lease under.
    #[error("leader election needs a non-empty identity")]
    NoIdentity,
    /// The leader could not renew the Lease within the renew deadline, or found it
    /// held by another: it stopped leading (the process should exit, as the Go
    /// manager does, and start again as a candidate).
    #[error("leadership of Lease {namespace}/{name} lost by {identity}: {why}")]
    Lost {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// This replica.
        identity: String,
        /// What happened.
        why: String,
    },
}

/// What one attempt found.
enum Attempt {
    /// This replica holds the Lease now (the write carrying it was sent at `sent`).
    Held { sent: Instant },
    /// Another holds it, and it has not expired.
    Other(String),
    /// Someone else wrote first (409), or the create raced: try again.
    Conflict,
}

/// The Lease record last seen and when this process saw it change.
struct Observed {
    spec: LeaseSpec,
    at: Instant,
}

/// One replica's side of the election over one Lease.
pub struct Elector {
    api: Api<Lease>,
    config: LeaderElection,
    observed: Option<Observed>,
}

impl Elector {
    /// An elector over `client`'s Lease `config.lease_namespace/lease_name`.
    ///
    /// # Errors
    /// [`LeaderElectionError::Timings`] or [`LeaderElectionError::NoIdentity`].
    pub fn new(client: kube::Client, config: LeaderElection) -> Result<Self, LeaderElectionError> {
        config.validate()?;
        Ok(Elector {
            api: Api::namespaced(client, &config.lease_namespace),
            config,
            observed: None,
        })
    }

    /// Waits until this replica holds the Lease, then runs `leading` while it renews
    /// it. Returns `Ok(None)` when `shutdown` resolves before it leads, `Ok(Some(_))`
    /// when `leading` ends (the Lease then released), and
    /// [`LeaderElectionError::Lost`] when the Lease could not be kept: `leading` is
    /// dropped at once then (its work cancelled), before the renew deadline passes.
    ///
    /// `leading` should end soon after `shutdown` resolves (a Controller's
    /// `graceful_shutdown_on`): the Lease is renewed until it does.
    ///
    /// # Errors
    /// [`LeaderElectionError::Lost`].
    pub async fn lead<T>(
        mut self,
        shutdown: impl Future<Output = ()>,
        leading: impl Future<Output = T>,
    ) -> Result<Option<T>, LeaderElectionError> {
        let acquired = {
            let acquire = self.acquire();
            tokio::pin!(acquire);
            tokio::select! {
                sent = &mut acquire => sent,
                () = shutdown => return Ok(None),
            }
        };
        tracing::info!(
            lease = %self.lease(),
            identity = %self.config.identity,
            "leader election: acquired the Lease; leading"
        );
        let outcome = {
            let renew = self.renew(acquired);
            tokio::pin!(renew);
            tokio::pin!(leading);
            tokio::select! {
                biased;
                lost = &mut renew => Err(lost),
                done = &mut leading => Ok(done),
            }
        };
        match outcome {
            Ok(done) => {
                self.release().await;
                Ok(Some(done))
            }
            Err(lost) => {
                tracing::error!(
                    lease = %self.lease(),
                    error = %lost,
                    "leader election: stopped leading"
                );
                Err(lost)
            }
        }
    }

    fn lease(&self) -> String {
        format!("{}/{}", self.config.lease_namespace, self.config.lease_name)
    }

    /// Tries every retry period (jittered) until this replica holds the Lease.
    async fn acquire(&mut self) -> Instant {
        let mut last_other: Option<String> = None;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Held { sent }) => return sent,
                Ok(Attempt::Other(holder)) => {
                    if last_other.as_deref() != Some(holder.as_str()) {
                        tracing::info!(lease = %self.lease(), %holder, "leader election: the Lease is held; waiting");
                        last_other = Some(holder);
                    }
                }
                Ok(Attempt::Conflict) => {}
                Err(error) => tracing::warn!(
                    lease = %self.lease(),
                    %error,
                    "leader election: cannot read or write the Lease"
                ),
            }
            let jitter = 1.0 + (JITTER - 1.0) * unit_random();
            tokio::time::sleep(self.config.retry_period.mul_f64(jitter)).await;
        }
    }

    /// Renews every retry period; returns why leadership ended (never otherwise).
    async fn renew(&mut self, mut renewed: Instant) -> LeaderElectionError {
        loop {
            let deadline = renewed + self.config.renew_deadline;
            tokio::time::sleep_until((Instant::now() + self.config.retry_period).min(deadline))
                .await;
            let (why, final_) = match tokio::time::timeout_at(deadline, self.try_acquire_or_renew())
                .await
            {
                Ok(Ok(Attempt::Held { sent })) => {
                    renewed = sent;
                    continue;
                }
                // Another holds it: lost now, whatever the deadline.
                Ok(Ok(Attempt::Other(holder))) => (format!("the Lease is held by {holder}"), true),
                Ok(Ok(Attempt::Conflict)) => ("a conflicting write".to_owned(), false),
                Ok(Err(error)) => (error.to_string(), false),
                Err(_) => ("the renewal did not finish in time".to_owned(), true),
            };
            // The next try could only finish after the deadline: stop leading now.
            if final_ || Instant::now() + self.config.retry_period >= deadline {
                return self.lost(format!(
                    "not renewed within the renew deadline ({:?}): {why}",
                    self.config.renew_deadline
                ));
            }
            tracing::warn!(lease = %self.lease(), %why, "leader election: renewal failed; retrying");
        }
    }

    fn lost(&self, why: String) -> LeaderElectionError {
        LeaderElectionError::Lost {
            namespace: self.config.lease_namespace.clone(),
            name: self.config.lease_name.clone(),
            identity: self.config.identity.clone(),
            why,
        }
    }

    /// client-go's `tryAcquireOrRenew`: read the Lease, and write it holding it when
    /// it is free, expired or ours, guarded by the `resourceVersion` read.
    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        // The seconds were checked by `validate`.
        let seconds = lease_seconds(self.config.lease_duration).unwrap_or(i32::MAX);
        let sent = Instant::now();
        let now = MicroTime(Timestamp::now());
        let Some(mut lease) = self.api.get_opt(&self.config.lease_name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.lease_name.clone()),
                    namespace: Some(self.config.lease_namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Held { sent }),
                Err(error) if is_conflict(&error) => Ok(Attempt::Conflict),
                Err(error) => Err(error),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let seen_at = match &self.observed {
            Some(observed) if observed.spec == spec => observed.at,
            _ => {
                self.observed = Some(Observed {
                    spec: spec.clone(),
                    at: Instant::now(),
                });
                Instant::now()
            }
        };
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let ours = holder.as_deref() == Some(self.config.identity.as_str());
        if let (Some(holder), false) = (&holder, ours) {
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.config.lease_duration, Duration::from_secs);
            if seen_at + duration > Instant::now() {
                return Ok(Attempt::Other(holder.clone()));
            }
        }
        let transitions = spec.lease_transitions.unwrap_or(0);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(seconds),
            acquire_time: if ours {
                spec.acquire_time.clone()
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if ours {
                transitions
            } else {
                transitions.saturating_add(1)
            }),
            ..spec
        });
        // `replace` sends the resourceVersion read above: a write in between is a 409.
        match self
            .api
            .replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observed = written.spec.map(|spec| Observed {
                    spec,
                    at: Instant::now(),
                });
                Ok(Attempt::Held { sent })
            }
            Err(error) if is_conflict(&error) => Ok(Attempt::Conflict),
            Err(error) => Err(error),
        }
    }

    /// Gives the Lease up if it is still ours (guarded like every write); failures are
    /// logged: the Lease then expires after its duration.
    async fn release(&mut self) {
        let result: Result<bool, kube::Error> = async {
            let Some(mut lease) = self.api.get_opt(&self.config.lease_name).await? else {
                return Ok(false);
            };
            let spec = lease.spec.clone().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(false);
            }
            let now = MicroTime(Timestamp::now());
            lease.spec = Some(LeaseSpec {
                holder_identity: None,
                lease_duration_seconds: Some(1),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                ..spec
            });
            self.api
                .replace(&self.config.lease_name, &PostParams::default(), &lease)
                .await
                .map(|_| true)
        }
        .await;
        match result {
            Ok(true) => {
                tracing::info!(lease = %self.lease(), "leader election: released the Lease")
            }
            Ok(false) => {}
            Err(error) => tracing::warn!(
                lease = %self.lease(),
                %error,
                "leader election: cannot release the Lease; it expires after its duration"
            ),
        }
    }
}

/// 409 Conflict (a stale `resourceVersion`) or 409 AlreadyExists (a create raced).
fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// A value in [0, 1).
fn unit_random() -> f64 {
    (random_u64() >> 11) as f64 / (1u64 << 53) as f64
}
