//! The handshake-time client-certificate resolver.
//!
//! [`IdentityResolver`] implements rustls's [`ResolvesClientCert`]. On **every**
//! handshake it asks its [`IdentitySource`] (the credential-source seam, see
//! [`crate::identity_source`]) for the identity it holds now. Today that is the
//! [`SecretIdentitySource`]: the client-certificate Secret from the watch cache (a sync
//! map read and an `Arc` clone), loaded through an
//! [`IdentityCache`](crate::material::IdentityCache) that reuses the previous load when
//! `tls.crt` and `tls.key` are byte-for-byte unchanged (time checks still run every
//! handshake), so an unchanged Secret costs a byte comparison and any change is fully
//! loaded on the very next handshake. No lock is held while loading and nothing on this
//! path does I/O. Each handshake presents one whole identity built from one snapshot of
//! the source: a certificate and a key from two different versions cannot be mixed.
//!
//! When a reload fails after a good one (malformed Secret, wrong key, deleted Secret),
//! the last good identity is served, the failure is counted, and a warning is logged at
//! most once per period (a minute by default) with how many failures were suppressed
//! and how long the stale identity has been served (see [`crate::report`]). A deleted
//! Secret keeps the last good identity; a recreated one is used on the next handshake.
//!
//! The last good identity lives in an [`ArcSwap`] slot: handshakes swap a pointer,
//! nothing waits on anything.
//!
//! # Pooled connections
//! The identity is chosen during the TLS handshake. An established connection (for
//! example one kept alive in `reqwest`'s pool) keeps the identity it was opened with
//! until it is closed; only new connections present a rotated identity. TLS session
//! resumption is disabled on configurations built by [`crate::client`], because a
//! resumed handshake does not ask the resolver at all.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::{ArcSwap, Guard};
use rustls::SignatureScheme;
use rustls::client::ResolvesClientCert;
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;

use crate::builder::WatchedSecretBuilder;
pub use crate::identity_source::ReloadError;
use crate::identity_source::{IdentitySource, SecretIdentitySource};
use crate::material::Identity;
use crate::material::MaterialErrorKind;
use crate::report::{
    CertificateValidity, DEFAULT_WATCH_FAILURE_THRESHOLD, IdentityState, InvalidIdentity,
    MonotonicClock, Recovery, StaleWarning, StateRecorder, WarningLimiter, WatchHealthState,
    time_text,
};
use crate::secret_ref::SecretRef;
use crate::source::{SecretSource, SourceError};

/// Why an identity resolver could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// The Secret's cache could not be started.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The source holds no usable identity now: the Secret does not exist or is
    /// malformed (naming the Secret and the data key), or the SVID is unusable; the
    /// same reasons a handshake-time reload fails for.
    #[error(transparent)]
    Unusable(#[from] ReloadError),
}

/// The identity being served, the version of the source it was read from, and when
/// it was loaded.
struct Served {
    identity: Identity,
    version: Option<u64>,
    loaded_at: SystemTime,
    loaded_mono: Duration,
}

/// How often, at most, a handshake looks at the source's watch health.
const HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(1);

struct Inner {
    source: Arc<dyn IdentitySource>,
    current: ArcSwap<Served>,
    failures: AtomicU64,
    stale: AtomicBool,
    /// Failed reloads in the current episode (since the last good reload).
    episode_failures: AtomicU64,
    /// Monotonic nanoseconds of the episode's first failure.
    episode_start: AtomicU64,
    /// Stale-identity warnings and invalid-identity errors.
    warnings: WarningLimiter,
    /// Recovery lines (a flapping Secret must not flood the log either).
    recoveries: WarningLimiter,
    /// Watch-failing warnings.
    watch_warnings: WarningLimiter,
    watch_threshold: Duration,
    /// Monotonic nanoseconds (plus one) when the watch was first seen failing; 0 while
    /// it is connected.
    watch_failing_since: AtomicU64,
    /// The same instant on the wall clock (nanoseconds since the epoch).
    watch_failing_since_wall: AtomicU64,
    /// Monotonic nanoseconds of the next watch-health look.
    next_health_check: AtomicU64,
    recorder: Arc<dyn StateRecorder>,
    clock: Arc<dyn MonotonicClock>,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A resolver building block that is about validity errors.
fn is_validity_error(error: &ReloadError) -> bool {
    let kind = match error {
        ReloadError::Material(e) => e.kind(),
        ReloadError::Spiffe(crate::spiffe::SpiffeError::Svid(e)) => e.kind(),
        _ => return false,
    };
    matches!(
        kind,
        MaterialErrorKind::CertificateExpired { .. }
            | MaterialErrorKind::CertificateNotYetValid { .. }
    )
}

fn to_identity_error(error: ReloadError) -> IdentityError {
    IdentityError::Unusable(error)
}

/// A rustls client-certificate resolver that reloads the identity from a watched Secret
/// on every handshake. Cheap to clone and share (an `Arc`): build it once at start-up
/// and hand clones to every client configuration.
#[derive(Clone)]
pub struct IdentityResolver {
    inner: Arc<Inner>,
}

impl fmt::Debug for IdentityResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Public facts only, never key material.
        let served = self.inner.current.load();
        f.debug_struct("IdentityResolver")
            .field("source", self.inner.source.origin())
            .field("serial", &served.identity.serial_hex())
            .field("failures", &self.inner.failures.load(Ordering::Relaxed))
            .finish()
    }
}

