//! The Argo CD `Application` shim (group `argoproj.io`, version `v1alpha1`).
//!
//! **Legacy**: kept for compatibility with the old in-tree CD layer, which
//! creates these objects (in namespace `argocd`). It models only the fields the
//! platform uses. New code must not grow around it.
//!
//! Field handling mirrors the Go shim: fields Go always writes are always written
//! here and decode to their default when missing or `null`; optional fields are
//! omitted when unset.

use std::collections::BTreeMap;

use kube::CustomResource;
use kube::core::ObjectList;
use serde::{Deserialize, Serialize};

use super::serde_util::{is_false, null_as_default};
use super::string_enum::string_enum;

/// The specification of an Argo CD [`Application`].
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "argoproj.io",
    version = "v1alpha1",
    kind = "Application",
    namespaced,
    status = "ApplicationStatus",
    schema = "disabled",
    derive = "PartialEq",
    doc = "A legacy shim for the Argo CD Application type."
)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSpec {
    /// The Argo CD project to provision in.
    #[serde(default)]
    pub project: String,
    /// Where to get the application from.
    #[serde(default)]
    pub source: ApplicationSource,
    /// Where to provision the application.
    #[serde(default)]
    pub destination: ApplicationDestination,
    /// How to keep the application in sync.
    #[serde(default)]
    pub sync_policy: ApplicationSyncPolicy,
    /// Differences to ignore when syncing.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub ignore_differences: Vec<ApplicationIgnoreDifference>,
}

/// Where an application comes from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSource {
    /// A Helm repository URL or a git URL.
    #[serde(rename = "repoURL", default)]
    pub repo_url: String,
    /// The chart, for a Helm repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<String>,
    /// The path of the chart, for a git repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A chart version, or a git tag or branch.
    #[serde(default)]
    pub target_revision: String,
    /// Helm settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm: Option<ApplicationSourceHelm>,
}

/// Helm settings of an application source.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSourceHelm {
    /// The Helm release name (defaults to the application name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_name: Option<String>,
    /// A verbatim values file (YAML text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<String>,
    /// `--set` parameters.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub parameters: Vec<HelmParameter>,
}

/// A Helm `--set` parameter.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct HelmParameter {
    /// A JSON path to the value to change.
    #[serde(default)]
    pub name: String,
    /// The value to set.
    #[serde(default)]
    pub value: String,
}

/// Where an application is provisioned.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplicationDestination {
    /// The Argo CD cluster name.
    #[serde(default)]
    pub name: String,
    /// The namespace.
    #[serde(default)]
    pub namespace: String,
}

string_enum! {
    /// An Argo CD sync option.
    ApplicationSyncOption {
        /// Argo creates the destination namespace.
        CreateNamespace = "CreateNamespace=true",
        /// Argo applies with server-side apply.
        ServerSideApply = "ServerSideApply=true",
    }
}

/// How an application is kept in sync.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSyncPolicy {
    /// Sync options (always written, as Go does).
    #[serde(default, deserialize_with = "null_as_default")]
    pub sync_options: Vec<ApplicationSyncOption>,
    /// Periodic synchronization, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automated: Option<ApplicationSyncAutomation>,
    /// Labels and annotations for a namespace Argo creates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_namespace_metadata: Option<NamespaceMetadata>,
}

/// Automated synchronization settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSyncAutomation {
    /// Self-healing.
    #[serde(default, skip_serializing_if = "is_false")]
    pub self_heal: bool,
    /// Remove orphaned resources.
    #[serde(default, skip_serializing_if = "is_false")]
    pub prune: bool,
}

/// Metadata for a namespace Argo creates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceMetadata {
    /// Labels.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub annotations: BTreeMap<String, String>,
}

/// Resource differences to ignore when syncing.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationIgnoreDifference {
    /// The resource's API group.
    #[serde(default)]
    pub group: String,
    /// The resource's kind.
    #[serde(default)]
    pub kind: String,
    /// JSON pointers to ignore.
    #[serde(rename = "jsonPointers", default, deserialize_with = "null_as_default")]
    pub json_pointers: Vec<String>,
}

/// The status of an application.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplicationStatus {
    /// The health status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<ApplicationHealth>,
    /// The sync status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<ApplicationSync>,
}

string_enum! {
    /// An application's health.
    ApplicationHealthStatus {
        /// Synchronized and every resource healthy.
        Healthy = "Healthy",
        /// Working, but not fully healthy yet.
        Degraded = "Degraded",
    }
}

/// An application's health report.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ApplicationHealth {
    /// The health status.
    pub status: ApplicationHealthStatus,
}

string_enum! {
    /// An application's sync state.
    ApplicationSyncStatus {
        /// Synchronized.
        Synced = "Synced",
        /// Argo has not done anything yet.
        Unknown = "Unknown",
    }
}

/// An application's sync report.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ApplicationSync {
    /// The sync status.
    pub status: ApplicationSyncStatus,
}

/// A list of [`Application`]s (`ApplicationList`).
pub type ApplicationList = ObjectList<Application>;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_what_go_writes() {
        // Go writes nil slices without omitempty as null, and nil status parts as null.
        let go = json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "app", "namespace": "argocd"},
            "spec": {
                "project": "default",
                "source": {"repoURL": "https://charts", "chart": "c", "targetRevision": "1.0.0"},
                "destination": {"name": "cluster", "namespace": "ns"},
                "syncPolicy": {"syncOptions": null},
                "ignoreDifferences": [{"group": "apps", "kind": "Deployment", "jsonPointers": null}],
            },
            "status": {"health": null, "sync": null},
        });
        let app: Application = serde_json::from_value(go).unwrap();
        assert!(app.spec.sync_policy.sync_options.is_empty());
        assert!(app.spec.ignore_differences[0].json_pointers.is_empty());
        assert_eq!(app.status, Some(ApplicationStatus::default()));
        let written = serde_json::to_value(&app).unwrap();
        assert_eq!(written["spec"]["syncPolicy"], json!({"syncOptions": []}));
        assert_eq!(
            written["spec"]["source"],
            json!({"repoURL": "https://charts", "chart": "c", "targetRevision": "1.0.0"})
        );
        assert_eq!(written["status"], json!({}));
    }

    #[test]
    fn sync_options_and_statuses() {
        let options: Vec<ApplicationSyncOption> = serde_json::from_value(json!([
            "CreateNamespace=true",
            "ServerSideApply=true",
            "Prune=false"
        ]))
        .unwrap();
        assert_eq!(
            options,
            [
                ApplicationSyncOption::CreateNamespace,
                ApplicationSyncOption::ServerSideApply,
                ApplicationSyncOption::Other("Prune=false".into())
            ]
        );
        let status: ApplicationStatus = serde_json::from_value(
            json!({"health": {"status": "Degraded"}, "sync": {"status": "Synced"}}),
        )
        .unwrap();
        assert_eq!(
            status.health.unwrap().status,
            ApplicationHealthStatus::Degraded
        );
        assert_eq!(status.sync.unwrap().status, ApplicationSyncStatus::Synced);
        let automated = ApplicationSyncAutomation {
            self_heal: true,
            prune: false,
        };
        assert_eq!(
            serde_json::to_value(&automated).unwrap(),
            json!({"selfHeal": true})
        );
    }
}
