//! The roots in a PEM bundle under one key of a watched ConfigMap (trust-manager's
//! default Bundle target), and the builder that starts its watch: the ConfigMap
//! adapter of the trust seam. A service trusting a CA this way needs no access to
//! Secrets at all.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;

use super::error::TrustError;
use super::source::{ReloadError, TrustSource};
use super::verifier::TrustVerifier;
use crate::last_good::{
    DEFAULT_MAX_ROOTS_WITHOUT_SOURCE, DEFAULT_WARNING_PERIOD, DEFAULT_WATCH_FAILURE_THRESHOLD,
    MonotonicClock, NoopRecorder, ReloadRecorder, Settings, SystemClock,
};
use crate::material::{
    ConfigMapTrustCache, ConfigMapTrustError, ConfigMapTrustProblem, TrustAnchors,
};
use crate::origin::{ConfigMapRef, SourceHealth, TrustOrigin};
use crate::watch::{ConfigMapSource, DEFAULT_SYNC_TIMEOUT, configmap_resource_version};

/// The data key [`TrustVerifier::from_configmap`] callers usually name: what
/// cert-manager and a trust-manager Bundle target with `key: ca.crt` write.
pub const DEFAULT_CONFIGMAP_KEY: &str = "ca.crt";

/// The roots in the PEM bundle under one key of a watched ConfigMap: the ConfigMap
/// from the watch cache ([`ConfigMapSource`], a map read and an `Arc` clone), loaded
/// through a [`ConfigMapTrustCache`] so that unchanged bytes cost a comparison.
pub struct ConfigMapTrustSource {
    origin: TrustOrigin,
    source: ConfigMapSource,
    cache: ConfigMapTrustCache,
}

impl ConfigMapTrustSource {
    /// The roots under `key` in `source`'s ConfigMap.
    pub fn new(source: ConfigMapSource, key: impl Into<String>) -> Self {
        let key = key.into();
        Self {
            origin: TrustOrigin::ConfigMap {
                configmap: Box::new(source.configmap_ref().clone()),
                key: key.clone(),
            },
            source,
            cache: ConfigMapTrustCache::new(key),
        }
    }

    /// The watched ConfigMap's cache.
    pub fn configmap_source(&self) -> &ConfigMapSource {
        &self.source
    }

    /// How many times the bundle was parsed (unchanged bytes are not parsed again).
    pub fn full_loads(&self) -> u64 {
        self.cache.full_loads()
    }
}

impl fmt::Debug for ConfigMapTrustSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigMapTrustSource")
            .field("origin", &self.origin)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl TrustSource for ConfigMapTrustSource {
    fn origin(&self) -> &TrustOrigin {
        &self.origin
    }

    fn current(&self) -> Result<Arc<TrustAnchors>, ReloadError> {
        self.current_versioned().map(|(anchors, _)| anchors)
    }

    fn current_versioned(&self) -> Result<(Arc<TrustAnchors>, Option<u64>), ReloadError> {
        if let Some(code) = self.source.refused_now() {
            return Err(ReloadError::Refused {
                object: format!("ConfigMap {}", self.source.configmap_ref()),
                code,
            });
        }
        let Some(object) = self.source.get() else {
            return Err(ReloadError::ConfigMap(Box::new(ConfigMapTrustError::new(
                self.source.configmap_ref().clone(),
                self.cache.key(),
                ConfigMapTrustProblem::NotFound,
            ))));
        };
        let version = configmap_resource_version(&object);
        let anchors = self
            .cache
            .load(&object)
            .map_err(|e| ReloadError::ConfigMap(Box::new(e)))?;
        Ok((anchors, version))
    }

    fn health(&self) -> Option<SourceHealth> {
        Some(self.source.watch_health())
    }

    fn refused_now(&self) -> Option<u16> {
        self.source.refused_now()
    }

    fn watch_error(&self) -> Option<String> {
        self.source.last_watch_error()
    }

    fn watched_configmap(&self) -> Option<&ConfigMapSource> {
        Some(&self.source)
    }
}

/// Builds a [`TrustVerifier`] over a CA ConfigMap; see
/// [`TrustVerifier::from_configmap`]. The settings are those of the Secret builder
/// ([`TrustVerifierBuilder`](super::TrustVerifierBuilder)).
pub struct ConfigMapTrustBuilder {
    client: kube::Client,
    configmap: ConfigMapRef,
    key: String,
    timeout: Duration,
    provider: Option<Arc<CryptoProvider>>,
    recorder: Arc<dyn ReloadRecorder<TrustOrigin, TrustAnchors>>,
    clock: Arc<dyn MonotonicClock>,
    warning_period: Duration,
    watch_threshold: Duration,
    max_without_source: Duration,
}

