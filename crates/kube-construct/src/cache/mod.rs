//! Declared, watch-driven caches, proven synced at construction, with health.
//!
//! A caller declares up front what it reads through the cache
//! ([`CacheDeclaration::typed`] / [`CacheDeclaration::dynamic`], each scoped by a
//! [`Selection`]: namespace, label selector, field selector). Each declaration
//! becomes one kube-runtime reflector: a `watcher` with those selectors feeding a
//! `reflector::store`.
//!
//! Construction ([`crate::client::ClientBuilder`], then [`start`](start.rs))
//! races every store's `wait_until_ready` against the watchers' errors and a timeout
//! ([`DEFAULT_SYNC_TIMEOUT`], 2 minutes as in controller-runtime):
//!
//! * every cache completed its initial list: success;
//! * a permanent error (401 Unauthorized, 403 Forbidden, 404 for an unknown
//!   resource) on any cache before it synced: failure at once, naming the cache;
//! * the timeout: failure naming every cache not yet synced and its last error.
//!
//! Transient errors (5xx, connection failures) are retried with kube-runtime's
//! default backoff. After construction, errors never stop a cache: it reports
//! [`CacheState::Degraded`] with its last error, logs through `tracing`, keeps
//! retrying, and reads keep serving the last known state (a re-list replaces the
//! store contents atomically when it completes). It is [`CacheState::Ready`]
//! again as soon as the API server accepts its WATCH again (each cache's requests
//! pass through a thin observer on the one shared client, because kube-runtime's
//! watcher resumes a watch silently), or the watch delivers an event.
//!
//! An API server is not always trusted (a tenant cluster's), so each cache is held
//! within [`WatchLimits`] (set with
//! [`ClientBuilder::watch_limits`](crate::client::ClientBuilder::watch_limits);
//! `watch-ready`'s defaults otherwise): an object over the size cap, objects past the
//! count cap, a LIST body or WATCH event over its cap are refused with a typed
//! [`LimitError`], counted in [`CacheHealth::over_limit`], and the cache keeps
//! serving its last good state.

//!
//! The watching, the readiness wait, the error classification and the timeout
//! default are the workspace's one watch layer, the internal `watch-ready` crate,
//! shared with `svc-tls`'s Secret source. This module adds what is particular to a
//! client's caches: declarations and selections ([`selection`](selection.rs)), names
//! and health reports ([`health`](health.rs)), typed and dynamic reads through one
//! store reader ([`reader`](reader.rs)), and starting them all ([`start`](start.rs)).

mod health;
mod reader;
mod selection;
mod start;

pub use health::{CacheError, CacheHealth, CacheState, HealthReport, NotReady};
pub use reader::{CacheObject, CachedType, KnownScope};
pub use selection::{CacheName, Selection};
pub use start::CacheDeclaration;

pub(crate) use reader::{Query, Reader, StoreReader};
pub(crate) use selection::resource_name;
pub(crate) use start::{Caches, dedupe};

/// How long construction waits for every declared cache to sync, unless configured:
/// the workspace's one sync-timeout default (see
/// `docs/decisions/one-watch-layer-and-sync-timeout.md`).
pub use watch_ready::DEFAULT_SYNC_TIMEOUT;

/// The bounds on what the API server can make a cache hold, and what a bound
/// refused: `watch-ready`'s, set per client with
/// [`ClientBuilder::watch_limits`](crate::client::ClientBuilder::watch_limits).
pub use watch_ready::{LimitError, WatchLimits};