impl crate::builder::sealed::Sealed for IdentityResolver {}
impl crate::builder::Watched for IdentityResolver {
    type Recorder = dyn StateRecorder;
    fn no_recorder() -> Arc<Self::Recorder> {
        Arc::new(crate::report::NoopRecorder)
    }
}

/// Builds an [`IdentityResolver`]; see [`IdentityResolver::builder`]. The settings
/// are shared with the trust verifier's builder ([`WatchedSecretBuilder`]).
pub type IdentityResolverBuilder = WatchedSecretBuilder<IdentityResolver>;

impl WatchedSecretBuilder<IdentityResolver> {
    /// How long the Secret's watch may fail before a (rate-limited) warning says that
    /// rotations are not being seen (default one minute,
    /// [`DEFAULT_WATCH_FAILURE_THRESHOLD`]).
    pub fn watch_failure_threshold(mut self, threshold: Duration) -> Self {
        self.watch_threshold = threshold;
        self
    }

    /// Starts the Secret's watch and waits, at most the sync timeout, for it to sync and
    /// for the Secret to hold an identity.
    ///
    /// Fails with an error naming the Secret when it is missing or malformed, when the
    /// watch is refused, or on timeout. A certificate that is expired or not yet valid
    /// does not fail it: it is served, logged at `ERROR`, reported to the recorder and
    /// marked in [`IdentityState::validity`], and replaced as soon as the Secret is
    /// renewed. Cancel-safe: dropping the future stops the watch.
    pub async fn build(self) -> Result<IdentityResolver, IdentityError> {
        let provider = self.provider_or_default();
        let source = SecretSource::watch(self.client, self.secret, self.timeout).await?;
        IdentityResolver::assemble(
            Arc::new(SecretIdentitySource::new(source, provider)),
            self.recorder,
            self.clock,
            self.warning_period,
            self.watch_threshold,
        )
    }
}

impl IdentityResolver {
    /// A builder for a resolver of the identity in `secret`, watched through `client`.
    ///
    /// ```no_run
    /// # async fn f(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use svc_tls::options::SecretRef;
    /// use svc_tls::resolver::IdentityResolver;
    ///
    /// let secret = SecretRef {
    ///     namespace: "unikorn".into(),
    ///     name: "unikorn-region-client-certificate".into(),
    /// };
    /// let resolver = IdentityResolver::builder(client, secret)
    ///     .sync_timeout(std::time::Duration::from_secs(10))
    ///     .build()
    ///     .await?;
    /// println!("presenting serial {}", resolver.state().serial_hex);
    /// # Ok(()) }
    /// ```
    pub fn builder(client: kube::Client, secret: SecretRef) -> IdentityResolverBuilder {
        WatchedSecretBuilder::new(client, secret)
    }

    /// A resolver over an already synced Secret source: the Secret must hold an
    /// identity now (one outside its validity period is served and reported, see
    /// [`IdentityResolverBuilder::build`]).
    pub fn from_source(
        source: SecretSource,
        provider: Arc<CryptoProvider>,
        recorder: Arc<dyn StateRecorder>,
        clock: Arc<dyn MonotonicClock>,
        warning_period: Duration,
    ) -> Result<Self, IdentityError> {
        Self::from_identity_source(
            Arc::new(SecretIdentitySource::new(source, provider)),
            recorder,
            clock,
            warning_period,
        )
    }

