//! The handshake-time client-certificate resolver.
//!
//! [`IdentityResolver`] implements rustls's [`ResolvesClientCert`]. On **every**
//! handshake it asks its [`IdentitySource`] (the identity seam) for the identity it
//! holds now. For a Secret ([`SecretIdentitySource`](super::SecretIdentitySource)) that
//! is the client-certificate Secret from the watch cache (a sync map read and an `Arc`
//! clone), loaded through an
//! [`IdentityCache`](crate::material::IdentityCache) that reuses the previous load when
//! `tls.crt` and `tls.key` are byte-for-byte unchanged (time checks still run every
//! handshake), so an unchanged Secret costs a byte comparison and any change is fully
//! loaded on the very next handshake. No lock is held while loading and nothing on this
//! path does I/O. Each handshake presents one whole identity built from one snapshot of
//! the source: a certificate and a key from two different versions cannot be mixed.
//!
//! When a reload fails after a good one (malformed Secret, wrong key, deleted Secret),
//! the last good identity is served, the failure is counted, and a warning is logged at
//! most once per period (a minute by default) with how many failures were suppressed
//! and how long the stale identity has been served. A deleted Secret keeps the last
//! good identity; a recreated one is used on the next handshake. For the SPIFFE
//! Workload API ([`SpiffeIdentitySource`](super::SpiffeIdentitySource)) the read is a
//! pointer load of the newest SVID.
//!
//! All of that is the one last-good core ([`crate::last_good`]), shared with the trust
//! verifier: the last good identity lives in a lock-free slot, handshakes swap a
//! pointer, nothing waits on anything. This file words the lines and calls the
//! recorder.
//!
//! # Pooled connections
//! The identity is chosen during the TLS handshake. An established connection (for
//! example one kept alive in `reqwest`'s pool) keeps the identity it was opened with
//! until it is closed; only new connections present a rotated identity. TLS session
//! resumption is disabled on configurations built by [`crate::client`], because a
//! resumed handshake does not ask the resolver at all.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;
use watch_ready::excerpt;

use rustls::SignatureScheme;
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;

use super::source::{IdentityReloadError, IdentitySource};
use super::state::IdentityState;
use crate::follow::Follower;
use crate::last_good::{
    OutsideValidity, ReloadRecorder, report::Reporter, slot::Accepted, slot::Episode,
    slot::Failure, slot::LastGood, slot::Settings, watch_health::WatchWords,
};
use crate::material::{CertificateValidity, Identity, validity::time_text};
use crate::origin::{IdentityOrigin, SourceHealth};
use crate::watch::{Secret, WatchError};

/// Why an identity resolver could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// The Secret's cache could not be started.
    #[error(transparent)]
    Source(#[from] WatchError<Secret>),
    /// The source holds no usable identity now: the Secret does not exist or is
    /// malformed (naming the Secret and the data key), or the SVID is unusable; the
    /// same reasons a handshake-time reload fails for.
    #[error(transparent)]
    Unusable(#[from] IdentityReloadError),
    /// A registry was set ([`WatchedBuilder::watches`](crate::watch::WatchedBuilder::watches))
    /// on a builder over a source of the caller's, which reads no object the registry
    /// could share.
    #[error(
        "a registry of watched objects was set on the builder of a resolver over {origin}, \
         a source of the caller's that reads no object; remove `.watches(..)`"
    )]
    SharedSource {
        /// Where the source's identity comes from.
        origin: IdentityOrigin,
    },
    /// The builder has no client to read its Secret through (neither its own nor a
    /// registry's). Not reachable through the public constructors.
    #[error("the builder of a resolver over {origin} has no client to read it through")]
    NoClient {
        /// The Secret.
        origin: IdentityOrigin,
    },
}

struct Inner {
    source: Arc<dyn IdentitySource>,
    core: LastGood<Identity>,
    recorder: Arc<dyn ReloadRecorder<IdentityOrigin, Identity>>,
}

/// The identity's words and recorder events; the order of events is the core's.
impl Reporter<Identity> for Inner {
    type Origin = IdentityOrigin;
    type Value = Identity;

    const WATCH_WORDS: WatchWords = WatchWords {
        subject: "client certificate",
        consequence: "a renewed certificate would not be seen; presenting the identity last seen",
    };

    fn core(&self) -> &LastGood<Identity> {
        &self.core
    }

    fn origin(&self) -> &IdentityOrigin {
        self.source.origin()
    }

    fn health(&self) -> Option<SourceHealth> {
        self.source.health()
    }

    fn recorder(&self) -> &dyn ReloadRecorder<IdentityOrigin, Identity> {
        &*self.recorder
    }

    fn shown(identity: &Identity) -> &Identity {
        identity
    }

