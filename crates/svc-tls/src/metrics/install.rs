//! The metric families of one Prometheus registry, their installation into a
//! registry of watched Secrets, and the labels of a source.

use super::source::{SourceFamilies, SourceRecorder};
use super::{collector, peer, principal};

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use cluster_id::ClusterId;

use prometheus_client::registry::Registry;

use crate::identity::IdentityResolver;
use crate::origin::{IdentityOrigin, TrustOrigin};
use crate::trust::TrustVerifier;
use crate::watch::{WatchedObjects, observer::RegistryObserver, registry::WeakWatchedObjects};

/// Why metrics could not be installed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// The registry of watched Secrets already records into a [`Metrics`].
    #[error("metrics are already installed into this registry of watched Secrets")]
    AlreadyInstalled,
}

/// The metric families of svc-tls registered into one Prometheus [`Registry`], and the
/// resolvers and verifiers whose states are read at scrape time. Cheap to clone.
///
/// Make one per Prometheus registry ([`Metrics::new`]) and install it into each
/// registry of watched Secrets that should record into it.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) identity: SourceFamilies,
    pub(crate) trust: SourceFamilies,
    /// The one recorder of the principals signed and verified (no per-source labels).
    pub(crate) principal: Arc<principal::PrincipalRecorder>,
    /// The recorder of peer requests and the listeners' handshake families.
    pub(crate) peers: Arc<peer::PeerRequestRecorder>,
    /// The resolvers and verifiers read at scrape time, one per labelled source (the
    /// newest one built wins: they read the same source).
    pub(crate) tracked: Mutex<Tracked>,
}

/// The `cluster` label of `cluster`, empty when there is none (see
/// [`Metrics::cluster_label`]).
pub(crate) fn cluster_label(cluster: Option<&ClusterId>) -> String {
    cluster.map(ClusterId::metric_label).unwrap_or_default()
}

