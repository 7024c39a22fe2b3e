//! The manager's two HTTP endpoints, as controller-runtime serves them:
//!
//! - **metrics** on `--metrics-bind-address`: `GET /metrics`, the process's
//!   `prometheus-client` registry in the OpenMetrics text format: the controller's
//!   counters ([`ManagerMetrics`], under controller-runtime's names, so the Go
//!   controller's dashboards keep working), and svc-tls's and kube-construct's
//!   metrics;
//! - **probes** on `--health-probe-bind-address`: `GET /healthz` (200 while the process
//!   runs) and `GET /readyz` (503 until the caches have synced, then 200 while none is
//!   syncing again; [`Probes`]).
//!
//! `0` (or an empty value) disables either, as in controller-runtime; `:8080` (Go's
//! form without a host) listens on every IPv4 address.

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{Arc, OnceLock},
};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode, service::service_fn};
use hyper_util::rt::TokioIo;
use kube_construct::{cache::CacheState, client::CachedClient};
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, text::encode},
    metrics::MetricType,
    registry::Registry,
};
use thiserror::Error;
use tokio::net::TcpListener;

use crate::Counters;

/// The `controller` label of the controller's series (controller-runtime names a
/// controller after its kind, lower-cased).
pub const CONTROLLER: &str = "managedresource";

/// The OpenMetrics text format `prometheus-client` writes.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// An endpoint that could not be served.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// The address could not be listened on.
    #[error("--{flag}={address:?}: cannot listen: {source}")]
    Bind {
        /// The flag, without `--`.
        flag: &'static str,
        /// The address as given.
        address: String,
        /// Why.
        source: std::io::Error,
    },
}

/// A bind address flag's value as an address to listen on: `None` for `0` or empty
/// (disabled); Go's `:port` as `0.0.0.0:port`. `Err` says what is wrong.
///
/// # Errors
/// A sentence saying what was expected.
pub fn bind_address(value: &str) -> Result<Option<String>, String> {
    if value.is_empty() || value == "0" {
        return Ok(None);
    }
    let Some((host, port)) = value.rsplit_once(':') else {
        return Err("host:port, :port, or 0 to disable".to_owned());
    };
    if port.parse::<u16>().is_err() {
        return Err("a port from 0 to 65535 after the last ':'".to_owned());
    }
    Ok(Some(if host.is_empty() {
        format!("0.0.0.0:{port}")
    } else {
        value.to_owned()
    }))
}

async fn listen(flag: &'static str, address: &str) -> Result<TcpListener, EndpointError> {
    TcpListener::bind(address)
        .await
        .map_err(|source| EndpointError::Bind {
            flag,
            address: address.to_owned(),
            source,
        })
}

