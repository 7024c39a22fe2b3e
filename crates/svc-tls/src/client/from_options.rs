//! Building a peer's TLS setup from the command-line options or a SPIFFE stream,
//! over the process's (or a given) registries of watched Secrets and streams.

use std::sync::Arc;
use std::time::Duration;

use crate::identity::{
    IdentityError, IdentityResolver, IdentitySettings, IdentitySource, SpiffeIdentitySource,
};
use crate::last_good::SystemClock;
use crate::options::{ClientIdentityOptions, IdentityConfig, PeerCa, PeerOptions};
use crate::spiffe::{SpiffeEndpoint, SpiffeId, WorkloadApiSource, WorkloadApiStreams};
use crate::trust::{
    ServerAuthorization, SpiffeTrustSource, TrustError, TrustObject, TrustSettings, TrustSource,
    TrustVerifier,
};
use crate::watch::WatchedObjects;

/// The settings of both halves that a peer's TLS setup from the options is built
/// with: what flags do not say (the warning period, the watch-failure threshold, the
/// bounds on roots without their source), passed alongside the options to
/// [`PeerTls::from_options_with`]. Every resolver and verifier it builds takes them
/// through the same builders as [`IdentityResolver::builder`] and
/// [`TrustVerifier::builder`].
///
/// ```
/// use std::time::Duration;
/// use svc_tls::client::PeerTlsSettings;
///
/// let settings = PeerTlsSettings::default()
///     .sync_timeout(Duration::from_secs(30))
///     .warning_period(Duration::from_secs(300));
/// assert_eq!(settings.identity.warning_period, Duration::from_secs(300));
/// assert_eq!(settings.trust.sync_timeout, Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerTlsSettings {
    /// The identity half's settings (the client certificate).
    pub identity: IdentitySettings,
    /// The trust half's settings (the peer's CA).
    pub trust: TrustSettings,
}

impl PeerTlsSettings {
    /// Both halves' settings.
    pub fn new(identity: IdentitySettings, trust: TrustSettings) -> Self {
        Self { identity, trust }
    }

    /// Sets both halves' sync timeout.
    #[must_use]
    pub fn sync_timeout(mut self, timeout: Duration) -> Self {
        self.identity = self.identity.sync_timeout(timeout);
        self.trust = self.trust.sync_timeout(timeout);
        self
    }

    /// Sets both halves' warning period.
    #[must_use]
    pub fn warning_period(mut self, period: Duration) -> Self {
        self.identity = self.identity.warning_period(period);
        self.trust = self.trust.warning_period(period);
        self
    }
}

use super::{PeerClientError, PeerTls, TrustMode};

