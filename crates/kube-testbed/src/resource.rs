//! Requests on a resource (`/api/v1/...`, `/apis/<group>/<version>/...`): which
//! resource and object the path names, which verb, RBAC, and one handler per verb.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response};
use serde_json::{Value, json};

use crate::auth::Attributes;
use crate::http::{Body, Shared, json_response, lock, not_found};
use crate::selectors::{FieldSelector, LabelSelector, SelectorError};
use crate::store::{ApiError, KindSpec, PatchKind, Store, WatchStart};
use crate::watch::{OpenWatch, OwnedScope, WatchStream, error_body};

const MAX_BODY: usize = 3 * 1024 * 1024;

/// The resource and object a request path names.
pub(crate) struct Target {
    kind: Arc<KindSpec>,
    ns: Option<String>,
    name: Option<String>,
    status: bool,
}

pub(crate) fn resolve(
    store: &Store,
    group: &str,
    version: &str,
    rest: &[String],
) -> Result<Target, ApiError> {
    let namespaced_kind = match rest {
        [first, _ns, plural, ..] if first == "namespaces" => {
            store.kind_by_resource(group, version, plural)
        }
        _ => None,
    };
    let (kind, ns, tail) = match namespaced_kind {
        Some(kind) => (kind, rest.get(1).cloned(), &rest[3..]),
        None => {
            let plural = rest.first().ok_or_else(not_found)?;
            let kind = store
                .kind_by_resource(group, version, plural)
                .ok_or_else(not_found)?;
            (kind, None, &rest[1..])
        }
    };
    let (name, status) = match tail {
        [] => (None, false),
        [name] => (Some(name.clone()), false),
        [name, sub] if sub == "status" && kind.status_subresource => (Some(name.clone()), true),
        _ => return Err(not_found()),
    };
    if ns.is_some() && !kind.namespaced {
        return Err(not_found());
    }
    if ns.is_none() && kind.namespaced && name.is_some() {
        return Err(not_found());
    }
    Ok(Target {
        kind,
        ns,
        name,
        status,
    })
}

fn truthy(q: &HashMap<String, String>, key: &str) -> bool {
    matches!(q.get(key).map(String::as_str), Some("true" | "1"))
}

fn dry_run(q: &HashMap<String, String>, body: Option<&Value>) -> bool {
    q.get("dryRun").is_some_and(|v| v == "All")
        || body
            .and_then(|b| b.get("dryRun"))
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v == "All"))
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, ApiError> {
    Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ApiError::new(413, "RequestEntityTooLarge", format!("request body: {e}")))
}

fn content_type(req: &Request<Incoming>) -> String {
    req.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Decode an object body: JSON, YAML, or (for built-in kinds) Kubernetes protobuf.
fn decode_object(ct: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    match ct {
        "application/vnd.kubernetes.protobuf" => crate::proto::decode(bytes).map_err(|e| {
            ApiError::new(
                415,
                "UnsupportedMediaType",
                format!("the body of the request was in an unknown format: {e}"),
            )
        }),
        "application/yaml" => serde_saphyr::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}"))),
        _ => parse_json(bytes),
    }
}

fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

/// The verb of a request on a resource, as RBAC names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    fn of(method: &Method, named: bool, watch: bool) -> Result<Self, ApiError> {
        Ok(match (method, named) {
            (&Method::GET, true) => Self::Get,
            (&Method::GET, false) if watch => Self::Watch,
            (&Method::GET, false) => Self::List,
            (&Method::POST, false) => Self::Create,
            (&Method::PUT, true) => Self::Update,
            (&Method::PATCH, true) => Self::Patch,
            (&Method::DELETE, true) => Self::Delete,
            (&Method::DELETE, false) => Self::DeleteCollection,
            _ => {
                return Err(ApiError::new(
                    405,
                    "MethodNotAllowed",
                    format!(
                        "the server does not allow this method on the requested resource ({method})"
                    ),
                ));
            }
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
        }
    }
}

