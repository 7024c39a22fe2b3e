//! [`PeerClient`]: one peer's HTTP client, whose pooled connections follow the
//! identity presented and the trust that verified the server.
//!
//! reqwest keeps connections alive in its pool, and a connection keeps the identity
//! and the server verification of its handshake for as long as it lives. A
//! `PeerClient` holds one `reqwest::Client` (one pool) per *generation* of what its
//! handshakes depend on: the identity the resolver serves, the roots the verifier
//! serves and whether its source withdrew its trust. Every request first compares
//! the generation's marks with what is served now (two pointer loads and an atomic
//! load); when they differ, a new `reqwest::Client` replaces the old one, so new
//! requests open new connections, which present the new identity and verify the
//! server under the new roots. The old client is dropped when its last in-flight
//! request completes, and with it its idle connections (HTTP/1.1 and HTTP/2 alike):
//! in-flight requests finish, none fails for the change.
//!
//! What is served moves within the loader's latency of a new Secret version (the
//! loader reloads the resolver and verifier, see [`crate::follow`]), without waiting
//! for a handshake; a SPIFFE stream's do the same on each message.
//!
//! Why a generation swap and not hyper's connection poisoning: hyper-util's pool
//! skips a connection whose `Connected` was poisoned, but that handle reaches the
//! caller only through `capture_connection` on a hyper request, which reqwest 0.13
//! does not pass through, and reqwest's connector layers see its sealed `Conn`,
//! whose `connected()` mints a fresh poison pill on each call (docs/decisions.md,
//! *Pooled connections follow identity and trust*).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use rustls::sign::CertifiedKey;

use super::recorded::PeerSeriesSet;
use super::{PeerClientError, PeerRequest, PeerRequestError, PeerTls, TrustMode};
use crate::material::TrustAnchors;

/// One peer's HTTP client: a `reqwest::Client` replaced whenever the identity it
/// presents or the trust it verifies servers with changes, so that no request rides a
/// connection made under a replaced identity or withdrawn trust. Cheap to clone.
///
/// Get the process's shared one with [`PeerTls::client`] (every construction with
/// the same cluster, identity, trust and protocol settings shares one pool, so a
/// client built per reconcile reuses its connections), or one of your own with
/// [`PeerTls::private_client`].
///
/// With a recorder ([`PeerTls::with_request_recorder`], set by
/// [`PeerTls::from_options`] over a registry with metrics), each request through
/// [`PeerClient::send`] or [`PeerClient::execute`] reports its status class and
/// duration, a failed handshake its reason, and each pool replacement counts, per
/// peer (see [`crate::recording`]); a request built on [`PeerClient::current`]'s
/// `reqwest::Client` and sent by hand is not seen.
///
/// A pooled connection is driven by a task on the Tokio runtime of the request that
/// opened it. Share one client among tasks of runtimes that keep running: a request
/// handed a connection whose runtime is not being driven (a current-thread runtime
/// between two `block_on` calls, say) waits until that runtime runs again.
///
/// ```no_run
/// # async fn f(tls: svc_tls::PeerTls) -> Result<(), Box<dyn std::error::Error>> {
/// let peer = tls.client()?;
/// let url = tls.host()?.join("api/v1/regions")?;
/// let response = peer.get(url)?.send().await?; // through `PeerClient::send`
/// # let _ = response; Ok(()) }
/// ```
#[derive(Clone)]
pub struct PeerClient {
    inner: Arc<Inner>,
}

struct Inner {
    tls: PeerTls,
    customize: Option<Customize>,
    generation: ArcSwap<Generation>,
    retired: AtomicU64,
    /// The series of its peers, when its [`PeerTls`] has a recorder
    /// ([`PeerTls::with_request_recorder`]); `None` costs a request one branch.
    requests: Option<PeerSeriesSet>,
}

type Customize = Box<dyn Fn(reqwest::ClientBuilder) -> reqwest::ClientBuilder + Send + Sync>;

struct Generation {
    client: reqwest::Client,
    marks: Marks,
    /// When the trust changed, for a generation made by a trust change: a
    /// certificate refusal on it is [`PeerRequestError::TrustChanged`] until a
    /// request on it succeeds (then the new trust is proven, and a later refusal is
    /// an ordinary error).
    trust_changed_at: Option<SystemTime>,
    /// A request on this generation succeeded.
    confirmed: AtomicBool,
}

/// What a generation's handshakes depended on.
struct Marks {
    identity: Option<Arc<CertifiedKey>>,
    roots: Option<Arc<TrustAnchors>>,
    /// The verifier refuses every server now (withdrawn, source gone past the bound,
    /// roots expired): connections made before must take no request.
    refusing: bool,
}