impl PeerTls {
    /// From the command-line options: trust from `--S-ca-secret-*` (watched, the roots
    /// of the Secret's current contents verify every handshake) or from
    /// `--S-ca-configmap-*` (the PEM bundle under the key of a watched ConfigMap, as
    /// trust-manager writes it: no Secret is read; not both, see
    /// [`PeerOptions::ca`]; one watch and verifier per cluster, ConfigMap and key in
    /// the registry); the platform's trust store when neither is set) and the identity from `--[P-]client-certificate-*` (watched,
    /// reloaded per handshake; no client certificate when unset). Waits at most
    /// `sync_timeout` for each cache; a missing or malformed Secret fails, naming it.
    /// The provider is [`crypto_provider`](crate::material::crypto_provider) (aws-lc-rs),
    /// passed explicitly.
    ///
    /// The `--S-host` value never stops the build, as Go's client took any host string
    /// and failed only when a request was made: a peer whose host is not configured
    /// (flag absent or empty) or is set but unusable (`https://`, `collector:443`)
    /// still gets its TLS setup, and [`PeerTls::host`] returns the [`HostError`](crate::options::HostError)
    /// naming the flag (and quoting the value) when the service asks for the URL. An
    /// unusable value is logged once at WARN when the client is built
    /// ([`PeerOptions::client_host`]). `--S-http2` and `--S-pool-idle-timeout` apply to
    /// every client built from the result.
    ///
    /// ```no_run
    /// # async fn f(client: cluster_id::ClusterClient, peer: svc_tls::options::PeerOptions,
    /// #            me: svc_tls::options::ClientIdentityOptions) -> Result<(), Box<dyn std::error::Error>> {
    /// use svc_tls::client::PeerTls;
    ///
    /// let tls = PeerTls::from_options(&client, &peer, &me, std::time::Duration::from_secs(30)).await?;
    /// let peer = tls.client()?; // per reconcile if you like: one shared pool
    /// let url = tls.host()?.join("api/v1/regions")?;
    /// let regions = peer.send(peer.get(url)?).await?;
    /// # let _ = regions; Ok(()) }
    /// ```
    pub async fn from_options(
        client: &cluster_id::ClusterClient,
        peer: &PeerOptions,
        identity: &ClientIdentityOptions,
        sync_timeout: Duration,
    ) -> Result<Self, PeerClientError> {
        Self::from_options_in(
            WatchedObjects::process(),
            WorkloadApiStreams::process(),
            client,
            peer,
            identity,
            sync_timeout,
        )
        .await
    }

    /// [`PeerTls::from_options`] with both halves' `settings` (their sync timeouts
    /// included) instead of the defaults.
    ///
    /// ```no_run
    /// # async fn f(client: cluster_id::ClusterClient, peer: svc_tls::options::PeerOptions,
    /// #            me: svc_tls::options::ClientIdentityOptions) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use svc_tls::client::{PeerTls, PeerTlsSettings};
    ///
    /// let settings = PeerTlsSettings::default()
    ///     .sync_timeout(Duration::from_secs(30))
    ///     .warning_period(Duration::from_secs(300));
    /// let tls = PeerTls::from_options_with(&client, &peer, &me, &settings).await?;
    /// # let _ = tls; Ok(()) }
    /// ```
    pub async fn from_options_with(
        client: &cluster_id::ClusterClient,
        peer: &PeerOptions,
        identity: &ClientIdentityOptions,
        settings: &PeerTlsSettings,
    ) -> Result<Self, PeerClientError> {
        Self::from_options_in_with(
            WatchedObjects::process(),
            WorkloadApiStreams::process(),
            client,
            peer,
            identity,
            settings,
        )
        .await
    }

    /// [`PeerTls::from_options`] over registries of the caller's (one per test)
    /// instead of the process's.
    pub async fn from_options_in(
        watches: &WatchedObjects,
        streams: &WorkloadApiStreams,
        client: &cluster_id::ClusterClient,
        peer: &PeerOptions,
        identity: &ClientIdentityOptions,
        sync_timeout: Duration,
    ) -> Result<Self, PeerClientError> {
        let settings = PeerTlsSettings::default().sync_timeout(sync_timeout);
        Self::from_options_in_with(watches, streams, client, peer, identity, &settings).await
    }

