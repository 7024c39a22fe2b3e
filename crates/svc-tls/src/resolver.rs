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
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use rustls::SignatureScheme;
use rustls::client::ResolvesClientCert;
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;

use crate::identity_source::{IdentitySource, SecretIdentitySource};
use crate::material::{Identity, MaterialError};
use crate::options::SecretRef;
use crate::report::{
    DEFAULT_WARNING_PERIOD, IdentityState, MonotonicClock, NoopRecorder, StaleWarning,
    StateRecorder, SystemClock, WarningLimiter,
};
use crate::source::{DEFAULT_SYNC_TIMEOUT, SecretSource, SourceError};

/// Why an identity resolver could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// The Secret's cache could not be started.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The cache synced, and the Secret does not exist.
    #[error("client certificate Secret {secret} not found")]
    NotFound {
        /// The Secret.
        secret: SecretRef,
    },
    /// The Secret exists and does not hold a usable identity (the error names the
    /// Secret and the data key).
    #[error("client certificate {0}")]
    Material(#[source] MaterialError),
}

/// Why one handshake-time reload failed (the last good identity was served instead).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    /// The Secret is not in the cache (deleted, or not yet recreated).
    #[error("client certificate Secret {secret} not found")]
    NotFound {
        /// The Secret.
        secret: SecretRef,
    },
    /// The Secret does not hold a usable identity (the error names the Secret).
    #[error("client certificate {0}")]
    Material(#[source] MaterialError),
}

/// The identity being served and when it was loaded.
struct Served {
    identity: Identity,
    loaded_at: SystemTime,
    loaded_mono: Duration,
}

struct Inner {
    source: Arc<dyn IdentitySource>,
    current: ArcSwap<Served>,
    failures: AtomicU64,
    stale: AtomicBool,
    warnings: WarningLimiter,
    recorder: Arc<dyn StateRecorder>,
    clock: Arc<dyn MonotonicClock>,
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

/// Builds an [`IdentityResolver`]; see [`IdentityResolver::builder`].
pub struct IdentityResolverBuilder {
    client: kube::Client,
    secret: SecretRef,
    timeout: Duration,
    provider: Option<Arc<CryptoProvider>>,
    recorder: Arc<dyn StateRecorder>,
    clock: Arc<dyn MonotonicClock>,
    warning_period: Duration,
}

impl fmt::Debug for IdentityResolverBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdentityResolverBuilder")
            .field("secret", &self.secret)
            .field("timeout", &self.timeout)
            .field("warning_period", &self.warning_period)
            .finish_non_exhaustive()
    }
}

