//! What the Go manager added around a reconciler: leader election, a bound on
//! concurrent reconciles, and panic recovery.

use std::{
    future::Future,
    panic::AssertUnwindSafe,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use futures::{FutureExt as _, StreamExt as _};
use kube::ResourceExt as _;
use kube_construct::{
    client::{CachedClient, ClientError},
    types::fake::ManagedResource,
};
use kube_runtime::{
    Controller,
    controller::{Action, Config},
};
use thiserror::Error;

use crate::{
    Context, ReconcileError, Settings, error_policy,
    leader::{Elector, LeaderElection, LeaderElectionError},
    resources,
};

/// The Go manager's `--max-concurrency` default.
pub const DEFAULT_MAX_CONCURRENCY: u16 = 16;

/// How the controller is run: the Go manager's part.
#[derive(Clone, Debug)]
pub struct Manager {
    /// At most this many reconciles at once (`--max-concurrency`; 0: no bound).
    pub max_concurrency: u16,
    /// Only the holder of this Lease reconciles (`--leader-elect`); `None`: every
    /// replica does.
    pub leader_election: Option<LeaderElection>,
}

impl Default for Manager {
    /// [`DEFAULT_MAX_CONCURRENCY`], no leader election.
    fn default() -> Self {
        Manager {
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            leader_election: None,
        }
    }
}

/// What the manager counts, readable while it runs (the test's view, the log's, and
/// `/metrics`': [`crate::endpoints::ManagerMetrics`]).
#[derive(Debug, Default)]
pub struct Counters {
    reconciles: AtomicU64,
    succeeded: AtomicU64,
    errors: AtomicU64,
    panics: AtomicU64,
    running: AtomicU64,
    most_running: AtomicU64,
    leading: AtomicBool,
}

impl Counters {
    /// Reconciles started.
    pub fn reconciles(&self) -> u64 {
        self.reconciles.load(Ordering::Relaxed)
    }

    /// Reconciles that ended with `Ok`.
    pub fn succeeded(&self) -> u64 {
        self.succeeded.load(Ordering::Relaxed)
    }

    /// Reconciles that ended with an error, panics included (as controller-runtime
    /// counts them).
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Whether this replica runs the controller now: it holds the Lease (or elects
    /// no leader) and its controller has started.
    pub fn leading(&self) -> bool {
        self.leading.load(Ordering::Acquire)
    }

    /// Reconciles that panicked (recovered, and the object requeued).
    pub fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }

    /// Reconciles running now.
    pub fn running(&self) -> u64 {
        self.running.load(Ordering::Relaxed)
    }

    /// The most reconciles that ran at once.
    pub fn most_running(&self) -> u64 {
        self.most_running.load(Ordering::Relaxed)
    }

    fn start(self: &Arc<Self>) -> Running {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        let now = self.running.fetch_add(1, Ordering::AcqRel) + 1;
        self.most_running.fetch_max(now, Ordering::AcqRel);
        Running(Arc::clone(self))
    }
}

/// This replica leading: [`Counters::leading`] until dropped (the controller ended,
/// or was cancelled when the Lease was lost).
struct Leading(Arc<Counters>);

impl Leading {
    fn start(counters: &Arc<Counters>) -> Self {
        counters.leading.store(true, Ordering::Release);
        Leading(Arc::clone(counters))
    }
}

impl Drop for Leading {
    fn drop(&mut self) {
        self.0.leading.store(false, Ordering::Release);
    }
}

/// One running reconcile: counted down however it ends (cancelled included).
struct Running(Arc<Counters>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why the controller stopped other than by shutdown.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RunError {
    /// The client has no cache of the resources.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Leader election could not start, or this replica lost the Lease (it stopped
    /// reconciling at once; the binary exits, as the Go manager does).
    #[error(transparent)]
    LeaderElection(#[from] LeaderElectionError),
}

/// Runs `reconciler` as the controller (see [`crate::run`]) under `manager`: when it
/// elects, only while this replica holds the Lease, and returning
/// [`RunError::LeaderElection`] at once when it loses it; with at most
/// `manager.max_concurrency` reconciles at once; a reconcile that panics is recovered,
/// counted in `counters` and requeued by [`error_policy`].
///
/// # Errors
/// [`RunError`].
pub async fn run_with<R, F>(
    client: CachedClient,
    settings: Settings,
    manager: Manager,
    counters: Arc<Counters>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    reconciler: R,
) -> Result<(), RunError>
where
    R: Fn(Arc<ManagedResource>, Arc<Context>) -> F + Send + Sync + 'static,
    F: Future<Output = Result<Action, ReconcileError>> + Send + 'static,
{
    let watch = client.shared_watch::<ManagedResource>(&resources(&settings))?;
    let elector = match manager.leader_election {
        Some(config) => Some(Elector::new(client.kube_client().clone(), config)?),
        None => None,
    };
    let leading = Arc::clone(&counters);
    let context = Arc::new(Context {
        client,
        settings,
        counters,
    });
    let shutdown = shutdown.shared();
    let config = Config::default().concurrency(manager.max_concurrency);
    let controller = {
        let shutdown = shutdown.clone();
        async move {
            // Polled only once this replica leads (or elects no leader).
            let _leading = Leading::start(&leading);
            Controller::for_shared_stream(watch.subscribe(), watch.store())
                .with_config(config)
                .graceful_shutdown_on(shutdown)
                .run(
                    move |object: Arc<ManagedResource>, context: Arc<Context>| {
                        // The reconciler's own call may panic too, before its future
                        // exists.
                        let future = std::panic::catch_unwind(AssertUnwindSafe(|| {
                            reconciler(Arc::clone(&object), Arc::clone(&context))
                        }));
                        guarded(future, &object, &context)
                    },
                    error_policy,
                    context,
                )
                .for_each(|result| async move {
                    match result {
                        Ok((object, _)) => tracing::info!(%object, "reconciled"),
                        Err(error) => tracing::warn!(
                            error = %svc_tls::excerpt::chain(&error),
                            "reconcile failed"
                        ),
                    }
                })
                .await;
        }
    };
    match elector {
        None => controller.await,
        Some(elector) => {
            elector.lead(shutdown, controller).await?;
        }
    }
    Ok(())
}

/// One reconcile, counted, its panic caught and turned into
/// [`ReconcileError::Panicked`] (which [`error_policy`] requeues), as the Go
/// manager's `RecoverPanic`.
fn guarded<F>(
    future: std::thread::Result<F>,
    object: &ManagedResource,
    context: &Context,
) -> impl Future<Output = Result<Action, ReconcileError>> + Send + 'static + use<F>
where
    F: Future<Output = Result<Action, ReconcileError>> + Send + 'static,
{
    let counters = Arc::clone(&context.counters);
    let name = format!(
        "{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    );
    // Each reconcile in a span (controller-runtime's reconcile span): its peer
    // requests carry that trace, exported with --otlp-endpoint.
    let span = tracing::info_span!("reconcile", controller = "managedresource", object = %name);
    let reconcile = async move {
        let _running = counters.start();
        let outcome = match future {
            Ok(future) => AssertUnwindSafe(future).catch_unwind().await,
            Err(payload) => Err(payload),
        };
        let result = outcome.unwrap_or_else(|payload| {
            let panics = counters.panics.fetch_add(1, Ordering::Relaxed) + 1;
            let message = panic_message(payload.as_ref());
            tracing::error!(
                object = %name,
                panic = %message,
                panics,
                "reconcile panicked: recovered, the object is requeued"
            );
            Err(ReconcileError::Panicked {
                object: name,
                message,
            })
        });
        match &result {
            Ok(_) => counters.succeeded.fetch_add(1, Ordering::Relaxed),
            Err(_) => counters.errors.fetch_add(1, Ordering::Relaxed),
        };
        result
    };
    tracing::Instrument::instrument(reconcile, span)
}

/// The text a panic was raised with, when it was text.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(not text)".to_owned())
}