/// What the collector reads at scrape time, held weakly: a resolver or verifier is
/// exported while something else holds it (a client, a registry entry), and its
/// series go with it (an evicted entry's included), so the metrics neither keep a
/// registry entry alive nor grow with every cluster the process ever reached.
#[derive(Default)]
pub(crate) struct Tracked {
    pub(crate) identities: BTreeMap<SourceLabels, crate::identity::resolver::WeakIdentityResolver>,
    pub(crate) trusts: BTreeMap<SourceLabels, crate::trust::verifier::WeakTrustVerifier>,
    pub(crate) watches: Vec<WeakWatchedObjects>,
    /// The receivers whose mode in force is exported.
    pub(crate) receivers: Vec<Weak<crate::principal::ingress::ModeState>>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tracked = self
            .inner
            .tracked
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Metrics")
            .field("identities", &tracked.identities.keys().collect::<Vec<_>>())
            .field("trusts", &tracked.trusts.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Metrics {
    /// Registers svc-tls's metric families (and the collector of its states) into
    /// `registry`. Call once per Prometheus registry.
    pub fn new(registry: &mut Registry) -> Self {
        let inner = Arc::new(Shared {
            identity: SourceFamilies::register::<IdentityOrigin>(registry),
            trust: SourceFamilies::register::<TrustOrigin>(registry),
            principal: Arc::new(principal::PrincipalRecorder::new(
                &principal::PrincipalFamilies::register(registry),
            )),
            peers: Arc::new(peer::PeerRequestRecorder {
                families: peer::PeerFamilies::register(registry),
            }),
            tracked: Mutex::new(Tracked::default()),
        });
        registry.register_collector(Box::new(collector::StateCollector::new(&inner)));
        Self { inner }
    }

    /// The recorder of an identity source: its counters, created now (construction
    /// path), updated with atomics on the handshake path. `spiffe_id` names a SPIFFE
    /// identity (the Workload API's endpoint is used when it is `None`).
    /// `cluster` is the cluster a Secret is read from (the `cluster` label; empty for
    /// SPIFFE sources and when not known).
    pub fn identity_recorder(
        &self,
        origin: &IdentityOrigin,
        spiffe_id: Option<&str>,
        cluster: Option<&ClusterId>,
    ) -> Arc<SourceRecorder<IdentityOrigin>> {
        Arc::new(SourceRecorder::new(
            &self.inner.identity,
            SourceLabels::identity(origin, spiffe_id).in_cluster(self.cluster_label(cluster)),
            cluster,
        ))
    }

    /// The recorder of a trust source (see [`Metrics::identity_recorder`]).
    pub fn trust_recorder(
        &self,
        origin: &TrustOrigin,
        cluster: Option<&ClusterId>,
    ) -> Arc<SourceRecorder<TrustOrigin>> {
        Arc::new(SourceRecorder::new(
            &self.inner.trust,
            SourceLabels::trust(origin).in_cluster(self.cluster_label(cluster)),
            cluster,
        ))
    }

    /// The `cluster` label of `cluster`: its [`ClusterId::metric_label`] (its
    /// [`ClusterId::label`], with its short fingerprint appended when another cluster
    /// of the process has that label already: one value per cluster, the same in
    /// kube-construct's metrics), empty when there is none.
    pub fn cluster_label(&self, cluster: Option<&ClusterId>) -> String {
        cluster_label(cluster)
    }

    /// The recorder of principals signed and verified: give it to a
    /// [`PrincipalSigner`](crate::principal::PrincipalSigner) or an
    /// [`IngressVerifier`](crate::receiving::IngressVerifier) built by hand
    /// (`with_recorder`). Those from [`PeerTls::principal_signer`](crate::PeerTls::principal_signer)
    /// and [`receiving::IngressBuilder`](crate::receiving::IngressBuilder)
    /// have it already.
    pub fn principal_recorder(&self) -> Arc<dyn crate::principal::TokenRecorder> {
        self.inner.principal.clone()
    }

    /// The recorder of peer requests (`svc_tls_peer_*`: requests by class, their
    /// duration, handshake failures by reason, pool retirements, per peer): give it
    /// to a [`PeerTls`](crate::PeerTls) built by hand
    /// ([`with_request_recorder`](crate::PeerTls::with_request_recorder)). Those from
    /// [`PeerTls::from_options`](crate::PeerTls::from_options) over a registry with
    /// these metrics have it already.
    pub fn peer_recorder(&self) -> Arc<dyn crate::recording::PeerRecorder> {
        self.inner.peers.clone()
    }

    /// The recorder of the handshakes failed on the listener named `listener`
    /// (`svc_tls_listener_handshake_failures_total{listener, reason}`): give it to
    /// [`ServerTlsBuilder::handshake_recorder`](crate::serving::ServerTlsBuilder::handshake_recorder).
    /// `listener` is a name of the service's (`https`, `internal`), never anything
    /// of a caller's. Construction path: its series are created now, at zero.
    ///
    /// ```
    /// use prometheus_client::registry::Registry;
    /// use svc_tls::recording::{HandshakeFailure, ListenerSeries as _};
    ///
    /// let mut registry = Registry::default();
    /// let metrics = svc_tls::metrics::Metrics::new(&mut registry);
    /// metrics.listener_recorder("https").handshake_failed(HandshakeFailure::UnknownCa);
    /// let mut text = String::new();
    /// prometheus_client::encoding::text::encode(&mut text, &registry)?;
    /// assert!(text.contains(
    ///     r#"svc_tls_listener_handshake_failures_total{listener="https",reason="unknown_ca"} 1"#
    /// ));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn listener_recorder(&self, listener: &str) -> Arc<dyn crate::recording::ListenerSeries> {
        self.inner.peers.families.listener_recorder(listener)
    }

    /// Exports `resolver`'s state at scrape time while it lives (replacing a
    /// resolver of the same source tracked before). Construction path.
    pub fn track_identity(&self, resolver: &IdentityResolver, cluster: Option<&ClusterId>) {
        let state = resolver.state();
        let labels = SourceLabels::identity(&state.origin, state.spiffe_id.as_deref())
            .in_cluster(self.cluster_label(cluster));
        self.tracked()
            .identities
            .insert(labels, resolver.downgrade());
    }

    /// Exports `verifier`'s state at scrape time while it lives (replacing a
    /// verifier of the same source tracked before). Construction path.
    pub fn track_trust(&self, verifier: &TrustVerifier, cluster: Option<&ClusterId>) {
        let labels = SourceLabels::trust(verifier.trust_source().origin())
            .in_cluster(self.cluster_label(cluster));
        self.tracked().trusts.insert(labels, verifier.downgrade());
    }

    /// Exports `verifier`'s mode in force (`svc_tls_principal_receiving_mode`, read at
    /// scrape time) while it or a clone lives. A verifier from
    /// [`IngressBuilder`](crate::receiving::IngressBuilder) over a registry with
    /// metrics is tracked already. Construction path.
    ///
    /// ```
    /// use prometheus_client::registry::Registry;
    /// use svc_tls::metrics::Metrics;
    /// use svc_tls::receiving::IngressVerifier;
    ///
    /// let mut registry = Registry::default();
    /// let metrics = Metrics::new(&mut registry);
    /// let ingress = IngressVerifier::from_trust_anchors([])?;
    /// metrics.track_receiver(&ingress);
    /// let mut text = String::new();
    /// prometheus_client::encoding::text::encode(&mut text, &registry)?;
    /// assert!(text.contains(r#"svc_tls_principal_receiving_mode{mode="strict"} 1"#));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn track_receiver(&self, verifier: &crate::principal::ingress::IngressVerifier) {
        let mut tracked = self.tracked();
        tracked.receivers.retain(|weak| weak.strong_count() > 0);
        tracked
            .receivers
            .push(Arc::downgrade(verifier.mode_state()));
    }

