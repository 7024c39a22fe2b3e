//! TLS client configurations and `reqwest` clients for calling peer services.
//!
//! [`client_config`] builds a rustls [`ClientConfig`] from CA trust and an optional
//! [`IdentityResolver`]:
//! - TLS 1.3 only;
//! - the crypto provider is passed in explicitly (use
//!   [`crypto_provider`](crate::material::crypto_provider), aws-lc-rs); the
//!   process-wide default provider is never consulted. Its key exchange order is what
//!   the client offers: `crypto_provider` offers the hybrid post-quantum
//!   `X25519MLKEM768` first, with X25519 and the NIST curves after it for servers
//!   without ML-KEM (as the Go client does since Go 1.24);
//! - **session resumption is disabled** (`Resumption::disabled()`): a resumed handshake
//!   does not run the client-certificate resolver, so a rotated identity would not be
//!   presented on connections that resume an old session (the legacy Go client kept no
//!   session cache either);
//! - ALPN offers `http/1.1` only by default, as Go's transport with a custom
//!   `tls.Config` spoke HTTP/1.1 only; HTTP/2 is an opt-in
//!   ([`HttpProtocol::Http2Preferred`], flag `--S-http2`), offering `h2` then
//!   `http/1.1` ([`client_config_for`]).
//!
//! [`reqwest_client`] puts that configuration under a `reqwest::Client`
//! (`use_preconfigured_tls`), restricted to HTTP/1.1 unless the configuration offers
//! `h2`.
//!
//! # Rotation and pooled connections
//! Every *new* connection runs a full handshake and so presents the identity currently
//! in the Secret and, with [`TrustMode::Watched`], verifies the server against the roots
//! currently in the CA Secret. A connection already open (kept alive in reqwest's pool, or an HTTP/2
//! connection being multiplexed) keeps the identity and trust it was opened with until
//! it is closed: by the peer (nginx closes a keep-alive connection after
//! `keepalive_timeout`, 75 s, or `keepalive_requests`, 1000, by default), or by
//! reqwest's pool once it has been idle for the pool idle timeout (90 s by default).
//! reqwest has no maximum connection age, so a connection that never goes idle
//! keeps its identity until the peer closes it. Bound the idle part with
//! `--S-pool-idle-timeout` ([`PeerOptions::with_pool_idle_timeout`]); `0` keeps no
//! idle connection, so every request opens a connection and presents the current
//! identity. HTTP/2 puts every request on one connection, which rarely goes idle:
//! one more reason it is an opt-in.
//!
//! # Example
//! ```no_run
//! # async fn f(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use svc_tls::client::{TrustMode, client_config, reqwest_client};
//! use svc_tls::options::SecretRef;
//! use svc_tls::resolver::IdentityResolver;
//! use svc_tls::verifier::TrustVerifier;
//!
//! let provider = Arc::new(svc_tls::material::crypto_provider());
//! let ca = SecretRef { namespace: "unikorn".into(), name: "unikorn-ca".into() };
//! let identity = SecretRef {
//!     namespace: "unikorn".into(),
//!     name: "unikorn-region-client-certificate".into(),
//! };
//!
//! // Once, at start-up: the watched trust and identity (each waits for its sync).
//! let trust = TrustMode::Watched(TrustVerifier::builder(client.clone(), ca).build().await?);
//! let resolver = IdentityResolver::builder(client.clone(), identity)
//!     .provider(provider.clone())
//!     .build()
//!     .await?;
//!
//! // As often as needed (e.g. per reconcile): no waiting, the resolver is shared.
//! let config = client_config(provider, trust, Some(&resolver))?;
//! let http = reqwest_client(config)?;
//! let response = http.get("https://identity.example/api/v1/organizations").send().await?;
//! # let _ = response; Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use rustls::client::Resumption;
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, RootCertStore};

