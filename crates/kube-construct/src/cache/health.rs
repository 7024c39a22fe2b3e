//! How healthy the caches are ([`HealthReport`]), and why they could not start
//! ([`CacheError`]).

use std::{fmt, time::Duration};

use thiserror::Error;
use watch_ready::{LimitError, Refusal, RefusalReason};

use super::CacheName;
use crate::display::Joined;

/// The state of one cache: `Syncing` until its initial list, then `Ready`, or
/// `Degraded` (serving the last known state) while its watch fails. The state of the
/// workspace's one watch layer (`watch-ready`), under the name this crate has always
/// used.
pub use watch_ready::WatchState as CacheState;

/// The health of one cache.
#[derive(Clone, Debug)]
pub struct CacheHealth {
    /// Which cache.
    pub cache: CacheName,
    /// Its state.
    pub state: CacheState,
    /// The last watch error, until the watch recovers.
    pub last_error: Option<String>,
    /// Watch errors seen since construction started.
    pub errors: u64,
    /// Objects currently held.
    pub objects: usize,
    /// Versions, objects and bodies the API server sent past the cache's
    /// [`WatchLimits`](watch_ready::WatchLimits) and that were refused (each counted
    /// once; the cache kept its last good state).
    pub over_limit: u64,
    /// The last such refusal: the object or body and the cap it was over.
    pub last_limit_error: Option<LimitError>,
}

/// A health/readiness report over every declared cache.
#[derive(Clone, Debug)]
pub struct HealthReport {
    /// One entry per declared cache, in declaration order.
    pub caches: Vec<CacheHealth>,
}

impl HealthReport {
    /// True when every cache is [`CacheState::Ready`].
    pub fn is_ready(&self) -> bool {
        self.caches
            .iter()
            .all(|cache| cache.state == CacheState::Ready)
    }

    /// The caches that are not ready.
    pub fn not_ready(&self) -> impl Iterator<Item = &CacheHealth> {
        self.caches
            .iter()
            .filter(|cache| cache.state != CacheState::Ready)
    }
}

impl fmt::Display for HealthReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for cache in &self.caches {
            write!(
                f,
                "{}: {}, {} objects",
                cache.cache, cache.state, cache.objects
            )?;
            if let Some(err) = &cache.last_error {
                write!(f, ", last error: {err}")?;
            }
            if let Some(err) = &cache.last_limit_error {
                write!(
                    f,
                    ", {} refused over a limit, last: {err}",
                    cache.over_limit
                )?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// A cache that was not ready when construction timed out.
#[derive(Clone, Debug)]
pub struct NotReady {
    /// Which cache.
    pub cache: CacheName,
    /// Its last error, if it saw one.
    pub last_error: Option<String>,
}

impl fmt::Display for NotReady {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.cache)?;
        match &self.last_error {
            Some(err) => write!(f, " (last error: {err})"),
            None => f.write_str(" (no response yet)"),
        }
    }
}

/// Why the declared caches could not be proven synced.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CacheError {
    /// The API server refused access (403).
    #[error("cache {cache}: forbidden to list/watch {} (403): {message}", cache.resource())]
    Forbidden {
        /// Which cache.
        cache: CacheName,
        /// The API server's message.
        message: String,
    },
    /// The API server does not know the resource (404): wrong group/version, or the CRD is not installed.
    #[error("cache {cache}: the API server does not serve {} (404, is the CRD installed?): {message}", cache.resource())]
    UnknownResource {
        /// Which cache.
        cache: CacheName,
        /// The API server's message.
        message: String,
    },
    /// The credentials were rejected (401).
    #[error("cache {cache}: unauthorized (401), the credentials were rejected: {message}")]
    Unauthorized {
        /// Which cache.
        cache: CacheName,
        /// The API server's message.
        message: String,
    },
    /// Some caches did not complete their initial list in time.
    #[error("caches not synced within {timeout:?}: {}", Joined(not_ready))]
    Timeout {
        /// The configured timeout.
        timeout: Duration,
        /// Every cache not synced, with its last error.
        not_ready: Vec<NotReady>,
    },
    /// A namespace was given for a cluster-scoped kind.
    #[error("cache {cache}: {} is cluster-scoped, a namespace cannot be selected", cache.kind)]
    NamespaceOnClusterScoped {
        /// Which cache.
        cache: CacheName,
    },
    /// A cache's task ended before its initial list completed.
    #[error("cache {cache} stopped before its initial list completed")]
    Stopped {
        /// Which cache.
        cache: CacheName,
    },
}

impl CacheError {
    /// Why, as a short fixed label (`unauthorized`, `forbidden`, `unknown_resource`,
    /// `timeout`, `namespace_on_cluster_scoped`, `stopped`): for metrics, never
    /// carrying the API server's message.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Unauthorized { .. } => "unauthorized",
            Self::Forbidden { .. } => "forbidden",
            Self::UnknownResource { .. } => "unknown_resource",
            Self::Timeout { .. } => "timeout",
            Self::NamespaceOnClusterScoped { .. } => "namespace_on_cluster_scoped",
            Self::Stopped { .. } => "stopped",
        }
    }

    /// The cache the error is about (for [`CacheError::Timeout`], the first not ready).
    pub fn cache(&self) -> Option<&CacheName> {
        match self {
            Self::Forbidden { cache, .. }
            | Self::UnknownResource { cache, .. }
            | Self::Unauthorized { cache, .. }
            | Self::NamespaceOnClusterScoped { cache }
            | Self::Stopped { cache } => Some(cache),
            Self::Timeout { not_ready, .. } => not_ready.first().map(|item| &item.cache),
        }
    }
}

impl CacheError {
    /// The error for a refusal (401, 403 or 404; classified by `watch-ready`) of `cache`.
    pub(crate) fn refused(cache: CacheName, refusal: Refusal) -> Self {
        let message = refusal.message;
        match refusal.reason {
            RefusalReason::Unauthorized => Self::Unauthorized { cache, message },
            RefusalReason::Forbidden => Self::Forbidden { cache, message },
            // `RefusalReason` is non-exhaustive; 404 is the only other refusal.
            _ => Self::UnknownResource { cache, message },
        }
    }
}
