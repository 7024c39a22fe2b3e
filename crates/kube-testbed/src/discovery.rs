//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{g}`,
//! `/apis/{g}/{v}`, and minimal OpenAPI documents.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::store::KindSpec;

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "37",
        "emulationMajor": "1",
        "emulationMinor": "37",
        "gitVersion": "v1.37.0-testbed",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

pub(crate) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn resources(kinds: &[Arc<KindSpec>]) -> Vec<Value> {
    let mut out = Vec::new();
    for k in kinds {
        out.push(json!({
            "name": k.plural,
            "singularName": k.singular,
            "namespaced": k.namespaced,
            "kind": k.kind,
            "verbs": VERBS,
            "shortNames": k.short_names,
            "storageVersionHash": "",
        }));
        if k.status_subresource {
            out.push(json!({
                "name": format!("{}/status", k.plural),
                "singularName": "",
                "namespaced": k.namespaced,
                "kind": k.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    out
}

/// `APIResourceList` for one group/version.
pub(crate) fn resource_list(kinds: &[Arc<KindSpec>], group: &str, version: &str) -> Option<Value> {
    let selected: Vec<Arc<KindSpec>> = kinds
        .iter()
        .filter(|k| k.group == group && k.version == version)
        .cloned()
        .collect();
    if selected.is_empty() {
        return None;
    }
    let gv = selected
        .first()
        .map(|k| k.api_version())
        .unwrap_or_default();
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources(&selected),
    }))
}

fn groups(kinds: &[Arc<KindSpec>]) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for k in kinds.iter().filter(|k| !k.group.is_empty()) {
        let versions = groups.entry(k.group.clone()).or_default();
        if !versions.contains(&k.version) {
            versions.push(k.version.clone());
        }
    }
    groups
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `APIGroupList`.
pub(crate) fn group_list(kinds: &[Arc<KindSpec>]) -> Value {
    let groups: Vec<Value> = groups(kinds).iter().map(|(g, v)| group_doc(g, v)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `APIGroup`.
pub(crate) fn group(kinds: &[Arc<KindSpec>], name: &str) -> Option<Value> {
    groups(kinds).get(name).map(|v| group_doc(name, v))
}

/// A valid OpenAPI v2 document with no definitions: clients that validate
/// against it find no schema and skip client-side validation.
pub(crate) fn openapi_v2() -> Value {
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes (kube-testbed)", "version": "v1.37.0"},
        "paths": {},
        "definitions": {}
    })
}

fn gv_path(k: &KindSpec) -> String {
    if k.group.is_empty() {
        format!("api/{}", k.version)
    } else {
        format!("apis/{}/{}", k.group, k.version)
    }
}

/// The same empty OpenAPI v2 document in the protobuf form (gnostic
/// `openapi_v2.Document`: `swagger`, `info{title, version}`, empty `paths`), which
/// is what kubectl asks for; with no definitions it skips client-side validation.
pub(crate) fn openapi_v2_protobuf() -> Vec<u8> {
    fn field(out: &mut Vec<u8>, tag: u8, payload: &[u8]) {
        out.push(tag);
        // every payload here is shorter than 128 bytes: a one-byte varint length
        out.push(u8::try_from(payload.len()).unwrap_or(0x7f).min(0x7f));
        out.extend_from_slice(payload);
    }
    let mut info = Vec::new();
    field(&mut info, 0x0a, b"Kubernetes (kube-testbed)");
    field(&mut info, 0x12, b"v1.37.0");
    let mut doc = Vec::new();
    field(&mut doc, 0x0a, b"2.0");
    field(&mut doc, 0x12, &info);
    field(&mut doc, 0x42, b"");
    doc
}

/// The OpenAPI v3 index: one entry per served group-version.
pub(crate) fn openapi_v3_root(kinds: &[Arc<KindSpec>]) -> Value {
    let mut paths = serde_json::Map::new();
    for k in kinds {
        let p = gv_path(k);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=testbed")}),
        );
    }
    json!({"paths": paths})
}

/// A minimal OpenAPI v3 document for one group-version (path being `api/v1` or
/// `apis/g/v`): per kind, the item path with GET/PUT/PATCH/DELETE operations
/// tagged with `x-kubernetes-group-version-kind` and the `fieldValidation` and
/// `dryRun` query parameters. That tells kubectl the server validates fields
/// itself, so it sends `fieldValidation=Strict` instead of validating against
/// schemas (none are published: every kind accepts any fields).
pub(crate) fn openapi_v3_gv(kinds: &[Arc<KindSpec>], path: &str) -> Option<Value> {
    let selected: Vec<&Arc<KindSpec>> = kinds.iter().filter(|k| gv_path(k) == path).collect();
    if selected.is_empty() {
        return None;
    }
    let mut paths = serde_json::Map::new();
    for k in selected {
        let gvk = json!({"group": k.group, "version": k.version, "kind": k.kind});
        let params = json!([
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}}
        ]);
        let op = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", k.kind),
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": params,
                "responses": {"200": {"description": "OK"}}
            })
        };
        let prefix = format!("/{path}");
        let item = if k.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", k.plural)
        } else {
            format!("{prefix}/{}/{{name}}", k.plural)
        };
        let collection = if k.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", k.plural)
        } else {
            format!("{prefix}/{}", k.plural)
        };
        paths.insert(
            item,
            json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}),
        );
        paths.insert(collection, json!({"get": op("list"), "post": op("post")}));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kube-testbed)", "version": "v1.37.0"},
        "paths": paths,
        "components": {"schemas": {}}
    }))
}
