//! [`IngressBuilder`]: the verified receiving side, with its audiences and its mode.

use std::time::Duration;

use url::Url;

use crate::origin::SecretRef;
use crate::principal::{AllowedPeer, IngressVerifier, ReceiverConfigError, ReceivingMode};
use crate::trust::TrustError;
use crate::watch::{DEFAULT_SYNC_TIMEOUT, SecretWatches};

/// Why the receiving side was not built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReceivingError {
    /// The receiver's configuration accepts no principal (no audiences and no
    /// opt-out, or the strict mode without audiences). Checked before anything is
    /// watched.
    #[error("the ingress receiver is not configured")]
    Configuration(#[source] ReceiverConfigError),
    /// The client CA Secret cannot be watched, does not sync in time, or holds no
    /// usable CA.
    #[error("the ingress receiver's client CA")]
    Trust(#[source] TrustError),
}

/// Builds the verified receiving side over the CA Secret the ingress's
/// `nginx.ingress.kubernetes.io/auth-tls-secret` annotation names: the Secret is
/// watched once per process ([`SecretWatches::process`], shared with peer clients
/// that trust the same Secret), its roots are read on every request, and, when
/// metrics are installed (`svc_tls::metrics::register`, feature `metrics`), the
/// trust's state and every request's principal are exported.
///
/// Two choices are the caller's, and the builder refuses to build without them:
/// - **the audiences** ([`IngressBuilder::audiences`]): the URLs senders call this
///   service at (only the origin counts); a token signed for another origin is
///   refused, so a principal captured on its way to another service cannot be
///   replayed here. [`IngressBuilder::without_audience_check`] opts out, in the
///   compatibility mode only;
/// - **the mode** ([`ReceivingMode`], given to [`IngressBuilder::new`]): the strict
///   mode accepts signed principals bound to this receiver only; the compatibility
///   mode also what the deployed Go senders send, counted.
///
/// ```no_run
/// # async fn f(client: cluster_id::ClusterClient, headers: reqwest::header::HeaderMap)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use svc_tls::principal::{Principal, ReceivingMode};
/// use svc_tls::receiving::IngressBuilder;
/// use svc_tls::SecretRef;
///
/// // Once, at start-up.
/// let ingress = IngressBuilder::new(SecretRef::new("unikorn", "client-ca"), ReceivingMode::GoCompatible)
///     .audiences(["https://region.example.com".parse()?])
///     .build(&client)
///     .await?;
/// // Per request.
/// let who: Principal = ingress.verify_request(&headers)?;
/// # let _ = who; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct IngressBuilder {
    ca: SecretRef,
    mode: ReceivingMode,
    audiences: Vec<Url>,
    audience_unchecked: bool,
    allowed: Option<Vec<AllowedPeer>>,
    sync_timeout: Duration,
}

impl IngressBuilder {
    /// The receiving side over the client CA Secret `ca`, accepting what `mode`
    /// says. The first sync is waited for up to [`DEFAULT_SYNC_TIMEOUT`].
    pub fn new(ca: SecretRef, mode: ReceivingMode) -> Self {
        Self {
            ca,
            mode,
            audiences: Vec::new(),
            audience_unchecked: false,
            allowed: None,
            sync_timeout: DEFAULT_SYNC_TIMEOUT,
        }
    }

    /// This service's audiences: every URL its senders call it at (its ingress
    /// host; an in-cluster `https://region.unikorn.svc` too if some call it
    /// directly). Adds to those given before.
    #[must_use]
    pub fn audiences<I: IntoIterator<Item = Url>>(mut self, audiences: I) -> Self {
        self.audiences.extend(audiences);
        self
    }

    /// Opts out of the audience check, explicitly (compatibility mode only: the
    /// strict mode refuses to build without audiences).
    #[must_use]
    pub fn without_audience_check(mut self) -> Self {
        self.audience_unchecked = true;
        self
    }

    /// Peers allowed to send principals ([`IngressVerifier::with_allowed_peers`]).
    #[must_use]
    pub fn allowed_peers<I: IntoIterator<Item = AllowedPeer>>(mut self, peers: I) -> Self {
        self.allowed = Some(peers.into_iter().collect());
        self
    }

    /// How long to wait for the CA Secret's first sync.
    #[must_use]
    pub fn sync_timeout(mut self, timeout: Duration) -> Self {
        self.sync_timeout = timeout;
        self
    }

    /// The verifier's settings over `trust`, without the watch.
    fn configure(&self, verifier: IngressVerifier) -> Result<IngressVerifier, ReceivingError> {
        let mut verifier = verifier
            .with_mode(self.mode)
            .with_audiences(self.audiences.iter().cloned());
        if self.audience_unchecked {
            verifier = verifier.without_audience_check();
        }
        if let Some(allowed) = &self.allowed {
            verifier = verifier.with_allowed_peers(allowed.iter().cloned());
        }
        verifier
            .check_configuration()
            .map_err(ReceivingError::Configuration)?;
        Ok(verifier)
    }

    /// Checks the configuration alone (what [`IngressBuilder::build`] checks
    /// before it watches anything).
    ///
    /// # Errors
    /// [`ReceivingError::Configuration`].
    pub fn check(&self) -> Result<(), ReceivingError> {
        ReceiverConfigError::check(
            self.mode == ReceivingMode::Strict,
            !self.audiences.is_empty(),
            self.audience_unchecked,
        )
        .map_err(ReceivingError::Configuration)
    }

    /// Builds over the process's Secret watches.
    ///
    /// # Errors
    /// [`ReceivingError::Configuration`] before anything is watched;
    /// [`ReceivingError::Trust`] naming the Secret when it cannot be watched, does
    /// not sync in time, or holds no usable CA.
    pub async fn build(
        &self,
        client: &cluster_id::ClusterClient,
    ) -> Result<IngressVerifier, ReceivingError> {
        self.build_in(SecretWatches::process(), client).await
    }

    /// [`IngressBuilder::build`] over a registry of the caller's (one per test).
    ///
    /// # Errors
    /// As [`IngressBuilder::build`].
    pub async fn build_in(
        &self,
        watches: &SecretWatches,
        client: &cluster_id::ClusterClient,
    ) -> Result<IngressVerifier, ReceivingError> {
        self.check()?;
        let trust = crate::wiring::watched_trust(watches, client, &self.ca, self.sync_timeout)
            .await
            .map_err(ReceivingError::Trust)?;
        let recorder = crate::wiring::principal_recorder(watches);
        self.configure(IngressVerifier::verified(trust).with_recorder(recorder.0))
    }
}
