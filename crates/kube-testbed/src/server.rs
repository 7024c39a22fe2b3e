//! HTTP(S) serving: TLS, the accept loop, routing and the request handlers.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::auth::{Attributes, Authenticator};
use crate::discovery;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{ApiError, KindSpec, PatchKind, Store, WatchStart};
use crate::watch::{OwnedScope, WatchStream, error_body};

/// Response body type.
pub(crate) type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

const MAX_BODY: usize = 3 * 1024 * 1024;

/// Fault injection state.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    pub delay: Duration,
    pub fail_next: usize,
    pub fail_status: u16,
}

/// State shared by the server tasks and the [`crate::Testbed`] handle.
pub(crate) struct Shared {
    pub store: Mutex<Store>,
    pub auth: Mutex<Authenticator>,
    pub faults: Mutex<Faults>,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub server_address: Mutex<String>,
}

/// Lock, recovering from poisoning (a panicking test thread must not wedge the server).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Accept connections until the task is aborted; aborting drops every connection.
pub(crate) async fn serve(shared: Arc<Shared>, listener: TcpListener) {
    let acceptor = shared.tls.clone().map(tokio_rustls::TlsAcceptor::from);
    let mut conns = JoinSet::new();
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let acceptor = acceptor.clone();
        conns.spawn(async move {
            let svc = hyper::service::service_fn(move |req| handle(shared.clone(), req));
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let result = match acceptor {
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(tls) => builder.serve_connection(TokioIo::new(tls), svc).await,
                    Err(e) => {
                        tracing::debug!("TLS handshake failed: {e}");
                        return;
                    }
                },
                None => builder.serve_connection(TokioIo::new(stream), svc).await,
            };
            if let Err(e) = result {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn json_response(code: u16, value: &Value) -> Response<Body> {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut resp = Response::new(full(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn error_response(e: &ApiError) -> Response<Body> {
    let mut resp = json_response(e.code, &e.status());
    if e.code == 429 {
        resp.headers_mut()
            .insert("retry-after", HeaderValue::from_static("1"));
    }
    resp
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let (delay, fail) = {
        let mut f = lock(&shared.faults);
        let fail = if f.fail_next > 0 {
            f.fail_next -= 1;
            Some(f.fail_status)
        } else {
            None
        };
        (f.delay, fail)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    tracing::debug!(method = %req.method(), path = %req.uri().path(), "request");
    if let Some(code) = fail {
        return Ok(error_response(&ApiError::for_status(code)));
    }
    Ok(match route(&shared, req).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    })
}

fn not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

struct Target {
    kind: Arc<KindSpec>,
    ns: Option<String>,
    name: Option<String>,
    status: bool,
}

fn resolve(store: &Store, group: &str, version: &str, rest: &[String]) -> Result<Target, ApiError> {
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
        "application/yaml" => serde_yaml::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}"))),
        _ => parse_json(bytes),
    }
}

fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

async fn route(shared: &Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let path = req.uri().path().to_string();
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let query: HashMap<String, String> = req
        .uri()
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    let seg: Vec<&str> = segs.iter().map(String::as_str).collect();

    match seg.as_slice() {
        ["version"] => return Ok(json_response(200, &discovery::version())),
        ["healthz" | "livez" | "readyz"] => {
            let mut r = Response::new(full("ok"));
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            return Ok(r);
        }
        _ => {}
    }

    let auth_header = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let user = lock(&shared.auth)
        .authenticate(auth_header.as_deref())?
        .to_string();

    let is_get = req.method() == Method::GET;
    let accepts_json = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|a| !a.contains("protobuf"));
    match seg.as_slice() {
        ["openapi", "v2"] | ["swagger-2.0.0.pb-v1"] if is_get && !accepts_json => {
            let mut r = Response::new(full(discovery::openapi_v2_protobuf()));
            r.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            return Ok(r);
        }
        ["openapi", "v2"] if is_get => {
            return Ok(json_response(200, &discovery::openapi_v2()));
        }
        ["openapi", "v3"] if is_get => {
            let store = lock(&shared.store);
            return Ok(json_response(
                200,
                &discovery::openapi_v3_root(store.kinds()),
            ));
        }
        ["openapi", "v3", rest @ ..] if is_get => {
            let store = lock(&shared.store);
            let doc =
                discovery::openapi_v3_gv(store.kinds(), &rest.join("/")).ok_or_else(not_found)?;
            return Ok(json_response(200, &doc));
        }
        ["api"] if is_get => {
            let addr = lock(&shared.server_address).clone();
            return Ok(json_response(200, &discovery::core_versions(&addr)));
        }
        ["api", "v1"] if is_get => {
            let store = lock(&shared.store);
            let doc = discovery::resource_list(store.kinds(), "", "v1").ok_or_else(not_found)?;
            return Ok(json_response(200, &doc));
        }
        ["apis"] if is_get => {
            let store = lock(&shared.store);
            return Ok(json_response(200, &discovery::group_list(store.kinds())));
        }
        ["apis", g] if is_get => {
            let store = lock(&shared.store);
            let doc = discovery::group(store.kinds(), g).ok_or_else(not_found)?;
            return Ok(json_response(200, &doc));
        }
        ["apis", g, v] if is_get => {
            let store = lock(&shared.store);
            let doc = discovery::resource_list(store.kinds(), g, v).ok_or_else(not_found)?;
            return Ok(json_response(200, &doc));
        }
        _ => {}
    }

    let target = {
        let store = lock(&shared.store);
        match seg.as_slice() {
            ["api", "v1", ..] => resolve(&store, "", "v1", &segs[2..])?,
            ["apis", g, v, ..] => resolve(&store, g, v, &segs[3..])?,
            _ => return Err(not_found()),
        }
    };
    resource_request(shared, &user, target, query, req).await
}

async fn resource_request(
    shared: &Arc<Shared>,
    user: &str,
    t: Target,
    q: HashMap<String, String>,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let method = req.method().clone();
    // kube-rs metadata APIs (`get_metadata`, `list_metadata`, `metadata_watcher`)
    let metadata_only = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=PartialObjectMetadata"));
    let watch = truthy(&q, "watch");
    let verb = match (&method, t.name.is_some()) {
        (&Method::GET, true) => "get",
        (&Method::GET, false) if watch => "watch",
        (&Method::GET, false) => "list",
        (&Method::POST, false) => "create",
        (&Method::PUT, true) => "update",
        (&Method::PATCH, true) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => {
            return Err(ApiError::new(
                405,
                "MethodNotAllowed",
                format!(
                    "the server does not allow this method on the requested resource ({method})"
                ),
            ));
        }
    };
    let labels = LabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or(""))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector").map(String::as_str).unwrap_or(""),
        t.kind.supported_fields(),
    )
    .map_err(|e| ApiError::bad_request(e.to_string()))?;

    let resource = if t.status {
        format!("{}/status", t.kind.plural)
    } else {
        t.kind.plural.clone()
    };
    let auth_name = t.name.as_deref().or_else(|| fields.pinned_name());
    lock(&shared.auth).authorize(
        user,
        &Attributes {
            verb,
            group: &t.kind.group,
            resource: &resource,
            namespace: t.ns.as_deref(),
            name: if verb == "create" { None } else { auth_name },
        },
    )?;

    let ns = t.ns.as_deref();
    let kind = &t.kind;
    match verb {
        "get" => {
            let name = t.name.as_deref().unwrap_or("");
            let obj = lock(&shared.store).get(kind, ns, name)?;
            if metadata_only {
                return Ok(json_response(200, &crate::watch::partial_metadata(&obj)));
            }
            Ok(json_response(200, &obj))
        }
        "list" => {
            let scope = OwnedScope {
                ns: t.ns.clone(),
                labels,
                fields,
            };
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
            let list = json!({
                "kind": format!("{}List", kind.kind),
                "apiVersion": kind.api_version(),
                "metadata": {"resourceVersion": rv.to_string()},
                "items": items,
            });
            Ok(json_response(200, &list))
        }
        "watch" => watch_request(shared, t, &q, labels, fields, metadata_only),
        "create" => {
            let ct = content_type(&req);
            let body = decode_object(&ct, &read_body(req).await?)?;
            let dry = dry_run(&q, None);
            let obj = lock(&shared.store).create(kind, ns, body, dry)?;
            Ok(json_response(201, &obj))
        }
        "update" => {
            let ct = content_type(&req);
            let body = decode_object(&ct, &read_body(req).await?)?;
            let name = t.name.as_deref().unwrap_or("");
            let dry = dry_run(&q, None);
            let obj = lock(&shared.store).update(kind, ns, name, body, t.status, dry)?;
            Ok(json_response(200, &obj))
        }
        "patch" => {
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
            let patch_kind = match ct.as_str() {
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
            };
            let bytes = read_body(req).await?;
            let body: Value = if patch_kind == PatchKind::Apply {
                serde_yaml::from_slice(&bytes)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
            } else {
                parse_json(&bytes)?
            };
            let name = t.name.as_deref().unwrap_or("");
            let dry = dry_run(&q, None);
            let obj = lock(&shared.store).patch(kind, ns, name, patch_kind, body, t.status, dry)?;
            Ok(json_response(200, &obj))
        }
        "delete" => {
            let bytes = read_body(req).await?;
            // DeleteOptions; a protobuf body (typed clients) is ignored
            let opts: Value = serde_json::from_slice(&bytes).unwrap_or_else(|_| json!({}));
            let pre_rv = opts
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str);
            let pre_uid = opts.pointer("/preconditions/uid").and_then(Value::as_str);
            let name = t.name.as_deref().unwrap_or("");
            let dry = dry_run(&q, Some(&opts));
            let obj = lock(&shared.store).delete(kind, ns, name, pre_rv, pre_uid, dry)?;
            Ok(json_response(200, &obj))
        }
        "deletecollection" => {
            let bytes = read_body(req).await?;
            // DeleteOptions; a protobuf body (typed clients) is ignored
            let opts: Value = serde_json::from_slice(&bytes).unwrap_or_else(|_| json!({}));
            let dry = dry_run(&q, Some(&opts));
            let scope = OwnedScope {
                ns: t.ns.clone(),
                labels,
                fields,
            };
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
            Ok(json_response(
                200,
                &json!({
                    "kind": format!("{}List", kind.kind),
                    "apiVersion": kind.api_version(),
                    "metadata": {"resourceVersion": rv.to_string()},
                    "items": deleted,
                }),
            ))
        }
        _ => Err(not_found()),
    }
}

