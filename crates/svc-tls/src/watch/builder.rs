//! The one builder for what follows a watched Secret on every handshake: the identity
//! resolver ([`IdentityResolverBuilder`](crate::identity::IdentityResolverBuilder)) and
//! the trust verifier ([`TrustVerifierBuilder`](crate::trust::TrustVerifierBuilder))
//! take the same settings (sync timeout, crypto provider, recorder, clock, warning
//! period, watch-failure threshold), so they share them here. What differs, how each
//! half builds itself over the watched Secret, is [`BuiltFromSecret::from_builder`],
//! implemented beside each half's Secret adapter: the builder's methods are all here.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;

use super::secret::DEFAULT_SYNC_TIMEOUT;
use crate::last_good::{
    DEFAULT_WARNING_PERIOD, DEFAULT_WATCH_FAILURE_THRESHOLD, MonotonicClock, Settings, SystemClock,
};
use crate::origin::SecretRef;

/// Seals [`BuiltFromSecret`]: only this crate's resolver and verifier implement it.
pub(crate) mod sealed {
    pub trait Sealed {}
}

/// What a [`WatchedSecretBuilder`] builds: the identity resolver or the trust
/// verifier. Sealed.
pub trait BuiltFromSecret: sealed::Sealed + Sized {
    /// The recorder that receives its state changes.
    type Recorder: ?Sized + Send + Sync + fmt::Debug + 'static;

    /// Why it could not be built (naming the Secret).
    type Error: std::error::Error + From<super::SourceError> + Send + Sync + 'static;

    /// Builds it over the builder's Secret: what [`WatchedSecretBuilder::build`] runs.
    fn from_builder(
        builder: WatchedSecretBuilder<Self>,
    ) -> impl Future<Output = Result<Self, Self::Error>> + Send;

    /// The recorder used when none is set (records nothing).
    fn no_recorder() -> Arc<Self::Recorder>;

    /// Whether it reads the Secret as a CA only (a shared watch then never caches the
    /// Secret's `tls.key`).
    const TRUST_ONLY: bool = false;
}

/// What keeps its last good value only for a while once its Secret is gone: the
/// trust verifier (roots must not outlive a deleted CA Secret for long; an identity
/// is presented until it expires, and the peer judges it). Sealed.
pub trait LimitedWithoutSource: BuiltFromSecret {}

/// Builds a `T` ([`IdentityResolver`](crate::identity::IdentityResolver) or
/// [`TrustVerifier`](crate::trust::TrustVerifier)) over a Secret watched through a
/// `kube::Client`; see `IdentityResolver::builder` and `TrustVerifier::builder`.
pub struct WatchedSecretBuilder<T: BuiltFromSecret> {
    pub(crate) client: kube::Client,
    pub(crate) secret: SecretRef,
    pub(crate) timeout: Duration,
    pub(crate) provider: Option<Arc<CryptoProvider>>,
    pub(crate) recorder: Arc<T::Recorder>,
    pub(crate) clock: Arc<dyn MonotonicClock>,
    pub(crate) warning_period: Duration,
    pub(crate) watch_threshold: Duration,
    pub(crate) watches: Option<(super::SecretWatches, cluster_id::ClusterClient)>,
    pub(crate) max_without_source: Duration,
    built: PhantomData<fn() -> T>,
}

impl<T: BuiltFromSecret> fmt::Debug for WatchedSecretBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchedSecretBuilder")
            .field("secret", &self.secret)
            .field("timeout", &self.timeout)
            .field("warning_period", &self.warning_period)
            .field("watch_failure_threshold", &self.watch_threshold)
            .field("shared", &self.watches.is_some())
            .finish_non_exhaustive()
    }
}

impl<T: BuiltFromSecret> WatchedSecretBuilder<T> {
    /// The defaults: [`DEFAULT_SYNC_TIMEOUT`], the aws-lc-rs provider, no recorder,
    /// the system's monotonic clock, [`DEFAULT_WARNING_PERIOD`].
    pub(crate) fn new(client: kube::Client, secret: SecretRef) -> Self {
        Self {
            client,
            secret,
            timeout: DEFAULT_SYNC_TIMEOUT,
            provider: None,
            recorder: T::no_recorder(),
            clock: Arc::new(SystemClock::new()),
            warning_period: DEFAULT_WARNING_PERIOD,
            watch_threshold: DEFAULT_WATCH_FAILURE_THRESHOLD,
            watches: None,
            max_without_source: crate::last_good::DEFAULT_MAX_ROOTS_WITHOUT_SOURCE,
            built: PhantomData,
        }
    }

