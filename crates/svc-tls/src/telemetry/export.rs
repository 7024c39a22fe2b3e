//! OTLP/HTTP export of the process's spans: [`install`], the [`Telemetry`] it returns,
//! and the bounded, counted queue between the spans and the collector.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
    SpanProcessor,
};

/// How many finished spans may wait for the collector (queued or in the batch being
/// sent) before new ones are dropped and counted: the OpenTelemetry SDKs' default
/// queue (Go's `BatchSpanProcessor` too).
pub const DEFAULT_MAX_QUEUED_SPANS: usize = 2048;

/// How long one export may take before it is given up (and its spans counted as
/// failed): the OTLP exporters' default.
pub const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the [`Telemetry`] dropped at the end of `main` waits for the last spans
/// to be sent.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The OTLP/HTTP path of traces, appended to an endpoint given without one.
pub const TRACES_PATH: &str = "/v1/traces";

/// Why export was not set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The endpoint is neither `host:port` nor an `http://` or `https://` URL.
    #[error("OTLP endpoint {endpoint:?}: {why}")]
    Endpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        why: String,
    },
    /// The OTLP exporter could not be built (its HTTP client).
    #[error("the OTLP exporter")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
}

/// The OTLP/HTTP traces URL of `endpoint`: `host:port` as the Go manager's
/// `--otlp-endpoint` takes it (`otlptracehttp.WithEndpoint`: plain HTTP, path
/// [`TRACES_PATH`]), or an `http://` / `https://` URL, with [`TRACES_PATH`] appended
/// when it has no path.
///
/// ```
/// use svc_tls::telemetry::traces_url;
///
/// assert_eq!(traces_url("otel-collector.observability:4318")?.as_str(),
///            "http://otel-collector.observability:4318/v1/traces");
/// assert_eq!(traces_url("https://collector.example:4318")?.as_str(),
///            "https://collector.example:4318/v1/traces");
/// assert_eq!(traces_url("http://127.0.0.1:4318/custom/traces")?.as_str(),
///            "http://127.0.0.1:4318/custom/traces");
/// assert!(traces_url("ftp://collector:4318").is_err());
/// assert!(traces_url("collector:notaport").is_err());
/// # Ok::<(), svc_tls::telemetry::TelemetryError>(())
/// ```
///
/// # Errors
/// [`TelemetryError::Endpoint`] naming the endpoint and what is wrong with it.
pub fn traces_url(endpoint: &str) -> Result<url::Url, TelemetryError> {
    let invalid = |why: &str| TelemetryError::Endpoint {
        endpoint: endpoint.to_owned(),
        why: why.to_owned(),
    };
    let trimmed = endpoint.trim();
    if trimmed.is_empty() {
        return Err(invalid("empty"));
    }
    if trimmed.chars().any(char::is_whitespace) {
        return Err(invalid("contains whitespace"));
    }
    let with_scheme = trimmed.contains("://");
    let text = if with_scheme {
        trimmed.to_owned()
    } else {
        format!("http://{trimmed}")
    };
    let mut url = url::Url::parse(&text)
        .map_err(|e| invalid(&format!("not host:port nor an http(s) URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("the scheme must be http or https (OTLP/HTTP)"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("credentials in the endpoint are not supported"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("a query or fragment is not an OTLP endpoint"));
    }
    if url.path().is_empty() || url.path() == "/" {
        url.set_path(TRACES_PATH);
    } else if !with_scheme {
        return Err(invalid(
            "host:port takes no path; give a URL (http://host:port/path) for another path",
        ));
    }
    Ok(url)
}

/// What happened to the spans since [`install`]: a drop is a span that found the
/// queue full ([`DEFAULT_MAX_QUEUED_SPANS`]), a failure one whose export did not
/// succeed (collector down, refusing, or slower than the export timeout).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportStats {
    /// Spans waiting now (queued, or in the batch being sent).
    pub queued: u64,
    /// Spans the collector accepted.
    pub exported: u64,
    /// Spans dropped because the queue was full.
    pub dropped: u64,
    /// Spans whose export failed.
    pub failed: u64,
}

#[derive(Debug, Default)]
struct Counts {
    queued: AtomicU64,
    exported: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
    /// The drops already warned about.
    dropped_reported: AtomicU64,
}

/// The spans of this process exported to an OTLP collector, or nothing (off). Hold
/// it for the life of the process: dropping it sends what is queued (waiting at most
/// [`SHUTDOWN_TIMEOUT`]) and stops export.
///
/// Add [`Telemetry::layer`] to the `tracing` subscriber; [`install`] set the global
/// W3C propagator, so requests through [`PeerClient`](crate::client::PeerClient)
/// carry the current span's trace and the serving half continues callers' traces.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    endpoint: Option<url::Url>,
    counts: Arc<Counts>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("on", &self.is_on())
            .field("stats", &self.stats())
            .finish()
    }
}

