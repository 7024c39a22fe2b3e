//! The ClusterTrustBundle's room in the watched-object cache: the
//! `ClusterTrustBundle`s of one signer (`certificates.k8s.io`, cluster-scoped),
//! optionally narrowed by a label selector, watched as one set
//! (`fieldSelector=spec.signerName=<signer>`) and read as one object whose
//! `spec.trustBundle` is the members' bundles concatenated, in name order.
//!
//! The API version is the one the selected Kubernetes release serves by default:
//! `certificates.k8s.io/v1` from 1.37 (`k8s-openapi`'s `v1_37`), `v1beta1` before
//! (the API server then needs `--feature-gates=ClusterTrustBundle=true` and
//! `--runtime-config=certificates.k8s.io/v1beta1/clustertrustbundles=true`).
//!
//! RBAC (cluster-scoped, so a ClusterRole; `resourceNames` cannot narrow a list of
//! several objects):
//!
//! ```yaml
//! rules:
//! - apiGroups: ["certificates.k8s.io"]
//!   resources: ["clustertrustbundles"]
//!   verbs: ["list", "watch"]
//! ```

use std::sync::Arc;

use super::kind::{Selection, WatchedKind, WatchedRef, sealed};
use crate::origin::ClusterTrustBundlesRef;

k8s_openapi::k8s_if_ge_1_37! {
    /// The `ClusterTrustBundle` type of the selected Kubernetes release
    /// (`certificates.k8s.io/v1` from 1.37, `v1beta1` before).
    pub use k8s_openapi::api::certificates::v1::{ClusterTrustBundle, ClusterTrustBundleSpec};
}
k8s_openapi::k8s_if_le_1_36! {
    /// The `ClusterTrustBundle` type of the selected Kubernetes release
    /// (`certificates.k8s.io/v1` from 1.37, `v1beta1` before).
    pub use k8s_openapi::api::certificates::v1beta1::{ClusterTrustBundle, ClusterTrustBundleSpec};
}

impl WatchedRef for ClusterTrustBundlesRef {
    type Kind = ClusterTrustBundle;
}

impl WatchedKind for ClusterTrustBundle {
    type Ref = ClusterTrustBundlesRef;
    const KIND: &'static str = "ClusterTrustBundle";

    /// Cluster-scoped: none.
    fn namespace(_: &ClusterTrustBundlesRef) -> &str {
        ""
    }

    /// The signer name: what names the set.
    fn name(bundles: &ClusterTrustBundlesRef) -> &str {
        bundles.signer_name()
    }

    fn grant(_: &ClusterTrustBundlesRef) -> String {
        "grant list and watch on clustertrustbundles (group certificates.k8s.io, \
         cluster-wide: a ClusterRole and ClusterRoleBinding) to the service account"
            .to_owned()
    }
}

/// A ClusterTrustBundle holds no key material: a trust-only watch keeps it whole.
impl sealed::Sealed for ClusterTrustBundle {
    /// Nothing: each verifier parses the set's bundle through its own cache.
    type Loads = ();

    fn loads(_: Arc<rustls::crypto::CryptoProvider>) {}

    fn selection(bundles: &ClusterTrustBundlesRef) -> Selection {
        Selection::Set {
            fields: bundles.field_selector(),
            labels: bundles.label_selector(),
        }
    }

    /// The members `bundles` selects (checked here too: a server may ignore a
    /// selector), in name order, read as one bundle: their PEM concatenated. `None`
    /// when there is none: no roots.
    fn combine(
        bundles: &ClusterTrustBundlesRef,
        members: Vec<Arc<ClusterTrustBundle>>,
    ) -> Option<ClusterTrustBundle> {
        let mut members: Vec<_> = members
            .into_iter()
            .filter(|m| bundles.selects(m.spec.signer_name.as_deref(), m.metadata.labels.as_ref()))
            .collect();
        if members.is_empty() {
            return None;
        }
        members.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut pem = String::new();
        let mut names = Vec::with_capacity(members.len());
        for member in &members {
            pem.push_str(member.spec.trust_bundle.trim_end());
            pem.push('\n');
            names.push(member.metadata.name.clone().unwrap_or_default());
        }
        let mut combined = ClusterTrustBundle::default();
        combined.metadata.name = Some(bundles.to_string());
        // The members' names, for the state and `svc-tls-inspect`.
        combined.metadata.annotations = Some(
            [(MEMBERS_ANNOTATION.to_owned(), names.join(","))]
                .into_iter()
                .collect(),
        );
        // No resourceVersion: a set has none that orders its versions (a member
        // deleted lowers the newest), so no version is refused as older.
        combined.spec = ClusterTrustBundleSpec {
            signer_name: Some(bundles.signer_name().to_owned()),
            trust_bundle: pem,
        };
        Some(combined)
    }
}

/// The annotation of the combined object that lists the members' names, in order,
/// comma-separated.
pub const MEMBERS_ANNOTATION: &str = "svc-tls.unikorn-cloud.org/members";