    /// A resolver over any [`IdentitySource`]: it must hold an identity now (one
    /// outside its validity period is served and reported, see
    /// [`IdentityResolverBuilder::build`]).
    pub fn from_identity_source(
        source: Arc<dyn IdentitySource>,
        recorder: Arc<dyn StateRecorder>,
        clock: Arc<dyn MonotonicClock>,
        warning_period: Duration,
    ) -> Result<Self, IdentityError> {
        Self::assemble(
            source,
            recorder,
            clock,
            warning_period,
            DEFAULT_WATCH_FAILURE_THRESHOLD,
        )
    }

    fn assemble(
        source: Arc<dyn IdentitySource>,
        recorder: Arc<dyn StateRecorder>,
        clock: Arc<dyn MonotonicClock>,
        warning_period: Duration,
        watch_threshold: Duration,
    ) -> Result<Self, IdentityError> {
        let (identity, version, invalid) = match source.current_versioned() {
            Ok((identity, version)) => (identity, version, false),
            // Missing and malformed Secrets stop start-up; a certificate that is only
            // outside its validity period does not (see docs/decisions.md).
            Err(error) if is_validity_error(&error) => {
                let identity = source
                    .current_ignoring_validity()
                    .map_err(to_identity_error)?;
                (identity, None, true)
            }
            Err(error) => return Err(to_identity_error(error)),
        };
        let loaded_at = SystemTime::now();
        recorder.reloaded(source.origin(), &identity, loaded_at);
        let served = Served {
            identity,
            version,
            loaded_at,
            loaded_mono: clock.elapsed(),
        };
        let resolver = Self {
            inner: Arc::new(Inner {
                source,
                current: ArcSwap::from_pointee(served),
                failures: AtomicU64::new(0),
                stale: AtomicBool::new(false),
                episode_failures: AtomicU64::new(0),
                episode_start: AtomicU64::new(0),
                warnings: WarningLimiter::new(warning_period, clock.clone()),
                recoveries: WarningLimiter::new(warning_period, clock.clone()),
                watch_warnings: WarningLimiter::new(warning_period, clock.clone()),
                watch_threshold,
                watch_failing_since: AtomicU64::new(0),
                watch_failing_since_wall: AtomicU64::new(0),
                next_health_check: AtomicU64::new(0),
                recorder,
                clock,
            }),
        };
        if invalid {
            resolver.report_invalid_at_start();
        }
        Ok(resolver)
    }

    /// The start-up report of a certificate outside its validity period: one ERROR
    /// (it takes the limiter's slot, so the failing handshakes that follow within the
    /// period do not repeat it) and a recorder event.
    fn report_invalid_at_start(&self) {
        let inner = &*self.inner;
        let served = inner.current.load();
        let identity = &served.identity;
        let validity = CertificateValidity::of(identity, SystemTime::now());
        let _ = inner.warnings.admit();
        tracing::error!(
            source = %inner.source.origin(),
            serial = %identity.serial_hex(),
            not_before = %time_text(identity.not_before()),
            not_after = %time_text(identity.not_after()),
            validity = %validity,
            "client certificate is {validity} at start-up; starting anyway and presenting it \
             (peers will refuse it) until the Secret is renewed, which is picked up on the \
             next handshake"
        );
        inner.recorder.invalid_identity(&InvalidIdentity {
            source: inner.source.origin(),
            serial_hex: identity.serial_hex(),
            validity,
            reload_error: None,
            suppressed: 0,
        });
    }

    /// Reads the identity from the source now, as a handshake does, and returns the
    /// identity to present: the fresh one, or on failure the last good one.
    ///
    /// The served slot is written only when the identity changed, and never with an
    /// identity read from an older version of the source than the one served.
    pub fn reload(&self) -> Identity {
        let identity = match self.inner.source.current_versioned() {
            Ok((identity, version)) => self.serve(identity, version),
            Err(error) => self.failed(error),
        };
        self.check_watch_health();
        identity
    }

    /// A successful read: present it, installing it if it is new.
    fn serve(&self, identity: Identity, version: Option<u64>) -> Identity {
        let inner = &*self.inner;
        let unchanged = Arc::ptr_eq(
            inner.current.load().identity.certified_key(),
            identity.certified_key(),
        );
        if unchanged {
            // The common path: nothing written, nothing allocated.
            if inner.stale.load(Ordering::Acquire) {
                self.recovered(&identity);
            }
            return identity;
        }
        let loaded_at = SystemTime::now();
        let new = Arc::new(Served {
            identity: identity.clone(),
            version,
            loaded_at,
            loaded_mono: inner.clock.elapsed(),
        });
        let mut current = inner.current.load_full();
        loop {
            if Arc::ptr_eq(current.identity.certified_key(), identity.certified_key()) {
                // Another handshake installed the same identity meanwhile.
                break;
            }
            if let (Some(new_version), Some(served_version)) = (version, current.version)
                && new_version < served_version
            {
                // This handshake read an older snapshot than the one served: present
                // the newer identity and leave the slot alone.
                return current.identity.clone();
            }
            let previous = inner.current.compare_and_swap(&current, new.clone());
            if Arc::ptr_eq(&*previous, &current) {
                inner
                    .recorder
                    .reloaded(inner.source.origin(), &identity, loaded_at);
                break;
            }
            current = Guard::into_inner(previous);
        }
        if inner.stale.load(Ordering::Acquire) {
            self.recovered(&identity);
        }
        identity
    }

