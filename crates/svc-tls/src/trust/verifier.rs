//! The handshake-time server-certificate verifier: peer trust that follows its Secret.
//!
//! [`TrustVerifier`] implements rustls's [`ServerCertVerifier`](rustls::client::danger::ServerCertVerifier). On **every**
//! handshake it asks its [`TrustSource`] (the trust seam) for the root set it holds
//! now, and verifies the server's
//! chain with webpki's verifier ([`WebPkiServerVerifier`]) for exactly those roots.
//! The webpki verifier is built again only when the root set changes: the Secret
//! source returns the same `Arc` for byte-identical `tls.crt`/`ca.crt`, so an
//! unchanged Secret costs a cache read, a byte comparison and a pointer comparison.
//! The verifier for the roots being served lives in the one last-good core
//! ([`crate::last_good`], shared with the identity resolver): no lock is held and
//! nothing on this path does I/O. A handshake takes one snapshot of that slot, so it
//! verifies against one whole root set, never part of two.
//!
//! When a read fails after a good one (malformed CA Secret, no usable root, deleted
//! Secret), the last good roots are used, the failure is counted, and a warning is
//! logged at most once per period (a minute by default) with how many failures were
//! suppressed and how long the stale roots have been used, exactly as for the
//! identity; the end of such an episode and a watch failing for over a minute are
//! each one rate-limited line. A Secret with no usable root therefore never replaces
//! good roots; a recreated Secret is used on the next handshake.
//!
//! # Rotation with overlap
//! cert-manager rotates a CA by writing `ca.crt` with the old and the new CA, then
//! the new one only. While both are present, servers with either chain are accepted;
//! afterwards only the new one. No restart and no new client is needed; connections
//! already open keep the trust decision they were opened with (see
//! [`crate::client`]).

use crate::follow::Follower;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;
use watch_ready::excerpt;

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;

use super::authorization::ServerAuthorization;
use super::error::{TrustError, TrustFailure, TrustRefused, refusal};
use super::settings::TrustSettings;
use super::source::{TrustReloadError, TrustSource};
use super::state::TrustState;
use crate::last_good::{
    MonotonicClock, ReloadRecorder, report::Reporter, slot::Accepted, slot::Episode, slot::Failure,
    slot::LastGood, slot::Served, watch_health::WatchWords,
};
use crate::material::TrustAnchors;
use crate::origin::{SourceHealth, TrustOrigin};

/// The serving half's use: a caller's certificate verified against the same roots.
mod client_auth;
/// Handles that do not keep a verifier alive.
mod handles;
/// rustls's seam: the handshake's verification, in a file of its own.
mod handshake;

use handles::FollowingVerifier;
#[cfg(feature = "metrics")]
pub(crate) use handles::WeakTrustVerifier;

/// The roots being used and webpki's verifier for them.
#[derive(Debug, Clone)]
struct Roots {
    anchors: Arc<TrustAnchors>,
    verifier: Arc<WebPkiServerVerifier>,
}

/// One trust decision: the same `Arc`, or the same anchors re-wrapped. A re-wrap is
/// no trust change: it must neither rebuild webpki's verifier nor retire the pooled
/// connections made under these roots (issue 48: a loader's and a builder's racing
/// loads of one version once made two `Arc`s of it).
fn same_roots(a: &Roots, b: &Roots) -> bool {
    Arc::ptr_eq(&a.anchors, &b.anchors) || a.anchors.same_roots_as(&b.anchors)
}

struct Inner {
    /// Whether the source's latest answer withdrew its trust.
    withdrawn: AtomicBool,
    source: Arc<dyn TrustSource>,
    provider: Arc<CryptoProvider>,
    authorization: ServerAuthorization,
    core: LastGood<Roots>,
    recorder: Arc<dyn ReloadRecorder<TrustOrigin, TrustAnchors>>,
    /// The settings it was built with (the bounds on roots without their source).
    settings: TrustSettings,
    /// Whether the failing reads say the source is gone (deleted, malformed,
    /// refused), so that the bound applies.
    source_gone: AtomicBool,
}

/// The trust's words and recorder events; the order of events is the core's.
impl Reporter<Roots> for Inner {
    type Origin = TrustOrigin;
    type Value = TrustAnchors;

    const WATCH_WORDS: WatchWords = WatchWords {
        subject: "CA trust",
        consequence: "a rotated CA would not be seen; verifying against the roots last seen",
    };

    fn core(&self) -> &LastGood<Roots> {
        &self.core
    }

