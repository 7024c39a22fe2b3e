//! Secrets as JSON objects, the form an API emulator's `upsert` takes
//! (`kube_testbed::Testbed::upsert`): `data` values base64-encoded, as the API
//! stores them.

use base64::Engine as _;
use serde_json::Value;

/// A `kubernetes.io/tls` Secret `namespace/name` holding `tls.crt` and `tls.key`.
pub fn tls_secret(namespace: &str, name: &str, cert_pem: &str, key_pem: &str) -> Value {
    secret_with(
        namespace,
        name,
        "kubernetes.io/tls",
        &[("tls.crt", cert_pem), ("tls.key", key_pem)],
    )
}

/// A Secret `namespace/name` of type `type_` with the given data (text values,
/// base64-encoded here).
pub fn secret_with(namespace: &str, name: &str, type_: &str, data: &[(&str, &str)]) -> Value {
    let b64 = base64::engine::general_purpose::STANDARD;
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), b64.encode(v).into()))
        .collect();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": name, "namespace": namespace },
        "type": type_,
        "data": data,
    })
}
