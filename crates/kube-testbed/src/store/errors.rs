//! API errors, rendered as `Status` objects the way the API server renders them.

use serde_json::{Value, json};

use super::KindSpec;

/// An API error, rendered as a `Status` object.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, kind: &KindSpec, name: &str) -> Self {
        self.details = Some(details(name, &kind.group, &kind.plural));
        self
    }

    pub(crate) fn not_found(kind: &KindSpec, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", resource_label(kind), name),
        )
        .with_details(kind, name)
    }

    pub(crate) fn already_exists(kind: &KindSpec, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", resource_label(kind), name),
        )
        .with_details(kind, name)
    }

    pub(crate) fn conflict(kind: &KindSpec, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                resource_label(kind),
                name,
                why
            ),
        )
        .with_details(kind, name)
    }

    pub(crate) fn invalid(kind: &KindSpec, name: &str, field: &str, why: &str) -> Self {
        let mut e = Self::new(
            422,
            "Invalid",
            // The apiserver names a kind of a group with it (`Kind.group`).
            format!(
                "{} \"{}\" is invalid: {}: {}",
                qualified_kind(kind),
                name,
                field,
                why
            ),
        );
        let mut d = details(name, &kind.group, &kind.kind);
        d["causes"] = json!([{"reason": "FieldValueInvalid", "message": why, "field": field}]);
        e.details = Some(d);
        e
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub(crate) fn for_status(code: u16) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        };
        Self::new(code, reason, format!("injected failure ({code} {reason})"))
    }

    /// The `Status` object.
    pub(crate) fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let (Some(d), Some(o)) = (&self.details, s.as_object_mut()) {
            o.insert("details".into(), d.clone());
        }
        s
    }
}

/// `Kind`, or `Kind.group` outside the core group (a `GroupKind` as the apiserver
/// writes it).
fn qualified_kind(kind: &KindSpec) -> String {
    if kind.group.is_empty() {
        kind.kind.clone()
    } else {
        format!("{}.{}", kind.kind, kind.group)
    }
}

fn resource_label(kind: &KindSpec) -> String {
    if kind.group.is_empty() {
        kind.plural.clone()
    } else {
        format!("{}.{}", kind.plural, kind.group)
    }
}

/// A `Status`'s `details`: the name and the group (each left out when empty, as the
/// apiserver's `omitempty` leaves them out: a list, the core group) and the kind or
/// resource.
pub(crate) fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut d = json!({"kind": kind});
    if !name.is_empty() {
        d["name"] = json!(name);
    }
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    d
}

/// What the apiserver answers to a DELETE that removed the object at once, for the
/// resources whose storage does not return the deleted object (ConfigMaps, Secrets,
/// custom resources, ...): `Status` `Success` naming it.
pub(crate) fn deleted_status(kind: &KindSpec, name: &str, uid: &str) -> Value {
    let mut d = details(name, &kind.group, &kind.plural);
    d["uid"] = json!(uid);
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": d,
    })
}