    /// The end of an episode of failures: one (rate-limited) line with its failure
    /// count and duration; the warning limiter's suppressed count is dropped.
    fn recovered(&self, identity: &Identity) {
        let inner = &*self.inner;
        if !inner.stale.swap(false, Ordering::AcqRel) {
            return;
        }
        let failures = inner.episode_failures.swap(0, Ordering::AcqRel);
        let started = Duration::from_nanos(inner.episode_start.load(Ordering::Acquire));
        let duration = inner.clock.elapsed().saturating_sub(started);
        inner.warnings.end_episode();
        if let Some(suppressed) = inner.recoveries.admit() {
            let origin = inner.source.origin();
            tracing::info!(
                source = %origin,
                serial = %identity.serial_hex(),
                failures,
                episode_secs = duration.as_secs(),
                suppressed,
                "client certificate reloaded again after {failures} failed reloads over {}s \
                 ({suppressed} earlier recoveries not logged)",
                duration.as_secs(),
            );
            inner.recorder.recovered(&Recovery {
                source: origin,
                serial_hex: identity.serial_hex(),
                failures,
                duration,
            });
        }
    }

    /// A failed read: count it, report it (rate-limited), present the last good identity.
    fn failed(&self, error: ReloadError) -> Identity {
        let inner = &*self.inner;
        let origin = inner.source.origin();
        let failures = inner.failures.fetch_add(1, Ordering::AcqRel) + 1;
        if !inner.stale.swap(true, Ordering::AcqRel) {
            // A new episode.
            inner
                .episode_start
                .store(nanos(inner.clock.elapsed()), Ordering::Release);
            inner.episode_failures.store(0, Ordering::Release);
        }
        inner.episode_failures.fetch_add(1, Ordering::AcqRel);
        let served = inner.current.load_full();
        inner.recorder.reload_failed(origin, &error, failures);
        if let Some(suppressed) = inner.warnings.admit() {
            let identity = &served.identity;
            let validity = CertificateValidity::of(identity, SystemTime::now());
            if validity.is_valid() {
                let stale_for = inner.clock.elapsed().saturating_sub(served.loaded_mono);
                let warning = StaleWarning {
                    source: origin,
                    error: &error,
                    serving_serial_hex: identity.serial_hex().to_string(),
                    stale_for,
                    suppressed,
                };
                tracing::warn!(
                    source = %origin,
                    error = %error,
                    serial = %warning.serving_serial_hex,
                    stale_for_secs = stale_for.as_secs(),
                    suppressed,
                    "client certificate reload failed; serving the last good identity \
                     (stale for {}s, {} more failures suppressed since the last warning)",
                    stale_for.as_secs(),
                    suppressed,
                );
                inner.recorder.stale_warning(&warning);
            } else {
                // Not the generic stale warning: the identity served is itself refused
                // by every peer.
                tracing::error!(
                    source = %origin,
                    error = %error,
                    serial = %identity.serial_hex(),
                    not_before = %time_text(identity.not_before()),
                    not_after = %time_text(identity.not_after()),
                    validity = %validity,
                    suppressed,
                    "client certificate reload failed and the identity served is {validity}: \
                     peers refuse it until the Secret holds a valid certificate \
                     ({suppressed} more failures suppressed since the last report)",
                );
                inner.recorder.invalid_identity(&InvalidIdentity {
                    source: origin,
                    serial_hex: identity.serial_hex(),
                    validity,
                    reload_error: Some(&error),
                    suppressed,
                });
            }
        }
        served.identity.clone()
    }

