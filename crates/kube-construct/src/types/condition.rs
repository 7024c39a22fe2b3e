//! Status conditions and the interfaces of managed resources.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::string_enum::string_enum;

string_enum! {
    /// The type of a [`Condition`].
    ConditionType {
        /// Whether the resource is provisioned and usable.
        Available = "Available",
        /// Whether the provisioned resource is healthy.
        Healthy = "Healthy",
    }
}

string_enum! {
    /// The status of a [`Condition`] (Kubernetes' `ConditionStatus`).
    ConditionStatus {
        /// The condition holds.
        True = "True",
        /// The condition does not hold.
        False = "False",
        /// It is not known whether the condition holds.
        Unknown = "Unknown",
    }
}

string_enum! {
    /// Why a [`Condition`] has its status.
    ConditionReason {
        /// Provisioning is in progress.
        Provisioning = "Provisioning",
        /// Provisioning has finished.
        Provisioned = "Provisioned",
        /// Provisioning was cancelled.
        Cancelled = "Cancelled",
        /// Provisioning failed.
        Errored = "Errored",
        /// Deprovisioning is in progress.
        Deprovisioning = "Deprovisioning",
        /// Deprovisioning has finished.
        Deprovisioned = "Deprovisioned",
        /// The health is not known.
        Unknown = "Unknown",
        /// The resource is healthy.
        Healthy = "Healthy",
        /// The resource is degraded.
        Degraded = "Degraded",
    }
}

/// A status condition of a platform resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition type.
    #[serde(rename = "type")]
    pub type_: ConditionType,
    /// The condition status.
    pub status: ConditionStatus,
    /// When the condition last changed.
    #[schemars(schema_with = "super::schema::time")]
    pub last_transition_time: Time,
    /// Why the condition has its status.
    pub reason: ConditionReason,
    /// A human-readable message.
    pub message: String,
}

/// The current time at the precision the API keeps (whole seconds), so that a
/// condition compares equal to itself after a round trip through the API.
fn now() -> Time {
    Time(Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH))
}

impl Condition {
    /// A condition with the current time as its transition time.
    pub fn new(
        type_: ConditionType,
        status: ConditionStatus,
        reason: ConditionReason,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            last_transition_time: now(),
            reason,
            message: message.into(),
        }
    }
}

/// The first condition of a type.
pub fn get_condition<'a>(
    conditions: &'a [Condition],
    type_: &ConditionType,
) -> Option<&'a Condition> {
    conditions.iter().find(|c| &c.type_ == type_)
}

/// Adds or updates a condition, with the current time as the transition time
/// of a change (see [`update_condition_at`]).
pub fn update_condition(
    conditions: &mut Vec<Condition>,
    type_: ConditionType,
    status: ConditionStatus,
    reason: ConditionReason,
    message: impl Into<String>,
) -> bool {
    update_condition_at(conditions, type_, status, reason, message, now())
}

/// Adds or updates a condition (the platform's update rule).
///
/// A condition of a type not yet present is appended. An existing one (the
/// first of its type) is replaced only when its status, reason or message
/// differ, and the replacement always takes `now` as its transition time; when
/// nothing differs it is left alone, keeping its old transition time.
/// Returns whether anything changed.
pub fn update_condition_at(
    conditions: &mut Vec<Condition>,
    type_: ConditionType,
    status: ConditionStatus,
    reason: ConditionReason,
    message: impl Into<String>,
    now: Time,
) -> bool {
    let condition = Condition {
        type_,
        status,
        last_transition_time: now,
        reason,
        message: message.into(),
    };
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        None => {
            conditions.push(condition);
            true
        }
        Some(existing) => {
            if existing.status == condition.status
                && existing.reason == condition.reason
                && existing.message == condition.message
            {
                false
            } else {
                *existing = condition;
                true
            }
        }
    }
}

/// A condition of a type is not in a resource's status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("status condition {0} not found")]
pub struct ConditionNotFound(pub ConditionType);

/// A resource's identifying labels could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResourceLabelError {
    /// An expected label is missing from the resource.
    #[error("expected label {0:?} is missing")]
    MissingLabel(String),
}

/// A resource that can be uniquely identified by a set of labels.
pub trait ResourceLabeller {
    /// The labels that uniquely identify the resource (a composite key, were
    /// every such resource in one namespace).
    fn resource_labels(&self) -> Result<BTreeMap<String, String>, ResourceLabelError>;
}

/// A resource whose reconciliation can be paused.
pub trait ReconcilePauser {
    /// Whether reconciliation is paused.
    fn paused(&self) -> bool;
}

/// A resource whose status conditions can be read.
pub trait StatusConditionReader {
    /// The first condition of a type.
    fn status_condition_read(&self, type_: &ConditionType)
    -> Result<&Condition, ConditionNotFound>;
}

