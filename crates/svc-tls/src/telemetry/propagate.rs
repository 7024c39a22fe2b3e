//! W3C trace context on the wire, through OpenTelemetry's global propagator: injected
//! into the requests [`PeerClient`](crate::client::PeerClient) sends, extracted from
//! the requests the serving half serves.

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TraceContextExt as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The headers of an outgoing request, as a propagator writes them.
struct HeaderInjector<'a>(&'a mut http::HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// The headers of an incoming request, as a propagator reads them.
struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// The OpenTelemetry context of `span`, when it has a valid span context (the
/// subscriber has `tracing-opentelemetry`'s layer and the span is enabled); `None`
/// otherwise, after a check that costs no lock: a disabled span, or one whose
/// subscriber has no OpenTelemetry layer, stops here.
pub(crate) fn context_of(span: &tracing::Span) -> Option<opentelemetry::Context> {
    if span.is_disabled() {
        return None;
    }
    let cx = span.context();
    cx.span().span_context().is_valid().then_some(cx)
}

/// Writes `cx` into `headers` (`traceparent`, `tracestate` with the W3C propagator)
/// through the global propagator.
pub(crate) fn inject_context(cx: &opentelemetry::Context, headers: &mut http::HeaderMap) {
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(cx, &mut HeaderInjector(headers));
    });
}

/// Writes the current `tracing` span's trace context into `headers` through
/// OpenTelemetry's global propagator (set by [`install`](super::install), or by
/// `opentelemetry::global::set_text_map_propagator`). Nothing is written when the
/// current span has no OpenTelemetry context.
///
/// [`PeerClient::send`](crate::client::PeerClient::send) and
/// [`PeerClient::execute`](crate::client::PeerClient::execute) call it; use it for a
/// request sent another way.
///
/// ```
/// let mut headers = http::HeaderMap::new();
/// svc_tls::telemetry::inject(&mut headers);
/// // No subscriber with an OpenTelemetry layer here: nothing was written.
/// assert!(headers.is_empty());
/// ```
pub fn inject(headers: &mut http::HeaderMap) {
    if let Some(cx) = context_of(&tracing::Span::current()) {
        inject_context(&cx, headers);
    }
}

/// The trace context `headers` carry, read through OpenTelemetry's global propagator
/// (an empty context when they carry none, or no propagator is set).
pub fn extract(headers: &http::HeaderMap) -> opentelemetry::Context {
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&HeaderExtractor(headers))
    })
}

/// Makes `span` continue the trace `headers` carry: its parent becomes the caller's
/// span. Returns whether they carried one. Call it before `span` is first entered.
///
/// The serving half ([`serve`](crate::serving::serve), [`CallerLayer`](crate::serving::CallerLayer))
/// does this for each request's span; use it for a request served another way.
pub fn continue_trace(span: &tracing::Span, headers: &http::HeaderMap) -> bool {
    if span.is_disabled() {
        return false;
    }
    let cx = extract(headers);
    if !cx.span().span_context().is_valid() {
        return false;
    }
    span.set_parent(cx).is_ok()
}