impl Marks {
    fn now(tls: &PeerTls) -> Self {
        let verifier = tls.trust_verifier();
        Self {
            identity: tls.identity().map(|r| r.current().certified_key().clone()),
            roots: verifier.map(|v| v.current()),
            refusing: verifier.is_some_and(|v| v.refuses_now()),
        }
    }

    fn identity_changed(&self, now: &Self) -> bool {
        !same(&self.identity, &now.identity)
    }

    fn trust_changed(&self, now: &Self) -> bool {
        !same(&self.roots, &now.roots) || self.refusing != now.refusing
    }
}

fn same<T>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

impl PeerClient {
    /// A client of its own over `tls`, each generation's builder passed through
    /// `customize` (timeouts and the like) when given.
    pub(super) fn new(tls: PeerTls, customize: Option<Customize>) -> Result<Self, PeerClientError> {
        let marks = Marks::now(&tls);
        let client = build(&tls, customize.as_ref())?;
        let requests = PeerSeriesSet::of(&tls);
        Ok(Self {
            inner: Arc::new(Inner {
                requests,
                tls,
                customize,
                generation: ArcSwap::from_pointee(Generation {
                    client,
                    marks,
                    trust_changed_at: None,
                    confirmed: AtomicBool::new(false),
                }),
                retired: AtomicU64::new(0),
            }),
        })
    }

    /// Counts requests to `tls`'s configured host under its own `peer` label (a
    /// shared client serves every peer with the same identity and trust): each
    /// [`PeerTls::client`] call names the peer it was asked for. Construction path.
    pub(super) fn add_peer(&self, tls: &PeerTls) {
        if let Some(requests) = &self.inner.requests {
            requests.add(tls);
        }
    }

    /// Whether a clone is held outside the registry that shares it.
    pub(super) fn held_elsewhere(&self) -> bool {
        Arc::strong_count(&self.inner) > 1
    }

    /// Whether this client is what `tls` would build: the same identity resolver, the
    /// same watched verifier (or both the platform's store), the same protocol and
    /// pool settings. Fixed roots are never shared.
    pub(super) fn serves(&self, tls: &PeerTls) -> bool {
        let mine = &self.inner.tls;
        let identity = match (mine.identity(), tls.identity()) {
            (Some(a), Some(b)) => a.ptr_eq(b),
            (None, None) => true,
            _ => false,
        };
        let trust = match (&mine.trust, &tls.trust) {
            (TrustMode::Watched(a), TrustMode::Watched(b)) => a.ptr_eq(b),
            (TrustMode::Platform, TrustMode::Platform) => true,
            _ => false,
        };
        self.inner.customize.is_none()
            && identity
            && trust
            && mine.protocol == tls.protocol
            && mine.pool_idle_timeout == tls.pool_idle_timeout
            && mine.request_timeout == tls.request_timeout
            && mine.max_response_body == tls.max_response_body
    }

    /// The `reqwest::Client` for a request now: the current generation's, or a new
    /// one when the identity or trust served changed since it was built. Take a new
    /// one per request (it is an `Arc` clone); one held on to keeps its connections.
    /// It has the request timeout ([`PeerTls::with_request_timeout`]) but not the
    /// response-body cap: pass what it returns through [`PeerClient::cap_body`], or
    /// use [`PeerClient::send`] / [`PeerClient::execute`].
    pub fn current(&self) -> Result<reqwest::Client, PeerClientError> {
        Ok(self.generation()?.client.clone())
    }

    /// The current generation, replaced first when what it depends on changed.
    fn generation(&self) -> Result<Arc<Generation>, PeerClientError> {
        let inner = &*self.inner;
        let now = Marks::now(&inner.tls);
        let generation = inner.generation.load_full();
        let identity_changed = generation.marks.identity_changed(&now);
        let trust_changed = generation.marks.trust_changed(&now);
        if !identity_changed && !trust_changed {
            return Ok(generation);
        }
        // Work happens: a span (no span on the no-change path above).
        let _span = tracing::info_span!(
            "svc_tls.pool.retire",
            peer = %inner.tls.host().map_or("", |h| h.host_str().unwrap_or_default()),
            identity_changed,
            trust_changed,
        )
        .entered();
        let client = build(&inner.tls, inner.customize.as_ref())?;
        let trust_changed_at = if trust_changed {
            Some(SystemTime::now())
        } else if generation.confirmed.load(Ordering::Acquire) {
            None
        } else {
            // An identity change on a trust change not yet proven keeps saying so.
            generation.trust_changed_at
        };
        let fresh = Arc::new(Generation {
            client,
            marks: now,
            trust_changed_at,
            confirmed: AtomicBool::new(false),
        });
        let before = inner
            .generation
            .compare_and_swap(&generation, fresh.clone());
        if !Arc::ptr_eq(&before, &generation) {
            // Another request replaced it first: use that one.
            return Ok(arc_swap::Guard::into_inner(before));
        }
        inner.retired.fetch_add(1, Ordering::Relaxed);
        if let Some(requests) = &inner.requests {
            requests.pool_retired();
        }
        tracing::info!(
            identity_changed,
            trust_changed,
            "peer client: the {} changed; new requests open new connections and the old \
             ones close once their requests complete",
            match (identity_changed, trust_changed) {
                (true, true) => "client identity and the CA trust",
                (true, false) => "client identity",
                _ => "CA trust",
            }
        );
        Ok(fresh)
    }