/// Exports this process's spans over OTLP/HTTP (protobuf) to `endpoint` (see
/// [`traces_url`] for its forms) as `service_name`, through a bounded queue; `None`
/// or an empty endpoint is off (nothing installed, nothing costs). Sets
/// OpenTelemetry's global propagator to W3C trace context.
///
/// **A collector that is down, slow or refusing never slows or fails a request**:
/// finished spans go into a queue of [`DEFAULT_MAX_QUEUED_SPANS`] that one background
/// thread sends in batches (at most 512, every 5 s or when a batch is full; the SDK's
/// `OTEL_BSP_SCHEDULE_DELAY` and `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` change that); a span
/// that finds the queue full is dropped and counted ([`Telemetry::stats`]), as is
/// each span of a failed export, and a warning says how many, once per export.
///
/// ```no_run
/// use tracing_subscriber::layer::SubscriberExt as _;
/// use tracing_subscriber::util::SubscriberInitExt as _;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let endpoint: Option<String> = std::env::args().nth(1); // --otlp-endpoint
/// let telemetry = svc_tls::telemetry::install(endpoint.as_deref(), "region")?;
/// tracing_subscriber::registry()
///     .with(tracing_subscriber::fmt::layer())
///     .with(telemetry.layer())
///     .init();
/// // … run; `telemetry` is dropped at the end of main, sending what is queued.
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`TelemetryError::Endpoint`] for a malformed endpoint (nothing is installed);
/// [`TelemetryError::Exporter`] when the exporter's HTTP client cannot be built.
pub fn install(endpoint: Option<&str>, service_name: &str) -> Result<Telemetry, TelemetryError> {
    Telemetry::builder(service_name).install(endpoint)
}

/// [`install`] with other bounds (tests, or a process that makes many spans).
#[derive(Debug, Clone)]
pub struct TelemetryBuilder {
    service_name: String,
    max_queued: usize,
    export_timeout: Duration,
    schedule_delay: Option<Duration>,
}

impl TelemetryBuilder {
    /// How many spans may wait before new ones are dropped (at least 1).
    #[must_use]
    pub fn max_queued_spans(mut self, spans: usize) -> Self {
        self.max_queued = spans.max(1);
        self
    }

    /// How long one export may take.
    #[must_use]
    pub fn export_timeout(mut self, timeout: Duration) -> Self {
        self.export_timeout = timeout;
        self
    }

    /// How often queued spans are sent (5 s by default, or `OTEL_BSP_SCHEDULE_DELAY`).
    #[must_use]
    pub fn schedule_delay(mut self, delay: Duration) -> Self {
        self.schedule_delay = Some(delay);
        self
    }

    /// As [`install`], with these settings.
    ///
    /// # Errors
    /// As [`install`].
    pub fn install(self, endpoint: Option<&str>) -> Result<Telemetry, TelemetryError> {
        let Some(endpoint) = endpoint.filter(|e| !e.trim().is_empty()) else {
            return Ok(Telemetry::off());
        };
        let url = traces_url(endpoint)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(url.as_str())
            .with_timeout(self.export_timeout)
            .with_headers(std::collections::HashMap::new())
            .build()
            .map_err(TelemetryError::Exporter)?;
        let counts = Arc::new(Counts::default());
        let mut batch = BatchConfigBuilder::default().with_max_queue_size(self.max_queued);
        if let Some(delay) = self.schedule_delay {
            batch = batch.with_scheduled_delay(delay);
        }
        let processor = BatchSpanProcessor::builder(CountingExporter {
            inner: exporter,
            counts: counts.clone(),
        })
        .with_batch_config(batch.build())
        .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(BoundedProcessor {
                inner: processor,
                counts: counts.clone(),
                max_queued: self.max_queued as u64,
            })
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name(self.service_name)
                    .build(),
            )
            .build();
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        Ok(Telemetry {
            provider: Some(provider),
            endpoint: Some(url),
            counts,
        })
    }
}

impl Telemetry {
    /// [`install`]'s settings for `service_name`, to change before installing.
    pub fn builder(service_name: &str) -> TelemetryBuilder {
        TelemetryBuilder {
            service_name: service_name.to_owned(),
            max_queued: DEFAULT_MAX_QUEUED_SPANS,
            export_timeout: DEFAULT_EXPORT_TIMEOUT,
            schedule_delay: None,
        }
    }

    /// No export: [`Telemetry::layer`] is `None`.
    pub fn off() -> Self {
        Self {
            provider: None,
            endpoint: None,
            counts: Arc::new(Counts::default()),
        }
    }

    /// The OTLP/HTTP URL spans are sent to ([`traces_url`] of the endpoint given);
    /// `None` when off. [`install`] logs nothing (it usually runs before the
    /// subscriber exists): log this once the subscriber is set.
    pub fn endpoint(&self) -> Option<&url::Url> {
        self.endpoint.as_ref()
    }

    /// Whether spans are exported.
    pub fn is_on(&self) -> bool {
        self.provider.is_some()
    }

