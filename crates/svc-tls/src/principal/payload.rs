//! The principal payload and the header that carries it.

use serde::{Deserialize, Deserializer, Serialize};

/// The HTTP header that carries the signed principal.
pub const PRINCIPAL_HEADER: &str = "X-Principal";

/// The principal the identity service understands: on whose behalf a call is made.
///
/// JSON names are `organizationId`, `projectId` and `actor`; each is omitted when empty
/// (Go's `omitempty`), and an empty string received is read as absent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Principal {
    /// The organization the call is for.
    #[serde(
        default,
        skip_serializing_if = "is_empty",
        deserialize_with = "empty_as_none"
    )]
    pub organization_id: Option<String>,
    /// The project the call is for.
    #[serde(
        default,
        skip_serializing_if = "is_empty",
        deserialize_with = "empty_as_none"
    )]
    pub project_id: Option<String>,
    /// Who is acting (the end user or service the call originates from).
    #[serde(
        default,
        skip_serializing_if = "is_empty",
        deserialize_with = "empty_as_none"
    )]
    pub actor: Option<String>,
}

fn is_empty(value: &Option<String>) -> bool {
    value.as_deref().is_none_or(str::is_empty)
}

fn empty_as_none<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let value = Option::<String>::deserialize(deserializer)?;
    Ok(value.filter(|s| !s.is_empty()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn principal_json_names_and_omission() {
        let p = Principal {
            organization_id: Some("o".into()),
            project_id: Some(String::new()),
            actor: None,
        };
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"organizationId":"o"}"#
        );
        let back: Principal =
            serde_json::from_str(r#"{"organizationId":"o","projectId":"","actor":"a"}"#).unwrap();
        assert_eq!(back.organization_id.as_deref(), Some("o"));
        assert_eq!(back.project_id, None);
        assert_eq!(back.actor.as_deref(), Some("a"));
        assert_eq!(serde_json::to_string(&Principal::default()).unwrap(), "{}");
    }
}
