//! Serde helpers shared by the type modules.

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