fn watch_request(
    shared: &Arc<Shared>,
    t: Target,
    q: &HashMap<String, String>,
    labels: LabelSelector,
    fields: FieldSelector,
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
    let scope = OwnedScope {
        ns: t.ns.clone(),
        labels,
        fields,
    };
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

/// Generate a CA and a serving certificate (SANs 127.0.0.1 and localhost).
/// Returns (server config, CA PEM, CA DER).
pub(crate) fn make_tls() -> Result<(Arc<rustls::ServerConfig>, String, Vec<u8>), crate::TestbedError>
{
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

    let tls_err = |e: rcgen::Error| crate::TestbedError::Tls(e.to_string());
    let ca_key = KeyPair::generate().map_err(tls_err)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kube-testbed CA");
    let ca_cert = ca_params.self_signed(&ca_key).map_err(tls_err)?;
    let ca_pem = ca_cert.pem();
    let ca_der = ca_cert.der().to_vec();
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().map_err(tls_err)?;
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .map_err(tls_err)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.use_authority_key_identifier_extension = true;
    let cert = params.signed_by(&key, &issuer).map_err(tls_err)?;

    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| crate::TestbedError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone(), CertificateDer::from(ca_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(|e| crate::TestbedError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((Arc::new(config), ca_pem, ca_der))
}
