//! Traces (feature `otel`): W3C trace context on every hop and OTLP/HTTP export,
//! through OpenTelemetry's Rust crates and `tracing-opentelemetry`, as the platform's
//! Go processes do with `otel.GetTextMapPropagator()` and `otelhttp`.
//!
//! - **Sending**: [`PeerClient::send`](crate::client::PeerClient::send) and
//!   [`PeerClient::execute`](crate::client::PeerClient::execute) (so generated clients
//!   over it) send each request in a client span (`svc_tls.peer.request`) and write
//!   its context as `traceparent`/`tracestate` through the global propagator
//!   ([`inject`]), when the current span has an OpenTelemetry context. Without one
//!   (no OpenTelemetry layer in the subscriber, or the span disabled) a request pays a
//!   thread-local look-up and one branch; with the feature off, nothing.
//! - **Receiving**: [`serve`](crate::serving::serve) and
//!   [`CallerLayer`](crate::serving::CallerLayer) run each request's service in a
//!   server span (`svc_tls.serve`) whose parent is the caller's span when the request
//!   carries one ([`continue_trace`]); the ingress verifier's span
//!   (`svc_tls.principal.verify`) continues the trace of the headers it verifies when
//!   nothing else did.
//! - **Export**: [`install`] (one call at start-up, `--otlp-endpoint` in the examples)
//!   sends the spans to an OTLP collector through a bounded, counted queue that never
//!   holds a request up.
//!
//! Spans where work happens (all plain `tracing` spans, OpenTelemetry spans through
//! the layer): pool retirements (`svc_tls.pool.retire`), identity and trust reloads
//! that load something, principal signing and verification, cache syncs. Their
//! attributes name Secrets, serials and peers, never key material; a handshake on the
//! no-change path makes none.

mod export;
mod propagate;

pub use export::{
    DEFAULT_EXPORT_TIMEOUT, DEFAULT_MAX_QUEUED_SPANS, ExportStats, SHUTDOWN_TIMEOUT, TRACES_PATH,
    Telemetry, TelemetryBuilder, TelemetryError, install, traces_url,
};
pub(crate) use propagate::{context_of, inject_context};
pub use propagate::{continue_trace, extract, inject};