impl IdentityResolverBuilder {
    /// Bound on waiting for the cache to sync (default 30 s).
    pub fn sync_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The crypto provider that loads keys (default:
    /// [`crypto_provider`](crate::material::crypto_provider): aws-lc-rs with a key
    /// loader that loads each key type once; the process-wide default provider is
    /// never consulted).
    pub fn provider(mut self, provider: Arc<CryptoProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Where state changes are recorded (default: nowhere).
    pub fn recorder(mut self, recorder: Arc<dyn StateRecorder>) -> Self {
        self.recorder = recorder;
        self
    }

    /// The clock of the warning limiter and staleness durations (default: the system's
    /// monotonic clock). Tests use [`crate::report::ManualClock`].
    pub fn clock(mut self, clock: Arc<dyn MonotonicClock>) -> Self {
        self.clock = clock;
        self
    }

    /// At most one stale-identity warning per this period (default one minute).
    pub fn warning_period(mut self, period: Duration) -> Self {
        self.warning_period = period;
        self
    }

    /// Starts the Secret's watch and waits, at most the sync timeout, for it to sync and
    /// for the Secret to hold a valid identity.
    ///
    /// Fails with an error naming the Secret when it is missing or malformed, when the
    /// watch is refused, or on timeout. Cancel-safe: dropping the future stops the watch.
    pub async fn build(self) -> Result<IdentityResolver, IdentityError> {
        let source = SecretSource::watch(self.client, self.secret, self.timeout).await?;
        let provider = self
            .provider
            .unwrap_or_else(|| Arc::new(crate::material::crypto_provider()));
        IdentityResolver::from_source(
            source,
            provider,
            self.recorder,
            self.clock,
            self.warning_period,
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
        IdentityResolverBuilder {
            client,
            secret,
            timeout: DEFAULT_SYNC_TIMEOUT,
            provider: None,
            recorder: Arc::new(NoopRecorder),
            clock: Arc::new(SystemClock::new()),
            warning_period: DEFAULT_WARNING_PERIOD,
        }
    }

    /// A resolver over an already synced Secret source: the Secret must hold a valid
    /// identity now.
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

    /// A resolver over any [`IdentitySource`]: it must hold a valid identity now.
    pub fn from_identity_source(
        source: Arc<dyn IdentitySource>,
        recorder: Arc<dyn StateRecorder>,
        clock: Arc<dyn MonotonicClock>,
        warning_period: Duration,
    ) -> Result<Self, IdentityError> {
        let identity = source.current().map_err(|error| match error {
            ReloadError::NotFound { secret } => IdentityError::NotFound { secret },
            ReloadError::Material(error) => IdentityError::Material(error),
        })?;
        let loaded_at = SystemTime::now();
        recorder.reloaded(source.origin(), &identity, loaded_at);
        let served = Served {
            identity,
            loaded_at,
            loaded_mono: clock.elapsed(),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                source,
                current: ArcSwap::from_pointee(served),
                failures: AtomicU64::new(0),
                stale: AtomicBool::new(false),
                warnings: WarningLimiter::new(warning_period, clock.clone()),
                recorder,
                clock,
            }),
        })
    }

    /// Reads the identity from the source now, as a handshake does, and returns the
    /// identity to present: the fresh one, or on failure the last good one.
    pub fn reload(&self) -> Identity {
        let inner = &*self.inner;
        let origin = inner.source.origin();
        match inner.source.current() {
            Ok(identity) => {
                let loaded_at = SystemTime::now();
                inner.current.store(Arc::new(Served {
                    identity: identity.clone(),
                    loaded_at,
                    loaded_mono: inner.clock.elapsed(),
                }));
                if inner.stale.swap(false, Ordering::AcqRel) {
                    tracing::info!(
                        source = %origin,
                        serial = %identity.serial_hex(),
                        "client certificate reloaded again after failures"
                    );
                }
                inner.recorder.reloaded(origin, &identity, loaded_at);
                identity
            }
            Err(error) => {
                let failures = inner.failures.fetch_add(1, Ordering::AcqRel) + 1;
                inner.stale.store(true, Ordering::Release);
                let served = inner.current.load_full();
                inner.recorder.reload_failed(origin, &error, failures);
                if let Some(suppressed) = inner.warnings.admit() {
                    let stale_for = inner.clock.elapsed().saturating_sub(served.loaded_mono);
                    let warning = StaleWarning {
                        source: origin,
                        error: &error,
                        serving_serial_hex: served.identity.serial_hex().to_string(),
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
                }
                served.identity.clone()
            }
        }
    }

    /// The identity currently served (the last good one), without reloading.
    pub fn current(&self) -> Identity {
        self.inner.current.load().identity.clone()
    }

    /// A snapshot of the visible state: serial, expiry, last good reload, failures.
    pub fn state(&self) -> IdentityState {
        let served = self.inner.current.load();
        IdentityState {
            source: self.inner.source.origin().clone(),
            serial_hex: served.identity.serial_hex().to_string(),
            not_after: served.identity.not_after(),
            last_good_reload: served.loaded_at,
            failures: self.inner.failures.load(Ordering::Acquire),
            stale: self.inner.stale.load(Ordering::Acquire),
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
