//! The HTTP helpers the handlers share: the response body type, JSON and error
//! responses, the state shared by the server tasks and the [`crate::Testbed`] handle,
//! and poison-tolerant locking. It imports none of the handler modules (`server`,
//! `resource`, `watch`), which all import it.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Response;
use hyper::StatusCode;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use serde_json::Value;

use crate::auth::Authenticator;
use crate::store::{ApiError, Store};

/// Response body type.
pub(crate) type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

/// Fault injection state.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    pub delay: Duration,
    pub fail_next: usize,
    pub fail_status: u16,
    /// The `Status.message` of the failures (`None`: the emulator's own words).
    pub fail_message: Option<String>,
    /// Requests still to answer with [`Faults::reply_body`].
    pub reply_next: usize,
    /// The status of those answers.
    pub reply_status: u16,
    /// Their raw body.
    pub reply_body: Bytes,
    /// Ignore the `fieldSelector` of LIST and WATCH requests (after authorizing).
    pub ignore_field_selectors: bool,
}

/// State shared by the server tasks and the [`crate::Testbed`] handle.
pub(crate) struct Shared {
    pub store: Mutex<Store>,
    pub auth: Mutex<Authenticator>,
    pub faults: Mutex<Faults>,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub server_address: Mutex<String>,
    /// WATCH response bodies alive now (see [`crate::Testbed::open_watches`]).
    pub open_watches: Arc<std::sync::atomic::AtomicUsize>,
    /// Authorized resource requests so far, by verb and resource (see
    /// [`crate::Testbed::requests`] and [`crate::Testbed::requests_on`]).
    pub requests: Mutex<std::collections::HashMap<(&'static str, String), usize>>,
}

/// Lock, recovering from poisoning (a panicking test thread must not wedge the server).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A whole body from bytes.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A JSON response with status `code`.
pub(crate) fn json_response(code: u16, value: &Value) -> Response<Body> {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut resp = Response::new(full(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// The `Status` response for an API error (429 adds `Retry-After: 1`).
pub(crate) fn error_response(e: &ApiError) -> Response<Body> {
    let mut resp = json_response(e.code, &e.status());
    if e.code == 429 {
        resp.headers_mut()
            .insert("retry-after", HeaderValue::from_static("1"));
    }
    resp
}

/// The API's 404 for a path it does not serve.
pub(crate) fn not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}
