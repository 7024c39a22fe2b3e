//! # watch-ready
//!
//! Watch Kubernetes objects into a kube-runtime store, and wait until that store has
//! synced. An internal crate: `svc-tls` watches one Secret with it, `kube-construct`
//! watches every declared cache with it.
//!
//! ## Why it exists
//!
//! Both crates need the same four things, and before this crate each had its own copy
//! with its own defaults: start a reflector (a kube-runtime `watcher` with default
//! backoff feeding a `reflector::store`), decide which watch errors are worth waiting
//! out, wait for the first list with a timeout, and keep a health record of the watch
//! afterwards. Having one copy means one sync-timeout default
//! ([`DEFAULT_SYNC_TIMEOUT`]) and one classification of errors ([`Refusal::of`]):
//! 401, 403 and 404 before the first sync fail at once; every other error is retried
//! with backoff until the timeout.
//!
//! ## What it does
//!
//! * [`Watched::spawn`] runs the reflector as a Tokio task, aborted when the
//!   [`Watched`] is dropped, and keeps a [`Health`] current: [`WatchState::Syncing`]
//!   until the first list, then [`WatchState::Ready`], or [`WatchState::Degraded`]
//!   with the last error while the watch fails (reads keep serving the last state).
//! * [`observe`] wraps a `kube::Client` (same connection pool and credentials) so
//!   that an accepted WATCH marks the health ready again: kube-runtime's watcher
//!   resumes a dropped watch silently, so the stream alone cannot say so.
//! * [`Watched::synced`] and [`all_synced`] are the one readiness wait: the store's
//!   `wait_until_ready`, raced against refusals and a timeout.
//!
//! ## What it does not do
//!
//! It names nothing: errors carry no Secret or cache name, and the crates that use
//! it wrap them in their own typed errors. It does not read objects for callers
//! (they use the [`Store`] directly, or follow it with [`Watched::subscribe`]),
//! build clients or configurations, or decide what to watch.
#![deny(missing_docs)]

pub mod excerpt;
mod health;
mod kube_error;
mod limits;
mod log_filter;
mod refusal;
mod subscribe;
mod watched;

pub use health::{Health, WatchState, WatchStatus, observe};
pub use kube_error::KubeError;
pub use kube_runtime::reflector::Store;
pub use limits::{
    DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_LIST_BYTES, DEFAULT_MAX_OBJECT_BYTES, DEFAULT_MAX_OBJECTS,
    LimitError, WatchLimits, observe_bounded,
};
pub use log_filter::{KUBE_CLIENT_RAW_BODY_TARGET, RAW_BODY_DIRECTIVE, RawBodyFilter};
pub use refusal::{Refusal, RefusalReason};
pub use watched::{QUICK_RETRY_MAX, Unsynced, WaitError, Watched, all_synced};

use std::time::Duration;

/// How long a first sync may take before construction gives up, unless the caller
/// configures another bound. Two minutes, as controller-runtime's cache sync
/// timeout, which the Go services this replaces ran with; see
/// `docs/decisions/one-watch-layer-and-sync-timeout.md`.
pub const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(120);
