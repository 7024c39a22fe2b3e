//! Spawning tasks that keep the provisioning scope.
//!
//! `tokio::spawn` starts a task with no task-locals and no current span, so a
//! spawned step would see no scope (every accessor fails) and log outside its
//! cluster's span. These helpers capture both **at the call site** and install them
//! in the new task.
//!
//! Runners derive their scope when first polled, so `tokio::spawn(with_cluster(c, f))`
//! gives `f` the cluster `c` but *no* provisioner client or namespace; write
//! `spawn(with_cluster(c, f))` instead.

use std::future::Future;

use tokio::task::{AbortHandle, JoinHandle, JoinSet};
use tracing::Instrument;

use crate::scope::{SCOPE, current};

/// Wraps `fut` so that, wherever it is polled, it runs in the scope and span that
/// are current now. The building block of [`spawn()`] and [`spawn_in`]; use it
/// directly for other executors (e.g. `JoinSet::spawn_on`).
pub fn carry<F: Future>(fut: F) -> impl Future<Output = F::Output> {
    SCOPE
        .scope(current(), fut)
        .instrument(tracing::Span::current())
}

/// `tokio::spawn`, keeping the current provisioning scope and tracing span.
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(carry(fut))
}

/// `JoinSet::spawn`, keeping the current provisioning scope and tracing span.
pub fn spawn_in<T, F>(set: &mut JoinSet<T>, fut: F) -> AbortHandle
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    set.spawn(carry(fut))
}
