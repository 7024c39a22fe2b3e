//! Reading a `kubernetes.io/tls` Secret's type and data keys.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

use super::{MaterialError, MaterialErrorKind, SECRET_TYPE_TLS};
use crate::options::SecretRef;

pub(super) fn secret_ref_of(secret: &Secret) -> SecretRef {
    SecretRef::new(
        secret.metadata.namespace.clone().unwrap_or_default(),
        secret.metadata.name.clone().unwrap_or_default(),
    )
}

pub(super) fn check_type(
    secret: &Secret,
    name: &dyn Fn() -> SecretRef,
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
    name: &dyn Fn() -> SecretRef,
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
        Some(ByteString(v)) => Ok(v),
    }
}
