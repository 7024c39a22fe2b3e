//! The registry's errors (building, decoding, encoding) and how they write a kind.

use kube::core::GroupVersionKind;

use super::Scope;

/// Formats a group/version/kind the way Kubernetes does: `group/version, Kind=kind`
/// (`version, Kind=kind` for the core group).
pub(crate) fn display_gvk(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{}, Kind={}", gvk.version, gvk.kind)
    } else {
        format!("{}/{}, Kind={}", gvk.group, gvk.version, gvk.kind)
    }
}

/// Details of a [`RegistryError::Conflict`]: a kind offered again with another
/// type, plural or scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} is already registered as {existing} (plural {existing_plural:?}, scope {existing_scope}); \
     refusing to register it again as {new} (plural {new_plural:?}, scope {new_scope})",
    display_gvk(.gvk)
)]
pub struct KindConflict {
    /// The kind registered twice.
    pub gvk: GroupVersionKind,
    /// The Rust type already registered.
    pub existing: &'static str,
    /// Its plural.
    pub existing_plural: String,
    /// Its scope.
    pub existing_scope: Scope,
    /// The Rust type that was offered.
    pub new: &'static str,
    /// The plural that was offered.
    pub new_plural: String,
    /// The scope that was offered.
    pub new_scope: Scope,
}

/// Errors building or querying a [`Registry`](super::Registry).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The kind is already registered with another type, plural or scope.
    #[error("{0}")]
    Conflict(Box<KindConflict>),
    /// A registration was missing a version, kind or plural.
    #[error("cannot register {}: {reason}", display_gvk(.gvk))]
    Invalid {
        /// The kind offered.
        gvk: GroupVersionKind,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The kind is not registered.
    #[error("{} is not registered", display_gvk(.0))]
    NotRegistered(GroupVersionKind),
    /// The kind is the body of a subresource request and has no collection.
    #[error("{} is a subresource kind; it has no API collection to access", display_gvk(.0))]
    Subresource(GroupVersionKind),
    /// A caller-supplied addition failed (see [`platform_registry`](super::platform_registry)).
    #[error("registry addition #{index} failed")]
    Addition {
        /// Position of the addition in the list passed to [`platform_registry`](super::platform_registry),
        /// counting from 0.
        index: usize,
        /// What went wrong.
        #[source]
        source: Box<RegistryError>,
    },
    /// Any other failure reported by a caller-supplied addition.
    #[error("{0}")]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

/// Errors decoding an untyped object into its registered type.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The object has no `apiVersion`/`kind`.
    #[error("object has no apiVersion/kind, so its type cannot be looked up")]
    MissingTypeMeta,
    /// The object's `apiVersion` is not `version` or `group/version`.
    #[error("object has an invalid apiVersion {0:?}")]
    InvalidApiVersion(String),
    /// The object's kind is not registered.
    #[error("{} is not registered", display_gvk(.0))]
    NotRegistered(GroupVersionKind),
    /// The kind is registered with a different type than the one requested.
    #[error("{} is registered as {registered}, not {requested}", display_gvk(.gvk))]
    TypeMismatch {
        /// The object's kind.
        gvk: GroupVersionKind,
        /// The type registered for it.
        registered: &'static str,
        /// The type the caller asked for.
        requested: &'static str,
    },
    /// The object does not have the shape of its registered type.
    #[error("cannot decode {} as {type_name}", display_gvk(.gvk))]
    Deserialize {
        /// The object's kind.
        gvk: GroupVersionKind,
        /// The type registered for it.
        type_name: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
}

/// Errors encoding a typed object.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The object's kind is not registered.
    #[error("{} is not registered", display_gvk(.0))]
    NotRegistered(GroupVersionKind),
    /// The kind is registered with a different type than the one offered.
    #[error("{} is registered as {registered}, not {offered}", display_gvk(.gvk))]
    TypeMismatch {
        /// The object's kind.
        gvk: GroupVersionKind,
        /// The type registered for it.
        registered: &'static str,
        /// The type offered.
        offered: &'static str,
    },
    /// The object did not serialize to a JSON object.
    #[error("cannot encode {}: {reason}", display_gvk(.gvk))]
    NotAnObject {
        /// The object's kind.
        gvk: GroupVersionKind,
        /// What it serialized to instead.
        reason: &'static str,
    },
    /// Serialization failed.
    #[error("cannot serialize {}", display_gvk(.gvk))]
    Serialize {
        /// The object's kind.
        gvk: GroupVersionKind,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
}