    /// [`PeerTls::from_options_with`] over registries of the caller's.
    pub async fn from_options_in_with(
        watches: &WatchedObjects,
        streams: &WorkloadApiStreams,
        client: &cluster_id::ClusterClient,
        peer: &PeerOptions,
        identity: &ClientIdentityOptions,
        settings: &PeerTlsSettings,
    ) -> Result<Self, PeerClientError> {
        let provider = watches.provider().clone();
        let sync_timeout = settings.identity.sync_timeout;
        let mut from_files = None;
        let secret = match identity.config()? {
            // The server ID validated by the options, carried: not read again.
            IdentityConfig::Spiffe { server_id } => {
                let endpoint = SpiffeEndpoint::from_env()?;
                let workload = streams
                    .connect(endpoint.clone(), provider, sync_timeout)
                    .await?;
                return Self::from_spiffe_in(
                    watches,
                    Some((streams, endpoint.as_str())),
                    peer,
                    identity,
                    server_id,
                    &workload,
                    settings,
                );
            }
            IdentityConfig::Secret(secret) => Some(secret),
            IdentityConfig::None => None,
            IdentityConfig::Files { dir, layout } => {
                from_files = Some(files_identity(watches, dir, layout, &settings.identity)?);
                None
            }
        };
        // Each watched object through the one builder of its half, kept in the
        // registry entry (one verifier per cluster, object, key and settings).
        let watched = |object| crate::wiring::kept_trust(watches, client, object, &settings.trust);
        let trust = match peer.ca()? {
            PeerCa::Secret(secret) => {
                TrustMode::Watched(watched(TrustObject::Secret { secret }).await?)
            }
            PeerCa::ConfigMap { configmap, key } => {
                TrustMode::Watched(watched(TrustObject::ConfigMap { configmap, key }).await?)
            }
            PeerCa::Platform => TrustMode::Platform,
            PeerCa::File(path) => TrustMode::Watched(files_trust(watches, &path, &settings.trust)?),
            PeerCa::ClusterTrustBundles(bundles) => {
                TrustMode::Watched(watched(TrustObject::ClusterTrustBundles { bundles }).await?)
            }
        };
        let identity = match secret {
            Some(secret) => Some(
                crate::wiring::kept_identity(watches, client, &secret, &settings.identity).await?,
            ),
            None => from_files,
        };
        let mut tls = Self::new(provider, trust, identity).for_peer(peer);
        tls.principal = crate::wiring::principal_recorder(watches);
        tls.requests = crate::wiring::peer_recorder(watches);
        tls.registry = Some(watches.downgrade());
        Ok(tls)
    }

    /// The peer's `--S-host` (kept as the URL or the error [`PeerTls::host`] returns),
    /// `--S-http2` and `--S-pool-idle-timeout` applied.
    fn for_peer(mut self, peer: &PeerOptions) -> Self {
        self.host = peer.client_host_with_credentials(self.identity.is_some());
        self.protocol = peer.http_protocol();
        self.pool_idle_timeout = peer.pool_idle_timeout();
        self
    }

    /// SPIFFE mode over a Workload API stream the caller already holds (one stream can
    /// serve every peer): the client presents the stream's current X509-SVID, and the
    /// server must chain to its trust domain's current bundle and present exactly
    /// `identity`'s `--[P-]spiffe-server-id` (no host-name check; see
    /// [`crate::spiffe`]). The peer's CA Secret flags do not apply here; when they are
    /// set, that is logged once. [`PeerTls::from_options`] calls this in SPIFFE mode
    /// with a stream of its own, from `SPIFFE_ENDPOINT_SOCKET`.
    pub fn from_spiffe(
        peer: &PeerOptions,
        identity: &ClientIdentityOptions,
        workload: &WorkloadApiSource,
    ) -> Result<Self, PeerClientError> {
        let server_id = identity.required_spiffe_server_id()?;
        Self::from_spiffe_in(
            WatchedObjects::process(),
            None,
            peer,
            identity,
            server_id,
            workload,
            &PeerTlsSettings::default(),
        )
    }

