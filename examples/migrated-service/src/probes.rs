//! `/readyz` and `/livez` on `--health-probe-bind-address`, as controller-runtime
//! managers serve them, for the pod's readiness and liveness probes.
//!
//! - `/readyz`: 200 when every check of the [`Readiness`] is ready (or degraded),
//!   503 otherwise; the body has one line per check (`ok identity`, `not ready
//!   caches`). The reasons ("waiting for ... to load" until the caches, the identity
//!   Secret and the CA Secret are loaded; the loader's error when the identity Secret
//!   breaks later) name Secrets and quote API servers, so they are logged at WARN
//!   each time they change, and put in the body only with `--health-probe-verbose`:
//!   whoever can reach the probe port learns nothing else by default.
//! - `/livez`: 200 while the process serves. It judges no Secret, no cache and no
//!   peer: a restart fixes none of them, and a liveness probe that fails on a broken
//!   Secret turns one bad rotation into a crash loop of every replica.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use platform_client_compat::construct::cache::{CacheState, HealthReport};
use platform_client_compat::tls::readiness::{Readiness, Verdict};
use tokio::net::TcpListener;

/// Binds `address` and serves the probes until the process ends; returns the address
/// bound (port 0 picks one).
pub(crate) async fn serve(
    address: SocketAddr,
    readiness: Readiness,
    verbose: bool,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let logged = Arc::new(Mutex::new(String::new()));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (readiness, logged) = (readiness.clone(), logged.clone());
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let (readiness, logged) = (readiness.clone(), logged.clone());
                    async move { Ok::<_, Infallible>(answer(&request, &readiness, verbose, &logged)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(bound)
}

fn answer<B>(
    request: &Request<B>,
    readiness: &Readiness,
    verbose: bool,
    logged: &Mutex<String>,
) -> Response<Full<Bytes>> {
    let (status, body) = match request.uri().path() {
        "/livez" => (StatusCode::OK, "ok\n".to_owned()),
        "/readyz" => {
            let report = readiness.report();
            let full = report.to_string();
            if !report.is_ready() {
                // Each new set of reasons once, not once per probe.
                let mut last = logged.lock().unwrap_or_else(PoisonError::into_inner);
                if *last != full {
                    tracing::warn!(
                        report = %platform_client_compat::tls::excerpt::display(&full),
                        "not ready"
                    );
                    *last = full.clone();
                }
            }
            let body = if verbose {
                full
            } else {
                report.summary().to_string()
            };
            if report.is_ready() {
                (StatusCode::OK, body)
            } else {
                (StatusCode::SERVICE_UNAVAILABLE, body)
            }
        }
        _ => (StatusCode::NOT_FOUND, "not found\n".to_owned()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The caches' verdict: syncing is not ready (reads would miss objects); degraded
/// (the watch fails, reads serve the last known state) is ready with its reason, so
/// that an API server outage does not take every replica out of its Service.
pub(crate) fn caches_verdict(report: &HealthReport) -> Verdict {
    let describe = |state: CacheState| {
        report
            .caches
            .iter()
            .filter(|cache| cache.state == state)
            .map(|cache| match &cache.last_error {
                Some(error) => format!("{} ({error})", cache.cache),
                None => cache.cache.to_string(),
            })
            .collect::<Vec<_>>()
    };
    let syncing = describe(CacheState::Syncing);
    if !syncing.is_empty() {
        return Verdict::NotReady {
            reason: format!("syncing: {}", syncing.join(", ")),
        };
    }
    let degraded = describe(CacheState::Degraded);
    if !degraded.is_empty() {
        return Verdict::Degraded {
            reason: format!(
                "watch failing, serving the last known state: {}",
                degraded.join(", ")
            ),
        };
    }
    Verdict::Ready
}
