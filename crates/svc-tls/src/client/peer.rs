//! One peer's TLS setup: trust, the identity resolver, the host and protocol.

use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls::crypto::CryptoProvider;

use crate::identity::IdentityResolver;
use crate::last_good::NoopRecorder;
use crate::options::{HostError, HttpProtocol};
use crate::principal::PrincipalSigner;
use crate::recording::PeerRecorder;
use crate::trust::TrustVerifier;
use url::Url;

use super::{PeerClient, PeerClientError, TrustMode, client_config_for, reqwest_builder};

/// Everything needed to call one peer service, loaded once: trust, and the identity
/// resolver (shared by every configuration built from it). Cheap to clone.
#[derive(Debug, Clone)]
pub struct PeerTls {
    pub(super) provider: Arc<CryptoProvider>,
    pub(super) trust: TrustMode,
    pub(super) identity: Option<IdentityResolver>,
    /// `--S-host` checked, with the flag name for "not configured".
    pub(super) host: Result<Url, HostError>,
    pub(super) protocol: HttpProtocol,
    pub(super) pool_idle_timeout: Option<Duration>,
    /// The timeout of each request, body included (`None`: none).
    pub(super) request_timeout: Option<Duration>,
    /// The cap on each response body a [`PeerClient`] returns.
    pub(super) max_response_body: usize,
    /// What the principal signer reports to (the registry's metrics, if any).
    pub(super) principal: crate::wiring::PrincipalRecording,
    /// The registry this was built over, where [`PeerTls::client`] finds the shared
    /// pool (weak: a registry's stored clients hold a `PeerTls`).
    pub(super) registry: Option<crate::watch::registry::WeakWatchedObjects>,
    /// What the requests of clients built from this report to (`None`: nothing, at
    /// no cost).
    pub(super) requests: Option<crate::recording::peer::Held<dyn PeerRecorder>>,
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
            request_timeout: Some(super::DEFAULT_REQUEST_TIMEOUT),
            max_response_body: super::DEFAULT_MAX_RESPONSE_BODY,
            principal: crate::wiring::PrincipalRecording(Arc::new(NoopRecorder)),
            registry: None,
            requests: None,
        }
    }

    /// Sets the peer's base URL. With a client identity, an `http://` URL to a
    /// host other than a loopback address is refused: [`PeerTls::host`] returns
    /// [`HostProblem::PlaintextWithCredentials`](crate::options::HostProblem).
    #[must_use]
    pub fn with_host(mut self, host: Url) -> Self {
        self.host = if self.identity.is_some() {
            crate::options::host::refuse_plaintext_with_credentials("host", host)
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

    /// Sets the timeout of each request of clients built from this, from its start
    /// (connecting included) to the end of its response body (default
    /// [`DEFAULT_REQUEST_TIMEOUT`](super::DEFAULT_REQUEST_TIMEOUT), 30 s); `None`
    /// sets none (a long poll that bounds itself). A request past it fails with a
    /// `reqwest::Error` whose `is_timeout()` is true.
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the cap on each response body a [`PeerClient`] built from this returns
    /// (default [`DEFAULT_MAX_RESPONSE_BODY`](super::DEFAULT_MAX_RESPONSE_BODY),
    /// 4 MiB): a longer body fails its read with a
    /// [`ResponseBodyTooLarge`](super::ResponseBodyTooLarge) naming the peer and the
    /// cap, and at most the cap and one chunk of it is held.
    #[must_use]
    pub fn with_max_response_body(mut self, bytes: usize) -> Self {
        self.max_response_body = bytes;
        self
    }

    /// Makes the [`PeerClient`]s built from this report each request (status class
    /// and duration), handshake failure (by reason) and pool retirement to
    /// `recorder`, under this peer's label (see [`crate::recording`]). The
    /// constructors over a registry with metrics installed
    /// ([`PeerTls::from_options`], feature `metrics`) set it already; without one a
    /// client records nothing and pays nothing for it.
    ///
    /// ```
    /// # #[cfg(feature = "metrics")] {
    /// use prometheus_client::registry::Registry;
    /// use svc_tls::{PeerTls, TrustMode};
    ///
    /// let mut registry = Registry::default();
    /// let metrics = svc_tls::metrics::Metrics::new(&mut registry);
    /// let provider = std::sync::Arc::new(svc_tls::material::crypto_provider());
    /// let tls = PeerTls::new(provider, TrustMode::Platform, None)
    ///     .with_host("https://region.example".parse().unwrap())
    ///     .with_request_recorder(metrics.peer_recorder());
    /// # let _ = tls; }
    /// ```
    #[must_use]
    pub fn with_request_recorder(mut self, recorder: Arc<dyn PeerRecorder>) -> Self {
        self.requests = Some(crate::recording::peer::Held(recorder));
        self
    }

    /// The timeout of each request (see [`PeerTls::with_request_timeout`]).
    pub fn request_timeout(&self) -> Option<Duration> {
        self.request_timeout
    }

    /// The cap on each response body (see [`PeerTls::with_max_response_body`]).
    pub fn max_response_body(&self) -> usize {
        self.max_response_body
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
    /// to the metrics of the registry this was built over (`svc_tls::metrics`, feature `metrics`).
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
    /// timeout and the request timeout ([`PeerTls::with_request_timeout`]) applied;
    /// add what else you need, then `build()`. The response-body cap is
    /// [`PeerClient`]'s: a plain `reqwest` client has none. Redirects are
    /// followed within the request's origin only, and with a client identity the
    /// client is `https_only` (even to a loopback `http://` host, which
    /// [`PeerTls::with_host`] accepts): see [`reqwest_builder`](super::reqwest_builder).
    pub fn reqwest_builder(&self) -> Result<reqwest::ClientBuilder, PeerClientError> {
        let mut builder = reqwest_builder(self.config()?);
        if let Some(timeout) = self.request_timeout {
            builder = builder.timeout(timeout);
        }
        Ok(match self.pool_idle_timeout {
            Some(Duration::ZERO) => builder.pool_max_idle_per_host(0),
            Some(timeout) => builder.pool_idle_timeout(timeout),
            None => builder,
        })
    }

    /// A new `reqwest` client on [`PeerTls::config`], with a pool of its own that does
    /// not follow rotations: its kept-alive connections keep the identity and trust
    /// they were opened with. Prefer [`PeerTls::client`].
    pub fn reqwest_client(&self) -> Result<reqwest::Client, PeerClientError> {
        self.reqwest_builder()?
            .build()
            .map_err(PeerClientError::Http)
    }

    /// The process's HTTP client for this peer setup: every construction over the same
    /// registry with the same identity, trust, protocol and pool settings (so the same
    /// cluster and Secrets) gets the one [`PeerClient`], and its one connection pool.
    /// A client built per reconcile reuses a kept-alive connection instead of running
    /// a handshake. Its connections retire when the identity or the trust changes
    /// (see [`PeerClient`]).
    ///
    /// The shared client lives as long as the registry (the process's, for
    /// [`PeerTls::from_options`]); its idle connections close after the pool idle
    /// timeout (`--S-pool-idle-timeout`, reqwest's 90 s by default) and at each
    /// rotation. Built from parts ([`PeerTls::new`]), or with fixed roots, there is no
    /// registry to share through: the client is private, as
    /// [`PeerTls::private_client`]'s.
    pub fn client(&self) -> Result<PeerClient, PeerClientError> {
        let shareable = !matches!(self.trust, TrustMode::Roots(_));
        match self.registry.as_ref().and_then(|r| r.upgrade()) {
            Some(registry) if shareable => registry
                .shared_value(
                    |client: &PeerClient| client.serves(self),
                    || PeerClient::new(self.clone(), None),
                )
                .inspect(|client| client.add_peer(self)),
            _ => PeerClient::new(self.clone(), None),
        }
    }

    /// A [`PeerClient`] with a pool of its own (following rotations like the shared
    /// one): for callers that must not share connections.
    pub fn private_client(&self) -> Result<PeerClient, PeerClientError> {
        PeerClient::new(self.clone(), None)
    }

    /// [`PeerTls::private_client`] with each of its `reqwest` builders passed through
    /// `customize` (timeouts, default headers); called again at each rotation.
    ///
    /// ```no_run
    /// # fn f(tls: svc_tls::PeerTls) -> Result<(), Box<dyn std::error::Error>> {
    /// let peer = tls.private_client_with(|b| b.timeout(std::time::Duration::from_secs(10)))?;
    /// # let _ = peer; Ok(()) }
    /// ```
    pub fn private_client_with(
        &self,
        customize: impl Fn(reqwest::ClientBuilder) -> reqwest::ClientBuilder + Send + Sync + 'static,
    ) -> Result<PeerClient, PeerClientError> {
        PeerClient::new(self.clone(), Some(Box::new(customize)))
    }
}
