//! `/readyz` and `/livez` on `--health-probe-bind-address`, as controller-runtime
//! managers serve them, for the pod's readiness and liveness probes.
//!
//! - `/readyz`: 200 when every check of the [`Readiness`] is ready (or degraded),
//!   503 otherwise; the body has one line per check with its reason. It answers from
//!   the start of the process, so it says "waiting for ... to load" until the caches,
//!   the identity Secret and the CA Secret are loaded, and names the loader's error
//!   when the identity Secret breaks later.
//! - `/livez`: 200 while the process serves. It judges no Secret, no cache and no
//!   peer: a restart fixes none of them, and a liveness probe that fails on a broken
//!   Secret turns one bad rotation into a crash loop of every replica.

use std::convert::Infallible;
use std::net::SocketAddr;

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
pub async fn serve(address: SocketAddr, readiness: Readiness) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let readiness = readiness.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let readiness = readiness.clone();
                    async move { Ok::<_, Infallible>(answer(&request, &readiness)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(bound)
}

fn answer<B>(request: &Request<B>, readiness: &Readiness) -> Response<Full<Bytes>> {
    let (status, body) = match request.uri().path() {
        "/livez" => (StatusCode::OK, "ok\n".to_owned()),
        "/readyz" => {
            let report = readiness.report();
            if report.is_ready() {
                (StatusCode::OK, report.to_string())
            } else {
                (StatusCode::SERVICE_UNAVAILABLE, report.to_string())
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
pub fn caches_verdict(report: &HealthReport) -> Verdict {
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