/// A resource whose status conditions can be written.
pub trait StatusConditionWriter {
    /// Adds or updates a condition with the platform's update rule
    /// ([`update_condition`]).
    fn status_condition_write(
        &mut self,
        type_: ConditionType,
        status: ConditionStatus,
        reason: ConditionReason,
        message: &str,
    );
}

/// A resource a controller manages (Go's `ManagableResourceInterface`).
pub trait ManagableResource:
    kube::Resource + ResourceLabeller + ReconcilePauser + StatusConditionReader + StatusConditionWriter
{
}

impl<T> ManagableResource for T where
    T: kube::Resource
        + ResourceLabeller
        + ReconcilePauser
        + StatusConditionReader
        + StatusConditionWriter
{
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    #[test]
    fn condition_json_shape() {
        let condition = Condition {
            type_: ConditionType::Available,
            status: ConditionStatus::True,
            last_transition_time: at(1_700_000_000),
            reason: ConditionReason::Provisioned,
            message: "ok".into(),
        };
        let json = serde_json::json!({
            "type": "Available",
            "status": "True",
            "lastTransitionTime": "2023-11-14T22:13:20Z",
            "reason": "Provisioned",
            "message": "ok",
        });
        assert_eq!(serde_json::to_value(&condition).unwrap(), json);
        assert_eq!(
            serde_json::from_value::<Condition>(json).unwrap(),
            condition
        );
        // Unknown values are kept verbatim.
        let other: ConditionReason =
            serde_json::from_value(serde_json::json!("Frobnicating")).unwrap();
        assert_eq!(other, ConditionReason::Other("Frobnicating".into()));
        assert_eq!(
            serde_json::to_value(&other).unwrap(),
            serde_json::json!("Frobnicating")
        );
        assert_eq!(ConditionStatus::from("Unknown"), ConditionStatus::Unknown);
    }

    #[test]
    fn update_appends_a_missing_condition() {
        let mut conditions = Vec::new();
        assert!(update_condition_at(
            &mut conditions,
            ConditionType::Available,
            ConditionStatus::False,
            ConditionReason::Provisioning,
            "starting",
            at(10)
        ));
        assert!(update_condition_at(
            &mut conditions,
            ConditionType::Healthy,
            ConditionStatus::Unknown,
            ConditionReason::Unknown,
            "",
            at(11)
        ));
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[0].type_, ConditionType::Available);
        assert_eq!(conditions[1].type_, ConditionType::Healthy);
        assert_eq!(conditions[1].last_transition_time, at(11));
    }

    #[test]
    fn update_without_change_keeps_the_old_transition_time() {
        let mut conditions = Vec::new();
        update_condition_at(
            &mut conditions,
            ConditionType::Available,
            ConditionStatus::False,
            ConditionReason::Provisioning,
            "starting",
            at(10),
        );
        let before = conditions.clone();
        assert!(!update_condition_at(
            &mut conditions,
            ConditionType::Available,
            ConditionStatus::False,
            ConditionReason::Provisioning,
            "starting",
            at(20)
        ));
        assert_eq!(conditions, before);
    }

    #[test]
    fn any_change_replaces_with_a_new_transition_time() {
        let base = || {
            let mut conditions = Vec::new();
            update_condition_at(
                &mut conditions,
                ConditionType::Available,
                ConditionStatus::False,
                ConditionReason::Provisioning,
                "starting",
                at(10),
            );
            conditions
        };
        let cases = [
            (
                ConditionStatus::True,
                ConditionReason::Provisioning,
                "starting",
            ),
            (ConditionStatus::False, ConditionReason::Errored, "starting"),
            (
                ConditionStatus::False,
                ConditionReason::Provisioning,
                "still starting",
            ),
        ];
        for (status, reason, message) in cases {
            let mut conditions = base();
            assert!(update_condition_at(
                &mut conditions,
                ConditionType::Available,
                status.clone(),
                reason.clone(),
                message,
                at(30)
            ));
            assert_eq!(conditions.len(), 1);
            assert_eq!(conditions[0].status, status);
            assert_eq!(conditions[0].reason, reason);
            assert_eq!(conditions[0].message, message);
            assert_eq!(conditions[0].last_transition_time, at(30));
        }
    }

    #[test]
    fn get_condition_finds_by_type() {
        let mut conditions = Vec::new();
        assert!(get_condition(&conditions, &ConditionType::Available).is_none());
        update_condition(
            &mut conditions,
            ConditionType::Healthy,
            ConditionStatus::True,
            ConditionReason::Healthy,
            "fine",
        );
        assert_eq!(
            get_condition(&conditions, &ConditionType::Healthy)
                .unwrap()
                .message,
            "fine"
        );
        assert!(get_condition(&conditions, &ConditionType::Available).is_none());
        // The current time is kept at whole seconds, as the API stores it.
        assert_eq!(conditions[0].last_transition_time.0.subsec_nanosecond(), 0);
    }
}