impl fmt::Debug for ConfigMapTrustBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigMapTrustBuilder")
            .field("configmap", &self.configmap)
            .field("key", &self.key)
            .field("timeout", &self.timeout)
            .field("warning_period", &self.warning_period)
            .field("watch_failure_threshold", &self.watch_threshold)
            .field("max_roots_without_source", &self.max_without_source)
            .finish_non_exhaustive()
    }
}

impl ConfigMapTrustBuilder {
    /// Bound on waiting for the ConfigMap's cache to sync (default
    /// [`DEFAULT_SYNC_TIMEOUT`], 120 s).
    pub fn sync_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The crypto provider that verifies server chains (default
    /// [`crypto_provider`](crate::material::crypto_provider)).
    pub fn provider(mut self, provider: Arc<CryptoProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Where state changes are recorded (default: nowhere).
    pub fn recorder(
        mut self,
        recorder: Arc<dyn ReloadRecorder<TrustOrigin, TrustAnchors>>,
    ) -> Self {
        self.recorder = recorder;
        self
    }

    /// The clock of the warning limiter and staleness durations.
    pub fn clock(mut self, clock: Arc<dyn MonotonicClock>) -> Self {
        self.clock = clock;
        self
    }

    /// At most one stale warning per this period (default one minute).
    pub fn warning_period(mut self, period: Duration) -> Self {
        self.warning_period = period;
        self
    }

    /// How long the watch may fail before a (rate-limited) warning (default one
    /// minute).
    pub fn watch_failure_threshold(mut self, threshold: Duration) -> Self {
        self.watch_threshold = threshold;
        self
    }

    /// How long the last good roots stay in use once the ConfigMap is deleted or
    /// holds no usable root, before every server is refused (default one day, as for
    /// a CA Secret).
    pub fn max_roots_without_source(mut self, limit: Duration) -> Self {
        self.max_without_source = limit;
        self
    }

    /// Starts the ConfigMap's watch (one of its own, living as long as the verifier)
    /// and waits, at most the sync timeout, for it to sync and for the key to hold at
    /// least one usable root.
    ///
    /// Fails with an error naming the ConfigMap and the key when the ConfigMap is
    /// missing, lacks the key, or holds no usable certificate there
    /// ([`TrustError::Unusable`] with [`ReloadError::ConfigMap`]), when the watch is
    /// refused, or on timeout ([`TrustError::ConfigMapSource`]). Cancel-safe.
    pub async fn build(self) -> Result<TrustVerifier, TrustError> {
        let source = ConfigMapSource::watch(self.client, self.configmap, self.timeout).await?;
        let settings = Settings {
            clock: self.clock,
            warning_period: self.warning_period,
            watch_threshold: self.watch_threshold,
            max_without_source: self.max_without_source,
        };
        TrustVerifier::with_settings(
            Arc::new(ConfigMapTrustSource::new(source, self.key)),
            self.provider
                .unwrap_or_else(|| Arc::new(crate::material::crypto_provider())),
            self.recorder,
            settings,
            super::ServerAuthorization::HostName,
        )
    }
}

impl TrustVerifier {
    /// A builder for a verifier trusting the PEM bundle under `key` of the ConfigMap
    /// `configmap` (trust-manager's default Bundle target; `ca.crt` or
    /// `trust-bundle.pem`), watched through `client`. Every handshake verifies
    /// against the ConfigMap's current bundle, read from the watch cache (no I/O; a
    /// byte comparison when unchanged). No Secret is read: the service account needs
    /// `get`, `list` and `watch` on ConfigMaps in that namespace only.
    ///
    /// ```no_run
    /// # async fn f(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use svc_tls::TrustVerifier;
    /// use svc_tls::origin::ConfigMapRef;
    ///
    /// let bundle = ConfigMapRef::new("unikorn", "platform-ca-bundle");
    /// let trust = TrustVerifier::from_configmap(client, bundle, "ca.crt").build().await?;
    /// println!("trusting {} root(s)", trust.state().roots);
    /// # Ok(()) }
    /// ```
    pub fn from_configmap(
        client: kube::Client,
        configmap: ConfigMapRef,
        key: impl Into<String>,
    ) -> ConfigMapTrustBuilder {
        ConfigMapTrustBuilder {
            client,
            configmap,
            key: key.into(),
            timeout: DEFAULT_SYNC_TIMEOUT,
            provider: None,
            recorder: Arc::new(NoopRecorder),
            clock: Arc::new(SystemClock::new()),
            warning_period: DEFAULT_WARNING_PERIOD,
            watch_threshold: DEFAULT_WATCH_FAILURE_THRESHOLD,
            max_without_source: DEFAULT_MAX_ROOTS_WITHOUT_SOURCE,
        }
    }

    /// The watched CA ConfigMap's cache, when the roots come from a ConfigMap.
    pub fn configmap_source(&self) -> Option<&ConfigMapSource> {
        self.trust_source().watched_configmap()
    }
}