use crate::identity::{
    IdentityError, IdentityResolver, IdentitySource, SecretIdentitySource, SpiffeIdentitySource,
};
use crate::last_good::{DEFAULT_WARNING_PERIOD, NoopRecorder, Settings, SystemClock};
use crate::material::{self, MaterialError};
use crate::options::{
    ClientIdentityOptions, HostError, HttpProtocol, IdentityConfig, OptionsError, PeerOptions,
    SecretRef,
};
use crate::origin::IdentityOrigin;
use crate::principal::PrincipalSigner;
use crate::spiffe::{
    SpiffeEndpoint, SpiffeId, SpiffeStartError, WorkloadApiSource, WorkloadApiStreams,
};
use crate::trust::{
    ServerAuthorization, SpiffeTrustSource, TrustError, TrustSource, TrustVerifier,
};
use crate::watch::SecretWatches;
use url::Url;

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PeerClientError {
    /// The CA Secret does not exist.
    #[error("CA Secret {secret} not found")]
    CaSecretNotFound {
        /// The Secret.
        secret: SecretRef,
    },
    /// Reading the CA Secret failed.
    #[error("reading CA Secret {secret} failed: {source}")]
    CaSecretRead {
        /// The Secret.
        secret: SecretRef,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The CA Secret holds no usable trust (the error names the Secret and data key).
    #[error("CA {0}")]
    Trust(#[source] MaterialError),
    /// rustls refused the configuration (e.g. the provider lacks TLS 1.3 suites), or
    /// the platform verifier could not be set up.
    #[error("TLS configuration rejected: {0}")]
    Tls(#[from] rustls::Error),
    /// The options do not describe a usable setup (e.g. a half-set Secret reference).
    #[error(transparent)]
    Config(#[from] OptionsError),
    /// The client identity could not be loaded.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The watched CA trust could not be started (missing or malformed CA Secret,
    /// refused or unsynced watch; the error names the Secret).
    #[error(transparent)]
    CaTrust(#[from] TrustError),
    /// The SPIFFE Workload API could not be used (address unset or invalid, agent
    /// unreachable, no identity issued, no SVID in time; each its own variant).
    #[error(transparent)]
    Spiffe(#[from] SpiffeStartError),
    /// reqwest could not build its client.
    #[error("building the HTTP client failed: {0}")]
    Http(#[source] reqwest::Error),
    /// The peer's `--S-host` is not configured, or not a usable URL (the error names
    /// the flag and quotes the value). Building a client never returns this (Go's
    /// client did not fail on the host either); it is here for a caller that needs the
    /// URL and propagates [`PeerTls::host`]'s error with `?`.
    #[error(transparent)]
    Host(#[from] HostError),
}

/// Which server certificates to trust.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TrustMode {
    /// Exactly these roots, fixed for the life of the configuration.
    Roots(RootCertStore),
    /// The roots in the peer's CA Secret as they are at each handshake (watched;
    /// see [`TrustVerifier`]). What [`PeerTls::from_options`] uses when the CA flags
    /// are set.
    Watched(TrustVerifier),
    /// The platform's trust store (when no CA Secret is configured).
    Platform,
}

/// Reads a CA Secret once and returns its roots, which are then fixed: a later change
/// of the Secret is not seen. Every certificate in `tls.crt`, and in `ca.crt` when
/// present, becomes a root. To follow the Secret (a CA rotation without restart), use
/// [`TrustVerifier`] and [`TrustMode::Watched`].
pub async fn trust_from_secret(
    client: &kube::Client,
    secret: &SecretRef,
) -> Result<RootCertStore, PeerClientError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &secret.namespace);
    let object = api
        .get_opt(&secret.name)
        .await
        .map_err(|source| PeerClientError::CaSecretRead {
            secret: secret.clone(),
            source,
        })?
        .ok_or_else(|| PeerClientError::CaSecretNotFound {
            secret: secret.clone(),
        })?;
    material::load_trust(&object).map_err(PeerClientError::Trust)
}

/// Builds a TLS 1.3 client configuration with session resumption disabled, trusting
/// `trust` and presenting the identity from `identity` (reloaded on every handshake),
/// or no client certificate when `identity` is `None`. ALPN offers `http/1.1` only
/// (as the Go client spoke); see [`client_config_for`] to offer `h2`.
pub fn client_config(
    provider: Arc<CryptoProvider>,
    trust: TrustMode,
    identity: Option<&IdentityResolver>,
) -> Result<ClientConfig, PeerClientError> {
    client_config_for(provider, trust, identity, HttpProtocol::Http1Only)
}

/// [`client_config`] offering the ALPN protocols of `protocol`.
pub fn client_config_for(
    provider: Arc<CryptoProvider>,
    trust: TrustMode,
    identity: Option<&IdentityResolver>,
    protocol: HttpProtocol,
) -> Result<ClientConfig, PeerClientError> {
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let builder = match trust {
        TrustMode::Roots(roots) => builder.with_root_certificates(roots),
        TrustMode::Watched(verifier) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier)),
        TrustMode::Platform => builder
            .dangerous()
            .with_custom_certificate_verifier(platform_verifier(provider)?),
    };
    let mut config = match identity {
        Some(resolver) => builder.with_client_cert_resolver(Arc::new(resolver.clone())),
        None => builder.with_no_client_auth(),
    };
    // A resumed handshake skips the resolver: every connection must run it.
    config.resumption = Resumption::disabled();
    config.alpn_protocols = protocol.alpn();
    Ok(config)
}

/// The platform's trust store as a verifier, made once per process: the operating
/// system's CA bundle is read at the first verification, so a verifier per client
/// would read it again for every client built (per reconcile). The first provider
/// given is the one it verifies with (this crate's configurations all use
/// [`crypto_provider`](crate::material::crypto_provider)'s algorithms).
fn platform_verifier(
    provider: Arc<CryptoProvider>,
) -> Result<Arc<rustls_platform_verifier::Verifier>, rustls::Error> {
    static PLATFORM: std::sync::OnceLock<Arc<rustls_platform_verifier::Verifier>> =
        std::sync::OnceLock::new();
    if let Some(verifier) = PLATFORM.get() {
        return Ok(verifier.clone());
    }
    let verifier = Arc::new(rustls_platform_verifier::Verifier::new(provider)?);
    Ok(PLATFORM.get_or_init(|| verifier).clone())
}

/// A `reqwest` client builder on `config`; add timeouts and the like, then `build()`.
///
/// The builder speaks HTTP/1.1 only unless `config` offers `h2` through ALPN, so the
/// TLS configuration alone decides the protocol.
pub fn reqwest_builder(config: ClientConfig) -> reqwest::ClientBuilder {
    let offers_h2 = config.alpn_protocols.iter().any(|p| p.as_slice() == b"h2");
    let builder = reqwest::Client::builder().use_preconfigured_tls(config);
    if offers_h2 {
        builder
    } else {
        builder.http1_only()
    }
}

/// A `reqwest` client on `config`.
pub fn reqwest_client(config: ClientConfig) -> Result<reqwest::Client, PeerClientError> {
    reqwest_builder(config)
        .build()
        .map_err(PeerClientError::Http)
}

/// Everything needed to call one peer service, loaded once: trust, and the identity
/// resolver (shared by every configuration built from it). Cheap to clone.
#[derive(Debug, Clone)]
pub struct PeerTls {
    provider: Arc<CryptoProvider>,
    trust: TrustMode,
    identity: Option<IdentityResolver>,
    /// `--S-host` checked, with the flag name for "not configured".
    host: Result<Url, HostError>,
    protocol: HttpProtocol,
    pool_idle_timeout: Option<Duration>,
    /// What the principal signer reports to (the registry's metrics, if any).
    principal: crate::wiring::PrincipalRecording,
}

impl PeerTls {
    /// From parts already loaded.
    pub fn new(
        provider: Arc<CryptoProvider>,
        trust: TrustMode,
        identity: Option<IdentityResolver>,
    ) -> Self {
        Self {
            provider,
            trust,
            identity,
            host: Err(HostError::NotConfigured {
                flag: "host".to_owned(),
            }),
            protocol: HttpProtocol::default(),
            pool_idle_timeout: None,
            principal: crate::wiring::PrincipalRecording(Arc::new(NoopRecorder)),
        }
    }

    /// Sets the peer's base URL. With a client identity, an `http://` URL to a
    /// host other than a loopback address is refused: [`PeerTls::host`] returns
    /// [`HostProblem::PlaintextWithCredentials`](crate::options::HostProblem).
    #[must_use]
    pub fn with_host(mut self, host: Url) -> Self {
        self.host = if self.identity.is_some() {
            crate::options::refuse_plaintext_with_credentials("host", host)
        } else {
            Ok(host)
        };
        self
    }

    /// Sets the HTTP versions clients built from this may speak (default HTTP/1.1
    /// only).
    #[must_use]
    pub fn with_http_protocol(mut self, protocol: HttpProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Sets reqwest's pool idle timeout for clients built from this; zero keeps no
    /// idle connection (every request presents the current identity).
    #[must_use]
    pub fn with_pool_idle_timeout(mut self, timeout: Duration) -> Self {
        self.pool_idle_timeout = Some(timeout);
        self
    }

    /// From the command-line options: trust from `--S-ca-secret-*` (watched, the roots
    /// of the Secret's current contents verify every handshake; the platform's trust
    /// store when unset) and the identity from `--[P-]client-certificate-*` (watched,
    /// reloaded per handshake; no client certificate when unset). Waits at most
    /// `sync_timeout` for each cache; a missing or malformed Secret fails, naming it.
    /// The provider is [`crypto_provider`](crate::material::crypto_provider) (aws-lc-rs),
    /// passed explicitly.
    ///
    /// The `--S-host` value never stops the build, as Go's client took any host string
    /// and failed only when a request was made: a peer whose host is not configured
    /// (flag absent or empty) or is set but unusable (`https://`, `collector:443`)
    /// still gets its TLS setup, and [`PeerTls::host`] returns the [`HostError`]
    /// naming the flag (and quoting the value) when the service asks for the URL. An
    /// unusable value is logged once at WARN when the client is built
    /// ([`PeerOptions::client_host`]). `--S-http2` and `--S-pool-idle-timeout` apply to
    /// every client built from the result.
    ///
    /// ```no_run
    /// # async fn f(client: kube::Client, peer: svc_tls::options::PeerOptions,
    /// #            me: svc_tls::options::ClientIdentityOptions) -> Result<(), Box<dyn std::error::Error>> {
    /// use svc_tls::client::PeerTls;
    ///
    /// let tls = PeerTls::from_options(&client, &peer, &me, std::time::Duration::from_secs(30)).await?;
    /// let http = tls.reqwest_client()?; // per reconcile if you like: no waiting
    /// let url = tls.host()?.join("api/v1/regions")?;
    /// let regions = http.get(url).send().await?;
    /// # let _ = regions; Ok(()) }
    /// ```
    pub async fn from_options(
        client: &kube::Client,
        peer: &PeerOptions,
        identity: &ClientIdentityOptions,
        sync_timeout: Duration,
    ) -> Result<Self, PeerClientError> {
        Self::from_options_with(
            SecretWatches::process(),
            WorkloadApiStreams::process(),
            client,
            peer,
            identity,
            sync_timeout,
        )
        .await
    }

    /// [`PeerTls::from_options`] over registries of the caller's (one per test, or per
    /// cluster a process reads Secrets from) instead of the process's.
    pub async fn from_options_with(
        watches: &SecretWatches,
        streams: &WorkloadApiStreams,
        client: &kube::Client,
        peer: &PeerOptions,
        identity: &ClientIdentityOptions,
        sync_timeout: Duration,
    ) -> Result<Self, PeerClientError> {
        let provider = watches.provider().clone();
        let secret = match identity.config()? {
            IdentityConfig::Spiffe { .. } => {
                let endpoint = SpiffeEndpoint::from_env()?;
                let workload = streams.connect(endpoint, provider, sync_timeout).await?;
                return Self::from_spiffe_in(watches, peer, identity, &workload);
            }
            IdentityConfig::Secret(secret) => Some(secret),
            IdentityConfig::None => None,
        };
        let ca = peer.ca_secret()?;
        let trust = match ca {
            Some(ca) => TrustMode::Watched(
                crate::wiring::watched_trust(watches, client, &ca, sync_timeout).await?,
            ),
            None => TrustMode::Platform,
        };
        let identity = match secret {
            Some(secret) => {
                let shared = watches
                    .watch(client, &secret, sync_timeout)
                    .await
                    .map_err(IdentityError::from)?;
                Some(shared.built(|| {
                    let resolver = IdentityResolver::with_settings(
                        Arc::new(SecretIdentitySource::shared(&shared)),
                        crate::wiring::identity_recorder(
                            watches,
                            &IdentityOrigin::Secret(secret.clone()),
                            None,
                        ),
                        Settings::default(),
                    )?;
                    crate::wiring::track_identity(watches, &resolver);
                    Ok::<_, IdentityError>(resolver)
                })?)
            }
            None => None,
        };
        let mut tls = Self::new(provider, trust, identity).for_peer(peer);
        tls.principal = crate::wiring::principal_recorder(watches);
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
        Self::from_spiffe_in(SecretWatches::process(), peer, identity, workload)
    }

    /// [`PeerTls::from_spiffe`] recording into `watches`' metrics.
    fn from_spiffe_in(
        watches: &SecretWatches,
        peer: &PeerOptions,
        identity: &ClientIdentityOptions,
        workload: &WorkloadApiSource,
    ) -> Result<Self, PeerClientError> {
        let server_id = identity.spiffe_server_id().cloned().ok_or_else(|| {
            OptionsError::MissingSpiffeServerId {
                flag: ClientIdentityOptions::spiffe_server_id_flag(identity.prefix()),
                source_flag: ClientIdentityOptions::source_flag(identity.prefix()),
            }
        })?;
        if peer.ca_secret().ok().flatten().is_some() {
            crate::options::warn_once(
                &format!("spiffe-ca {}", peer.service()),
                &format!(
                    "--{}-ca-secret-namespace/-name are set and ignored: with --{}=spiffe the server is verified against the SPIFFE trust bundle",
                    peer.service(),
                    ClientIdentityOptions::source_flag(identity.prefix())
                ),
            );
        }
        Ok(Self::for_spiffe_id_in(watches, workload, server_id)?.for_peer(peer))
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
    /// let http = tls.reqwest_client()?;
    /// # let _ = http; Ok(()) }
    /// ```
    ///
    /// With metrics installed into the process's registry
    /// ([`crate::metrics::register`]), the resolver and verifier record into them.
    pub fn for_spiffe_id(
        workload: &WorkloadApiSource,
        server_id: SpiffeId,
    ) -> Result<Self, PeerClientError> {
        Self::for_spiffe_id_in(SecretWatches::process(), workload, server_id)
    }

    /// [`PeerTls::for_spiffe_id`] recording into `watches`' metrics.
    fn for_spiffe_id_in(
        watches: &SecretWatches,
        workload: &WorkloadApiSource,
        server_id: SpiffeId,
    ) -> Result<Self, PeerClientError> {
        let provider = Arc::new(crate::material::crypto_provider());
        let trust_source = SpiffeTrustSource::new(workload.clone(), server_id.trust_domain());
        let trust_recorder = crate::wiring::trust_recorder(watches, trust_source.origin());
        let trust = TrustVerifier::from_trust_source_authorizing(
            Arc::new(trust_source),
            provider.clone(),
            trust_recorder,
            Arc::new(SystemClock::new()),
            DEFAULT_WARNING_PERIOD,
            ServerAuthorization::SpiffeId(server_id),
        )?;
        let identity_source = SpiffeIdentitySource::new(workload.clone());
        let spiffe_id = workload.spiffe_id();
        let identity_recorder = crate::wiring::identity_recorder(
            watches,
            identity_source.origin(),
            Some(spiffe_id.as_str()).filter(|id| !id.is_empty()),
        );
        let resolver = IdentityResolver::from_identity_source(
            Arc::new(identity_source),
            identity_recorder,
            Arc::new(SystemClock::new()),
            DEFAULT_WARNING_PERIOD,
        )?;
        crate::wiring::track_trust(watches, &trust);
        crate::wiring::track_identity(watches, &resolver);
        let mut tls = Self::new(provider, TrustMode::Watched(trust), Some(resolver));
        tls.principal = crate::wiring::principal_recorder(watches);
        Ok(tls)
    }

    /// The peer's base URL; [`HostError::NotConfigured`] naming the flag when the
    /// peer has no host (Go: `Host() == ""`), [`HostError::Invalid`] naming the flag
    /// and quoting the value when `--S-host` is set but not a usable URL.
    pub fn host(&self) -> Result<&Url, HostError> {
        self.host.as_ref().map_err(Clone::clone)
    }

    /// The HTTP versions clients built from this may speak.
    pub fn http_protocol(&self) -> HttpProtocol {
        self.protocol
    }

    /// The identity resolver, when a client certificate is configured.
    pub fn identity(&self) -> Option<&IdentityResolver> {
        self.identity.as_ref()
    }

    /// A signer of `X-Principal` tokens with this client's identity (re-read for each
    /// token, as a handshake does, so rotations are followed), reporting every token
    /// to the metrics of the registry this was built over (see [`crate::metrics`]).
    /// `None` without a client identity.
    ///
    /// ```no_run
    /// # async fn f(tls: svc_tls::PeerTls) -> Result<(), Box<dyn std::error::Error>> {
    /// use svc_tls::Principal;
    ///
    /// let signer = tls.principal_signer().ok_or("no client identity configured")?;
    /// let who = Principal { actor: Some("alice".into()), ..Principal::default() };
    /// let request = signer.attach(tls.reqwest_client()?.get(tls.host()?.join("api")?), &who)?;
    /// # let _ = request; Ok(()) }
    /// ```
    pub fn principal_signer(&self) -> Option<PrincipalSigner<IdentityResolver>> {
        let resolver = self.identity.clone()?;
        Some(PrincipalSigner::new(resolver).with_recorder(self.principal.0.clone()))
    }

    /// How server certificates are verified.
    pub fn trust(&self) -> &TrustMode {
        &self.trust
    }

    /// The watched CA trust, when a CA Secret is configured.
    pub fn trust_verifier(&self) -> Option<&TrustVerifier> {
        match &self.trust {
            TrustMode::Watched(verifier) => Some(verifier),
            _ => None,
        }
    }

    /// A new rustls configuration (see [`client_config_for`]).
    pub fn config(&self) -> Result<ClientConfig, PeerClientError> {
        client_config_for(
            self.provider.clone(),
            self.trust.clone(),
            self.identity.as_ref(),
            self.protocol,
        )
    }

    /// A new `reqwest` client builder on [`PeerTls::config`], with the pool idle
    /// timeout applied; add timeouts and the like, then `build()`.
    pub fn reqwest_builder(&self) -> Result<reqwest::ClientBuilder, PeerClientError> {
        let builder = reqwest_builder(self.config()?);
        Ok(match self.pool_idle_timeout {
            Some(Duration::ZERO) => builder.pool_max_idle_per_host(0),
            Some(timeout) => builder.pool_idle_timeout(timeout),
            None => builder,
        })
    }

    /// A new `reqwest` client on [`PeerTls::config`].
    pub fn reqwest_client(&self) -> Result<reqwest::Client, PeerClientError> {
        self.reqwest_builder()?
            .build()
            .map_err(PeerClientError::Http)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn provider() -> Arc<CryptoProvider> {
        Arc::new(rustls::crypto::aws_lc_rs::default_provider())
    }

    #[test]
    fn configs_offer_http1_by_default_and_h2_on_request_and_build_a_reqwest_client() {
        for trust in [
            TrustMode::Roots(RootCertStore::empty()),
            TrustMode::Platform,
        ] {
            let config = client_config(provider(), trust.clone(), None).unwrap();
            assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
            reqwest_client(config).unwrap();
            let config =
                client_config_for(provider(), trust, None, HttpProtocol::Http2Preferred).unwrap();
            assert_eq!(
                config.alpn_protocols,
                vec![b"h2".to_vec(), b"http/1.1".to_vec()]
            );
            reqwest_client(config).unwrap();
        }
    }
}