    /// A request to `url` on [`PeerClient::current`], sent by
    /// [`PeerRequest::send`] through [`PeerClient::send`].
    ///
    /// # Errors
    /// [`PeerClientError`] when the generation's client cannot be built.
    pub fn request(
        &self,
        method: reqwest::Method,
        url: impl reqwest::IntoUrl,
    ) -> Result<PeerRequest, PeerClientError> {
        Ok(PeerRequest::new(
            self.clone(),
            self.current()?.request(method, url),
        ))
    }

    /// A `GET` of `url` (see [`PeerClient::request`]).
    ///
    /// # Errors
    /// As [`PeerClient::request`].
    pub fn get(&self, url: impl reqwest::IntoUrl) -> Result<PeerRequest, PeerClientError> {
        self.request(reqwest::Method::GET, url)
    }

    /// A `POST` to `url` (see [`PeerClient::request`]).
    ///
    /// # Errors
    /// As [`PeerClient::request`].
    pub fn post(&self, url: impl reqwest::IntoUrl) -> Result<PeerRequest, PeerClientError> {
        self.request(reqwest::Method::POST, url)
    }

    /// Sends `request` (a [`PeerRequest`] or any `reqwest::RequestBuilder`) on the
    /// current generation, whichever client built it: a request built before an identity or trust change (or cloned by a retry
    /// helper) never rides a connection made under the old identity or trust.
    ///
    /// Its timeout is [`PeerTls::with_request_timeout`]'s (30 s by default) and its
    /// response body is capped ([`PeerClient::cap_body`]).
    ///
    /// A server refused because the CA trust changed (new roots it does not chain
    /// to, or trust withdrawn) is [`PeerRequestError::TrustChanged`], naming the trust
    /// and when it changed, until a request under the new trust succeeds; nothing
    /// was sent then, so the request is safe to retry (rebuild it from this client).
    pub async fn send(
        &self,
        request: impl Into<reqwest::RequestBuilder>,
    ) -> Result<reqwest::Response, PeerRequestError> {
        let (_, request) = request.into().build_split();
        #[cfg_attr(not(feature = "otel"), allow(unused_mut))]
        let mut request = request?;
        #[cfg(feature = "otel")]
        let span = trace::client_span(&mut request);
        let started = self.inner.requests.as_ref().map(|r| r.start(request.url()));
        let generation = match self.generation() {
            Ok(generation) => generation,
            Err(error) => {
                if let Some(started) = started {
                    started.finish(Err(&error));
                }
                return Err(error.into());
            }
        };
        let sent = generation.client.execute(request);
        #[cfg(feature = "otel")]
        let result = trace::in_span(sent, span).await;
        #[cfg(not(feature = "otel"))]
        let result = sent.await;
        if let Some(started) = started {
            started.finish(result.as_ref());
        }
        match result {
            Ok(response) => {
                generation.confirmed.store(true, Ordering::Release);
                Ok(self.cap_body(response))
            }
            Err(error) => Err(self.classify(&generation, error)),
        }
    }

    /// Executes `request` on the current generation, its response body capped
    /// ([`PeerClient::cap_body`]): for callers whose seam is a `reqwest::Request` and
    /// a `reqwest::Result` (a generated client's hook). [`PeerClient::send`] says more
    /// when it fails (a trust change); this one fails with the client-building error
    /// flattened into a `reqwest::Error` that sent nothing.
    pub async fn execute(
        &self,
        #[cfg_attr(not(feature = "otel"), allow(unused_mut))] mut request: reqwest::Request,
    ) -> reqwest::Result<reqwest::Response> {
        #[cfg(feature = "otel")]
        let span = trace::client_span(&mut request);
        let started = self.inner.requests.as_ref().map(|r| r.start(request.url()));
        let client = self
            .generation()
            .map(|generation| generation.client.clone());
        let sent = async {
            match client {
                Ok(client) => client.execute(request).await,
                Err(_) => refuse(&self.inner.generation.load().client, request).await,
            }
        };
        #[cfg(feature = "otel")]
        let result = trace::in_span(sent, span).await;
        #[cfg(not(feature = "otel"))]
        let result = sent.await;
        if let Some(started) = started {
            started.finish(result.as_ref());
        }
        Ok(self.cap_body(result?))
    }

