//! The runtime a registry of watched objects runs its watches and loaders on: its
//! own, on a thread of its own, so that a shared watch does not end with the runtime
//! of whichever caller happened to start it (a `#[tokio::test]`, a short-lived
//! `block_on` at start-up, a controller's per-reconcile runtime).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A current-thread Tokio runtime on a dedicated thread; it stops when the last clone
/// of its handle is dropped. Cheap to clone.
#[derive(Clone)]
pub(crate) struct BackgroundRuntime {
    inner: Arc<Inner>,
}

struct Inner {
    handle: Handle,
    /// Dropped (closing the channel) when the last clone goes: the thread then returns
    /// from `block_on` and drops the runtime, ending its tasks.
    _stop: oneshot::Sender<()>,
}

impl fmt::Debug for BackgroundRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BackgroundRuntime")
    }
}

/// Why the background runtime could not be started (the OS refused a thread).
#[derive(Debug, thiserror::Error)]
#[error("could not start the watched objects' runtime thread")]
pub(crate) struct RuntimeError(#[source] std::io::Error);

impl BackgroundRuntime {
    /// Starts the runtime and its thread.
    pub(crate) fn start() -> Result<Self, RuntimeError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("svc-tls-watches")
            .build()
            .map_err(RuntimeError)?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("svc-tls-watches".to_owned())
            .spawn(move || {
                // Err when the sender is dropped: time to stop.
                let _ = runtime.block_on(stopped);
            })
            .map_err(RuntimeError)?;
        Ok(Self {
            inner: Arc::new(Inner {
                handle,
                _stop: stop,
            }),
        })
    }

    /// Runs `future` on this runtime; the returned task is aborted when dropped, so a
    /// caller that gives up (a cancelled construction) leaves nothing running.
    pub(crate) fn spawn<F>(&self, future: F) -> AbortOnDrop<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        AbortOnDrop(self.inner.handle.spawn(future))
    }
}

/// A task aborted when its handle is dropped.
pub(crate) struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Whether a Tokio runtime still runs: a task parked on it forever holds a guard that
/// marks the runtime ended when the runtime drops the task at shutdown.
#[derive(Clone)]
pub(super) struct RuntimeLiveness(Arc<AtomicBool>);

struct MarkEnded(Arc<AtomicBool>);

impl Drop for MarkEnded {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

impl RuntimeLiveness {
    /// The liveness of the runtime this is called on (alive for ever outside one).
    pub(super) fn of_current() -> Self {
        let ended = Arc::new(AtomicBool::new(false));
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let guard = MarkEnded(ended.clone());
            handle.spawn(async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            });
        }
        Self(ended)
    }

    pub(super) fn is_alive(&self) -> bool {
        !self.0.load(Ordering::Acquire)
    }
}