    /// The `tracing` layer that makes spans OpenTelemetry spans and hands them to
    /// the exporter; `None` when off (an `Option` of a layer is a layer). The spans of
    /// the exporter's own HTTP stack (hyper, h2, reqwest, rustls, tower targets) are
    /// left out, so that exporting at a debug level does not export its own sending.
    pub fn layer<S>(&self) -> Option<impl tracing_subscriber::Layer<S> + 'static>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        use tracing_subscriber::Layer as _;
        let tracer: SdkTracer = self.provider.as_ref()?.tracer("svc-tls");
        Some(
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_filter(tracing_subscriber::filter::filter_fn(|metadata| {
                    !is_export_stack(metadata.target())
                })),
        )
    }

    /// The counts since [`install`].
    pub fn stats(&self) -> ExportStats {
        let c = &self.counts;
        ExportStats {
            queued: c.queued.load(Ordering::Relaxed),
            exported: c.exported.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
        }
    }

    /// Sends what is queued now and waits for it (at most 5 s): for a test, or
    /// before a planned exit. Blocks the calling thread.
    pub fn flush(&self) {
        if let Some(provider) = &self.provider {
            let _ = provider.force_flush();
        }
    }
}

#[cfg(feature = "metrics")]
impl Telemetry {
    /// Exports [`Telemetry::stats`] into `registry`, read at scrape time (feature
    /// `metrics`): `svc_tls_trace_spans_total{result}` (`exported`, `dropped`: the
    /// queue was full, `failed`: an export did not succeed) and
    /// `svc_tls_trace_spans_queued`. All zero when off.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register_collector(Box::new(SpanCounts(self.counts.clone())));
    }
}

/// [`Telemetry::register_metrics`]'s collector.
#[cfg(feature = "metrics")]
#[derive(Debug)]
struct SpanCounts(Arc<Counts>);

#[cfg(feature = "metrics")]
impl prometheus_client::collector::Collector for SpanCounts {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric as _;
        use prometheus_client::metrics::TypedMetric as _;
        use prometheus_client::metrics::counter::Counter;
        use prometheus_client::metrics::family::Family;
        use prometheus_client::metrics::gauge::Gauge;
        let c = &self.0;
        let spans: Family<Vec<(String, String)>, Counter> = Family::default();
        for (result, count) in [
            ("exported", &c.exported),
            ("dropped", &c.dropped),
            ("failed", &c.failed),
        ] {
            spans
                .get_or_create(&vec![("result".to_owned(), result.to_owned())])
                .inc_by(count.load(Ordering::Relaxed));
        }
        spans.encode(encoder.encode_descriptor(
            "svc_tls_trace_spans",
            "Finished spans by what became of them: exported to the OTLP collector, \
             dropped (the export queue was full) or failed (their export did not succeed)",
            None,
            Counter::<u64>::TYPE,
        )?)?;
        let queued: Gauge = Gauge::default();
        queued.set(i64::try_from(c.queued.load(Ordering::Relaxed)).unwrap_or(i64::MAX));
        queued.encode(encoder.encode_descriptor(
            "svc_tls_trace_spans_queued",
            "Finished spans waiting to be exported (queued, or in the batch being sent)",
            None,
            Gauge::<i64>::TYPE,
        )?)
    }
}

/// Targets of the crates the exporter sends with.
fn is_export_stack(target: &str) -> bool {
    [
        "hyper",
        "hyper_util",
        "h2",
        "reqwest",
        "rustls",
        "tower",
        "opentelemetry",
    ]
    .iter()
    .any(|name| {
        target
            .strip_prefix(name)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    })
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            let _ = provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT);
        }
    }
}

/// The SDK's batch processor behind a bound of our own, so that drops are counted:
/// a span that would take the waiting spans past the bound is dropped here (the
/// batch processor's own queue is as large, so it never drops one itself).
#[derive(Debug)]
struct BoundedProcessor {
    inner: BatchSpanProcessor,
    counts: Arc<Counts>,
    max_queued: u64,
}

impl SpanProcessor for BoundedProcessor {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let queued = &self.counts.queued;
        if queued.fetch_add(1, Ordering::AcqRel) >= self.max_queued {
            queued.fetch_sub(1, Ordering::AcqRel);
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, counting what each batch became and releasing its place in
/// the bound once sent (or given up).
#[derive(Debug)]
struct CountingExporter<E> {
    inner: E,
    counts: Arc<Counts>,
}

impl<E: SpanExporter> SpanExporter for CountingExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len() as u64;
        let result = self.inner.export(batch).await;
        let counts = &self.counts;
        counts.queued.fetch_sub(spans, Ordering::AcqRel);
        match &result {
            Ok(()) => {
                counts.exported.fetch_add(spans, Ordering::Relaxed);
            }
            Err(error) => {
                let failed = counts.failed.fetch_add(spans, Ordering::Relaxed) + spans;
                tracing::warn!(
                    spans,
                    failed_in_all = failed,
                    error = %error,
                    "telemetry: an OTLP export failed; its spans are lost (requests are not affected)"
                );
            }
        }
        let dropped = counts.dropped.load(Ordering::Relaxed);
        let reported = counts.dropped_reported.swap(dropped, Ordering::Relaxed);
        if dropped > reported {
            tracing::warn!(
                dropped = dropped - reported,
                dropped_in_all = dropped,
                "telemetry: spans were dropped because the export queue was full (the \
                 collector is slower than the spans are made)"
            );
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}
