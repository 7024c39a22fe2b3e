//! What the options-based constructors record into: the recorders and state exports
//! of a [`WatchedObjects`] registry's metrics, or nothing without them. Above both
//! halves and the watch layer, so that neither has to know the other.
//!
//! A registry's metrics are found with `Metrics::installed_in`: a typed lookup of
//! the metrics module (imported here), not a value the watch layer stores for us to
//! downcast. The watch layer only keeps the metrics as its `RegistryObserver`: it may
//! not name the recorders they make (see `watch/observer.rs`).

use std::sync::Arc;

use cluster_id::ClusterId;

use crate::identity::{IdentityError, IdentityObject, IdentityResolver, IdentitySettings};
use crate::last_good::{NoopRecorder, ReloadRecorder};
use crate::material::{Identity, TrustAnchors};
#[cfg(feature = "metrics")]
use crate::metrics::Metrics;
use crate::origin::{IdentityOrigin, SecretRef, TrustOrigin};
use crate::principal;
use crate::trust::{TrustError, TrustObject, TrustSettings, TrustVerifier};
use crate::watch::{WatchedBuilder, WatchedObjects};

/// The identity recorder for a resolver over `origin` built on `watches` (a
/// no-op without metrics). Construction path.
pub(crate) fn identity_recorder(
    watches: &WatchedObjects,
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
    watches: &WatchedObjects,
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
    watches: &WatchedObjects,
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
    watches: &WatchedObjects,
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
pub(crate) fn track_receiver(
    watches: &WatchedObjects,
    verifier: &crate::receiving::IngressVerifier,
) {
    #[cfg(feature = "metrics")]
    if let Some(metrics) = Metrics::installed_in(watches) {
        metrics.track_receiver(verifier);
    }
    let _ = (watches, verifier);
}

/// The principal recorder of signers and verifiers built over `watches` (a no-op
/// without metrics). Construction path.
pub(crate) fn principal_recorder(watches: &WatchedObjects) -> PrincipalRecording {
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

/// The verifier over `object` read from `client`'s cluster through `watches`, built
/// by the one trust builder ([`TrustVerifier::builder`]'s) with `settings`: the object
/// watched once per registry, the verifier kept in its entry and shared by every later
/// caller with the same settings, recording into the registry's metrics. Waits up to
/// the settings' sync timeout for the first sync.
pub(crate) async fn kept_trust(
    watches: &WatchedObjects,
    client: &cluster_id::ClusterClient,
    object: TrustObject,
    settings: &TrustSettings,
) -> Result<TrustVerifier, TrustError> {
    let origin = match &object {
        TrustObject::Secret { secret } => TrustOrigin::Secret(secret.clone()),
        TrustObject::ConfigMap { configmap, key } => TrustOrigin::ConfigMap {
            configmap: Box::new(configmap.clone()),
            key: key.clone(),
        },
        TrustObject::ClusterTrustBundles { bundles } => {
            TrustOrigin::ClusterTrustBundles(Box::new(bundles.clone()))
        }
        TrustObject::Source { source, .. } => source.origin().clone(),
    };
    let verifier = WatchedBuilder::kept_in(object, watches, client)
        .settings(settings.clone())
        .provider(watches.provider().clone())
        .recorder(trust_recorder(watches, &origin, Some(client.cluster())))
        .build()
        .await?;
    track_trust(watches, &verifier, Some(client.cluster()));
    Ok(verifier)
}

/// The resolver of the identity in `secret`, read from `client`'s cluster through
/// `watches`, built by the one identity builder with `settings` (as
/// [`kept_trust`]): kept in the Secret's entry, its keys loaded into the entry's
/// cache, recording into the registry's metrics.
pub(crate) async fn kept_identity(
    watches: &WatchedObjects,
    client: &cluster_id::ClusterClient,
    secret: &SecretRef,
    settings: &IdentitySettings,
) -> Result<IdentityResolver, IdentityError> {
    let origin = IdentityOrigin::Secret(secret.clone());
    let resolver = WatchedBuilder::kept_in(
        IdentityObject::Secret {
            secret: secret.clone(),
        },
        watches,
        client,
    )
    .settings(settings.clone())
    .recorder(identity_recorder(
        watches,
        &origin,
        None,
        Some(client.cluster()),
    ))
    .build()
    .await?;
    track_identity(watches, &resolver, Some(client.cluster()));
    Ok(resolver)
}

/// The recorder of the requests of peer clients built over `watches` (`None`
/// without metrics: the clients then record nothing). Construction path.
pub(crate) fn peer_recorder(
    watches: &WatchedObjects,
) -> Option<crate::recording::peer::Held<dyn crate::recording::PeerRecorder>> {
    #[cfg(feature = "metrics")]
    if let Some(metrics) = Metrics::installed_in(watches) {
        return Some(crate::recording::peer::Held(metrics.peer_recorder()));
    }
    let _ = watches;
    None
}
