//! One reconcile: cached reads, a provisioning scope for the remote cluster, a peer
//! call under that cluster's identity, a status write.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::{
    ResourceExt as _,
    api::{Patch, PatchParams},
};
use kube_construct::{
    client::ClientError,
    types::{
        ConditionReason, ConditionStatus, ConditionType, StatusConditionWriter as _,
        fake::ManagedResource,
    },
};
use kube_runtime::controller::Action;
use provision_scope::{
    self as scope, RemoteError, ResourceIdentifier, ScopeError, UntrustedKubeconfigError,
};
use svc_tls::{PeerClientError, PeerRequestError, PeerTls, UnidentifiedCluster};
use thiserror::Error;

use crate::{CLUSTER_LABEL, Context, RESYNC, Settings};

/// Why a reconcile failed (its text is the condition's message too).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReconcileError {
    /// A cached read or the status write failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The resource names no cluster.
    #[error("ManagedResource {object} has no label {CLUSTER_LABEL} naming its cluster")]
    NoCluster {
        /// `namespace/name`.
        object: String,
    },
    /// The named cluster's kubeconfig Secret is not there (or has no `value`).
    #[error(
        "no kubeconfig for cluster {cluster}: Secret {secret} (labelled {}) has no value",
        crate::KUBECONFIG_LABEL
    )]
    NoKubeconfig {
        /// The cluster.
        cluster: String,
        /// `namespace/name` of the Secret.
        secret: String,
    },
    /// The kubeconfig was refused (it is untrusted input).
    #[error(transparent)]
    Kubeconfig(#[from] UntrustedKubeconfigError),
    /// The local client has no cluster identity (adopted without one).
    #[error(transparent)]
    Unidentified(#[from] UnidentifiedCluster),
    /// The remote cluster could not be entered.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The provisioning scope lacks a value.
    #[error(transparent)]
    Scope(#[from] ScopeError),
    /// The peer's TLS could not be set up (its Secrets in the remote cluster).
    #[error(transparent)]
    Peer(#[from] PeerClientError),
    /// The peer's host flag is unusable.
    #[error(transparent)]
    Host(#[from] svc_tls::options::HostError),
    /// The path does not join onto the peer's host.
    #[error("the peer path does not make a URL: {0}")]
    Url(#[from] url::ParseError),
    /// The request failed.
    #[error(transparent)]
    Request(#[from] PeerRequestError),
    /// The peer answered, but not with success.
    #[error("the peer answered {status}")]
    Refused {
        /// The HTTP status.
        status: u16,
    },
    /// The reconcile panicked; the manager recovered it (and requeues the object).
    #[error("the reconcile of ManagedResource {object} panicked: {message}")]
    Panicked {
        /// `namespace/name`.
        object: String,
        /// The panic's text.
        message: String,
    },
}

/// After a failure: try again in 10 seconds (the condition says why meanwhile); after
/// a recovered panic, in 1 second (controller-runtime requeues it at once, rate
/// limited).
pub fn error_policy(_: Arc<ManagedResource>, error: &ReconcileError, _: Arc<Context>) -> Action {
    match error {
        ReconcileError::Panicked { .. } => Action::requeue(std::time::Duration::from_secs(1)),
        _ => Action::requeue(std::time::Duration::from_secs(10)),
    }
}

/// One reconcile of `object`: see the crate documentation.
///
/// # Errors
/// A [`ReconcileError`] (written into the `Available` condition as well).
pub async fn reconcile(
    object: Arc<ManagedResource>,
    context: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    // From the cache the controller's trigger shares: no API request.
    let Some(current) = context
        .client
        .get::<ManagedResource>(Some(&namespace), &name)?
    else {
        return Ok(Action::await_change()); // deleted meanwhile
    };
    let outcome = provision(&context, &current, &namespace).await;
    let (status, reason, message) = match &outcome {
        Ok(answer) => (
            ConditionStatus::True,
            ConditionReason::Provisioned,
            answer.clone(),
        ),
        Err(error) => (
            ConditionStatus::False,
            ConditionReason::Errored,
            svc_tls::excerpt::chain(error),
        ),
    };
    let mut updated = ManagedResource::clone(&current);
    updated.status_condition_write(ConditionType::Available, status, reason, &message);
    if updated.status != current.status {
        let patch = serde_json::json!({ "status": updated.status });
        context
            .client
            .patch_status::<ManagedResource, _>(
                Some(&namespace),
                &name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
    }
    outcome.map(|_| Action::requeue(RESYNC))
}

/// Enters the resource's remote cluster and calls the peer there; the answer, as the
/// condition's message.
async fn provision(
    context: &Context,
    object: &ManagedResource,
    namespace: &str,
) -> Result<String, ReconcileError> {
    let cluster = object
        .labels()
        .get(CLUSTER_LABEL)
        .ok_or_else(|| ReconcileError::NoCluster {
            object: format!("{namespace}/{}", object.name_any()),
        })?;
    let secret_name = format!("{cluster}-kubeconfig");
    let no_kubeconfig = || ReconcileError::NoKubeconfig {
        cluster: cluster.clone(),
        secret: format!("{namespace}/{secret_name}"),
    };
    let secret = context
        .client
        .get::<Secret>(Some(namespace), &secret_name)?
        .ok_or_else(no_kubeconfig)?;
    let kubeconfig = secret
        .data
        .as_ref()
        .and_then(|data| data.get("value"))
        .ok_or_else(no_kubeconfig)?;
    let config = scope::config_from_untrusted_kubeconfig(&kubeconfig.0, None).await?;
    // The root of the tree is the local cluster, identified (svc-tls keys its
    // watches by it); the children run in the remote one.
    let root = context.client.cluster_client()?;
    let remote = ResourceIdentifier::new(cluster.as_str());
    scope::with_root(
        root,
        scope::with_destinations(
            context.settings.destinations.clone(),
            Box::pin(scope::with_namespace(namespace, async {
                scope::with_remote_cluster(config, remote, call_peer(&context.settings)).await?
            })),
        ),
    )
    .await
}

/// The peer call, in the current cluster's scope: its identity and CA Secrets are
/// read from that cluster.
async fn call_peer(settings: &Settings) -> Result<String, ReconcileError> {
    let cluster = scope::cluster_client_identified()?;
    // Per reconcile, as Go's TLSClientConfig: after the first, this returns at once
    // from the process's shared watches, and `client()` is the one pooled client.
    let tls = PeerTls::from_options(
        &cluster,
        &settings.peer,
        &settings.identity,
        settings.sync_timeout,
    )
    .await?;
    let http = tls.client()?;
    let url = tls.host()?.join(&settings.path)?;
    let response = http.send(http.get(url.clone())?).await?;
    let status = response.status();
    if !status.is_success() {
        return Err(ReconcileError::Refused {
            status: status.as_u16(),
        });
    }
    Ok(format!(
        "GET {url} in cluster {} answered {status}",
        cluster.cluster()
    ))
}
