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
    /// Where a watched object is read through (`None` for a source of the caller's).
    pub(crate) reads: Option<Reads>,
    /// Whether what is built is kept in the registry entry and shared by every later
    /// build of the same object and settings (the options-based constructors).
    pub(crate) kept: bool,
}

/// Where a builder's object is read through: a watch of its own over the client
/// given to `builder`, or a registry's shared watch as a cluster's client reads it.
#[derive(Clone)]
pub(crate) enum Reads {
    /// A watch of its own, through this client.
    Own(kube::Client),
    /// The registry's watch, keyed by this client's cluster and credential.
    Registry(super::WatchedObjects, cluster_id::ClusterClient),
}

impl<T: BuiltFromWatch> fmt::Debug for WatchedBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchedBuilder")
            .field("object", &self.object)
            .field("settings", &self.settings)
            .field("shared", &matches!(self.reads, Some(Reads::Registry(..))))
            .finish_non_exhaustive()
    }
}

impl<T: BuiltFromWatch> WatchedBuilder<T> {
    /// The defaults: `T::Settings::default()`, the aws-lc-rs provider, no recorder,
    /// the system's monotonic clock; the object read as `reads` says.
    pub(crate) fn new(object: T::Object, reads: Option<Reads>) -> Self {
        Self {
            object,
            settings: T::Settings::default(),
            provider: None,
            recorder: T::no_recorder(),
            clock: Arc::new(SystemClock::new()),
            reads,
            kept: false,
        }
    }

    /// Built once per object and settings in the registry `watches`, reading it as
    /// `cluster` does, and shared by every later build: what the options-based
    /// constructors build (their verifier or resolver lives as long as the entry).
    pub(crate) fn kept_in(
        object: T::Object,
        watches: &super::WatchedObjects,
        cluster: &cluster_id::ClusterClient,
    ) -> Self {
        let mut builder = Self::new(
            object,
            Some(Reads::Registry(watches.clone(), cluster.clone())),
        );
        builder.kept = true;
        builder
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
    /// system's monotonic clock). Tests use `svc_tls::testing::ManualClock`.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn MonotonicClock>) -> Self {
        self.clock = clock;
        self
    }

    /// Shares the object's watch, cache and loads through `watches` (for example
    /// [`WatchedObjects::process`](super::WatchedObjects::process)), reading it from
    /// `cluster` with its credentials **instead of** the client given to `builder`:
    /// the registry keys its watches by cluster, credential and object, and runs each
    /// through a client of its own built from `cluster`'s configuration (or through
    /// `cluster`'s client when it has none), so `cluster` says which cluster and as
    /// whom, and the builder's client is dropped here. The first build for the object
    /// of that cluster and credential starts its watch, every later one returns at
    /// once without an API request. Without it the build starts a watch of its own
    /// through the builder's client, which lives as long as what it builds. With a
    /// [`provider`](Self::provider) of its own an identity build shares the watch but
    /// loads keys into a cache of its own.
    ///
    /// A builder over a source of the caller's (`source_builder`) reads no object:
    /// its build fails with an error saying so when a registry is set.
    #[must_use]
    pub fn watches(
        mut self,
        watches: &super::WatchedObjects,
        cluster: &cluster_id::ClusterClient,
    ) -> Self {
        self.reads = Some(Reads::Registry(watches.clone(), cluster.clone()));
        self
    }

    /// The built value's key in a registry entry: one per selector and settings, so
    /// that two services asking for different settings never share one.
    pub(crate) fn kept_key(&self, selector: &str) -> String {
        format!("{selector}|{:?}", self.settings)
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