    /// A stale identity is warned about; one outside its validity period is an error
    /// of its own (every peer refuses it).
    fn stale(&self, error: &IdentityReloadError, failure: &Failure<Identity>, suppressed: u64) {
        let origin = self.source.origin();
        let identity = &failure.served.value;
        let validity = CertificateValidity::of(identity, SystemTime::now());
        if validity.is_valid() {
            let stale_for = failure.stale_for;
            tracing::warn!(
                source = %origin,
                error = %excerpt::chain(error),
                serial = %identity.serial_hex(),
                stale_for_secs = stale_for.as_secs(),
                suppressed,
                "client certificate reload failed; serving the last good identity \
                 (stale for {}s, {} more failures suppressed since the last warning)",
                stale_for.as_secs(),
                suppressed,
            );
            self.record_stale(error, failure, suppressed);
        } else {
            // Not the generic stale warning: the identity served is itself refused by
            // every peer.
            tracing::error!(
                source = %origin,
                error = %excerpt::chain(error),
                serial = %identity.serial_hex(),
                not_before = %time_text(identity.not_before()),
                not_after = %time_text(identity.not_after()),
                validity = %validity,
                suppressed,
                "client certificate reload failed and the identity served is {validity}: \
                 peers refuse it until the Secret holds a valid certificate \
                 ({suppressed} more failures suppressed since the last report)",
            );
            self.recorder.outside_validity(&OutsideValidity {
                origin,
                serving: identity,
                validity,
                reload_error: Some(error),
                suppressed,
            });
        }
    }

    fn log_recovery(&self, identity: &Identity, episode: &Episode) {
        let origin = self.source.origin();
        let (failures, suppressed) = (episode.failures, episode.suppressed);
        tracing::info!(
            source = %origin,
            serial = %identity.serial_hex(),
            failures,
            episode_secs = episode.duration.as_secs(),
            suppressed,
            "client certificate reloaded again after {failures} failed reloads over {}s \
             ({suppressed} earlier recoveries not logged)",
            episode.duration.as_secs(),
        );
    }
}

fn same_identity(a: &Identity, b: &Identity) -> bool {
    Arc::ptr_eq(a.certified_key(), b.certified_key())
}

/// A rustls client-certificate resolver that reloads the identity from its source
/// on every handshake. Cheap to clone and share (an `Arc`): build it once at start-up
/// and hand clones to every client configuration.
#[derive(Clone)]
pub struct IdentityResolver {
    inner: Arc<Inner>,
}

impl IdentityResolver {
    /// Whether `self` and `other` are the same resolver (clones of one), sharing its
    /// last good identity, failure episodes and watch health.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl fmt::Debug for IdentityResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Public facts only, never key material.
        let served = self.inner.core.served();
        f.debug_struct("IdentityResolver")
            .field("source", self.inner.source.origin())
            .field("serial", &served.value.serial_hex())
            .field("failures", &self.inner.core.failures())
            .finish()
    }
}

impl IdentityResolver {
    /// A resolver over `source` (it must hold an identity now; one outside its
    /// validity period is served and reported), reporting to `recorder`: what
    /// [`IdentityResolverBuilder::build`](super::IdentityResolverBuilder::build) and
    /// the options-based constructors run.
    pub(crate) fn with_settings(
        source: Arc<dyn IdentitySource>,
        recorder: Arc<dyn ReloadRecorder<IdentityOrigin, Identity>>,
        settings: Settings,
    ) -> Result<Self, IdentityError> {
        let (identity, version, invalid) = match source.current_versioned() {
            Ok((identity, version)) => (identity, version, false),
            // Missing and malformed identities stop start-up; a certificate that is
            // only outside its validity period does not (see
            // docs/decisions/certificate-validity.md).
            Err(error) if error.is_validity_error() => {
                (source.current_ignoring_validity()?, None, true)
            }
            Err(error) => return Err(error.into()),
        };
        let core = LastGood::new(identity, version, settings);
        let inner = Inner {
            source,
            core,
            recorder,
        };
        inner.loaded(&inner.core.served());
        let resolver = Self {
            inner: Arc::new(inner),
        };
        if invalid {
            resolver.report_invalid_at_start();
        }
        Ok(resolver)
    }

    /// The start-up report of a certificate outside its validity period: one ERROR
    /// (it takes the limiter's slot, so the failing handshakes that follow within the
    /// period do not repeat it) and a recorder event.
    fn report_invalid_at_start(&self) {
        let inner = &*self.inner;
        let served = inner.core.served();
        let identity = &served.value;
        let validity = CertificateValidity::of(identity, SystemTime::now());
        let _ = inner.core.admit_warning();
        tracing::error!(
            source = %inner.source.origin(),
            serial = %identity.serial_hex(),
            not_before = %time_text(identity.not_before()),
            not_after = %time_text(identity.not_after()),
            validity = %validity,
            "client certificate is {validity} at start-up; starting anyway and presenting it \
             (peers will refuse it) until the Secret is renewed, which is picked up on the \
             next handshake"
        );
        inner.recorder.outside_validity(&OutsideValidity {
            origin: inner.source.origin(),
            serving: identity,
            validity,
            reload_error: None,
            suppressed: 0,
        });
    }

