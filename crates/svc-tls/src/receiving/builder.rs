//! [`IngressBuilder`]: the verified receiving side, with its audiences and its mode.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use url::Url;

use crate::origin::SecretRef;
use crate::principal::ReplayCache;
use crate::receiving::{
    AllowedPeer, CompatibilityWindow, IngressVerifier, ReceiverConfigError, ReceivingMode,
};
use crate::trust::{TrustError, TrustObject, TrustSettings};
use crate::watch::{DEFAULT_SYNC_TIMEOUT, WatchedObjects};

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
/// watched once per process ([`WatchedObjects::process`], shared with peer clients
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
///   mode also what the deployed Go senders send, counted, and only as bounded
///   ([`IngressBuilder::compatible_until`], [`IngressBuilder::compatible_senders`]:
///   both required in that mode).
///
/// **Replay**: the verifier it builds refuses a second use of a signed principal
/// (by its `jti`): a [`ReplayCache`] of [`DEFAULT_REPLAY_CAPACITY`](crate::principal::DEFAULT_REPLAY_CAPACITY)
/// entries, each kept until its token's `exp` plus the clock skew (at most the
/// lifetime cap plus the skew, 6 minutes by default), is on by default. When it
/// holds that many unexpired tokens it refuses new ones
/// ([`VerifyError::ReplayCacheFull`](crate::principal::VerifyError::ReplayCacheFull),
/// result `replayed`) rather than forget one early. Share or size it with
/// [`IngressBuilder::replay_cache`]; opt out with
/// [`IngressBuilder::without_replay_cache`].
///
/// ```no_run
/// # async fn f(client: cluster_id::ClusterClient, headers: reqwest::header::HeaderMap)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use svc_tls::principal::{Principal};
/// use svc_tls::receiving::{ReceivingMode};
/// use svc_tls::receiving::IngressBuilder;
/// use svc_tls::SecretRef;
///
/// // Once, at start-up.
/// let ingress = IngressBuilder::new(SecretRef::new("unikorn", "client-ca"), ReceivingMode::Strict)
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
    trust: TrustSettings,
    compatible_until: Option<SystemTime>,
    compatible_senders: Vec<AllowedPeer>,
    replay: Replay,
}