    /// At most once per [`HEALTH_CHECK_INTERVAL`] (one clock read and one atomic load
    /// otherwise), looks at the source's watch and reports it.
    fn check_watch_health(&self) {
        let inner = &*self.inner;
        let now = inner.clock.elapsed();
        let now_nanos = nanos(now);
        let next = inner.next_health_check.load(Ordering::Relaxed);
        if now_nanos < next {
            return;
        }
        let claimed = inner.next_health_check.compare_exchange(
            next,
            now_nanos.saturating_add(nanos(HEALTH_CHECK_INTERVAL)),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
        if claimed.is_ok() {
            self.observe_watch(now, true);
        }
    }

    /// The watch's health now; tracks since when it fails, and with `report` logs and
    /// records the (rate-limited) warning and the recovery.
    fn observe_watch(&self, now: Duration, report: bool) -> Option<WatchHealthState> {
        let inner = &*self.inner;
        let health = inner.source.health()?;
        let origin = inner.source.origin();
        let since = inner.watch_failing_since.load(Ordering::Acquire);
        if health.connected {
            if since != 0
                && inner
                    .watch_failing_since
                    .compare_exchange(since, 0, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                let failed_for = now.saturating_sub(Duration::from_nanos(since - 1));
                inner.watch_warnings.end_episode();
                tracing::info!(
                    source = %origin,
                    failed_for_secs = failed_for.as_secs(),
                    "the watch of the client certificate's source receives changes again \
                     (it failed for {}s)",
                    failed_for.as_secs(),
                );
                inner.recorder.watch_recovered(origin, failed_for);
            }
            return Some(WatchHealthState {
                connected: true,
                last_error: None,
                failing_since: None,
            });
        }
        let since = if since == 0 {
            let mine = nanos(now).saturating_add(1);
            match inner.watch_failing_since.compare_exchange(
                0,
                mine,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    let wall = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, nanos);
                    inner
                        .watch_failing_since_wall
                        .store(wall, Ordering::Release);
                    mine
                }
                Err(other) => other,
            }
        } else {
            since
        };
        let failing_for = now.saturating_sub(Duration::from_nanos(since - 1));
        let wall = inner.watch_failing_since_wall.load(Ordering::Acquire);
        let state = WatchHealthState {
            connected: false,
            last_error: health.last_error,
            failing_since: Some(UNIX_EPOCH + Duration::from_nanos(wall)),
        };
        if report
            && failing_for >= inner.watch_threshold
            && let Some(suppressed) = inner.watch_warnings.admit()
        {
            tracing::warn!(
                source = %origin,
                error = state.last_error.as_deref().unwrap_or("none"),
                failing_for_secs = failing_for.as_secs(),
                suppressed,
                "the watch of the client certificate's source has been failing for {}s: \
                 a renewed certificate would not be seen; presenting the identity last seen",
                failing_for.as_secs(),
            );
            inner.recorder.watch_failing(origin, &state, failing_for);
        }
        Some(state)
    }

    /// The identity currently served (the last good one), without reloading.
    pub fn current(&self) -> Identity {
        self.inner.current.load().identity.clone()
    }

    /// A snapshot of the visible state: serial, expiry, last good reload, failures,
    /// whether the certificate is valid now, and the health of the source's watch.
    pub fn state(&self) -> IdentityState {
        let served = self.inner.current.load();
        IdentityState {
            source: self.inner.source.origin().clone(),
            serial_hex: served.identity.serial_hex().to_string(),
            spiffe_id: served.identity.spiffe_id().map(str::to_owned),
            not_after: served.identity.not_after(),
            last_good_reload: served.loaded_at,
            failures: self.inner.failures.load(Ordering::Acquire),
            stale: self.inner.stale.load(Ordering::Acquire),
            validity: CertificateValidity::of(&served.identity, SystemTime::now()),
            watch: self.observe_watch(self.inner.clock.elapsed(), false),
        }
    }

    /// The source the identity is read from.
    pub fn identity_source(&self) -> &dyn IdentitySource {
        &*self.inner.source
    }

    /// The watched Secret's cache, when the identity comes from a Secret.
    pub fn secret_source(&self) -> Option<&SecretSource> {
        let source: &dyn std::any::Any = &*self.inner.source;
        source
            .downcast_ref::<SecretIdentitySource>()
            .map(SecretIdentitySource::secret_source)
    }

    /// The crypto provider keys are loaded with, when the identity comes from a
    /// Secret.
    pub fn provider(&self) -> Option<&Arc<CryptoProvider>> {
        let source: &dyn std::any::Any = &*self.inner.source;
        source
            .downcast_ref::<SecretIdentitySource>()
            .map(SecretIdentitySource::provider)
    }
}

impl ResolvesClientCert for IdentityResolver {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        // The identity is presented whatever the hints say: the peer decides.
        Some(self.reload().certified_key().clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}
