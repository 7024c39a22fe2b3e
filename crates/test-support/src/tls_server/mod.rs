//! A verifying TLS test server: the one in-process TLS 1.3 peer the workspace's TLS
//! tests talk to. It requires and verifies client certificates against a root set
//! that can be replaced while it runs (several roots at once for a CA overlap
//! window), presents a server leaf that can be replaced too (any SANs, URI SANs
//! included), can offer session resumption (tickets and a session cache), answers
//! HTTP/1.1 and h2, and counts completed and rejected handshakes.
//!
//! By default every request is answered `200` with the client leaf's serial number
//! (decimal; `none` when no certificate was asked for) as the body, and the headers
//! `x-request-version` (`HTTP/1.1`, `HTTP/2.0`), `x-alpn` (the negotiated protocol
//! or `none`) and `x-connection` (which connection the request came on, see
//! [`Seen::connection`]). A test that needs another answer sets a [`Handler`].
//!
//! The server runs as tasks on the caller's Tokio runtime and stops when dropped.
//! Set-up failures panic, as everywhere in test support: they are a broken test, not
//! an outcome under test.
#![allow(clippy::expect_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::crypto::CryptoProvider;
use rustls::server::{ProducesTickets, StoresServerSessions, WebPkiClientVerifier};
use rustls::{HandshakeKind, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

use crate::pki::{Leaf, TestCa};

mod client;

pub use client::{request, request_as, request_serial};

/// What the server saw on one connection whose handshake completed.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The client's leaf certificate (`None` when client certificates are not asked for).
    pub leaf: Option<CertificateDer<'static>>,
    /// Its serial number as a u64 (test certificates use small serials).
    pub serial: Option<u64>,
    /// Full or resumed handshake.
    pub kind: Option<HandshakeKind>,
    /// The negotiated ALPN protocol, if any.
    pub alpn: Option<Vec<u8>>,
    /// When the handshake completed.
    pub at: Instant,
    /// The connection's number: 1 for the first completed handshake, 2 for the next.
    pub connection: u64,
}

/// A handler's answer to one request.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The HTTP status code.
    pub status: u16,
    /// The body.
    pub body: String,
}

/// Answers one request, given the connection it came on and the request head.
pub type Handler = Arc<dyn Fn(&Seen, &hyper::http::request::Parts) -> Reply + Send + Sync>;