/// The replay cache a builder gives its verifier.
#[derive(Debug, Clone)]
enum Replay {
    /// A new [`ReplayCache::default`] per verifier built.
    Default,
    /// The caller's.
    Given(Arc<ReplayCache>),
    /// None: explicitly opted out.
    Off,
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
            trust: TrustSettings::default().sync_timeout(DEFAULT_SYNC_TIMEOUT),
            compatible_until: None,
            compatible_senders: Vec::new(),
            replay: Replay::Default,
        }
    }

    /// The end of the compatibility mode: from `until` on the receiver acts as
    /// strict (and says so). Required in [`ReceivingMode::GoCompatible`]; parse
    /// configuration text with [`CompatibilityWindow::parse_until`].
    ///
    /// ```
    /// use svc_tls::receiving::{AllowedPeer, CompatibilityWindow, ReceivingMode};
    /// use svc_tls::receiving::IngressBuilder;
    /// use svc_tls::SecretRef;
    ///
    /// let builder = IngressBuilder::new(SecretRef::new("unikorn", "client-ca"), ReceivingMode::GoCompatible)
    ///     .audiences(["https://region.example.com".parse()?])
    ///     .compatible_until(CompatibilityWindow::parse_until("2027-03-01")?)
    ///     .compatible_senders([AllowedPeer::uri("spiffe://example.org/ns/unikorn/sa/go-sender")]);
    /// builder.check()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn compatible_until(mut self, until: SystemTime) -> Self {
        self.compatible_until = Some(until);
        self
    }

    /// The senders that may still send the Go forms in the compatibility mode
    /// (typed certificate names; adds to those given before). Required in
    /// [`ReceivingMode::GoCompatible`]; other verified callers are judged as in the
    /// strict mode.
    #[must_use]
    pub fn compatible_senders<I: IntoIterator<Item = AllowedPeer>>(mut self, senders: I) -> Self {
        self.compatible_senders.extend(senders);
        self
    }

    /// The replay cache to use instead of a new default one (to share one between
    /// receivers of the same service, or to size it: [`ReplayCache::new`]).
    #[must_use]
    pub fn replay_cache(mut self, cache: Arc<ReplayCache>) -> Self {
        self.replay = Replay::Given(cache);
        self
    }

    /// No replay cache: a captured principal is accepted again until it expires
    /// (at most the lifetime cap plus the skew). An explicit opt-out, for a receiver
    /// whose replicas cannot share one and that would rather take the risk than
    /// refuse retries it cannot tell apart.
    #[must_use]
    pub fn without_replay_cache(mut self) -> Self {
        self.replay = Replay::Off;
        self
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

    /// How long to wait for the CA Secret's first sync (the trust settings'
    /// [`sync_timeout`](TrustSettings::sync_timeout)).
    #[must_use]
    pub fn sync_timeout(mut self, timeout: Duration) -> Self {
        self.trust.sync_timeout = timeout;
        self
    }

    /// The client CA's trust settings (default [`TrustSettings::default`]): the
    /// warning period, the watch-failure threshold, the bounds on roots without
    /// their Secret, and the sync timeout. The verifier is built by the same builder
    /// as [`TrustVerifier::builder`](crate::TrustVerifier::builder)'s.
    ///
    /// ```
    /// use std::time::Duration;
    /// use svc_tls::receiving::ReceivingMode;
    /// use svc_tls::receiving::IngressBuilder;
    /// use svc_tls::trust::TrustSettings;
    /// use svc_tls::SecretRef;
    ///
    /// let builder = IngressBuilder::new(SecretRef::new("unikorn", "client-ca"), ReceivingMode::Strict)
    ///     .trust_settings(TrustSettings::default().warning_period(Duration::from_secs(300)));
    /// # let _ = builder;
    /// ```
    #[must_use]
    pub fn trust_settings(mut self, settings: TrustSettings) -> Self {
        self.trust = settings;
        self
    }

    /// The verifier's settings over `trust`, without the watch.
    fn configure(&self, verifier: IngressVerifier) -> Result<IngressVerifier, ReceivingError> {
        let mut verifier = verifier
            .with_mode(self.mode)
            .with_audiences(self.audiences.iter().cloned());
        if let Some(window) = self.window()? {
            verifier = verifier.with_compatibility(window);
        }
        match &self.replay {
            Replay::Default => {
                verifier = verifier.with_replay_cache(Arc::new(ReplayCache::default()));
            }
            Replay::Given(cache) => verifier = verifier.with_replay_cache(cache.clone()),
            Replay::Off => {}
        }
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
        self.window()?;
        ReceiverConfigError::check(
            self.mode == ReceivingMode::Strict,
            !self.audiences.is_empty(),
            self.audience_unchecked,
        )
        .map_err(ReceivingError::Configuration)
    }

    /// The compatibility window, in that mode: both its parts are required.
    fn window(&self) -> Result<Option<CompatibilityWindow>, ReceivingError> {
        if self.mode != ReceivingMode::GoCompatible {
            return Ok(None);
        }
        let until = self.compatible_until.ok_or(ReceivingError::Configuration(
            ReceiverConfigError::CompatibilityWithoutEnd,
        ))?;
        CompatibilityWindow::new(until, self.compatible_senders.iter().cloned())
            .map(Some)
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
        self.build_in(WatchedObjects::process(), client).await
    }

    /// [`IngressBuilder::build`] over a registry of the caller's (one per test).
    ///
    /// # Errors
    /// As [`IngressBuilder::build`].
    pub async fn build_in(
        &self,
        watches: &WatchedObjects,
        client: &cluster_id::ClusterClient,
    ) -> Result<IngressVerifier, ReceivingError> {
        self.check()?;
        let ca = TrustObject::Secret {
            secret: self.ca.clone(),
        };
        let trust = crate::wiring::kept_trust(watches, client, ca, &self.trust)
            .await
            .map_err(ReceivingError::Trust)?;
        let recorder = crate::wiring::principal_recorder(watches);
        let verifier =
            self.configure(IngressVerifier::verified(trust).with_recorder(recorder.0))?;
        crate::wiring::track_receiver(watches, &verifier);
        Ok(verifier)
    }
}