/// A request on a resource: authorize it, then run its verb.
pub(crate) async fn request(
    shared: &Arc<Shared>,
    user: &str,
    t: Target,
    q: HashMap<String, String>,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    // kube-rs metadata APIs (`get_metadata`, `list_metadata`, `metadata_watcher`)
    let metadata_only = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=PartialObjectMetadata"));
    let verb = Verb::of(req.method(), t.name.is_some(), truthy(&q, "watch"))?;
    let labels = LabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or(""))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector").map(String::as_str).unwrap_or(""),
        t.kind.supported_fields(),
    )
    .map_err(|e| match e {
        // A kind with its own field label conversion (a ClusterTrustBundle) words
        // an unknown field as the apiserver's conversion does.
        SelectorError::UnsupportedField(field, _) if t.kind.is_cluster_trust_bundle() => {
            ApiError::bad_request(format!("field label not supported: {field}"))
        }
        e => ApiError::bad_request(e.to_string()),
    })?;
    authorize(shared, user, &t, verb, &fields)?;
    let fields = if lock(&shared.faults).ignore_field_selectors {
        FieldSelector::default()
    } else {
        fields
    };
    let mut resource = t.kind.plural.clone();
    if !t.kind.group.is_empty() {
        resource = format!("{resource}.{}", t.kind.group);
    }
    if t.status {
        resource.push_str("/status");
    }
    *lock(&shared.requests)
        .entry((verb.as_str(), resource))
        .or_default() += 1;
    let scope = OwnedScope {
        ns: t.ns.clone(),
        labels,
        fields,
    };

    let ns = t.ns.as_deref();
    let kind = &t.kind;
    let name = t.name.as_deref().unwrap_or("");
    match verb {
        Verb::Get => {
            let obj = lock(&shared.store).get(kind, ns, name)?;
            if metadata_only {
                return Ok(json_response(200, &crate::watch::partial_metadata(&obj)));
            }
            Ok(json_response(200, &obj))
        }
        Verb::List => list(shared, kind, &scope, metadata_only),
        Verb::Watch => watch_request(shared, t, &q, scope, metadata_only),
        Verb::Create => {
            let ct = content_type(&req);
            let body = decode_object(&ct, &read_body(req).await?)?;
            let obj = lock(&shared.store).create(kind, ns, body, dry_run(&q, None))?;
            Ok(json_response(201, &obj))
        }
        Verb::Update => {
            let ct = content_type(&req);
            let body = decode_object(&ct, &read_body(req).await?)?;
            let dry = dry_run(&q, None);
            let obj = lock(&shared.store).update(kind, ns, name, body, t.status, dry)?;
            Ok(json_response(200, &obj))
        }
        Verb::Patch => {
            let patch_kind = patch_kind(&req)?;
            let bytes = read_body(req).await?;
            let body: Value = if patch_kind == PatchKind::Apply {
                serde_saphyr::from_slice(&bytes)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
            } else {
                parse_json(&bytes)?
            };
            let dry = dry_run(&q, None);
            let obj = lock(&shared.store).patch(kind, ns, name, patch_kind, body, t.status, dry)?;
            Ok(json_response(200, &obj))
        }
        Verb::Delete => {
            let opts = delete_options(req).await?;
            let pre_rv = opts
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str);
            let pre_uid = opts.pointer("/preconditions/uid").and_then(Value::as_str);
            let dry = dry_run(&q, Some(&opts));
            let obj = lock(&shared.store).delete(kind, ns, name, pre_rv, pre_uid, dry)?;
            Ok(json_response(200, &deleted_answer(kind, name, obj)))
        }
        Verb::DeleteCollection => {
            let opts = delete_options(req).await?;
            delete_collection(shared, kind, &scope, dry_run(&q, Some(&opts)))
        }
    }
}

/// RBAC: the verb on the resource (or its status subresource), and on the object when
/// the request names one (by path, or pinned by a `metadata.name` field selector).
fn authorize(
    shared: &Shared,
    user: &str,
    t: &Target,
    verb: Verb,
    fields: &FieldSelector,
) -> Result<(), ApiError> {
    let resource = if t.status {
        format!("{}/status", t.kind.plural)
    } else {
        t.kind.plural.clone()
    };
    let auth_name = t.name.as_deref().or_else(|| fields.pinned_name());
    lock(&shared.auth).authorize(
        user,
        &Attributes {
            verb: verb.as_str(),
            group: &t.kind.group,
            resource: &resource,
            namespace: t.ns.as_deref(),
            name: if verb == Verb::Create {
                None
            } else {
                auth_name
            },
        },
    )
}

fn list(
    shared: &Shared,
    kind: &KindSpec,
    scope: &OwnedScope,
    metadata_only: bool,
) -> Result<Response<Body>, ApiError> {
    let (items, rv) = lock(&shared.store).list(kind, &scope.scope());
    if metadata_only {
        let items: Vec<Value> = items.iter().map(crate::watch::partial_metadata).collect();
        return Ok(json_response(
            200,
            &json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": rv.to_string()},
                "items": items,
            }),
        ));
    }
    Ok(json_response(200, &list_of(kind, rv, items)))
}