    /// Reads the identity from the source now, as a handshake does, and returns the
    /// identity to present: the fresh one, or on failure the last good one.
    ///
    /// The served slot is written only when the identity changed, and never with an
    /// identity read from an older version of the source than the one served.
    pub fn reload(&self) -> Identity {
        self.reload_reporting(crate::last_good::slot::ReadBy::Handshake)
            .0
    }

    /// [`IdentityResolver::reload`] by `by`, also handing back why this read failed
    /// (`None` when it did not, or when another caller is loading a new version): for
    /// the readiness probe, which words its reason from its own read, and whose failed
    /// read is recorded apart from a handshake's (see `ReadBy`).
    pub(crate) fn reload_reporting(
        &self,
        by: crate::last_good::slot::ReadBy,
    ) -> (Identity, Option<IdentityReloadError>) {
        let inner = &*self.inner;
        let read = match inner.source.current_on_handshake() {
            Ok((identity, version)) => match inner.serve(identity, version, same_identity) {
                // The common path: the identity read is the one served, handed back.
                Accepted::Same(identity) => (identity, None),
                // Installed, or this handshake read an older snapshot than the one
                // served: present the newer identity.
                Accepted::Installed(served) | Accepted::Older(served) => {
                    (served.value.clone(), None)
                }
            },
            // Another caller is loading the new version: present what is served.
            Err(IdentityReloadError::InProgress) => (self.current(), None),
            // Recorded (a handshake's counted and reported, rate-limited), the last
            // good identity presented.
            Err(error) => (inner.fail(&error, by).served.value.clone(), Some(error)),
        };
        inner.check_watch_health();
        read
    }

    /// The identity currently served (the last good one), without reloading.
    pub fn current(&self) -> Identity {
        self.inner.core.served().value.clone()
    }

    /// A snapshot of the visible state: serial, expiry, last good reload, failures,
    /// whether the certificate is valid now, and the health of the source's watch.
    pub fn state(&self) -> IdentityState {
        let inner = &*self.inner;
        let watch = inner.watch_state();
        let served = inner.core.served();
        let identity = &served.value;
        IdentityState {
            origin: inner.source.origin().clone(),
            serial_hex: identity.serial_hex().to_string(),
            spiffe_id: identity.spiffe_id().map(str::to_owned),
            not_after: identity.not_after(),
            last_good_reload: served.loaded_at,
            failures: inner.core.failures(),
            stale: inner.core.is_stale(),
            validity: CertificateValidity::of(identity, SystemTime::now()),
            watch,
        }
    }

    /// The source the identity is read from.
    pub fn identity_source(&self) -> &dyn IdentitySource {
        &*self.inner.source
    }

    /// A handle that does not keep it alive (what the metrics export while it
    /// lives).
    #[cfg(feature = "metrics")]
    pub(crate) fn downgrade(&self) -> WeakIdentityResolver {
        WeakIdentityResolver(Arc::downgrade(&self.inner))
    }

    /// How many handles (clones) of this share its state: a registry's cache keeps
    /// one, so more means it is held outside the registry.
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// A follower that reloads this resolver each time its source changes (see
    /// [`crate::follow`]), holding it weakly.
    pub(crate) fn follower(&self) -> Box<dyn Follower> {
        Box::new(FollowingResolver(Arc::downgrade(&self.inner)))
    }
}

/// Reloads a resolver when its source changed, so its state, its recorder and the
/// pooled connections that follow it see a new version without a handshake.
struct FollowingResolver(std::sync::Weak<Inner>);

impl Follower for FollowingResolver {
    fn source_changed(&self) -> bool {
        let Some(inner) = self.0.upgrade() else {
            return false;
        };
        // A reload that loads something: a span naming the source and the serial.
        let span = tracing::info_span!("svc_tls.identity.reload", source = %inner.source.origin(), serial = tracing::field::Empty);
        let _entered = span.enter();
        let identity = IdentityResolver { inner }.reload();
        span.record("serial", tracing::field::display(identity.serial_hex()));
        true
    }
}

impl ResolvesClientCert for IdentityResolver {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        // The identity is presented whatever the hints say: the peer decides.
        Some(self.reload().certified_key().clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// A [`IdentityResolver`] that does not keep it alive.
#[cfg(feature = "metrics")]
#[derive(Clone)]
pub(crate) struct WeakIdentityResolver(std::sync::Weak<Inner>);

#[cfg(feature = "metrics")]
impl WeakIdentityResolver {
    /// The IdentityResolver, while a clone of it lives.
    pub(crate) fn upgrade(&self) -> Option<IdentityResolver> {
        self.0.upgrade().map(|inner| IdentityResolver { inner })
    }
}