/// Serves `answer` on `listener` until the process ends.
fn spawn_server<F>(listener: TcpListener, answer: F)
where
    F: Fn(&str) -> Response<Full<Bytes>> + Send + Sync + 'static,
{
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let answer = Arc::clone(&answer);
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                    let answer = Arc::clone(&answer);
                    async move { Ok::<_, Infallible>(answer(request.uri().path())) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

fn not_found() -> Response<Full<Bytes>> {
    reply(
        StatusCode::NOT_FOUND,
        "text/plain; charset=utf-8",
        "not found\n".to_owned(),
    )
}

/// Listens on `address` (a [`bind_address`]) and serves `registry` on
/// `GET /metrics` until the process ends; returns the address bound (port 0 picks
/// one).
///
/// # Errors
/// [`EndpointError::Bind`] naming `--metrics-bind-address`.
pub async fn serve_metrics(address: &str, registry: Registry) -> Result<SocketAddr, EndpointError> {
    let flag = "metrics-bind-address";
    let listener = listen(flag, address).await?;
    let bound = listener
        .local_addr()
        .map_err(|source| EndpointError::Bind {
            flag,
            address: address.to_owned(),
            source,
        })?;
    spawn_server(listener, move |path| {
        if path != "/metrics" {
            return not_found();
        }
        let mut text = String::new();
        match encode(&mut text, &registry) {
            Ok(()) => reply(StatusCode::OK, CONTENT_TYPE, text),
            Err(_) => reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain; charset=utf-8",
                "encoding the metrics failed\n".to_owned(),
            ),
        }
    });
    Ok(bound)
}

/// What `/readyz` judges: not ready until [`Probes::synced`] is given the client
/// (built once its caches synced), then ready while none of its caches is syncing
/// again (a cache whose watch fails serves its last known state: still ready).
#[derive(Clone, Debug, Default)]
pub struct Probes {
    client: Arc<OnceLock<CachedClient>>,
}

impl Probes {
    /// Not ready yet.
    pub fn new() -> Self {
        Probes::default()
    }

    /// The caches of `client` have synced: ready from now on while they stay so.
    pub fn synced(&self, client: &CachedClient) {
        let _ = self.client.set(client.clone());
    }

    /// Whether `/readyz` answers 200, and its body.
    pub fn readiness(&self) -> (bool, String) {
        let Some(client) = self.client.get() else {
            return (false, "not ready: the caches have not synced\n".to_owned());
        };
        let syncing: Vec<String> = client
            .health()
            .caches
            .iter()
            .filter(|cache| cache.state == CacheState::Syncing)
            .map(|cache| cache.cache.to_string())
            .collect();
        if syncing.is_empty() {
            (true, "ok\n".to_owned())
        } else {
            (
                false,
                format!("not ready: syncing {}\n", syncing.join(", ")),
            )
        }
    }
}

/// Listens on `address` (a [`bind_address`]) and serves `/healthz` and `/readyz`
/// until the process ends; returns the address bound (port 0 picks one).
///
/// # Errors
/// [`EndpointError::Bind`] naming `--health-probe-bind-address`.
pub async fn serve_probes(address: &str, probes: Probes) -> Result<SocketAddr, EndpointError> {
    let flag = "health-probe-bind-address";
    let listener = listen(flag, address).await?;
    let bound = listener
        .local_addr()
        .map_err(|source| EndpointError::Bind {
            flag,
            address: address.to_owned(),
            source,
        })?;
    spawn_server(listener, move |path| match path {
        "/healthz" => reply(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            "ok\n".to_owned(),
        ),
        "/readyz" => {
            let (ready, body) = probes.readiness();
            let status = if ready {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            reply(status, "text/plain; charset=utf-8", body)
        }
        _ => not_found(),
    });
    Ok(bound)
}

/// The controller's [`Counters`] as Prometheus series, read at scrape time, under
/// controller-runtime's names:
///
/// - `controller_runtime_reconcile_total{controller, result}`: reconciles ended,
///   `result` `success` or `error` (controller-runtime also splits out `requeue` and
///   `requeue_after`, which are `success` here);
/// - `controller_runtime_reconcile_errors_total{controller}`: reconciles that ended
///   with an error, panics included;
/// - `controller_runtime_reconcile_panics_total{controller}`: reconciles that
///   panicked (recovered);
/// - `controller_runtime_active_workers{controller}`: reconciles running now;
/// - `controller_runtime_max_concurrent_reconciles{controller}`: `--max-concurrency`,
///   the bound on active workers (absent when there is none, `0`), so that an alert
///   can tell workers saturated ([`ManagerMetrics::max_concurrent_reconciles`]);
/// - `leader_election_master_status{name}`: 1 while this replica runs the controller
///   as the Lease's holder, else 0 (only with leader election, as in
///   controller-runtime; `name` is the Lease's).
#[derive(Debug)]
pub struct ManagerMetrics {
    counters: Arc<Counters>,
    lease: Option<String>,
    max_concurrency: Option<u16>,
}

impl ManagerMetrics {
    /// The series of `counters`; `lease` the Lease's name when electing.
    pub fn new(counters: Arc<Counters>, lease: Option<String>) -> Self {
        ManagerMetrics {
            counters,
            lease,
            max_concurrency: None,
        }
    }

    /// Exports `controller_runtime_max_concurrent_reconciles` as `max` (the manager's
    /// `--max-concurrency`); `0`, no bound, exports none.
    #[must_use]
    pub fn max_concurrent_reconciles(mut self, max: u16) -> Self {
        self.max_concurrency = (max > 0).then_some(max);
        self
    }
}

impl Collector for ManagerMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let controller = [("controller", CONTROLLER)];
        let c = &self.counters;
        {
            let mut family = encoder.encode_descriptor(
                "controller_runtime_reconcile",
                "Total number of reconciliations per controller",
                None,
                MetricType::Counter,
            )?;
            for (result, value) in [("success", c.succeeded()), ("error", c.errors())] {
                family
                    .encode_family(&[("controller", CONTROLLER), ("result", result)])?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(
                        &value, None,
                    )?;
            }
        }
        for (name, help, value) in [
            (
                "controller_runtime_reconcile_errors",
                "Total number of reconciliation errors per controller",
                c.errors(),
            ),
            (
                "controller_runtime_reconcile_panics",
                "Total number of reconciliation panics per controller",
                c.panics(),
            ),
        ] {
            encoder
                .encode_descriptor(name, help, None, MetricType::Counter)?
                .encode_family(&controller)?
                .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&value, None)?;
        }
        encoder
            .encode_descriptor(
                "controller_runtime_active_workers",
                "Number of currently used workers per controller",
                None,
                MetricType::Gauge,
            )?
            .encode_family(&controller)?
            .encode_gauge(&c.running())?;
        if let Some(max) = self.max_concurrency {
            encoder
                .encode_descriptor(
                    "controller_runtime_max_concurrent_reconciles",
                    "Maximum number of concurrent reconciles per controller",
                    None,
                    MetricType::Gauge,
                )?
                .encode_family(&controller)?
                .encode_gauge(&i64::from(max))?;
        }
        if let Some(lease) = &self.lease {
            encoder
                .encode_descriptor(
                    "leader_election_master_status",
                    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
                    None,
                    MetricType::Gauge,
                )?
                .encode_family(&[("name", lease.as_str())])?
                .encode_gauge(&u64::from(c.leading()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn bind_addresses_as_controller_runtime_takes_them() {
        assert_eq!(bind_address("0").unwrap(), None);
        assert_eq!(bind_address("").unwrap(), None);
        assert_eq!(
            bind_address(":8080").unwrap().as_deref(),
            Some("0.0.0.0:8080")
        );
        assert_eq!(
            bind_address("127.0.0.1:0").unwrap().as_deref(),
            Some("127.0.0.1:0")
        );
        assert_eq!(
            bind_address("[::1]:8081").unwrap().as_deref(),
            Some("[::1]:8081")
        );
        assert!(bind_address("8080").is_err());
        assert!(bind_address(":http").is_err());
        assert!(bind_address(":70000").is_err());
    }

    #[test]
    fn the_counters_under_controller_runtimes_names() {
        let counters = Arc::new(Counters::default());
        let mut registry = Registry::default();
        registry.register_collector(Box::new(
            ManagerMetrics::new(Arc::clone(&counters), Some("lease".to_owned()))
                .max_concurrent_reconciles(4),
        ));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for line in [
            "controller_runtime_reconcile_total{controller=\"managedresource\",result=\"success\"} 0",
            "controller_runtime_reconcile_errors_total{controller=\"managedresource\"} 0",
            "controller_runtime_reconcile_panics_total{controller=\"managedresource\"} 0",
            "controller_runtime_active_workers{controller=\"managedresource\"} 0",
            "controller_runtime_max_concurrent_reconciles{controller=\"managedresource\"} 4",
            "leader_election_master_status{name=\"lease\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}:\n{text}");
        }
    }
}
