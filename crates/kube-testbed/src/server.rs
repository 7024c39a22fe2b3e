//! HTTP(S) serving: TLS, the accept loop, fault injection and routing to the
//! discovery and resource handlers (the helpers they share are in `http`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::discovery;
use crate::error::TestbedError;
use crate::http::{Body, Shared, error_response, full, json_response, lock, not_found};
use crate::store::ApiError;

/// Binds `port` on 127.0.0.1 (0: any), retrying a taken one for a while (a
/// restart on the same port).
pub(crate) async fn bind(
    port: u16,
    runtime: &tokio::runtime::Handle,
) -> Result<TcpListener, TestbedError> {
    let mut last = None;
    for _ in 0..50 {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        match runtime
            .spawn(async move { TcpListener::bind(addr).await })
            .await
        {
            Ok(Ok(l)) => return Ok(l),
            Ok(Err(e)) => last = Some(e),
            Err(e) => last = Some(std::io::Error::other(e.to_string())),
        }
        if port == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(TestbedError::Bind {
        port,
        source: last.unwrap_or_else(|| std::io::Error::other("bind failed")),
    })
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

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let (delay, fail, reply) = {
        let mut f = lock(&shared.faults);
        let fail = if f.fail_next > 0 {
            f.fail_next -= 1;
            Some((f.fail_status, f.fail_message.clone()))
        } else {
            None
        };
        let reply = if fail.is_none() && f.reply_next > 0 {
            f.reply_next -= 1;
            Some((f.reply_status, f.reply_body.clone()))
        } else {
            None
        };
        (f.delay, fail, reply)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let Some((code, body)) = reply {
        let mut response = Response::new(crate::http::full(body));
        *response.status_mut() = hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::OK);
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        return Ok(response);
    }
    tracing::debug!(method = %req.method(), path = %req.uri().path(), "request");
    if let Some((code, message)) = fail {
        let mut error = ApiError::for_status(code);
        if let Some(message) = message {
            error.message = message;
        }
        return Ok(error_response(&error));
    }
    Ok(match route(&shared, req).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    })
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
            ["api", "v1", ..] => crate::resource::resolve(&store, "", "v1", &segs[2..])?,
            ["apis", g, v, ..] => crate::resource::resolve(&store, g, v, &segs[3..])?,
            _ => return Err(not_found()),
        }
    };
    crate::resource::request(shared, &user, target, query, req).await
}

/// Generate a CA and a serving certificate (SANs 127.0.0.1 and localhost).
/// Returns (server config, CA PEM, CA DER).
/// The emulator's serving configuration, its CA's PEM and DER; an error says why (the
/// caller wraps it as `TestbedError::Tls`).
pub(crate) fn make_tls() -> Result<(Arc<rustls::ServerConfig>, String, Vec<u8>), String> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

    let tls_err = |e: rcgen::Error| e.to_string();
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
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone(), CertificateDer::from(ca_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((Arc::new(config), ca_pem, ca_der))
}
