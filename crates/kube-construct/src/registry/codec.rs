//! Decoding JSON and `DynamicObject`s into the registered types, and encoding typed
//! objects with their `apiVersion` and `kind`.

use kube::core::{DynamicObject, GroupVersionKind};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{DecodeError, EncodeError, Registration, Registry, TypedObject, gvk_of};

impl Registry {
    fn lookup_value(&self, value: &serde_json::Value) -> Result<&Registration, DecodeError> {
        let gvk = gvk_of_value(value)?;
        self.get(&gvk).ok_or(DecodeError::NotRegistered(gvk))
    }

    /// Decodes a JSON object (with `apiVersion` and `kind`) into the type
    /// registered for its kind, which must be `K`.
    pub fn decode_value<K>(&self, value: serde_json::Value) -> Result<K, DecodeError>
    where
        K: DeserializeOwned + 'static,
    {
        let registration = self.lookup_value(&value)?;
        if !registration.is::<K>() {
            return Err(DecodeError::TypeMismatch {
                gvk: registration.gvk.clone(),
                registered: registration.type_name,
                requested: std::any::type_name::<K>(),
            });
        }
        serde_json::from_value(value).map_err(|source| DecodeError::Deserialize {
            gvk: registration.gvk.clone(),
            type_name: registration.type_name,
            source,
        })
    }

    /// Decodes a dynamic object into the type registered for its kind, which
    /// must be `K`.
    pub fn decode<K>(&self, object: &DynamicObject) -> Result<K, DecodeError>
    where
        K: DeserializeOwned + 'static,
    {
        self.decode_value(dynamic_to_value(object)?)
    }

    /// Decodes a JSON object (with `apiVersion` and `kind`) into whatever type
    /// is registered for its kind.
    pub fn decode_value_any(&self, value: serde_json::Value) -> Result<TypedObject, DecodeError> {
        let registration = self.lookup_value(&value)?;
        let decoded = registration.decode_value(value)?;
        Ok(TypedObject {
            gvk: registration.gvk.clone(),
            type_name: registration.type_name,
            value: decoded,
        })
    }

    /// Decodes a dynamic object into whatever type is registered for its kind.
    pub fn decode_any(&self, object: &DynamicObject) -> Result<TypedObject, DecodeError> {
        self.decode_value_any(dynamic_to_value(object)?)
    }

    /// Encodes a typed object as JSON with its `apiVersion` and `kind` set.
    ///
    /// `K` must be the type registered for its kind.
    pub fn encode_value<K>(&self, object: &K) -> Result<serde_json::Value, EncodeError>
    where
        K: kube::Resource<DynamicType = ()> + Serialize + 'static,
    {
        let gvk = gvk_of::<K>();
        let registration = self
            .get(&gvk)
            .ok_or_else(|| EncodeError::NotRegistered(gvk.clone()))?;
        if !registration.is::<K>() {
            return Err(EncodeError::TypeMismatch {
                gvk,
                registered: registration.type_name,
                offered: std::any::type_name::<K>(),
            });
        }
        let mut value = serde_json::to_value(object).map_err(|source| EncodeError::Serialize {
            gvk: gvk.clone(),
            source,
        })?;
        let Some(map) = value.as_object_mut() else {
            return Err(EncodeError::NotAnObject {
                gvk,
                reason: "it did not serialize to a JSON object",
            });
        };
        map.insert("apiVersion".into(), gvk.api_version().into());
        map.insert("kind".into(), gvk.kind.clone().into());
        Ok(value)
    }

    /// Encodes a typed object as a [`DynamicObject`] with its `apiVersion` and
    /// `kind` set.
    ///
    /// `K` must be the type registered for its kind.
    pub fn encode<K>(&self, object: &K) -> Result<DynamicObject, EncodeError>
    where
        K: kube::Resource<DynamicType = ()> + Serialize + 'static,
    {
        let value = self.encode_value(object)?;
        serde_json::from_value(value).map_err(|source| EncodeError::Serialize {
            gvk: gvk_of::<K>(),
            source,
        })
    }
}

fn gvk_of_value(value: &serde_json::Value) -> Result<GroupVersionKind, DecodeError> {
    let api_version = value.get("apiVersion").and_then(serde_json::Value::as_str);
    let kind = value.get("kind").and_then(serde_json::Value::as_str);
    let (Some(api_version), Some(kind)) = (api_version, kind) else {
        return Err(DecodeError::MissingTypeMeta);
    };
    if api_version.is_empty() || kind.is_empty() {
        return Err(DecodeError::MissingTypeMeta);
    }
    let (group, version) = match api_version.split_once('/') {
        None => ("", api_version),
        Some((group, version)) => (group, version),
    };
    if version.is_empty()
        || version.contains('/')
        || (api_version.contains('/') && group.is_empty())
    {
        return Err(DecodeError::InvalidApiVersion(api_version.to_owned()));
    }
    Ok(GroupVersionKind::gvk(group, version, kind))
}

fn dynamic_to_value(object: &DynamicObject) -> Result<serde_json::Value, DecodeError> {
    if object.types.is_none() {
        return Err(DecodeError::MissingTypeMeta);
    }
    // A DynamicObject always serializes (string keys, JSON values).
    serde_json::to_value(object).map_err(|_| DecodeError::MissingTypeMeta)
}
