//! [`CallerLayer`]: the tower layer that puts a connection's verified [`Caller`] into
//! each of its requests and removes the headers a gateway would forward a client
//! certificate in, which on a direct connection anyone could have written.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use super::caller::Caller;

/// The headers gateways forward a caller's certificate or its verification in
/// (ingress-nginx, Envoy, HAProxy and Caddy configurations): removed from every
/// request served directly, so no handler can mistake one for the connection's caller.
pub const FORWARDED_CERTIFICATE_HEADERS: [&str; 4] = [
    crate::principal::INGRESS_CLIENT_CERT_HEADER,
    crate::principal::INGRESS_CLIENT_VERIFY_HEADER,
    "x-forwarded-client-cert",
    "x-ssl-client-cert",
];

/// Puts one connection's [`Caller`] (if its handshake verified one) into the
/// extensions of each request on it, and removes the
/// [`FORWARDED_CERTIFICATE_HEADERS`], counting requests that carried one. Built per
/// connection, as [`serve`](super::serve) does; usable with axum and plain hyper.
#[derive(Clone, Debug)]
pub struct CallerLayer {
    caller: Option<Caller>,
    removed: Arc<AtomicU64>,
}

impl CallerLayer {
    /// The layer of a connection whose caller is `caller`, counting removed
    /// forwarded-certificate headers into `removed`.
    pub fn new(caller: Option<Caller>, removed: Arc<AtomicU64>) -> Self {
        Self { caller, removed }
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
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let headers = request.headers_mut();
        let mut forged = false;
        for name in FORWARDED_CERTIFICATE_HEADERS {
            forged |= headers.remove(name).is_some();
            // A repeated header leaves more values behind `remove`'s first.
            while headers.remove(name).is_some() {}
        }
        if forged {
            self.layer.removed.fetch_add(1, Ordering::Relaxed);
        }
        // A handler must never see a caller that this connection did not verify.
        request.extensions_mut().remove::<Caller>();
        if let Some(caller) = &self.layer.caller {
            request.extensions_mut().insert(caller.clone());
        }
        self.inner.call(request)
    }
}