/// A [`Handler`] that also sets response headers (a `location` for a redirect).
pub type HeadersHandler = Arc<
    dyn Fn(&Seen, &hyper::http::request::Parts) -> (Reply, Vec<(&'static str, String)>)
        + Send
        + Sync,
>;

/// Which client certificates the server asks for.
#[derive(Clone, Debug)]
pub enum ClientAuth {
    /// Required, verified against these roots (one or more: an overlap window).
    Required(Vec<CertificateDer<'static>>),
    /// Not asked for (a plain TLS server).
    None,
}

/// The replaceable part of the configuration.
struct Settings {
    chain: Vec<CertificateDer<'static>>,
    key_pem: String,
    client_auth: ClientAuth,
    alpn: Vec<Vec<u8>>,
    resumption: Option<(Arc<dyn StoresServerSessions>, Arc<dyn ProducesTickets>)>,
}

impl Settings {
    fn config(&self) -> Arc<ServerConfig> {
        let provider = provider();
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3 is supported");
        let builder = match &self.client_auth {
            ClientAuth::Required(roots) => {
                let mut store = RootCertStore::empty();
                for root in roots {
                    store.add(root.clone()).expect("a usable client root");
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider)
                        .build()
                        .expect("client verifier");
                builder.with_client_cert_verifier(verifier)
            }
            ClientAuth::None => builder.with_no_client_auth(),
        };
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).expect("server key PEM");
        let mut config = builder
            .with_single_cert(self.chain.clone(), key)
            .expect("server certificate and key match");
        config.alpn_protocols = self.alpn.clone();
        match &self.resumption {
            Some((cache, ticketer)) => {
                config.session_storage = cache.clone();
                config.ticketer = ticketer.clone();
                config.send_tls13_tickets = 4;
            }
            None => {
                config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
                config.send_tls13_tickets = 0;
            }
        }
        Arc::new(config)
    }
}

/// Builds a [`VerifyingServer`].
pub struct Builder {
    settings: Settings,
    handler: Option<HeadersHandler>,
    keep_seen: bool,
    keep_alive: bool,
}

impl Builder {
    /// Require client certificates verified against these roots (replaces the set).
    pub fn client_roots(mut self, roots: Vec<CertificateDer<'static>>) -> Self {
        self.settings.client_auth = ClientAuth::Required(roots);
        self
    }

    /// Require client certificates issued by any of these CAs.
    pub fn client_cas(self, cas: &[&TestCa]) -> Self {
        self.client_roots(cas.iter().map(|ca| ca.der()).collect())
    }

    /// Ask for no client certificate (a plain TLS server).
    pub fn no_client_auth(mut self) -> Self {
        self.settings.client_auth = ClientAuth::None;
        self
    }

    /// Present this leaf (with these intermediates after it, if any).
    pub fn server_chain(mut self, chain: Vec<CertificateDer<'static>>, key_pem: &str) -> Self {
        self.settings.chain = chain;
        self.settings.key_pem = key_pem.to_owned();
        self
    }

    /// Present this leaf.
    pub fn server_leaf(self, leaf: &Leaf) -> Self {
        self.server_chain(vec![leaf.der.clone()], &leaf.key_pem)
    }

    /// Offer session resumption: TLS 1.3 tickets and a server-side session cache.
    pub fn resumption(mut self, on: bool) -> Self {
        self.settings.resumption = on.then(|| {
            let cache: Arc<dyn StoresServerSessions> =
                rustls::server::ServerSessionMemoryCache::new(256);
            let ticketer = rustls::crypto::aws_lc_rs::Ticketer::new().expect("ticketer");
            (cache, ticketer)
        });
        self
    }

    /// The ALPN protocols offered (default `h2`, `http/1.1`; empty: no ALPN).
    pub fn alpn(mut self, protocols: &[&[u8]]) -> Self {
        self.settings.alpn = protocols.iter().map(|p| p.to_vec()).collect();
        self
    }

    /// Answer requests with `handler` instead of the client serial.
    pub fn handler(mut self, handler: Handler) -> Self {
        self.handler = Some(Arc::new(move |seen, parts| {
            (handler(seen, parts), Vec::new())
        }));
        self
    }

    /// Answer requests with `handler`, which also sets response headers.
    pub fn handler_with_headers(mut self, handler: HeadersHandler) -> Self {
        self.handler = Some(handler);
        self
    }

    /// Whether to keep a [`Seen`] record per connection (default `true`); long runs
    /// (soak) turn it off so the record does not grow, the counters still count.
    pub fn keep_seen(mut self, keep: bool) -> Self {
        self.keep_seen = keep;
        self
    }

    /// Keep HTTP/1.1 connections open between requests (default `false`: every
    /// response says `connection: close` and the server closes, so each request of
    /// a pooling client runs a new handshake and presents its current identity).
    pub fn keep_alive(mut self, keep: bool) -> Self {
        self.keep_alive = keep;
        self
    }

    /// Bind 127.0.0.1 on an ephemeral port and serve.
    pub async fn start(self) -> VerifyingServer {
        let shared = Arc::new(Shared {
            config: Mutex::new(self.settings.config()),
            settings: Mutex::new(self.settings),
            seen: Mutex::new(Vec::new()),
            rejected: Mutex::new(Vec::new()),
            handshakes: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            rejections: AtomicU64::new(0),
            keep_seen: self.keep_seen,
            keep_alive: self.keep_alive,
            handler: self
                .handler
                .unwrap_or_else(|| Arc::new(|seen, parts| (serial_reply(seen, parts), Vec::new()))),
        });
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let task = tokio::spawn(accept_loop(listener, shared.clone()));
        VerifyingServer { addr, shared, task }
    }
}

struct Shared {
    settings: Mutex<Settings>,
    config: Mutex<Arc<ServerConfig>>,
    seen: Mutex<Vec<Seen>>,
    rejected: Mutex<Vec<String>>,
    handshakes: AtomicU64,
    requests: AtomicU64,
    rejections: AtomicU64,
    keep_seen: bool,
    keep_alive: bool,
    handler: HeadersHandler,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How many rejection reasons are kept (the count goes on).
const REJECTIONS_KEPT: usize = 1000;

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        // Without it, Nagle's algorithm against delayed ACKs costs ~40 ms a request.
        let _ = tcp.set_nodelay(true);
        let acceptor = tokio_rustls::TlsAcceptor::from(lock(&shared.config).clone());
        let shared = shared.clone();
        tokio::spawn(async move {
            let tls = match acceptor.accept(tcp).await {
                Ok(tls) => tls,
                Err(e) => {
                    shared.rejections.fetch_add(1, Ordering::SeqCst);
                    let mut rejected = lock(&shared.rejected);
                    if rejected.len() < REJECTIONS_KEPT {
                        rejected.push(e.to_string());
                    }
                    return;
                }
            };
            let (_, conn) = tls.get_ref();
            let leaf = conn
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| c.clone().into_owned());
            let seen = Seen {
                serial: leaf.as_deref().and_then(serial_of),
                leaf,
                kind: conn.handshake_kind(),
                alpn: conn.alpn_protocol().map(<[u8]>::to_vec),
                at: Instant::now(),
                connection: shared.handshakes.fetch_add(1, Ordering::SeqCst) + 1,
            };
            if shared.keep_seen {
                lock(&shared.seen).push(seen.clone());
            }
            let alpn = seen
                .alpn
                .as_deref()
                .map_or("none".to_owned(), |p| String::from_utf8_lossy(p).into());
            let handler = shared.handler.clone();
            let close = !shared.keep_alive;
            let requests = shared.clone();
            let service = hyper::service::service_fn(move |req: Request<_>| {
                requests.requests.fetch_add(1, Ordering::SeqCst);
                let (parts, _) = req.into_parts();
                let (reply, extra) = handler(&seen, &parts);
                let mut response = Response::new(Full::new(Bytes::from(reply.body)));
                *response.status_mut() =
                    StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let headers = response.headers_mut();
                for (name, value) in extra {
                    if let Ok(value) = value.parse() {
                        headers.insert(name, value);
                    }
                }
                if let Ok(v) = format!("{:?}", parts.version).parse() {
                    headers.insert("x-request-version", v);
                }
                if let Ok(v) = alpn.parse() {
                    headers.insert("x-alpn", v);
                }
                headers.insert("x-connection", seen.connection.into());
                if close && parts.version == hyper::Version::HTTP_11 {
                    headers.insert(
                        hyper::header::CONNECTION,
                        hyper::header::HeaderValue::from_static("close"),
                    );
                }
                async move { Ok::<_, Infallible>(response) }
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

/// The default handler: `200` and the client leaf's serial (`none` without one).
fn serial_reply(seen: &Seen, _: &hyper::http::request::Parts) -> Reply {
    Reply {
        status: 200,
        body: seen
            .serial
            .map_or_else(|| "none".to_owned(), |s| s.to_string()),
    }
}

/// The serial of a DER certificate as a u64 (`None` if unparsable or over 64 bits).
pub fn serial_of(der: &[u8]) -> Option<u64> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let raw = cert.tbs_certificate.raw_serial();
    let raw = match raw.iter().position(|b| *b != 0) {
        Some(i) => &raw[i..],
        None => &[][..],
    };
    (raw.len() <= 8).then(|| raw.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A TLS 1.3 server that verifies client certificates (see the module docs).
pub struct VerifyingServer {
    /// Where it listens (127.0.0.1).
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for VerifyingServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl VerifyingServer {
    /// A builder presenting a leaf for 127.0.0.1/localhost issued by `server_ca`,
    /// requiring client certificates from `client_ca`, offering `h2` and `http/1.1`,
    /// without resumption.
    pub fn builder(server_ca: &TestCa, client_ca: &TestCa) -> Builder {
        let leaf = server_ca.server_leaf();
        Builder {
            settings: Settings {
                chain: vec![leaf.der],
                key_pem: leaf.key_pem,
                client_auth: ClientAuth::Required(vec![client_ca.der()]),
                alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
                resumption: None,
            },
            handler: None,
            keep_seen: true,
            keep_alive: false,
        }
    }

    /// [`VerifyingServer::builder`] with its defaults, started.
    pub async fn start(server_ca: &TestCa, client_ca: &TestCa) -> Self {
        Self::builder(server_ca, client_ca).start().await
    }

    fn update(&self, change: impl FnOnce(&mut Settings)) {
        let mut settings = lock(&self.shared.settings);
        change(&mut settings);
        let config = settings.config();
        *lock(&self.shared.config) = config;
    }

    /// Require client certificates from `client_ca` only, from the next connection on.
    pub fn set_client_ca(&self, client_ca: &TestCa) {
        self.set_client_cas(&[client_ca]);
    }

    /// Require client certificates from any of `cas`, from the next connection on.
    pub fn set_client_cas(&self, cas: &[&TestCa]) {
        self.set_client_roots(cas.iter().map(|ca| ca.der()).collect());
    }

    /// Require client certificates verified against `roots`, from the next connection on.
    pub fn set_client_roots(&self, roots: Vec<CertificateDer<'static>>) {
        self.update(|s| s.client_auth = ClientAuth::Required(roots));
    }

    /// Present `leaf` from the next connection on.
    pub fn set_server_leaf(&self, leaf: &Leaf) {
        self.set_server_chain(vec![leaf.der.clone()], &leaf.key_pem);
    }

    /// Present `chain` (leaf first) with `key_pem` from the next connection on.
    pub fn set_server_chain(&self, chain: Vec<CertificateDer<'static>>, key_pem: &str) {
        self.update(|s| {
            s.chain = chain;
            s.key_pem = key_pem.to_owned();
        });
    }

    /// Present a new 127.0.0.1/localhost leaf issued by `ca` from the next connection on.
    pub fn set_server_ca(&self, ca: &TestCa) {
        self.set_server_leaf(&ca.server_leaf());
    }

    /// The server configuration in use now, for in-memory handshakes without sockets
    /// (long runs that would otherwise exhaust loopback ports in TIME_WAIT).
    pub fn server_config(&self) -> Arc<ServerConfig> {
        lock(&self.shared.config).clone()
    }

    /// `https://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}/", self.addr.port())
    }

    /// Completed handshakes so far.
    pub fn handshakes(&self) -> u64 {
        self.shared.handshakes.load(Ordering::SeqCst)
    }

    /// Requests served so far, on any connection.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Rejected handshakes so far (a refused client certificate among them).
    pub fn rejected(&self) -> u64 {
        self.shared.rejections.load(Ordering::SeqCst)
    }

    /// Why handshakes were rejected (the first thousand).
    pub fn rejection_reasons(&self) -> Vec<String> {
        lock(&self.shared.rejected).clone()
    }

    /// Every completed connection so far, oldest first (empty with `keep_seen(false)`).
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.shared.seen).clone()
    }

    /// The client leaves seen so far, oldest first.
    pub fn leaves(&self) -> Vec<CertificateDer<'static>> {
        lock(&self.shared.seen)
            .iter()
            .filter_map(|s| s.leaf.clone())
            .collect()
    }

    /// The last client leaf seen.
    pub fn last_leaf(&self) -> Option<CertificateDer<'static>> {
        lock(&self.shared.seen)
            .iter()
            .rev()
            .find_map(|s| s.leaf.clone())
    }
}
