//! [`serve`]: a small hyper-util server over [`ServerTls`]: each connection's verified
//! caller in its requests, and connections whose caller the client CA no longer
//! verifies closed.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::{CertificateDer, UnixTime};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::Layer as _;

use super::caller::Caller;
use super::config::ServerTls;
use crate::trust::TrustVerifier;

/// How long a caller has to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the client CA served is compared with the one each open connection's
/// caller was verified against (two atomic loads and a pointer comparison): a
/// connection whose caller no longer verifies is closed within this and the grace.
pub const TRUST_CHECK_INTERVAL: Duration = Duration::from_millis(200);

/// How long requests in flight on a connection being closed have to finish.
pub const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Serves `service` over mTLS on `listener` until accepting fails for good (the
/// future never ends otherwise; drop it to stop accepting).
///
/// Each connection's handshake presents the current identity and verifies the
/// caller against the current client CA ([`ServerTls`]); its requests carry the
/// verified [`Caller`] in their extensions and none of the
/// [`FORWARDED_CERTIFICATE_HEADERS`](super::FORWARDED_CERTIFICATE_HEADERS). HTTP/1.1
/// and HTTP/2 (ALPN).
///
/// **Established connections follow the client CA**: when the roots served change,
/// or the trust starts refusing every caller (a withdrawn SPIFFE domain, a source
/// gone past its bound), each open connection's caller is verified again against
/// what is served now, and a connection whose caller no longer verifies is closed
/// (gracefully: no new request is read, requests in flight get [`CLOSE_GRACE`]).
/// Within [`TRUST_CHECK_INTERVAL`] of the change. A caller that still verifies keeps
/// its connection.
///
/// # Errors
/// The listener's error when accepting fails other than for one connection.
pub async fn serve<S, B>(listener: TcpListener, tls: ServerTls, service: S) -> std::io::Result<()>
where
    S: tower::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let trust = tls.callers().trust().clone();
    let (revisions, _) = watch::channel(0u64);
    let revisions = Arc::new(revisions);
    let _watcher = AbortOnDrop(tokio::spawn(follow_trust(trust.clone(), revisions.clone())));
    let acceptor = tls.acceptor();
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(error) if is_per_connection(&error) => continue,
            Err(error) => return Err(error),
        };
        tokio::spawn(connection(
            acceptor.clone(),
            tcp,
            service.clone(),
            tls.clone(),
            trust.clone(),
            revisions.subscribe(),
        ));
    }
}

/// Errors of one connection that `accept` reports (the caller went away first).
fn is_per_connection(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset, Interrupted};
    matches!(
        error.kind(),
        ConnectionAborted | ConnectionReset | Interrupted
    )
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Bumps `revisions` each time the roots served change or the trust starts or stops
/// refusing every caller.
async fn follow_trust(trust: TrustVerifier, revisions: Arc<watch::Sender<u64>>) {
    let mut roots = trust.current();
    let mut refusing = trust.refuses_now();
    let mut tick = tokio::time::interval(TRUST_CHECK_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (now_roots, now_refusing) = (trust.current(), trust.refuses_now());
        if !Arc::ptr_eq(&now_roots, &roots) || now_refusing != refusing {
            (roots, refusing) = (now_roots, now_refusing);
            revisions.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

async fn connection<S, B>(
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: TcpStream,
    service: S,
    tls: ServerTls,
    trust: TrustVerifier,
    mut revisions: watch::Receiver<u64>,
) where
    S: tower::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            tracing::debug!(error = %error, "serving: a TLS handshake failed");
            tls.handshake_failed(Some(&error));
            return;
        }
        Err(_) => {
            tracing::debug!("serving: a TLS handshake timed out");
            tls.handshake_failed(None);
            return;
        }
    };
    let caller = match Caller::of_connection(stream.get_ref().1) {
        Ok(caller) => caller,
        Err(error) => {
            tracing::warn!(error = %error, "serving: a verified caller certificate cannot be read; closing");
            return;
        }
    };
    let chain: Option<Vec<CertificateDer<'static>>> = caller.as_ref().map(|c| c.chain().to_vec());
    let service = tls.layer(caller).layer(service);
    let builder = auto::Builder::new(TokioExecutor::new());
    let connection =
        builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
    tokio::pin!(connection);
    revisions.mark_unchanged();
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(error = %error, "serving: a connection ended with an error");
                }
                return;
            }
            changed = revisions.changed(), if chain.is_some() => {
                let still_verifies = changed.is_ok()
                    && chain.as_deref().is_some_and(|chain| still_verifies(&trust, chain));
                if !still_verifies {
                    tracing::info!(
                        "serving: a connection's caller no longer verifies against the client \
                         CA served now; closing it once its requests in flight finish"
                    );
                    connection.as_mut().graceful_shutdown();
                    break;
                }
            }
        }
    }
    let _ = tokio::time::timeout(CLOSE_GRACE, connection).await;
}

fn still_verifies(trust: &TrustVerifier, chain: &[CertificateDer<'static>]) -> bool {
    let Some((leaf, intermediates)) = chain.split_first() else {
        return false;
    };
    trust
        .verify_caller_chain(leaf, intermediates, UnixTime::now())
        .is_ok()
}
