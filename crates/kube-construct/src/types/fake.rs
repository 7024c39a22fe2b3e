//! The fake Unikorn types (group `unikorn.unikorn-cloud.org`, version
//! `v1alpha1`).
//!
//! [`ManagedResource`] is a test fixture: it lets generic reconcilers and
//! provisioners be exercised without a real CRD (none is shipped). It has
//! metadata and `status.conditions`, no spec; it reports its own labels as its
//! resource labels, is never paused, and reads and writes conditions with the
//! shared condition rule.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{NamespaceResourceScope, ObjectList};
use serde::{Deserialize, Serialize};

use super::condition::{
    Condition, ConditionNotFound, ConditionReason, ConditionStatus, ConditionType, ReconcilePauser,
    ResourceLabelError, ResourceLabeller, StatusConditionReader, StatusConditionWriter,
    get_condition, update_condition,
};

/// The API group of the fake types.
pub const GROUP: &str = "unikorn.unikorn-cloud.org";
/// The API version of the fake types.
pub const VERSION: &str = "v1alpha1";

/// A fake managed resource (namespaced, plural `managedresources`).
///
/// Serialises as `{apiVersion, kind, metadata, status}`; `status` is always
/// written (Go's non-pointer struct field), `status.conditions` only when not
/// empty.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ManagedResource {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The status.
    #[serde(default)]
    pub status: ManagedResourceStatus,
}

/// The status of a [`ManagedResource`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManagedResourceStatus {
    /// The status conditions.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "super::serde_util::null_as_default"
    )]
    pub conditions: Vec<Condition>,
}

/// A list of [`ManagedResource`]s (`ManagedResourceList`).
pub type ManagedResourceList = ObjectList<ManagedResource>;

impl ManagedResource {
    /// An object with a name and nothing else.
    pub fn new(name: &str) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            status: ManagedResourceStatus::default(),
        }
    }
}

impl Serialize for ManagedResource {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Repr<'a> {
            api_version: &'a str,
            kind: &'a str,
            metadata: &'a ObjectMeta,
            status: &'a ManagedResourceStatus,
        }
        Repr {
            api_version: "unikorn.unikorn-cloud.org/v1alpha1",
            kind: "ManagedResource",
            metadata: &self.metadata,
            status: &self.status,
        }
        .serialize(serializer)
    }
}

impl kube::Resource for ManagedResource {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "ManagedResource".into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        "managedresources".into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl ResourceLabeller for ManagedResource {
    /// The object's own labels.
    fn resource_labels(&self) -> Result<BTreeMap<String, String>, ResourceLabelError> {
        Ok(self.metadata.labels.clone().unwrap_or_default())
    }
}

impl ReconcilePauser for ManagedResource {
    /// Never paused.
    fn paused(&self) -> bool {
        false
    }
}

impl StatusConditionReader for ManagedResource {
    fn status_condition_read(
        &self,
        type_: &ConditionType,
    ) -> Result<&Condition, ConditionNotFound> {
        get_condition(&self.status.conditions, type_)
            .ok_or_else(|| ConditionNotFound(type_.clone()))
    }
}

impl StatusConditionWriter for ManagedResource {
    fn status_condition_write(
        &mut self,
        type_: ConditionType,
        status: ConditionStatus,
        reason: ConditionReason,
        message: &str,
    ) {
        update_condition(&mut self.status.conditions, type_, status, reason, message);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn shape_and_interfaces() {
        let mut resource = ManagedResource::new("thing");
        resource.metadata.labels =
            Some([("unikorn-cloud.org/name".to_owned(), "x".to_owned())].into());
        assert_eq!(
            serde_json::to_value(&resource).unwrap(),
            json!({
                "apiVersion": "unikorn.unikorn-cloud.org/v1alpha1",
                "kind": "ManagedResource",
                "metadata": {"name": "thing", "labels": {"unikorn-cloud.org/name": "x"}},
                "status": {},
            })
        );
        assert_eq!(
            resource.resource_labels().unwrap(),
            resource.metadata.labels.clone().unwrap()
        );
        assert!(!resource.paused());
        let missing = resource
            .status_condition_read(&ConditionType::Available)
            .unwrap_err();
        assert_eq!(missing.to_string(), "status condition Available not found");

        resource.status_condition_write(
            ConditionType::Available,
            ConditionStatus::False,
            ConditionReason::Provisioning,
            "working",
        );
        let first = resource
            .status_condition_read(&ConditionType::Available)
            .unwrap()
            .clone();
        assert_eq!(first.reason, ConditionReason::Provisioning);
        resource.status_condition_write(
            ConditionType::Available,
            ConditionStatus::False,
            ConditionReason::Provisioning,
            "working",
        );
        assert_eq!(resource.status.conditions, [first]);
        resource.status_condition_write(
            ConditionType::Available,
            ConditionStatus::True,
            ConditionReason::Provisioned,
            "done",
        );
        assert_eq!(resource.status.conditions.len(), 1);
        assert_eq!(resource.status.conditions[0].status, ConditionStatus::True);

        let json = serde_json::to_value(&resource).unwrap();
        assert_eq!(json["status"]["conditions"][0]["reason"], "Provisioned");
        let back: ManagedResource = serde_json::from_value(json).unwrap();
        assert_eq!(back, resource);
        // Go writes `status` always; a missing one decodes to empty.
        let bare: ManagedResource =
            serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
        assert!(bare.status.conditions.is_empty());
    }
}
