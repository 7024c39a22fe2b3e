//! Reads no declared cache covers: refused ([`ClientError::NotCached`]), and
//! recorded so that a service's test can list every read it makes that its
//! declarations miss, before it runs anywhere else (docs/decisions.md, "Undeclared
//! reads stay errors").

use std::{
    collections::BTreeMap,
    fmt,
    sync::{Mutex, PoisonError},
};

#[cfg(doc)]
use super::ClientError;

/// How many distinct undeclared reads a client keeps (each later one is still
/// refused and logged, not kept): names can come from data, memory must not.
pub const MAX_UNDECLARED_READS: usize = 256;

/// A read that no declared cache covered ([`ClientError::NotCached`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UndeclaredRead {
    /// `plural.version.group` of the resource.
    pub resource: String,
    /// The namespace asked for (None: every namespace, or a cluster-scoped kind).
    pub namespace: Option<String>,
    /// The name asked for (None for a list).
    pub name: Option<String>,
}

impl fmt::Display for UndeclaredRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = if self.name.is_some() { "get" } else { "list" };
        write!(
            f,
            "{verb} {} {}",
            self.resource,
            Target {
                namespace: self.namespace.as_deref(),
                name: self.name.as_deref()
            }
        )
    }
}

/// Where a read looked: `ns/name`, `name`, `in namespace ns`, `across all namespaces`.
pub(super) struct Target<'a> {
    pub(super) namespace: Option<&'a str>,
    pub(super) name: Option<&'a str>,
}

impl fmt::Display for Target<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.namespace, self.name) {
            (Some(ns), Some(name)) => write!(f, "{ns}/{name}"),
            (None, Some(name)) => write!(f, "{name}"),
            (Some(ns), None) => write!(f, "in namespace {ns}"),
            (None, None) => f.write_str("across all namespaces"),
        }
    }
}

/// The undeclared reads of one client, counted.
#[derive(Default)]
pub(super) struct UndeclaredReads {
    seen: Mutex<BTreeMap<UndeclaredRead, u64>>,
}

impl UndeclaredReads {
    /// Counts `read`; the first time it is seen, logs it at WARN (only a refused
    /// read takes the lock: a covered read never does).
    pub(super) fn record(&self, read: UndeclaredRead) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = seen.get_mut(&read) {
            *count += 1;
            return;
        }
        tracing::warn!(
            read = %read,
            "read refused: no declared cache covers it (declare one at construction; \
             a test lists these with CachedClient::undeclared_reads)"
        );
        if seen.len() < MAX_UNDECLARED_READS {
            seen.insert(read, 1);
        }
    }

    pub(super) fn snapshot(&self) -> Vec<(UndeclaredRead, u64)> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.iter().map(|(read, n)| (read.clone(), *n)).collect()
    }
}
