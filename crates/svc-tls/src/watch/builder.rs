//! The one builder shape of what follows a watched object on every handshake: the
//! identity resolver ([`IdentityResolverBuilder`](crate::identity::IdentityResolverBuilder),
//! over a Secret) and the trust verifier
//! ([`TrustVerifierBuilder`](crate::trust::TrustVerifierBuilder), over a Secret or a
//! ConfigMap). Each half's builder holds the object it watches, its settings struct
//! ([`IdentitySettings`](crate::identity::IdentitySettings),
//! [`TrustSettings`](crate::trust::TrustSettings)) and the collaborators both take (a
//! crypto provider, a recorder, a clock, a registry); a setting is a field of the
//! half's settings struct, never a method here. How each half builds itself is
//! [`BuiltFromWatch::from_builder`], implemented beside its Secret adapter.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;

use crate::last_good::{MonotonicClock, SystemClock};

/// Seals [`BuiltFromWatch`]: only this crate's resolver and verifier implement it.
pub(crate) mod sealed {
    pub trait Sealed {}
}

/// What a [`WatchedBuilder`] builds: the identity resolver or the trust verifier.
/// Sealed.
pub trait BuiltFromWatch: sealed::Sealed + Sized {
    /// What it is built over: a Secret (the identity), a Secret or a ConfigMap
    /// ([`TrustObject`](crate::trust::TrustObject)).
    type Object: Clone + fmt::Debug + Send + Sync + 'static;

    /// Its settings struct.
    type Settings: Clone + fmt::Debug + Default + Send + Sync + 'static;

    /// The recorder that receives its state changes.
    type Recorder: ?Sized + Send + Sync + fmt::Debug + 'static;

    /// Why it could not be built (naming the object).
    type Error: std::error::Error + Send + Sync + 'static;

    /// Builds it over the builder's object: what [`WatchedBuilder::build`] runs.
    fn from_builder(
        builder: WatchedBuilder<Self>,
    ) -> impl Future<Output = Result<Self, Self::Error>> + Send;

    /// The recorder used when none is set (records nothing).
    fn no_recorder() -> Arc<Self::Recorder>;
}

/// Builds a `T` ([`IdentityResolver`](crate::identity::IdentityResolver) or
/// [`TrustVerifier`](crate::trust::TrustVerifier)) over an object watched through a
/// `kube::Client`; see `IdentityResolver::builder` and `TrustVerifier::builder`.
///
/// In the order a reader decides them: the object (given to `builder`), the
/// [`settings`](Self::settings) (timeouts and bounds, one struct per half), then the
/// collaborators: a [`registry`](Self::watches) to share the watch through, a
/// [`provider`](Self::provider), a [`recorder`](Self::recorder), a
/// [`clock`](Self::clock); then [`build`](Self::build).
pub struct WatchedBuilder<T: BuiltFromWatch> {
    pub(crate) object: T::Object,
    pub(crate) settings: T::Settings,
    pub(crate) provider: Option<Arc<CryptoProvider>>,
    pub(crate) recorder: Arc<T::Recorder>,
    pub(crate) clock: Arc<dyn MonotonicClock>,
    pub(crate) watches: Option<(super::SecretWatches, cluster_id::ClusterClient)>,
}

impl<T: BuiltFromWatch> fmt::Debug for WatchedBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchedBuilder")
            .field("object", &self.object)
            .field("settings", &self.settings)
            .field("shared", &self.watches.is_some())
            .finish_non_exhaustive()
    }
}

impl<T: BuiltFromWatch> WatchedBuilder<T> {
    /// The defaults: `T::Settings::default()`, the aws-lc-rs provider, no recorder,
    /// the system's monotonic clock, a watch of its own.
    pub(crate) fn new(object: T::Object) -> Self {
        Self {
            object,
            settings: T::Settings::default(),
            provider: None,
            recorder: T::no_recorder(),
            clock: Arc::new(SystemClock::new()),
            watches: None,
        }
    }

    /// The half's settings (default `T::Settings::default()`): the sync timeout, the
    /// warning period, the watch-failure threshold and, for trust, the bound on roots
    /// without their source.
    #[must_use]
    pub fn settings(mut self, settings: T::Settings) -> Self {
        self.settings = settings;
        self
    }

    /// The crypto provider (default:
    /// [`crypto_provider`](crate::material::crypto_provider), aws-lc-rs with a key
    /// loader that loads each key type once; the process-wide default provider is
    /// never consulted). It loads the identity's keys, or verifies server chains.
    #[must_use]
    pub fn provider(mut self, provider: Arc<CryptoProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Where state changes are recorded (default: nowhere).
    #[must_use]
    pub fn recorder(mut self, recorder: Arc<T::Recorder>) -> Self {
        self.recorder = recorder;
        self
    }

    /// The clock of the warning limiter and staleness durations (default: the
    /// system's monotonic clock). Tests use [`ManualClock`](crate::last_good::ManualClock).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn MonotonicClock>) -> Self {
        self.clock = clock;
        self
    }

    /// Shares the object's watch, cache and loads through `watches` (for example
    /// [`SecretWatches::process`](super::SecretWatches::process)), reading it from
    /// `cluster` with its credentials (the registry keys its watches by cluster,
    /// credential and object, so the caller says which cluster and as whom; the
    /// builder's own client is then not used): the first build for the object of that
    /// cluster and credential starts its watch, every later one returns at once
    /// without an API request. Without it the build starts a watch of its own, which
    /// lives as long as what it builds. With a [`provider`](Self::provider) of its own
    /// an identity build shares the watch but loads keys into a cache of its own.
    #[must_use]
    pub fn watches(
        mut self,
        watches: &super::SecretWatches,
        cluster: &cluster_id::ClusterClient,
    ) -> Self {
        self.watches = Some((watches.clone(), cluster.clone()));
        self
    }

    /// Starts the object's watch (or joins the registry's, see
    /// [`watches`](Self::watches)) and waits, at most the settings' sync timeout, for
    /// it to sync and for the object to hold what `T` serves: an identity, or at
    /// least one usable root.
    ///
    /// Fails with an error naming the object when it is missing or malformed, when
    /// the watch is refused, or on timeout. An identity whose certificate is expired
    /// or not yet valid does not fail it: it is served, logged at `ERROR`, reported to
    /// the recorder and marked in
    /// [`IdentityState::validity`](crate::identity::IdentityState::validity), and
    /// replaced as soon as the Secret is renewed. Cancel-safe: dropping the future
    /// stops the watch.
    pub async fn build(self) -> Result<T, T::Error> {
        T::from_builder(self).await
    }

    /// The provider set, or the default one.
    pub(crate) fn provider_or_default(&self) -> Arc<CryptoProvider> {
        self.provider
            .clone()
            .unwrap_or_else(|| Arc::new(crate::material::crypto_provider()))
    }
}
