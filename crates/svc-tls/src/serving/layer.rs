//! [`CallerLayer`]: the tower layer that puts a connection's verified [`Caller`] into
//! each of its requests: the connection's own, or, on an allowed gateway's
//! connection, the caller whose certificate the gateway forwarded. Elsewhere the
//! headers a gateway would forward a certificate in, which anyone could have written
//! on a direct connection, are removed and counted.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use super::caller::Caller;
use super::gateway::{ForwardedCounts, Gateways, XFCC_HEADER};
use crate::trust::TrustVerifier;

/// The headers gateways forward a caller's certificate or its verification in
/// (ingress-nginx, Envoy, and the names HAProxy and Caddy configurations use most):
/// removed from every request before a handler sees it, besides the header of the
/// configured [`ForwardedFormat`](super::ForwardedFormat).
pub const FORWARDED_CERTIFICATE_HEADERS: [&str; 4] = [
    crate::receiving::INGRESS_CLIENT_CERT_HEADER,
    crate::receiving::INGRESS_CLIENT_VERIFY_HEADER,
    XFCC_HEADER,
    "x-ssl-client-cert",
];

/// What every connection's layer of one serving configuration shares.
#[derive(Debug)]
pub(crate) struct Forwarding {
    pub(crate) gateways: Option<Gateways>,
    pub(crate) trust: TrustVerifier,
    pub(crate) counts: ForwardedCounts,
}

/// Puts one connection's caller into the extensions of each request on it and
/// removes the forwarded-certificate headers. Get one per connection from
/// [`ServerTls::layer`](super::ServerTls::layer) ([`serve`](super::serve) does);
/// usable with axum and plain hyper.
#[derive(Clone, Debug)]
pub struct CallerLayer {
    caller: Option<Caller>,
    /// Whether `caller` is an allowed gateway.
    gateway: bool,
    forwarding: Arc<Forwarding>,
}

impl CallerLayer {
    pub(crate) fn new(caller: Option<Caller>, forwarding: Arc<Forwarding>) -> Self {
        let gateway = match (&caller, &forwarding.gateways) {
            (Some(caller), Some(gateways)) => gateways.admits(caller),
            _ => false,
        };
        Self {
            caller,
            gateway,
            forwarding,
        }
    }

    /// The caller of a request on this connection with `headers`.
    fn caller_of(&self, headers: &http::HeaderMap) -> Option<Caller> {
        let connection = self.caller.as_ref()?;
        let gateways = match &self.forwarding.gateways {
            Some(gateways) if self.gateway => gateways,
            _ => return Some(connection.clone()),
        };
        let counts = &self.forwarding.counts;
        match gateways.forwarded(headers, connection, &self.forwarding.trust) {
            Ok(forwarded) => {
                if forwarded.is_some() {
                    counts.accepted.fetch_add(1, Ordering::Relaxed);
                }
                forwarded
            }
            Err(error) => {
                counts.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    gateway = ?connection.common_name(),
                    error = %watch_ready::excerpt::chain(&error),
                    "serving: a gateway's forwarded client certificate was refused; the \
                     request has no caller"
                );
                None
            }
        }
    }
}

impl<S> tower::Layer<S> for CallerLayer {
    type Service = CallerService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallerService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`CallerLayer`] wraps around a handler.
#[derive(Clone, Debug)]
pub struct CallerService<S> {
    inner: S,
    layer: CallerLayer,
}

impl<S, B> tower::Service<http::Request<B>> for CallerService<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    /// The handler's future, run in the request's server span (feature `otel`:
    /// `svc_tls.serve`, continuing the caller's trace; without it, no span).
    type Future = tracing::instrument::Instrumented<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let caller = self.layer.caller_of(request.headers());
        let configured = self
            .layer
            .forwarding
            .gateways
            .as_ref()
            .map(|g| g.format().header().to_owned());
        let headers = request.headers_mut();
        let mut present = false;
        for name in FORWARDED_CERTIFICATE_HEADERS
            .iter()
            .copied()
            .chain(configured.as_deref())
        {
            while headers.remove(name).is_some() {
                present = true;
            }
        }
        if present && !self.layer.gateway {
            let counts = &self.layer.forwarding.counts;
            counts.removed.fetch_add(1, Ordering::Relaxed);
        }
        // A handler must never see a caller that this connection did not verify.
        request.extensions_mut().remove::<Caller>();
        let span = server_span(&request, caller.as_ref());
        if let Some(caller) = caller {
            request.extensions_mut().insert(caller);
        }
        tracing::Instrument::instrument(self.inner.call(request), span)
    }
}

/// The span a request's handler runs in: with the feature `otel`, a server span
/// whose parent is the caller's span when the request carries W3C trace context
/// (through OpenTelemetry's global propagator); without it, none.
#[cfg(feature = "otel")]
fn server_span<B>(request: &http::Request<B>, caller: Option<&Caller>) -> tracing::Span {
    let span = tracing::info_span!(
        "svc_tls.serve",
        otel.kind = "server",
        http.request.method = %request.method(),
        url.path = request.uri().path(),
        caller.serial = caller.map_or("", |c| c.serial()),
    );
    crate::telemetry::continue_trace(&span, request.headers());
    span
}

#[cfg(not(feature = "otel"))]
fn server_span<B>(_: &http::Request<B>, _: Option<&Caller>) -> tracing::Span {
    tracing::Span::none()
}