    /// Bound on waiting for the Secret's cache to sync (default
    /// [`DEFAULT_SYNC_TIMEOUT`], 120 s).
    pub fn sync_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The crypto provider (default:
    /// [`crypto_provider`](crate::material::crypto_provider), aws-lc-rs with a key
    /// loader that loads each key type once; the process-wide default provider is
    /// never consulted). It loads the identity's keys, or verifies server chains.
    pub fn provider(mut self, provider: Arc<CryptoProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Where state changes are recorded (default: nowhere).
    pub fn recorder(mut self, recorder: Arc<T::Recorder>) -> Self {
        self.recorder = recorder;
        self
    }

    /// The clock of the warning limiter and staleness durations (default: the
    /// system's monotonic clock). Tests use [`ManualClock`](crate::last_good::ManualClock).
    pub fn clock(mut self, clock: Arc<dyn MonotonicClock>) -> Self {
        self.clock = clock;
        self
    }

    /// At most one stale warning per this period (default one minute,
    /// [`DEFAULT_WARNING_PERIOD`]). Periods longer than
    /// [`MAX_WARNING_PERIOD`](crate::last_good::MAX_WARNING_PERIOD) (a day) are clamped
    /// to it.
    pub fn warning_period(mut self, period: Duration) -> Self {
        self.warning_period = period;
        self
    }

    /// Shares the Secret's watch, cache and loads through `watches` (for example
    /// [`SecretWatches::process`](super::SecretWatches::process)), reading the Secret
    /// from `cluster` with its credentials (the registry keys its watches by cluster,
    /// credential and Secret, so the caller says which cluster and as whom; the
    /// builder's own client is then not used): the first build for the Secret of that
    /// cluster and credential starts its watch, every later one returns at once
    /// without an API request. Without it the build starts a watch of
    /// its own, which lives as long as what it builds. With a
    /// [`provider`](Self::provider) of its own the build shares the watch but loads
    /// keys into a cache of its own.
    pub fn watches(
        mut self,
        watches: &super::SecretWatches,
        cluster: &cluster_id::ClusterClient,
    ) -> Self {
        self.watches = Some((watches.clone(), cluster.clone()));
        self
    }

    /// How long the Secret's watch may fail before a (rate-limited) warning says that
    /// rotations are not being seen (default one minute,
    /// [`DEFAULT_WATCH_FAILURE_THRESHOLD`]).
    pub fn watch_failure_threshold(mut self, threshold: Duration) -> Self {
        self.watch_threshold = threshold;
        self
    }

    /// Starts the Secret's watch (or joins the registry's, see
    /// [`watches`](Self::watches)) and waits, at most the sync timeout, for it to
    /// sync and for the Secret to hold what `T` serves: an identity, or at least one
    /// usable root.
    ///
    /// Fails with an error naming the Secret when it is missing or malformed, when
    /// the watch is refused, or on timeout. An identity whose certificate is expired
    /// or not yet valid does not fail it: it is served, logged at `ERROR`, reported to
    /// the recorder and marked in
    /// [`IdentityState::validity`](crate::identity::IdentityState::validity), and
    /// replaced as soon as the Secret is renewed. Cancel-safe: dropping the future
    /// stops the watch.
    pub async fn build(self) -> Result<T, T::Error> {
        T::from_builder(self).await
    }

    /// The settings of the last-good core.
    pub(crate) fn settings(&self) -> Settings {
        Settings {
            clock: self.clock.clone(),
            warning_period: self.warning_period,
            watch_threshold: self.watch_threshold,
            max_without_source: self.max_without_source,
        }
    }

    /// The Secret's shared entry when the build goes through a registry, with whether
    /// the build loads keys with a provider of its own (then it keeps its own cache).
    pub(crate) async fn shared(
        &self,
    ) -> Result<Option<(super::SharedSecret, bool)>, super::SourceError> {
        match &self.watches {
            Some((watches, cluster)) => {
                let shared = if T::TRUST_ONLY {
                    watches
                        .watch_trust(cluster, &self.secret, self.timeout)
                        .await?
                } else {
                    watches.watch(cluster, &self.secret, self.timeout).await?
                };
                Ok(Some((shared, self.provider.is_some())))
            }
            None => Ok(None),
        }
    }

    /// The provider set, or the default one.
    pub(crate) fn provider_or_default(&self) -> Arc<CryptoProvider> {
        self.provider
            .clone()
            .unwrap_or_else(|| Arc::new(crate::material::crypto_provider()))
    }
}

impl<T: LimitedWithoutSource> WatchedSecretBuilder<T> {
    /// How long the last good roots stay in use once the CA Secret is deleted or
    /// unreadable (no usable root), before every server is refused (default
    /// [`DEFAULT_MAX_ROOTS_WITHOUT_SOURCE`](crate::last_good::DEFAULT_MAX_ROOTS_WITHOUT_SOURCE),
    /// one day). A watch that is only down (the API server unreachable) keeps them.
    pub fn max_roots_without_source(mut self, limit: Duration) -> Self {
        self.max_without_source = limit;
        self
    }
}