    fn origin(&self) -> &TrustOrigin {
        self.source.origin()
    }

    fn health(&self) -> Option<SourceHealth> {
        self.source.health()
    }

    fn recorder(&self) -> &dyn ReloadRecorder<TrustOrigin, TrustAnchors> {
        &*self.recorder
    }

    fn shown(roots: &Roots) -> &TrustAnchors {
        &roots.anchors
    }

    /// A withdrawal is an error of its own (every server is refused); any other
    /// failure is a stale-trust warning.
    fn stale(&self, failure: &TrustReloadError, failed: &Failure<Roots>, suppressed: u64) {
        let origin = self.source.origin();
        if matches!(failure, TrustReloadError::Withdrawn(_)) {
            tracing::error!(
                source = %origin,
                error = %excerpt::chain(failure),
                suppressed,
                "CA trust withdrawn by its source; refusing every server until it trusts \
                 roots again ({suppressed} more failures suppressed since the last report)",
            );
            return;
        }
        let stale_for = failed.stale_for;
        tracing::warn!(
            source = %origin,
            error = %excerpt::chain(failure),
            roots = failed.served.value.anchors.len(),
            stale_for_secs = stale_for.as_secs(),
            suppressed,
            "CA trust reload failed; verifying servers against the last good roots \
             (stale for {}s, {} more failures suppressed since the last warning)",
            stale_for.as_secs(),
            suppressed,
        );
        self.record_stale(failure, failed, suppressed);
    }

    fn log_recovery(&self, roots: &Roots, episode: &Episode) {
        let origin = self.source.origin();
        let (failures, suppressed) = (episode.failures, episode.suppressed);
        tracing::info!(
            source = %origin,
            roots = roots.anchors.len(),
            failures,
            episode_secs = episode.duration.as_secs(),
            suppressed,
            "CA trust reloaded again after {failures} failed reloads over {}s \
             ({suppressed} earlier recoveries not logged)",
            episode.duration.as_secs(),
        );
    }
}

/// A rustls server-certificate verifier whose roots follow a watched source (the
/// peer's CA Secret, or a SPIFFE trust domain's bundle). Cheap to clone and share (an
/// `Arc`): build it once at start-up and hand clones to every client configuration.
#[derive(Clone)]
pub struct TrustVerifier {
    inner: Arc<Inner>,
}

impl fmt::Debug for TrustVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let served = self.inner.core.served();
        f.debug_struct("TrustVerifier")
            .field("source", self.inner.source.origin())
            .field("roots", &served.value.anchors.len())
            .field("failures", &self.inner.core.failures())
            .finish()
    }
}