/// A `<Kind>List` of `items` at resourceVersion `rv`.
fn list_of(kind: &KindSpec, rv: u64, items: Vec<Value>) -> Value {
    json!({
        "kind": format!("{}List", kind.kind),
        "apiVersion": kind.api_version(),
        "metadata": {"resourceVersion": rv.to_string()},
        "items": items,
    })
}

/// How a PATCH body is to be read, from its content type.
fn patch_kind(req: &Request<Incoming>) -> Result<PatchKind, ApiError> {
    let ct = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    Ok(match ct.as_str() {
        "application/merge-patch+json" => PatchKind::Merge,
        "application/json-patch+json" => PatchKind::Json,
        "application/strategic-merge-patch+json" => PatchKind::StrategicMerge,
        "application/apply-patch+yaml" | "application/apply-patch+cbor" => PatchKind::Apply,
        other => {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {other:?})"
                ),
            ));
        }
    })
}

/// The DeleteOptions of a DELETE; a protobuf body (typed clients) is ignored.
async fn delete_options(req: Request<Incoming>) -> Result<Value, ApiError> {
    let bytes = read_body(req).await?;
    Ok(serde_json::from_slice(&bytes).unwrap_or_else(|_| json!({})))
}

fn delete_collection(
    shared: &Shared,
    kind: &KindSpec,
    scope: &OwnedScope,
    dry: bool,
) -> Result<Response<Body>, ApiError> {
    let mut store = lock(&shared.store);
    let (items, _) = store.list(kind, &scope.scope());
    let mut deleted = Vec::new();
    for item in items {
        let name = item
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let item_ns = item.pointer("/metadata/namespace").and_then(Value::as_str);
        if let Ok(d) = store.delete(kind, item_ns, name, None, None, dry) {
            deleted.push(d);
        }
    }
    let rv = store.current_rv();
    Ok(json_response(200, &list_of(kind, rv, deleted)))
}

fn watch_request(
    shared: &Arc<Shared>,
    t: Target,
    q: &HashMap<String, String>,
    scope: OwnedScope,
    metadata_only: bool,
) -> Result<Response<Body>, ApiError> {
    let rv = q.get("resourceVersion").map(String::as_str).unwrap_or("");
    let start = if truthy(q, "sendInitialEvents") {
        WatchStart::Initial { end_bookmark: true }
    } else if rv.is_empty() || rv == "0" {
        WatchStart::Initial {
            end_bookmark: false,
        }
    } else {
        let n = rv
            .parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))?;
        WatchStart::From(n)
    };
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|s| *s > 0)
        .unwrap_or(1800);
    let started = lock(&shared.store).watch(&t.kind, &scope.scope(), start);
    let mut resp = match started {
        Ok((initial, rx)) => {
            let stream = WatchStream {
                kind: t.kind.clone(),
                scope,
                bookmarks: truthy(q, "allowWatchBookmarks"),
                metadata_only,
                initial: VecDeque::from(initial),
                rx: Some(rx),
                deadline: tokio::time::Instant::now() + Duration::from_secs(timeout),
                done: false,
                _open: OpenWatch::new(&shared.open_watches),
            };
            Response::new(stream.into_body())
        }
        // Like the apiserver: a 200 response carrying one ERROR event.
        Err(e) => Response::new(error_body(&e)),
    };
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(resp)
}

/// The core resources whose storage answers a DELETE with the deleted object
/// (`ReturnDeletedObject` in kube-apiserver's registry); the others answer `Status`
/// `Success` once the object is gone.
const RETURN_DELETED_OBJECT: &[&str] = &[
    "Namespace",
    "Pod",
    "PodTemplate",
    "Service",
    "ServiceAccount",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "ResourceQuota",
];

/// What a DELETE answers: the object while finalizers hold it (it has a
/// `deletionTimestamp`) or for the resources that return it, else `Status` `Success`.
fn deleted_answer(kind: &KindSpec, name: &str, obj: Value) -> Value {
    let pending = obj.pointer("/metadata/deletionTimestamp").is_some();
    let returns_object = RETURN_DELETED_OBJECT.iter().any(|k| kind.is_core(k));
    if pending || returns_object {
        return obj;
    }
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    crate::store::deleted_status(kind, name, uid)
}
