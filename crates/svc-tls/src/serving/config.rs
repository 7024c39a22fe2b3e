//! [`ServerTls`] and its builder: the rustls server configuration that presents the
//! watched identity and verifies callers against the watched client CA.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rustls::ServerConfig;
use rustls::server::NoServerSessionStorage;

use super::caller::Caller;
use super::caller_verifier::CallerVerifier;
use super::gateway::{ForwardedCounts, Gateways};
use super::layer::{CallerLayer, Forwarding};
use super::names::{ServerNameError, ServerNames};
use crate::identity::IdentityResolver;
use crate::recording::{HandshakeFailure, ListenerSeries};
use crate::trust::TrustVerifier;

/// Whether callers must present a client certificate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientAuth {
    /// Every caller presents a certificate that verifies (the default).
    #[default]
    Required,
    /// A caller may present none; its requests carry no [`Caller`](super::Caller)
    /// and therefore no principal. For listeners that also serve probes.
    Optional,
}

/// Why a [`ServerTls`] could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerTlsError {
    /// No trust to verify callers against was given: a server that verifies nobody
    /// cannot know its callers. Give [`ServerTlsBuilder::callers`].
    #[error(
        "the serving configuration names no trust for its callers' certificates \
         (ServerTlsBuilder::callers): without it no caller can be known"
    )]
    NoCallerTrust,
    /// rustls refused the protocol versions of the crypto provider.
    #[error("the crypto provider's protocol versions")]
    Protocol(#[source] rustls::Error),
}

/// A rustls server configuration presenting a service's watched identity and
/// verifying its callers against a watched client CA, both read on every handshake
/// from memory (the same [`IdentityResolver`] and [`TrustVerifier`] the client half
/// calls with, from the same sources and process registry). Cheap to clone.
///
/// ```no_run
/// # async fn f(identity: svc_tls::IdentityResolver, client_ca: svc_tls::TrustVerifier)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use svc_tls::serving::ServerTls;
///
/// let tls = ServerTls::builder(identity).callers(client_ca).build()?;
/// let listener = tokio::net::TcpListener::bind("0.0.0.0:8443").await?;
/// let app = tower::service_fn(|request: http::Request<hyper::body::Incoming>| async move {
///     // The caller verified by this request's connection, never by a header.
///     let who = request.extensions().get::<svc_tls::serving::Caller>().cloned();
///     let body = format!("{:?}", who.and_then(|c| c.spiffe_id().map(ToString::to_string)));
///     Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
///         bytes::Bytes::from(body),
///     )))
/// });
/// svc_tls::serving::serve(listener, tls, app).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<ServerConfig>,
    callers: CallerVerifier,
    forwarding: Arc<Forwarding>,
    handshakes: Option<crate::recording::peer::Held<dyn ListenerSeries>>,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("callers", &self.callers.trust().trust_source().origin())
            .field("required", &self.callers.is_required())
            .field("alpn", &self.config.alpn_protocols.len())
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// A builder presenting `identity`.
    pub fn builder(identity: IdentityResolver) -> ServerTlsBuilder {
        ServerTlsBuilder {
            names: ServerNames::new(identity),
            callers: None,
            client_auth: ClientAuth::Required,
            alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            gateways: None,
            handshakes: None,
        }
    }

    /// The rustls configuration, for any server that takes one.
    pub fn config(&self) -> &Arc<ServerConfig> {
        &self.config
    }

    /// A tokio-rustls acceptor over the configuration.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }

    /// What callers are verified with.
    pub fn callers(&self) -> &CallerVerifier {
        &self.callers
    }

    /// How many requests served with this configuration arrived carrying a header a
    /// gateway forwards a client certificate in
    /// ([`FORWARDED_CERTIFICATE_HEADERS`](super::FORWARDED_CERTIFICATE_HEADERS)),
    /// removed before the handler saw them: on a direct connection anyone can write
    /// them, so a count above zero is a caller trying (or a gateway misconfigured).
    pub fn removed_forwarded_headers(&self) -> u64 {
        self.forwarding.counts.removed.load(Ordering::Relaxed)
    }

    /// How many certificates allowed gateways forwarded were taken as the caller.
    pub fn accepted_forwarded_certificates(&self) -> u64 {
        self.forwarding.counts.accepted.load(Ordering::Relaxed)
    }

    /// How many certificates allowed gateways forwarded were refused (malformed,
    /// repeated, over the cap, or not verifying against the client CA).
    pub fn refused_forwarded_certificates(&self) -> u64 {
        self.forwarding.counts.refused.load(Ordering::Relaxed)
    }

    /// Reports a caller's failed handshake (`None`: the handshake timed out) to the
    /// listener's recorder, if it has one ([`ServerTlsBuilder::handshake_recorder`]).
    pub(super) fn handshake_failed(&self, error: Option<&std::io::Error>) {
        if let Some(series) = &self.handshakes {
            let reason = error
                .and_then(|error| crate::recording::handshake_failure(error))
                .unwrap_or(HandshakeFailure::Other);
            series.0.handshake_failed(reason);
        }
    }

    /// The layer for one connection whose verified caller is `caller` (from
    /// [`Caller::of_connection`]), for servers with their own accept loop.
    pub fn layer(&self, caller: Option<Caller>) -> CallerLayer {
        CallerLayer::new(caller, self.forwarding.clone())
    }
}

