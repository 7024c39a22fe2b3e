//! Reading a `kubernetes.io/tls` Secret's type and data keys.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

use super::{
    MAX_CERTIFICATE_VALUE_BYTES, MAX_KEY_VALUE_BYTES, MaterialError, MaterialErrorKind,
    SECRET_TYPE_TLS, TLS_KEY,
};
use crate::origin::{MaterialOrigin, SecretRef};

pub(super) fn secret_ref_of(secret: &Secret) -> MaterialOrigin {
    MaterialOrigin::Secret(SecretRef::new(
        secret.metadata.namespace.clone().unwrap_or_default(),
        secret.metadata.name.clone().unwrap_or_default(),
    ))
}

pub(super) fn check_type(
    secret: &Secret,
    name: &dyn Fn() -> MaterialOrigin,
) -> Result<(), MaterialError> {
    if secret.type_.as_deref() == Some(SECRET_TYPE_TLS) {
        Ok(())
    } else {
        Err(MaterialError::new(
            name(),
            None,
            MaterialErrorKind::WrongType {
                found: secret.type_.clone(),
            },
        ))
    }
}

pub(super) fn required<'a>(
    secret: &'a Secret,
    key: &'static str,
    name: &dyn Fn() -> MaterialOrigin,
) -> Result<&'a [u8], MaterialError> {
    match secret.data.as_ref().and_then(|d| d.get(key)) {
        None => Err(MaterialError::new(
            name(),
            Some(key),
            MaterialErrorKind::MissingKey,
        )),
        Some(ByteString(v)) if v.is_empty() => Err(MaterialError::new(
            name(),
            Some(key),
            MaterialErrorKind::EmptyKey,
        )),
        Some(ByteString(v)) => within_cap(v, key, name),
    }
}

/// `value` of data key `key`, refused when larger than its cap
/// ([`MAX_KEY_VALUE_BYTES`] for `tls.key`, [`MAX_CERTIFICATE_VALUE_BYTES`] otherwise)
/// before anything parses it.
pub(super) fn within_cap<'a>(
    value: &'a [u8],
    key: &'static str,
    name: &dyn Fn() -> MaterialOrigin,
) -> Result<&'a [u8], MaterialError> {
    let max = if key == TLS_KEY {
        MAX_KEY_VALUE_BYTES
    } else {
        MAX_CERTIFICATE_VALUE_BYTES
    };
    if value.len() > max {
        return Err(MaterialError::new(
            name(),
            Some(key),
            MaterialErrorKind::TooLarge {
                len: value.len(),
                max,
            },
        ));
    }
    Ok(value)
}