    /// `response` with its body capped at [`PeerTls::max_response_body`] (4 MiB by
    /// default): a body announced longer fails at its first read, one that grows
    /// longer fails at the chunk that crosses the cap, each with a `reqwest::Error`
    /// whose source chain holds a
    /// [`ResponseBodyTooLarge`](super::ResponseBodyTooLarge) naming the peer and the
    /// cap. Status, headers and URL are kept.
    pub fn cap_body(&self, response: reqwest::Response) -> reqwest::Response {
        super::limits::cap_response(response, self.inner.tls.max_response_body)
    }

    fn classify(&self, generation: &Generation, error: reqwest::Error) -> PeerRequestError {
        let unproven = !generation.confirmed.load(Ordering::Acquire);
        match (generation.trust_changed_at, self.inner.tls.trust_verifier()) {
            (Some(changed_at), Some(verifier))
                if unproven && super::error::is_certificate_error(&error) =>
            {
                PeerRequestError::TrustChanged {
                    trust: verifier.trust_source().origin().clone(),
                    changed_at,
                    withdrawn: verifier.is_withdrawn(),
                    source: error,
                }
            }
            _ => PeerRequestError::Http(error),
        }
    }

    /// How many times the pool was replaced (an identity or trust change each).
    pub fn retired_pools(&self) -> u64 {
        self.inner.retired.load(Ordering::Relaxed)
    }

    /// Whether `self` and `other` share one pool (clones of one client).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The TLS setup this client was built from: for a shared client, that of the
    /// construction that created it, whose host may be another peer's when peers share
    /// an identity and trust. Take the host from your own [`PeerTls`].
    pub fn tls(&self) -> &PeerTls {
        &self.inner.tls
    }
}

/// Fails `request` without sending it: reqwest refuses a URL whose scheme is not
/// `http` or `https` before it picks a connection.
async fn refuse(
    client: &reqwest::Client,
    mut request: reqwest::Request,
) -> reqwest::Result<reqwest::Response> {
    let _ = request.url_mut().set_scheme("ftp");
    client.execute(request).await
}

fn build(tls: &PeerTls, customize: Option<&Customize>) -> Result<reqwest::Client, PeerClientError> {
    let builder = tls.reqwest_builder()?;
    let builder = match customize {
        Some(customize) => customize(builder),
        None => builder,
    };
    builder.build().map_err(PeerClientError::Http)
}

impl std::fmt::Debug for PeerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerClient")
            .field("tls", &self.inner.tls)
            .field("retired_pools", &self.retired_pools())
            .finish_non_exhaustive()
    }
}

/// Shared through a registry: kept while a clone is held outside it.
impl crate::watch::shareable::SharedValue for PeerClient {
    fn in_use(&self) -> bool {
        self.held_elsewhere()
    }
}

/// Trace context on the requests a `PeerClient` sends (feature `otel`).
#[cfg(feature = "otel")]
mod trace {
    use tracing::Instrument as _;

    /// A client span for `request` carrying the current span's trace, its context
    /// written into the request's headers; `Span::none()` (and no header) when the
    /// current span has no OpenTelemetry context: then the request pays a thread-local
    /// look-up and this branch.
    pub(super) fn client_span(request: &mut reqwest::Request) -> tracing::Span {
        let Some(parent) = crate::telemetry::propagate::context_of(&tracing::Span::current())
        else {
            return tracing::Span::none();
        };
        let span = tracing::info_span!(
            "svc_tls.peer.request",
            otel.kind = "client",
            http.request.method = %request.method(),
            server.address = request.url().host_str().unwrap_or_default(),
            url.path = request.url().path(),
            http.response.status_code = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        // The client span's context, or the current one when it is filtered out.
        let cx = crate::telemetry::propagate::context_of(&span).unwrap_or(parent);
        crate::telemetry::propagate::inject_context(&cx, request.headers_mut());
        span
    }

    /// `sent` run in `span`, whose status it records.
    pub(super) async fn in_span(
        sent: impl std::future::Future<Output = reqwest::Result<reqwest::Response>>,
        span: tracing::Span,
    ) -> reqwest::Result<reqwest::Response> {
        if span.is_none() {
            return sent.await;
        }
        let result = sent.instrument(span.clone()).await;
        match &result {
            Ok(response) => {
                span.record("http.response.status_code", response.status().as_u16());
                if response.status().is_server_error() {
                    span.record("otel.status_code", "ERROR");
                }
            }
            Err(_) => {
                span.record("otel.status_code", "ERROR");
            }
        }
        result
    }
}