    /// [`PeerTls::from_spiffe`] recording into `watches`' metrics; with `shared`, the
    /// resolver and verifier are built once per stream and server ID in that registry
    /// of streams and shared by every later construction.
    pub(crate) fn from_spiffe_in(
        watches: &WatchedObjects,
        shared: Option<(&WorkloadApiStreams, &str)>,
        peer: &PeerOptions,
        identity: &ClientIdentityOptions,
        server_id: SpiffeId,
        workload: &WorkloadApiSource,
        settings: &PeerTlsSettings,
    ) -> Result<Self, PeerClientError> {
        if peer.ca_configmap().ok().flatten().is_some() {
            crate::options::flags::warn_once(
                &format!("spiffe-ca-configmap {}", peer.service()),
                &format!(
                    "--{}-ca-configmap-namespace/-name are set and ignored: with --{}=spiffe the server is verified against the SPIFFE trust bundle",
                    peer.service(),
                    ClientIdentityOptions::source_flag(identity.prefix())
                ),
            );
        }
        if peer.ca_secret().ok().flatten().is_some() {
            crate::options::flags::warn_once(
                &format!("spiffe-ca {}", peer.service()),
                &format!(
                    "--{}-ca-secret-namespace/-name are set and ignored: with --{}=spiffe the server is verified against the SPIFFE trust bundle",
                    peer.service(),
                    ClientIdentityOptions::source_flag(identity.prefix())
                ),
            );
        }
        let tls = match shared {
            Some((streams, endpoint)) => {
                let (trust, resolver) = streams.built(endpoint, &server_id.to_string(), || {
                    Self::spiffe_halves(watches, workload, server_id.clone(), settings)
                })?;
                let mut tls = Self::new(
                    Arc::new(crate::material::crypto_provider()),
                    TrustMode::Watched(trust),
                    Some(resolver),
                );
                tls.principal = crate::wiring::principal_recorder(watches);
                tls.requests = crate::wiring::peer_recorder(watches);
                tls.registry = Some(watches.downgrade());
                tls
            }
            None => Self::for_spiffe_id_in(watches, workload, server_id, settings)?,
        };
        Ok(tls.for_peer(peer))
    }

    /// SPIFFE mode without options: present `workload`'s current X509-SVID on every
    /// handshake and accept only a server that chains to the current bundle of
    /// `server_id`'s trust domain and presents exactly `server_id` (no host-name
    /// check). Set the host with [`PeerTls::with_host`].
    ///
    /// ```no_run
    /// # async fn f(workload: svc_tls::spiffe::WorkloadApiSource) -> Result<(), Box<dyn std::error::Error>> {
    /// use svc_tls::client::PeerTls;
    /// use svc_tls::spiffe::SpiffeId;
    ///
    /// let server = SpiffeId::new("spiffe://example.org/ns/unikorn/sa/identity")?;
    /// let tls = PeerTls::for_spiffe_id(&workload, server)?
    ///     .with_host("https://identity.unikorn:8443".parse()?);
    /// let peer = tls.client()?;
    /// # let _ = peer; Ok(()) }
    /// ```
    ///
    /// With metrics installed into the process's registry
    /// (`svc_tls::metrics::register`, feature `metrics`), the resolver and verifier record into them.
    pub fn for_spiffe_id(
        workload: &WorkloadApiSource,
        server_id: SpiffeId,
    ) -> Result<Self, PeerClientError> {
        Self::for_spiffe_id_in(
            WatchedObjects::process(),
            workload,
            server_id,
            &PeerTlsSettings::default(),
        )
    }

    /// [`PeerTls::for_spiffe_id`] recording into `watches`' metrics.
    fn for_spiffe_id_in(
        watches: &WatchedObjects,
        workload: &WorkloadApiSource,
        server_id: SpiffeId,
        settings: &PeerTlsSettings,
    ) -> Result<Self, PeerClientError> {
        let (trust, resolver) = Self::spiffe_halves(watches, workload, server_id, settings)?;
        let provider = Arc::new(crate::material::crypto_provider());
        let mut tls = Self::new(provider, TrustMode::Watched(trust), Some(resolver));
        tls.principal = crate::wiring::principal_recorder(watches);
        tls.requests = crate::wiring::peer_recorder(watches);
        Ok(tls)
    }

