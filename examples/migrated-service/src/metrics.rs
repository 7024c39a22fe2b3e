//! `/metrics`: the Prometheus registry the service owns, served on
//! `--metrics-bind-address` as controller-runtime services serve theirs.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

/// The OpenMetrics text format `prometheus-client` writes.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Binds `address` and serves `registry` on `GET /metrics` until the process ends;
/// returns the address bound (port 0 picks one).
pub(crate) async fn serve(address: SocketAddr, registry: Registry) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let registry = Arc::new(registry);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let registry = registry.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let registry = registry.clone();
                    async move { Ok::<_, Infallible>(answer(&request, &registry)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(bound)
}

fn answer<B>(request: &Request<B>, registry: &Registry) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, content_type: &str, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        if let Ok(value) = content_type.parse() {
            response
                .headers_mut()
                .insert(hyper::header::CONTENT_TYPE, value);
        }
        response
    };
    if request.uri().path() != "/metrics" {
        return reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_owned(),
        );
    }
    let mut text = String::new();
    match encode(&mut text, registry) {
        Ok(()) => reply(StatusCode::OK, CONTENT_TYPE, text),
        Err(_) => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            "encoding the metrics failed\n".to_owned(),
        ),
    }
}
