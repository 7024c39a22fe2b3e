//! Rust types for the platform's custom resources, with the exact JSON shapes the
//! running Go services read and write.
//!
//! - The Unikorn API (group `unikorn-cloud.org`, version `v1alpha1`):
//!   [`HelmApplication`] (+ [`helm_application_crd`]) and the group's shared value
//!   types: [`SemanticVersion`], [`SemanticVersionConstraints`], [`Tag`] /
//!   [`TagList`], [`Condition`] and its update rule, [`IPv4Address`],
//!   [`IPv4Prefix`], [`MachineGeneric`], [`NetworkGeneric`],
//!   [`ApplicationReference`], [`ApplicationNamedReference`].
//! - [`fake`]: the fake Unikorn types (group `unikorn.unikorn-cloud.org`), test
//!   fixtures for generic reconcilers.
//! - [`argo`]: the **legacy** Argo CD `Application` shim (group `argoproj.io`).
//!
//! JSON conventions, mirroring the Go structs: optional fields are omitted when
//! unset (a Go `omitempty` list or map is an empty `Vec`/map here, omitted when
//! empty); a Go field without `omitempty` is always written and, when missing or
//! `null` on input, decodes to its default value the way Go decodes it.

pub mod argo;
mod condition;
pub mod fake;
// kube's `KubeSchema` derive (with `x_kube` validation rules) writes a private copy of
// `HelmApplicationVersion` carrying its `pub`; the lint sees that copy, not the type,
// which is re-exported below.
#[allow(unreachable_pub)]
mod helm;
mod schema;
mod values;

pub use condition::{
    Condition, ConditionNotFound, ConditionReason, ConditionStatus, ConditionType,
    ManagableResource, ReconcilePauser, ResourceLabelError, ResourceLabeller,
    StatusConditionReader, StatusConditionWriter, get_condition, update_condition,
    update_condition_at,
};
pub use helm::{
    HelmApplication, HelmApplicationDependency, HelmApplicationList, HelmApplicationParameter,
    HelmApplicationRecommendation, HelmApplicationSpec, HelmApplicationStatus,
    HelmApplicationVersion, HelmApplicationVersionError, VersionNotFound, helm_application_crd,
};
pub use values::{
    ApplicationNamedReference, ApplicationReference, ApplicationReferenceKind, IPv4Address,
    IPv4Prefix, MachineGeneric, NetworkGeneric, SemanticVersion, SemanticVersionConstraints,
    SemanticVersionConstraintsError, SemanticVersionError, Tag, TagList, ValueParseError,
};

/// The API group of the Unikorn API types.
pub const UNIKORN_GROUP: &str = "unikorn-cloud.org";
/// The API version of the Unikorn API types.
pub const UNIKORN_VERSION: &str = "v1alpha1";

/// Defines a string-valued enum that keeps values it does not know
/// (`Other(String)`), serialises as its text and has a plain string schema.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A value this crate does not know, kept verbatim. Construct values
            /// with `From<&str>`, which maps known texts to their variants.
            Other(String),
        }

        impl $name {
            /// The value's text.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $text, )*
                    Self::Other(text) => text,
                }
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                match text {
                    $( $text => Self::$variant, )*
                    other => Self::Other(other.to_owned()),
                }
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> Self {
                match text.as_str() {
                    $( $text => Self::$variant, )*
                    _ => Self::Other(text),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                Ok(Self::from(<String as ::serde::Deserialize>::deserialize(deserializer)?))
            }
        }

        impl ::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                ::schemars::json_schema!({ "type": "string" })
            }
        }
    };
}
pub(crate) use string_enum;

/// Serde helpers shared by the type modules.
pub(crate) mod serde_util {
    use serde::{Deserialize, Deserializer};

    /// Decodes `null` (which Go writes for a nil slice or map without
    /// `omitempty`) as the default value.
    pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: Default + Deserialize<'de>,
    {
        Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
    }

    /// `skip_serializing_if` for Go's `omitempty` on a bool.
    pub(crate) fn is_false(value: &bool) -> bool {
        !*value
    }
}
