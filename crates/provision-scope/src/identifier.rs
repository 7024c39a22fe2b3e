//! [`ResourceIdentifier`]: how the CD layer names a cluster.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Label naming the Kubernetes cluster a resource belongs to.
pub const KUBERNETES_CLUSTER_LABEL: &str = "unikorn-cloud.org/kubernetescluster";
/// Label naming the project a resource belongs to.
pub const PROJECT_LABEL: &str = "unikorn-cloud.org/project";
/// Label naming the organization a resource belongs to.
pub const ORGANIZATION_LABEL: &str = "unikorn-cloud.org/organization";

/// The fixed order in which generators put labels into a [`ResourceIdentifier`]:
/// kubernetes cluster, project, organization. The order is part of the CD cluster
/// name, so it must never change.
pub const LABEL_PRIORITIES: [&str; 3] =
    [KUBERNETES_CLUSTER_LABEL, PROJECT_LABEL, ORGANIZATION_LABEL];

/// One `{name, value}` pair giving context to a [`ResourceIdentifier`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Label {
    /// The label name.
    #[serde(alias = "Name")]
    pub name: String,
    /// The label value.
    #[serde(alias = "Value")]
    pub value: String,
}

impl Label {
    /// A label from its name and value.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// Identifies a cluster (or application) to the CD layer: a name, made unique by an
/// **ordered** list of labels.
///
/// Serialised as `{"name": ..., "labels": [{"name": ..., "value": ...}]}`; the
/// capitalised spellings Go's encoder produces (`Name`, `Labels`, `Value`) are
/// accepted on input.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResourceIdentifier {
    /// A unique name, or a generic one (`"vcluster"`, `"kubernetes"`) that the labels
    /// make unique.
    #[serde(alias = "Name")]
    pub name: String,
    /// Context for the name. Order is significant: it is kept in the cluster name.
    #[serde(default, alias = "Labels", deserialize_with = "null_as_empty")]
    pub labels: Vec<Label>,
}

impl ResourceIdentifier {
    /// An identifier with no labels.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            labels: Vec::new(),
        }
    }

    /// This identifier with one more label appended.
    #[must_use]
    pub fn with_label(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.push(Label::new(name, value));
        self
    }

    /// What the generators build for a remote cluster: `name`, then those of the
    /// resource's labels listed in [`LABEL_PRIORITIES`], in that order, skipping the
    /// absent ones. Other labels are ignored.
    pub fn from_resource_labels(
        name: impl Into<String>,
        resource_labels: &BTreeMap<String, String>,
    ) -> Self {
        let labels = LABEL_PRIORITIES
            .iter()
            .filter_map(|key| {
                resource_labels
                    .get(*key)
                    .map(|value| Label::new(*key, value.clone()))
            })
            .collect();
        Self {
            name: name.into(),
            labels,
        }
    }

    /// The name the CD layer gives this cluster: the name, then (if there are labels)
    /// `-` and the label values joined by `:`. Label names are not part of it.
    ///
    /// ```
    /// use provision_scope::ResourceIdentifier;
    ///
    /// let id = ResourceIdentifier::new("kubernetes")
    ///     .with_label("unikorn-cloud.org/kubernetescluster", "wl")
    ///     .with_label("unikorn-cloud.org/project", "p")
    ///     .with_label("unikorn-cloud.org/organization", "o");
    /// assert_eq!(id.cluster_name(), "kubernetes-wl:p:o");
    /// assert_eq!(ResourceIdentifier::new("vcluster").cluster_name(), "vcluster");
    /// ```
    pub fn cluster_name(&self) -> String {
        let mut out = self.name.clone();
        for (i, label) in self.labels.iter().enumerate() {
            out.push(if i == 0 { '-' } else { ':' });
            out.push_str(&label.value);
        }
        out
    }
}

/// Go encodes an empty label list as `null`.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Label>, D::Error> {
    Ok(Option::<Vec<Label>>::deserialize(deserializer)?.unwrap_or_default())
}

/// Shows the [`cluster_name`](ResourceIdentifier::cluster_name).
impl fmt::Display for ResourceIdentifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.cluster_name())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn cluster_name_keeps_label_order_and_uses_values_only() {
        let id = ResourceIdentifier::new("kubernetes")
            .with_label(ORGANIZATION_LABEL, "org")
            .with_label(PROJECT_LABEL, "proj");
        assert_eq!(id.cluster_name(), "kubernetes-org:proj");
        assert_eq!(id.to_string(), "kubernetes-org:proj");
    }

    #[test]
    fn cluster_name_without_labels_is_the_name() {
        assert_eq!(
            ResourceIdentifier::new("vcluster").cluster_name(),
            "vcluster"
        );
    }

    #[test]
    fn cluster_name_keeps_empty_values() {
        let id = ResourceIdentifier::new("x")
            .with_label("a", "")
            .with_label("b", "v");
        assert_eq!(id.cluster_name(), "x-:v");
    }

    #[test]
    fn generator_order_is_cluster_project_organization() {
        let labels: BTreeMap<String, String> = [
            (ORGANIZATION_LABEL, "org"),
            ("unikorn-cloud.org/name", "ignored"),
            (PROJECT_LABEL, "proj"),
            (KUBERNETES_CLUSTER_LABEL, "wl"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let id = ResourceIdentifier::from_resource_labels("kubernetes", &labels);
        let names: Vec<&str> = id.labels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, LABEL_PRIORITIES);
        assert_eq!(id.cluster_name(), "kubernetes-wl:proj:org");
    }

    #[test]
    fn generator_skips_absent_labels() {
        let labels: BTreeMap<String, String> =
            [(ORGANIZATION_LABEL, "org"), (PROJECT_LABEL, "proj")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        let id = ResourceIdentifier::from_resource_labels("vcluster", &labels);
        assert_eq!(id.cluster_name(), "vcluster-proj:org");
    }

    #[test]
    fn serde_uses_exact_names_and_keeps_order() {
        let id = ResourceIdentifier::new("vcluster")
            .with_label("b", "2")
            .with_label("a", "1");
        let json = serde_json::to_value(&id).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "vcluster", "labels": [{"name": "b", "value": "2"}, {"name": "a", "value": "1"}]})
        );
        let back: ResourceIdentifier = serde_json::from_value(json).unwrap();
        assert_eq!(back, id);
    }

    #[test]
    fn serde_accepts_go_spellings_and_missing_labels() {
        let go: ResourceIdentifier =
            serde_json::from_str(r#"{"Name":"kubernetes","Labels":[{"Name":"a","Value":"1"}]}"#)
                .unwrap();
        assert_eq!(
            go,
            ResourceIdentifier::new("kubernetes").with_label("a", "1")
        );
        let bare: ResourceIdentifier = serde_json::from_str(r#"{"name":"vcluster"}"#).unwrap();
        assert_eq!(bare, ResourceIdentifier::new("vcluster"));
        let null: ResourceIdentifier =
            serde_json::from_str(r#"{"Name":"vcluster","Labels":null}"#).unwrap();
        assert_eq!(null, ResourceIdentifier::new("vcluster"));
    }
}