    /// An empty registry of watched Secrets whose resolvers and verifiers record into
    /// metrics registered into `registry` now (see the [module](crate::metrics) documentation).
    /// Register one [`Metrics`] per Prometheus registry: for several registries of
    /// watched Secrets exporting into one, make it with [`Metrics::new`] and
    /// [`Metrics::install`] it into each.
    pub fn new_watches(registry: &mut Registry) -> WatchedObjects {
        let watches = WatchedObjects::new();
        // A new registry has none yet.
        let _ = Self::new(registry).install(&watches);
        watches
    }

    /// Makes the resolvers and verifiers built over `watches` from now on record into
    /// these metrics, and exports the health of its watches. Those built before keep
    /// the no-op recorder they were built with (a `WARN` names their Secrets).
    ///
    /// # Errors
    /// [`InstallError::AlreadyInstalled`] when `watches` records into metrics already.
    pub fn install(&self, watches: &WatchedObjects) -> Result<(), InstallError> {
        if !watches.install_observer(Arc::new(self.clone())) {
            return Err(InstallError::AlreadyInstalled);
        }
        let watched = watches.watched();
        if !watched.is_empty() {
            tracing::warn!(
                secrets = %watched
                    .iter()
                    .map(|(cluster, secret)| format!("{secret} of cluster {cluster}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                "metrics installed after Secrets were watched: resolvers and verifiers already \
                 built over them record no counters (install metrics before the first client)"
            );
        }
        Ok(())
    }

    /// The metrics `watches` records into, if installed ([`Metrics::install`],
    /// [`Metrics::new_watches`], [`register`]). Construction path: the options-based
    /// constructors ask it once per resolver, verifier or signer they build.
    pub fn installed_in(watches: &WatchedObjects) -> Option<Metrics> {
        INSTALLED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(installed, _)| installed.is(watches))
            .and_then(|(_, shared)| shared.upgrade())
            .map(|inner| Self { inner })
    }

    fn tracked(&self) -> std::sync::MutexGuard<'_, Tracked> {
        self.inner
            .tracked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Registers svc-tls's metrics into `registry` and installs them into the process's
/// registry of watched Secrets ([`WatchedObjects::process`]), which the options-based
/// constructors use: call it once at start-up, before the first peer client is built
/// (resolvers and verifiers built before keep recording nothing; see the module
/// documentation). A second call fails with [`InstallError::AlreadyInstalled`] and
/// registers nothing.
pub fn register(registry: &mut Registry) -> Result<Metrics, InstallError> {
    let process = WatchedObjects::process();
    if Metrics::installed_in(process).is_some() {
        return Err(InstallError::AlreadyInstalled);
    }
    let metrics = Metrics::new(registry);
    metrics.install(process)?;
    Ok(metrics)
}

/// The registries of watched Secrets that metrics are installed into, each with its
/// metrics: what [`Metrics::installed_in`] reads, filled by
/// [`RegistryObserver::installed`]. Weak both ways: a registry keeps its metrics (as
/// its observer), and this index keeps neither; entries of ended registries go at the
/// next installation.
static INSTALLED: Mutex<Vec<(WeakWatchedObjects, Weak<Shared>)>> = Mutex::new(Vec::new());

/// The metrics observe each registry they are installed into: the index above finds
/// them from the registry, and the collector reads the registry's watched Secrets at
/// scrape time.
impl RegistryObserver<WeakWatchedObjects> for Metrics {
    fn installed(&self, watches: WeakWatchedObjects) {
        {
            let mut installed = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
            installed.retain(|(registry, _)| registry.is_alive());
            installed.push((watches.clone(), Arc::downgrade(&self.inner)));
        }
        let mut tracked = self.tracked();
        tracked.watches.retain(WeakWatchedObjects::is_alive);
        tracked.watches.push(watches);
    }
}

/// The labels of one source: `source` (`secret`, `spiffe`, `configmap` or `file`) and
/// `name` (the Secret's `namespace/name`, the SPIFFE ID, or the directory or file).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct SourceLabels {
    /// `secret` or `spiffe`.
    pub source: &'static str,
    /// The Secret's `namespace/name`, or the SPIFFE ID (trust: `spiffe://<trust domain>`).
    pub name: String,
    /// The cluster a Secret is read from ([`ClusterId::metric_label`], one value per
    /// cluster); empty for SPIFFE sources.
    pub cluster: String,
}

impl SourceLabels {
    /// The labels of an identity source.
    pub fn identity(origin: &IdentityOrigin, spiffe_id: Option<&str>) -> Self {
        match origin {
            IdentityOrigin::Secret(secret) => Self {
                source: "secret",
                name: secret.to_string(),
                cluster: String::new(),
            },
            IdentityOrigin::Spiffe { endpoint } => Self {
                source: "spiffe",
                name: spiffe_id.unwrap_or(endpoint).to_owned(),
                cluster: String::new(),
            },
            IdentityOrigin::Files { dir, .. } => Self {
                source: "file",
                name: dir.clone(),
                cluster: String::new(),
            },
        }
    }