/// Builds a [`ServerTls`]. The decisions, in the order they are made:
///
/// 1. **The identity presented**: the [`IdentityResolver`] given to
///    [`ServerTls::builder`] (a Secret or a SPIFFE X509-SVID), asked on every
///    handshake; where a service is reached by names with certificates of their
///    own, [`ServerTlsBuilder::identity_for`] gives a name (or `*.` wildcard) its
///    identity, chosen by the caller's SNI (the default for any other name or none).
/// 2. **The callers' trust**: [`ServerTlsBuilder::callers`], a [`TrustVerifier`] over
///    the client CA (Secret, ConfigMap bundle or SPIFFE bundle); required, since a
///    server that verifies nobody cannot know its callers.
/// 3. **Whether a certificate is required**: [`ServerTlsBuilder::client_auth`],
///    [`ClientAuth::Required`] by default.
/// 4. **Gateways**: none by default; [`ServerTlsBuilder::gateways`] names the
///    gateway identities whose connections may forward their caller's certificate,
///    and the format they forward it in.
/// 5. **ALPN**: `h2` and `http/1.1` by default ([`ServerTlsBuilder::alpn`]).
///
/// Fixed, not choices: TLS 1.2 and 1.3 from the identity's crypto provider; no
/// session resumption (no tickets, no session cache), because a resumed handshake
/// neither presents the current identity nor verifies the caller against the
/// current client CA.
#[must_use]
pub struct ServerTlsBuilder {
    names: ServerNames,
    callers: Option<TrustVerifier>,
    client_auth: ClientAuth,
    alpn: Vec<Vec<u8>>,
    gateways: Option<Gateways>,
    handshakes: Option<crate::recording::peer::Held<dyn ListenerSeries>>,
}

impl fmt::Debug for ServerTlsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTlsBuilder")
            .field("names", &self.names)
            .field("client_auth", &self.client_auth)
            .field("alpn", &self.alpn.len())
            .finish_non_exhaustive()
    }
}

impl ServerTlsBuilder {
    /// Presents `identity`, not the default one, to callers asking (by SNI) for
    /// `name`: a DNS name or a one-label wildcard (`*.example.org`), compared
    /// without case, exact names before wildcards. For a service reached by several
    /// names whose certificates differ; one certificate naming them all needs none.
    ///
    /// # Errors
    /// [`ServerNameError`] for a name no SNI can carry (an IP address, say) or one
    /// given twice.
    pub fn identity_for(
        mut self,
        name: &str,
        identity: IdentityResolver,
    ) -> Result<Self, ServerNameError> {
        self.names = self.names.with(name, identity)?;
        Ok(self)
    }

    /// The trust callers' certificates are verified against.
    pub fn callers(mut self, trust: TrustVerifier) -> Self {
        self.callers = Some(trust);
        self
    }

    /// Whether callers must present a certificate (default [`ClientAuth::Required`]).
    pub fn client_auth(mut self, client_auth: ClientAuth) -> Self {
        self.client_auth = client_auth;
        self
    }

    /// The gateways whose connections may forward their caller's certificate (none
    /// by default: every request's caller is its own connection's).
    pub fn gateways(mut self, gateways: Gateways) -> Self {
        self.gateways = Some(gateways);
        self
    }

    /// The ALPN protocols offered, most preferred first.
    pub fn alpn<I: IntoIterator<Item = Vec<u8>>>(mut self, protocols: I) -> Self {
        self.alpn = protocols.into_iter().collect();
        self
    }

    /// Reports each caller's failed handshake in [`serve`](super::serve) to
    /// `series` (a listener's: `svc_tls::metrics::Metrics::listener_recorder`,
    /// feature `metrics`), by [`HandshakeFailure`]: callers refused for an unknown
    /// CA, an expired certificate or none presented, callers that refused this
    /// server's certificate ([`HandshakeFailure::RefusedByPeer`]), and every other
    /// failure or timeout as [`HandshakeFailure::Other`]. None by default.
    pub fn handshake_recorder(mut self, series: Arc<dyn ListenerSeries>) -> Self {
        self.handshakes = Some(crate::recording::peer::Held(series));
        self
    }

    /// The configuration.
    ///
    /// # Errors
    /// [`ServerTlsError::NoCallerTrust`] without [`ServerTlsBuilder::callers`].
    pub fn build(self) -> Result<ServerTls, ServerTlsError> {
        let trust = self.callers.ok_or(ServerTlsError::NoCallerTrust)?;
        let callers = match self.client_auth {
            ClientAuth::Required => CallerVerifier::required(trust),
            ClientAuth::Optional => CallerVerifier::optional(trust),
        };
        let provider = callers.trust().provider().clone();
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(ServerTlsError::Protocol)?
            .with_client_cert_verifier(Arc::new(callers.clone()))
            .with_cert_resolver(Arc::new(self.names));
        config.session_storage = Arc::new(NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
        config.alpn_protocols = self.alpn;
        let forwarding = Arc::new(Forwarding {
            gateways: self.gateways,
            trust: callers.trust().clone(),
            counts: ForwardedCounts::default(),
        });
        Ok(ServerTls {
            config: Arc::new(config),
            callers,
            forwarding,
            handshakes: self.handshakes,
        })
    }
}
