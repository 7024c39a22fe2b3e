//! Object bookkeeping on write: keys, type and object meta, names, defaults.

use serde_json::{Map, Value, json};

use super::{ApiError, KindSpec};

pub(super) fn obj_key(kind: &KindSpec, ns: Option<&str>, name: &str) -> (String, String) {
    let ns = if kind.namespaced {
        ns.unwrap_or("default")
    } else {
        ""
    };
    (ns.to_string(), name.to_string())
}

pub(super) fn check_type(kind: &KindSpec, obj: &Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    let k = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if !k.is_empty() && k != kind.kind {
        return Err(ApiError::bad_request(format!(
            "the kind of the object ({k}) does not match the kind of the resource ({})",
            kind.kind
        )));
    }
    let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if !av.is_empty() && av != kind.api_version() {
        return Err(ApiError::bad_request(format!(
            "the apiVersion of the object ({av}) does not match {}",
            kind.api_version()
        )));
    }
    if let Some(m) = obj.get("metadata")
        && !m.is_object()
    {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

pub(super) fn metadata_mut(obj: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    let o = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the request body must be a JSON object"))?;
    let m = o.entry("metadata").or_insert_with(|| json!({}));
    if m.is_null() {
        *m = json!({});
    }
    m.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

pub(super) fn set_type_meta(kind: &KindSpec, obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        o.insert("apiVersion".into(), Value::String(kind.api_version()));
        o.insert("kind".into(), Value::String(kind.kind.clone()));
    }
}

pub(super) fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

pub(super) fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("metadata");
            o.remove("status");
        }
        v
    };
    strip(old) != strip(new)
}

/// `name` checked as the apiserver does: an RFC 1123 subdomain; for a
/// ClusterTrustBundle of a signer (`signer`), the signer's prefix (`/` as `:`, then
/// `:`) followed by one (its `ValidateClusterTrustBundleName`).
pub(super) fn validate_name(
    kind: &KindSpec,
    name: &str,
    signer: Option<&str>,
) -> Result<(), ApiError> {
    if kind.is_cluster_trust_bundle() {
        match signer.filter(|s| !s.is_empty()) {
            Some(signer) => {
                let prefix = format!("{}:", signer.replace('/', ":"));
                let Some(rest) = name.strip_prefix(&prefix) else {
                    return Err(ApiError::invalid(
                        kind,
                        name,
                        "metadata.name",
                        &format!(
                            "Invalid value: \"{name}\": ClusterTrustBundle for signerName {signer} must be named with prefix {prefix}"
                        ),
                    ));
                };
                return validate_name(kind, rest, None).map_err(|_| {
                    ApiError::invalid(
                        kind,
                        name,
                        "metadata.name",
                        &format!(
                            "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
                        ),
                    )
                });
            }
            None if name.contains(':') => {
                return Err(ApiError::invalid(
                    kind,
                    name,
                    "metadata.name",
                    &format!(
                        "Invalid value: \"{name}\": ClusterTrustBundle without signer name must not have \":\" in its name"
                    ),
                ));
            }
            None => {}
        }
    }
    let ok = name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            kind,
            name,
            "metadata.name",
            &format!(
                "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        ))
    }
}

pub(super) fn apply_defaults(
    kind: &KindSpec,
    obj: &mut Value,
    serial: u64,
) -> Result<(), ApiError> {
    use base64::Engine as _;
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let Some(o) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    // Empty labels, annotations and finalizers are not stored (the apiserver's
    // `omitempty`), so an object reads back without them.
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["labels", "annotations", "finalizers"] {
            let empty = match meta.get(field) {
                Some(Value::Object(m)) => m.is_empty(),
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Null) => true,
                _ => false,
            };
            if empty {
                meta.remove(field);
            }
        }
    }
    if kind.is_core("Secret") {
        o.entry("type")
            .or_insert_with(|| Value::String("Opaque".into()));
        if let Some(sd) = o.remove("stringData") {
            let Some(sd) = sd.as_object() else {
                return Err(ApiError::invalid(
                    kind,
                    &name,
                    "stringData",
                    "must be a map of strings",
                ));
            };
            let data = o.entry("data").or_insert_with(|| json!({}));
            if data.is_null() {
                *data = json!({});
            }
            if let Some(d) = data.as_object_mut() {
                for (k, v) in sd {
                    let s = v.as_str().unwrap_or_default();
                    d.insert(
                        k.clone(),
                        Value::String(base64::engine::general_purpose::STANDARD.encode(s)),
                    );
                }
            }
        }
        if let Some(d) = o.get("data").and_then(Value::as_object) {
            for (k, v) in d {
                let valid = v
                    .as_str()
                    .is_some_and(|s| base64::engine::general_purpose::STANDARD.decode(s).is_ok());
                if !valid {
                    return Err(ApiError::bad_request(format!(
                        "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at key {k:?}"
                    )));
                }
            }
        }
    } else if kind.is_core("Namespace") {
        let phase = if o
            .get("metadata")
            .and_then(|m| m.get("deletionTimestamp"))
            .is_some()
        {
            "Terminating"
        } else {
            "Active"
        };
        o.insert("status".into(), json!({"phase": phase}));
    } else if kind.is_core("Service") {
        let spec = o.entry("spec").or_insert_with(|| json!({}));
        if let Some(s) = spec.as_object_mut() {
            s.entry("type")
                .or_insert_with(|| Value::String("ClusterIP".into()));
            let external = s.get("type").and_then(Value::as_str) == Some("ExternalName");
            if !external
                && s.get("clusterIP")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
            {
                let ip = format!("10.96.{}.{}", (serial / 250) % 250, serial % 250 + 1);
                s.insert("clusterIP".into(), Value::String(ip.clone()));
                s.insert("clusterIPs".into(), json!([ip]));
            }
        }
    }
    Ok(())
}