    /// The labels of a trust source.
    pub fn trust(origin: &TrustOrigin) -> Self {
        match origin {
            TrustOrigin::Secret(secret) => Self {
                source: "secret",
                name: secret.to_string(),
                cluster: String::new(),
            },
            TrustOrigin::SpiffeBundle { trust_domain } => Self {
                source: "spiffe",
                name: format!("spiffe://{trust_domain}"),
                cluster: String::new(),
            },
            TrustOrigin::ConfigMap { configmap, key } => Self {
                source: "configmap",
                name: format!("{configmap}:{key}"),
                cluster: String::new(),
            },
            TrustOrigin::File { path } => Self {
                source: "file",
                name: path.clone(),
                cluster: String::new(),
            },
            TrustOrigin::ClusterTrustBundles(bundles) => Self {
                source: "clustertrustbundles",
                name: bundles.to_string(),
                cluster: String::new(),
            },
        }
    }

    /// The same labels with `cluster` as the cluster label.
    pub fn in_cluster(mut self, cluster: String) -> Self {
        self.cluster = cluster;
        self
    }

    pub(crate) fn with(&self, key: &'static str, value: &'static str) -> LabelSet {
        vec![
            ("source", self.source.to_owned()),
            ("name", self.name.clone()),
            ("cluster", self.cluster.clone()),
            (key, value.to_owned()),
        ]
    }

    pub(crate) fn set(&self) -> LabelSet {
        vec![
            ("source", self.source.to_owned()),
            ("name", self.name.clone()),
            ("cluster", self.cluster.clone()),
        ]
    }
}

/// A label set as the families take it.
pub(crate) type LabelSet = Vec<(&'static str, String)>;

/// Unix seconds of `t` (negative before the epoch).
pub(crate) fn unix_seconds(t: std::time::SystemTime) -> i64 {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_secs()).map_or(i64::MIN, |s| -s),
    }
}
