//! The gRPC side: an accept loop on the unix socket, HTTP/2 connections served by
//! hyper, and the two X.509 RPCs dispatched by path to tonic's low-level
//! [`tonic::server::Grpc`] with the hand-written prost messages.
//!
//! The emulator runs its own accept loop (rather than tonic's `Server`) so that it can
//! stop like a killed agent: the listener and every connection go away at once, with
//! no graceful drain that would keep a stream open.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinSet;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tonic::server::Grpc;
use tonic_prost::ProstCodec;

use crate::proto::{X509BundlesRequest, X509BundlesResponse, X509SvidRequest, X509SvidResponse};
use crate::state::{Fault, Shared};

/// The gRPC path of `FetchX509SVID`.
pub const FETCH_X509_SVID: &str = "/SpiffeWorkloadAPI/FetchX509SVID";
/// The gRPC path of `FetchX509Bundles`.
pub const FETCH_X509_BUNDLES: &str = "/SpiffeWorkloadAPI/FetchX509Bundles";
const JWT_METHODS: [&str; 3] = [
    "/SpiffeWorkloadAPI/FetchJWTSVID",
    "/SpiffeWorkloadAPI/FetchJWTBundles",
    "/SpiffeWorkloadAPI/ValidateJWTSVID",
];
/// The metadata every Workload API request must carry (the SPIFFE specification's
/// guard against server-side request forgery through a proxy).
pub const SECURITY_HEADER: &str = "workload.spiffe.io";

fn fault_status(fault: Result<Fault, broadcast::error::RecvError>) -> Status {
    match fault {
        Ok(Fault::DropStreams) | Err(_) => Status::unavailable("stream dropped by the emulator"),
        Ok(Fault::Stopped) => Status::unavailable("agent stopped"),
    }
}

/// Accepts connections until the task is aborted; aborting it drops the listener
/// and every connection with it.
pub(crate) async fn accept_loop(listener: UnixListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((io, _)) => {
                    connections.spawn(serve_connection(io, shared.clone()));
                }
                // EMFILE and the like: back off a little, as any server would.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(io: UnixStream, shared: Arc<Shared>) {
    let service = hyper::service::service_fn(move |request| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(route(shared, request).await) }
    });
    // A connection error is the client's business (it went away); nothing to report.
    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(io), service)
        .await;
}

async fn route(
    shared: Arc<Shared>,
    request: http::Request<Incoming>,
) -> http::Response<tonic::body::Body> {
    let path = request.uri().path().to_owned();
    let known =
        path == FETCH_X509_SVID || path == FETCH_X509_BUNDLES || JWT_METHODS.contains(&&*path);
    if !known {
        return Status::unimplemented(format!("unknown method {path}")).into_http();
    }
    let has_header = request
        .headers()
        .get(SECURITY_HEADER)
        .is_some_and(|value| value.as_bytes() == b"true");
    if !has_header {
        shared.without_header.fetch_add(1, Ordering::SeqCst);
        return Status::invalid_argument("security header missing from request").into_http();
    }
    if path == FETCH_X509_SVID {
        let mut grpc = Grpc::new(ProstCodec::<X509SvidResponse, X509SvidRequest>::default());
        grpc.server_streaming(StreamService::svids(shared), request)
            .await
    } else if path == FETCH_X509_BUNDLES {
        let mut grpc = Grpc::new(ProstCodec::<X509BundlesResponse, X509BundlesRequest>::default());
        grpc.server_streaming(StreamService::bundles(shared), request)
            .await
    } else {
        Status::unimplemented("the emulator serves the X.509 profile only").into_http()
    }
}

/// Builds the next message of a stream from the emulator's state, or the status that
/// ends the stream (no identity, denied).
type Make<M> = fn(&Shared) -> Result<M, Status>;

/// One server-streaming RPC: `R` is its request, `M` its response message.
struct StreamService<R, M> {
    shared: Arc<Shared>,
    make: Make<M>,
    _request: std::marker::PhantomData<fn(R)>,
}

impl StreamService<X509SvidRequest, X509SvidResponse> {
    fn svids(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            make: Shared::svid_response,
            _request: std::marker::PhantomData,
        }
    }
}

impl StreamService<X509BundlesRequest, X509BundlesResponse> {
    fn bundles(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            make: Shared::bundles_response,
            _request: std::marker::PhantomData,
        }
    }
}

type StreamResult<M> = Result<tonic::Response<ReceiverStream<Result<M, Status>>>, Status>;

impl<R, M> tower::Service<tonic::Request<R>> for StreamService<R, M>
where
    M: Clone + PartialEq + Send + 'static,
{
    type Response = tonic::Response<ReceiverStream<Result<M, Status>>>;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = StreamResult<M>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: tonic::Request<R>) -> Self::Future {
        Box::pin(open_stream(self.shared.clone(), self.make))
    }
}

/// Counts an open stream from the RPC's start to the end of its pump task.
struct OpenStream(Arc<Shared>);

impl OpenStream {
    fn new(shared: Arc<Shared>) -> Self {
        shared.open_streams.fetch_add(1, Ordering::SeqCst);
        shared.streams_opened.fetch_add(1, Ordering::SeqCst);
        Self(shared)
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.open_streams.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The RPC handler: waits out the first-response delay, computes the first message
/// (or fails the RPC with its status, which goes out as a trailers-only response, as
/// grpc-go does when a handler returns before sending), then hands the stream to a
/// pump task that resends on every change.
async fn open_stream<M>(shared: Arc<Shared>, make: Make<M>) -> StreamResult<M>
where
    M: Clone + PartialEq + Send + 'static,
{
    let guard = OpenStream::new(shared.clone());
    let mut changes = shared.changes.subscribe();
    let mut faults = shared.faults.subscribe();
    let delay = shared.lock().first_delay;
    if !delay.is_zero() {
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            fault = faults.recv() => return Err(fault_status(fault)),
        }
    }
    changes.borrow_and_update();
    let first = make(&shared)?;
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(pump(shared, make, first, tx, changes, faults, guard));
    Ok(tonic::Response::new(ReceiverStream::new(rx)))
}

async fn pump<M>(
    shared: Arc<Shared>,
    make: Make<M>,
    first: M,
    tx: mpsc::Sender<Result<M, Status>>,
    mut changes: watch::Receiver<u64>,
    mut faults: broadcast::Receiver<Fault>,
    _guard: OpenStream,
) where
    M: Clone + PartialEq + Send + 'static,
{
    let mut last = first.clone();
    if tx.send(Ok(first)).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            () = tx.closed() => return,
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                match make(&shared) {
                    Ok(message) => {
                        if message != last {
                            last = message.clone();
                            if tx.send(Ok(message)).await.is_err() {
                                return;
                            }
                        }
                    }
                    Err(status) => {
                        let _ = tx.send(Err(status)).await;
                        return;
                    }
                }
            }
            fault = faults.recv() => {
                let _ = tx.send(Err(fault_status(fault))).await;
                return;
            }
        }
    }
}
