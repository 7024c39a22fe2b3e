//! What the options-based constructors record into: the recorders and state exports
//! of a [`SecretWatches`] registry's metrics, or nothing without them. Above both
//! halves and the watch layer, so that neither has to know the other.
//!
//! A registry's metrics are found with `Metrics::installed_in`: a typed lookup of
//! the metrics module (imported here), not a value the watch layer stores for us to
//! downcast. The watch layer only keeps the metrics as its `RegistryObserver`: it may
//! not name the recorders they make (see `watch/observer.rs`).

use std::sync::Arc;

use cluster_id::ClusterId;
use std::time::Duration;

use crate::identity::IdentityResolver;
use crate::last_good::{NoopRecorder, ReloadRecorder};
use crate::material::{Identity, TrustAnchors};
#[cfg(feature = "metrics")]
use crate::metrics::Metrics;
use crate::origin::{IdentityOrigin, SecretRef, TrustOrigin};
use crate::principal;
use crate::trust::{SecretTrustSource, ServerAuthorization, TrustError, TrustVerifier};
use crate::watch::SecretWatches;

/// The identity recorder for a resolver over `origin` built on `watches` (a
/// no-op without metrics). Construction path.
pub(crate) fn identity_recorder(
    watches: &SecretWatches,
    origin: &IdentityOrigin,
    spiffe_id: Option<&str>,
    cluster: Option<&ClusterId>,
) -> Arc<dyn ReloadRecorder<IdentityOrigin, Identity>> {
    #[cfg(feature = "metrics")]
    if let Some(metrics) = Metrics::installed_in(watches) {
        return metrics.identity_recorder(origin, spiffe_id, cluster);
    }
    let _ = (watches, origin, spiffe_id, cluster);
    Arc::new(NoopRecorder)
}

/// The trust recorder for a verifier over `origin` built on `watches` (a no-op
/// without metrics). Construction path.
pub(crate) fn trust_recorder(
    watches: &SecretWatches,
    origin: &TrustOrigin,
    cluster: Option<&ClusterId>,
) -> Arc<dyn ReloadRecorder<TrustOrigin, TrustAnchors>> {
    #[cfg(feature = "metrics")]
    if let Some(metrics) = Metrics::installed_in(watches) {
        return metrics.trust_recorder(origin, cluster);
    }
    let _ = (watches, origin, cluster);
    Arc::new(NoopRecorder)
}

/// Exports `resolver`'s state when this registry has metrics.
pub(crate) fn track_identity(
    watches: &SecretWatches,
    resolver: &IdentityResolver,
    cluster: Option<&ClusterId>,
) {
    #[cfg(feature = "metrics")]
    if let Some(metrics) = Metrics::installed_in(watches) {
        metrics.track_identity(resolver, cluster);
    }
    let _ = (watches, resolver, cluster);
}

/// Exports `verifier`'s state when this registry has metrics.
pub(crate) fn track_trust(
    watches: &SecretWatches,
    verifier: &TrustVerifier,
    cluster: Option<&ClusterId>,
) {
    #[cfg(feature = "metrics")]
    if let Some(metrics) = Metrics::installed_in(watches) {
        metrics.track_trust(verifier, cluster);
    }
    let _ = (watches, verifier, cluster);
}

/// Exports `verifier`'s mode in force when this registry has metrics.
pub(crate) fn track_receiver(watches: &SecretWatches, verifier: &principal::IngressVerifier) {
    #[cfg(feature = "metrics")]
    if let Some(metrics) = Metrics::installed_in(watches) {
        metrics.track_receiver(verifier);
    }
    let _ = (watches, verifier);
}

/// The principal recorder of signers and verifiers built over `watches` (a no-op
/// without metrics). Construction path.
pub(crate) fn principal_recorder(watches: &SecretWatches) -> PrincipalRecording {
    #[cfg(feature = "metrics")]
    if let Some(metrics) = Metrics::installed_in(watches) {
        return PrincipalRecording(metrics.principal_recorder());
    }
    let _ = watches;
    PrincipalRecording(Arc::new(NoopRecorder))
}

/// A principal recorder held by a client (`Debug` without showing it).
#[derive(Clone)]
pub(crate) struct PrincipalRecording(pub(crate) Arc<dyn principal::TokenRecorder>);

impl std::fmt::Debug for PrincipalRecording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrincipalRecording")
    }
}

/// The verifier of `ca`'s roots over `watches`: the Secret watched once per registry,
/// the verifier built once per Secret (every later caller shares it), recording into
/// the registry's metrics. Waits up to `sync_timeout` for the first sync.
pub(crate) async fn watched_trust(
    watches: &SecretWatches,
    client: &cluster_id::ClusterClient,
    ca: &SecretRef,
    sync_timeout: Duration,
) -> Result<TrustVerifier, TrustError> {
    let shared = watches.watch_trust(client, ca, sync_timeout).await?;
    shared.built(|| {
        let verifier = TrustVerifier::with_settings(
            Arc::new(SecretTrustSource::shared(&shared)),
            watches.provider().clone(),
            trust_recorder(
                watches,
                &TrustOrigin::Secret(ca.clone()),
                Some(client.cluster()),
            ),
            Arc::new(crate::last_good::SystemClock::new()),
            &crate::trust::TrustSettings::default(),
            ServerAuthorization::HostName,
        )?;
        track_trust(watches, &verifier, Some(client.cluster()));
        shared.follow(verifier.follower());
        Ok(verifier)
    })
}

/// The recorder of the requests of peer clients built over `watches` (`None`
/// without metrics: the clients then record nothing). Construction path.
pub(crate) fn peer_recorder(
    watches: &SecretWatches,
) -> Option<crate::recording::Held<dyn crate::recording::PeerRecorder>> {
    #[cfg(feature = "metrics")]
    if let Some(metrics) = Metrics::installed_in(watches) {
        return Some(crate::recording::Held(metrics.peer_recorder()));
    }
    let _ = watches;
    None
}