    /// The verifier of `server_id` over `workload`'s bundles and the resolver of its
    /// SVID, recording into `watches`' metrics.
    fn spiffe_halves(
        watches: &WatchedObjects,
        workload: &WorkloadApiSource,
        server_id: SpiffeId,
        settings: &PeerTlsSettings,
    ) -> Result<(TrustVerifier, IdentityResolver), PeerClientError> {
        let clock = Arc::new(SystemClock::new());
        let provider = Arc::new(crate::material::crypto_provider());
        let trust_source = SpiffeTrustSource::new(workload.clone(), server_id.trust_domain());
        let trust_recorder = crate::wiring::trust_recorder(watches, trust_source.origin(), None);
        let authorization = ServerAuthorization::SpiffeId(server_id);
        let trust = TrustVerifier::build_over_source(Arc::new(trust_source), authorization, |b| {
            b.settings(settings.trust.clone())
                .provider(provider)
                .recorder(trust_recorder)
                .clock(clock.clone())
        })?;
        let identity_source = SpiffeIdentitySource::new(workload.clone());
        let spiffe_id = workload.spiffe_id();
        let identity_recorder = crate::wiring::identity_recorder(
            watches,
            identity_source.origin(),
            Some(spiffe_id.as_str()).filter(|id| !id.is_empty()),
            None,
        );
        let resolver = IdentityResolver::build_over_source(Arc::new(identity_source), |b| {
            b.settings(settings.identity.clone())
                .recorder(identity_recorder)
                .clock(clock)
        })?;
        crate::wiring::track_trust(watches, &trust, None);
        crate::wiring::track_identity(watches, &resolver, None);
        workload.follow(trust.follower());
        workload.follow(resolver.follower());
        Ok((trust, resolver))
    }
}

/// The identity in the files of `--[P-]client-certificate-dir`: the process's one
/// follower of the directory ([`MountedFiles::process`](crate::files::MountedFiles::process)),
/// a resolver recording into `watches`' metrics and followed on every change.
fn files_identity(
    watches: &WatchedObjects,
    dir: std::path::PathBuf,
    layout: crate::files::FileLayout,
    settings: &IdentitySettings,
) -> Result<IdentityResolver, IdentityError> {
    let files = crate::files::MountedFiles::process(dir, layout).map_err(|e| {
        IdentityError::Unusable(crate::identity::IdentityReloadError::Unavailable(Box::new(
            e,
        )))
    })?;
    let source = crate::identity::FileIdentitySource::new(files.clone());
    let recorder = crate::wiring::identity_recorder(watches, source.origin(), None, None);
    let resolver = IdentityResolver::from_files_with(&files, settings, recorder)?;
    crate::wiring::track_identity(watches, &resolver, None);
    Ok(resolver)
}

/// The roots in the file of `--S-ca-file`: its directory followed (the process's one
/// follower of it), the file the bundle; a verifier recording into `watches`' metrics
/// and followed on every change.
fn files_trust(
    watches: &WatchedObjects,
    path: &std::path::Path,
    settings: &TrustSettings,
) -> Result<TrustVerifier, TrustError> {
    let unusable = |e: crate::files::FileError| {
        TrustError::Unusable(crate::trust::TrustReloadError::Unavailable(Box::new(e)))
    };
    let (dir, file) = match (path.parent(), path.file_name()) {
        (Some(dir), Some(file)) => (dir, file.to_string_lossy().into_owned()),
        _ => {
            return Err(unusable(crate::files::FileError::NotFound {
                path: path.to_path_buf(),
            }));
        }
    };
    let dir = if dir.as_os_str().is_empty() {
        std::path::Path::new(".")
    } else {
        dir
    };
    let files = crate::files::MountedFiles::process(dir, crate::files::FileLayout::ca_bundle(file))
        .map_err(unusable)?;
    let origin = crate::trust::FileTrustSource::new(files.clone())
        .origin()
        .clone();
    let verifier = TrustVerifier::from_files_with(
        &files,
        ServerAuthorization::HostName,
        settings,
        crate::wiring::trust_recorder(watches, &origin, None),
    )?;
    crate::wiring::track_trust(watches, &verifier, None);
    Ok(verifier)
}
