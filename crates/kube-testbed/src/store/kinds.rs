//! The kinds the emulator serves: built in, or registered by a test.

use std::sync::Arc;

/// A resource kind the emulator serves (built in or registered by a test).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindSpec {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
    pub(crate) plural: String,
    pub(crate) singular: String,
    pub(crate) namespaced: bool,
    pub(crate) short_names: Vec<String>,
    pub(crate) status_subresource: bool,
}

impl KindSpec {
    fn new(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        Self {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
            plural: plural.to_string(),
            singular: kind.to_ascii_lowercase(),
            namespaced,
            short_names: Vec::new(),
            status_subresource: true,
        }
    }

    /// A namespaced kind, e.g. `("unikorn-cloud.org", "v1alpha1", "HelmApplication", "helmapplications")`.
    /// The empty group is the core group.
    pub fn namespaced(group: &str, version: &str, kind: &str, plural: &str) -> Self {
        Self::new(group, version, kind, plural, true)
    }

    /// A cluster-scoped kind.
    pub fn cluster(group: &str, version: &str, kind: &str, plural: &str) -> Self {
        Self::new(group, version, kind, plural, false)
    }

    /// Short names advertised in discovery (what `kubectl get <short>` resolves).
    pub fn short_names(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Whether the kind has a `/status` subresource (default `true`, like most CRDs).
    /// With it, writes to the main resource keep the stored `status`, and writes to
    /// `/status` change only `status`.
    pub fn status_subresource(mut self, enabled: bool) -> Self {
        self.status_subresource = enabled;
        self
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub(crate) fn key(&self) -> ResKey {
        (self.group.clone(), self.plural.clone())
    }

    /// Field paths accepted in field selectors for this kind.
    pub(crate) fn supported_fields(&self) -> &'static [&'static str] {
        if self.group.is_empty() && self.kind == "Secret" {
            &["metadata.name", "metadata.namespace", "type"]
        } else if self.is_cluster_trust_bundle() {
            // The apiserver's: a cluster-scoped kind has no metadata.namespace field,
            // and a bundle is selected by its signer.
            &["metadata.name", "spec.signerName"]
        } else {
            &["metadata.name", "metadata.namespace"]
        }
    }

    /// Whether objects of the kind carry a `metadata.generation`: custom kinds do;
    /// the built-in kinds served here (the core ones, ClusterTrustBundle) do not.
    pub(crate) fn tracks_generation(&self) -> bool {
        !self.group.is_empty() && !self.is_cluster_trust_bundle()
    }

    /// `certificates.k8s.io` ClusterTrustBundle, built in.
    pub(crate) fn is_cluster_trust_bundle(&self) -> bool {
        self.group == "certificates.k8s.io" && self.kind == "ClusterTrustBundle"
    }

    pub(crate) fn is_core(&self, kind: &str) -> bool {
        self.group.is_empty() && self.kind == kind
    }
}

pub(crate) fn builtin_kinds() -> Vec<Arc<KindSpec>> {
    vec![
        Arc::new(KindSpec::namespaced("", "v1", "Secret", "secrets").status_subresource(false)),
        Arc::new(
            KindSpec::namespaced("", "v1", "ConfigMap", "configmaps")
                .short_names(&["cm"])
                .status_subresource(false),
        ),
        Arc::new(KindSpec::cluster("", "v1", "Namespace", "namespaces").short_names(&["ns"])),
        Arc::new(KindSpec::namespaced("", "v1", "Service", "services").short_names(&["svc"])),
        // certificates.k8s.io/v1 as Kubernetes 1.37 serves it (GA; v1beta1 is off by
        // default there).
        Arc::new(
            KindSpec::cluster(
                "certificates.k8s.io",
                "v1",
                "ClusterTrustBundle",
                "clustertrustbundles",
            )
            .status_subresource(false),
        ),
    ]
}

/// `(group, plural)`.
pub(crate) type ResKey = (String, String);