fn build_verifier(
    anchors: &TrustAnchors,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, rustls::client::VerifierBuilderError> {
    WebPkiServerVerifier::builder_with_provider(anchors.roots().clone(), provider.clone()).build()
}

impl TrustVerifier {
    /// Whether `self` and `other` are the same verifier (clones of one).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A verifier over `source` (it must hold a usable root set now), reporting to
    /// `recorder` and authorizing servers as `authorization` says: what
    /// [`TrustVerifierBuilder::build`](super::TrustVerifierBuilder::build) and the
    /// options-based constructors run.
    pub(crate) fn with_settings(
        source: Arc<dyn TrustSource>,
        provider: Arc<CryptoProvider>,
        recorder: Arc<dyn ReloadRecorder<TrustOrigin, TrustAnchors>>,
        clock: Arc<dyn MonotonicClock>,
        settings: &TrustSettings,
        authorization: ServerAuthorization,
    ) -> Result<Self, TrustError> {
        let (anchors, version) = source.current_versioned()?;
        let verifier =
            build_verifier(&anchors, &provider).map_err(|source_error| TrustError::Verifier {
                origin: source.origin().clone(),
                source: source_error,
            })?;
        let core = LastGood::new(Roots { anchors, verifier }, version, settings.core(clock));
        let inner = Inner {
            withdrawn: AtomicBool::new(false),
            source,
            provider,
            authorization,
            core,
            recorder,
            settings: settings.clone(),
            source_gone: AtomicBool::new(false),
        };
        inner.loaded(&inner.core.served());
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// Reads the roots from the source now, as a handshake does, and returns the roots
    /// and webpki's verifier to use: the ones for the current roots (a verifier built
    /// only when they changed), or on failure the last good ones.
    ///
    /// Refuses instead (an error for the handshake) when the source has withdrawn its
    /// trust, and when the last good roots it would fall back on have expired. Also
    /// hands back why the source's read failed (`None` when it did not), for the
    /// readiness probe, which words its reason from its own read (`by`: a probe's
    /// failure is recorded apart from a handshake's, see `ReadBy`).
    fn reload(
        &self,
        by: crate::last_good::slot::ReadBy,
    ) -> (
        Result<Arc<Served<Roots>>, rustls::Error>,
        Option<TrustReloadError>,
    ) {
        let read = match self.inner.source.current_versioned() {
            Ok((anchors, version)) => {
                self.inner.withdrawn.store(false, Ordering::Release);
                (self.serve(anchors, version, by), None)
            }
            Err(error) => {
                if matches!(error, TrustReloadError::Withdrawn(_)) {
                    self.inner.withdrawn.store(true, Ordering::Release);
                }
                let served = self.failed(&error, by);
                // Withdrawn stays withdrawn: a source that cannot be read after it
                // withdrew its trust (a stream down, an agent restarting) never brings
                // back the roots it withdrew; only a successful read does.
                let served = if self.inner.withdrawn.load(Ordering::Acquire) {
                    Err(refusal(TrustRefused::Withdrawn))
                } else {
                    served
                };
                (served, Some(error))
            }
        };
        self.inner.check_watch_health();
        read
    }

    /// A successful read: use it, building its verifier if the roots are new.
    fn serve(
        &self,
        anchors: Arc<TrustAnchors>,
        version: Option<u64>,
        by: crate::last_good::slot::ReadBy,
    ) -> Result<Arc<Served<Roots>>, rustls::Error> {
        let inner = &*self.inner;
        let current = inner.core.served();
        if Arc::ptr_eq(&current.value.anchors, &anchors)
            || current.value.anchors.same_roots_as(&anchors)
        {
            let served = arc_swap::Guard::into_inner(current);
            inner.end_episode(&served.value);
            return Ok(served);
        }
        drop(current);
        let verifier = match build_verifier(&anchors, &inner.provider) {
            Ok(verifier) => verifier,
            Err(source) => {
                let unusable = TrustFailure::Verifier {
                    origin: inner.source.origin().clone(),
                    source,
                };
                return self.failed(&TrustReloadError::Unavailable(Box::new(unusable)), by);
            }
        };
        Ok(
            match inner.serve(Roots { anchors, verifier }, version, same_roots) {
                Accepted::Same(_) => inner.core.served_full(),
                // Installed, or an older snapshot than the roots used: keep those.
                Accepted::Installed(served) | Accepted::Older(served) => served,
            },
        )
    }

    /// A failed read: record it (a handshake's counted and reported, rate-limited),
    /// use the last good roots while they have not expired.
    fn failed(
        &self,
        failure: &TrustReloadError,
        by: crate::last_good::slot::ReadBy,
    ) -> Result<Arc<Served<Roots>>, rustls::Error> {
        let inner = &*self.inner;
        let failed = inner.fail(failure, by);
        let source_gone = matches!(
            failure,
            TrustReloadError::NotFound { .. }
                | TrustReloadError::Material(_)
                | TrustReloadError::ConfigMap(_)
                | TrustReloadError::ClusterTrustBundles(_)
                | TrustReloadError::Refused { .. }
        );
        inner.source_gone.store(source_gone, Ordering::Release);
        if let TrustReloadError::Refused { code, .. } = failure
            && failed.failing_for > inner.settings.refused_bound()
        {
            if failed.report.is_some() {
                tracing::error!(
                    source = %inner.source.origin(),
                    code,
                    failing_for_secs = failed.failing_for.as_secs(),
                    limit_secs = inner.settings.refused_bound().as_secs(),
                    "the API server has refused the watch of the CA Secret or ConfigMap for \
                     longer than its roots are kept; refusing every server until it is \
                     followed again",
                );
            }
            return Err(refusal(TrustRefused::AccessRefused {
                code: *code,
                failing_for: failed.failing_for,
                limit: inner.settings.refused_bound(),
            }));
        }
        if source_gone && failed.failing_for > inner.settings.max_roots_without_source {
            if failed.report.is_some() {
                tracing::error!(
                    source = %inner.source.origin(),
                    failing_for_secs = failed.failing_for.as_secs(),
                    limit_secs = inner.settings.max_roots_without_source.as_secs(),
                    "CA Secret or ConfigMap missing or unreadable for longer than its roots are kept; \
                     refusing every server until it is readable again",
                );
            }
            return Err(refusal(TrustRefused::SourceGone {
                failing_for: failed.failing_for,
                limit: inner.settings.max_roots_without_source,
            }));
        }
        match failed.served.value.anchors.not_after() {
            Some(not_after) if not_after < SystemTime::now() => {
                Err(refusal(TrustRefused::Expired { not_after }))
            }
            _ => Ok(failed.served),
        }
    }

    /// A snapshot of the visible state: roots used, failures, staleness, watch health.
    pub fn state(&self) -> TrustState {
        let inner = &*self.inner;
        let watch = inner.watch_state();
        let served = inner.core.served();
        TrustState {
            origin: inner.source.origin().clone(),
            roots: served.value.anchors.len(),
            not_after: served.value.anchors.not_after(),
            last_good_reload: served.loaded_at,
            failures: inner.core.failures(),
            stale: inner.core.is_stale(),
            watch_error: inner.source.watch_error(),
            watch,
            withdrawn: inner.withdrawn.load(Ordering::Acquire),
        }
    }

    /// The root set currently used (the last good one), without reloading.
    pub fn current(&self) -> Arc<TrustAnchors> {
        self.inner.core.served().value.anchors.clone()
    }

    /// Reads the source now, exactly as a handshake does (the last good roots when
    /// the read fails, counted and warned about as for a handshake), and returns the
    /// roots in force: for verifying certificates outside a TLS handshake, such as a
    /// client certificate forwarded by an ingress (the principal module's
    /// `IngressVerifier`). No I/O and no lock.
    ///
    /// # Errors
    /// The handshake's refusal when the source has withdrawn its trust, or fails and
    /// the last good roots have expired.
    pub fn roots_now(&self) -> Result<Arc<TrustAnchors>, rustls::Error> {
        self.reload(crate::last_good::slot::ReadBy::Handshake)
            .0
            .map(|served| served.value.anchors.clone())
    }

    /// Reads the roots now, as [`TrustVerifier::roots_now`] but by `by`, and hands
    /// back why the source's read failed (`None` when it did not). Crate-internal: the
    /// readiness probe's one read.
    pub(crate) fn reload_reporting_error(
        &self,
        by: crate::last_good::slot::ReadBy,
    ) -> Option<TrustReloadError> {
        self.reload(by).1
    }

    /// The source the roots are read from.
    pub fn trust_source(&self) -> &dyn TrustSource {
        &*self.inner.source
    }

    /// Whether the source's latest answer withdrew its trust (a SPIFFE trust domain
    /// no longer federated): every handshake is refused until it trusts again.
    pub fn is_withdrawn(&self) -> bool {
        self.inner.withdrawn.load(Ordering::Acquire)
    }

    /// Whether every handshake would be refused now without a look at the server's
    /// chain: the trust withdrawn, the source gone (deleted, broken, its watch
    /// refused) for longer than the bound, or the last good roots expired while the
    /// source fails. No side effect (nothing counted or logged), atomics and clock
    /// reads only: a pooled client asks on every request, so that its kept-alive
    /// connections retire when the verifier starts refusing, not only when the roots
    /// change. A watch refused since the last read starts the failure episode (one
    /// read, as a handshake would make) so that the bound is counted from now.
    pub(crate) fn refuses_now(&self) -> bool {
        let inner = &*self.inner;
        if inner.withdrawn.load(Ordering::Acquire) {
            return true;
        }
        if inner.source.refused_now().is_some() && !inner.core.is_stale() {
            let _ = self.reload(crate::last_good::slot::ReadBy::Handshake);
        }
        let Some(failing_for) = inner.core.failing_for() else {
            return false;
        };
        let limit = if inner.source.refused_now().is_some() {
            inner.settings.refused_bound()
        } else {
            inner.settings.max_roots_without_source
        };
        if inner.source_gone.load(Ordering::Acquire) && failing_for > limit {
            return true;
        }
        inner
            .core
            .served()
            .value
            .anchors
            .not_after()
            .is_some_and(|not_after| not_after < SystemTime::now())
    }

    /// A handle that does not keep it alive (what the metrics export while it
    /// lives).
    #[cfg(feature = "metrics")]
    pub(crate) fn downgrade(&self) -> WeakTrustVerifier {
        WeakTrustVerifier(Arc::downgrade(&self.inner))
    }

    /// How many handles (clones) of this share its state: a registry's cache keeps
    /// one, so more means it is held outside the registry.
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// A follower that reloads this verifier each time its source changes (see
    /// [`crate::follow`]), holding it weakly.
    pub(crate) fn follower(&self) -> Box<dyn Follower> {
        Box::new(FollowingVerifier(Arc::downgrade(&self.inner)))
    }
}
