//! Reads no declared cache covers: refused ([`ClientError::NotCached`]), and
//! recorded so that a service's test can list every read it makes that its
//! declarations miss, before it runs anywhere else
//! (docs/decisions/undeclared-reads-stay-errors.md).

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
    /// Lines logged for reads past [`MAX_UNDECLARED_READS`] (at most one).
    overflow_lines: std::sync::atomic::AtomicU64,
}

/// What the WARN shows of `read`: its names come from the caller's data (a
/// namespace or name a request carried), so they are escaped and cut like any
/// outside text.
fn shown(read: &UndeclaredRead) -> String {
    watch_ready::excerpt::escaped(
        &read.to_string(),
        2 * watch_ready::excerpt::SENDER_TEXT_CHARS,
    )
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
        if seen.len() < MAX_UNDECLARED_READS {
            tracing::warn!(
                read = %shown(&read),
                "read refused: no declared cache covers it (declare one at construction; \
                 a test lists these with CachedClient::undeclared_reads)"
            );
            seen.insert(read, 1);
        } else if self
            .overflow_lines
            .compare_exchange(
                0,
                1,
                std::sync::atomic::Ordering::AcqRel,
                std::sync::atomic::Ordering::Acquire,
            )
            .is_ok()
        {
            // Names can come from data: past the bound, one line, not one per name.
            tracing::warn!(
                limit = MAX_UNDECLARED_READS,
                "more than {MAX_UNDECLARED_READS} distinct undeclared reads: further ones \
                 are refused without a log line each"
            );
        }
    }

    pub(super) fn snapshot(&self) -> Vec<(UndeclaredRead, u64)> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.iter().map(|(read, n)| (read.clone(), *n)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(name: &str) -> UndeclaredRead {
        UndeclaredRead {
            resource: "secrets.v1.".into(),
            namespace: Some("ns".into()),
            name: Some(name.into()),
        }
    }

    /// A name from data is escaped in the WARN, and a flood of distinct names logs one
    /// line past the bound, not one per name (issue 50).
    #[test]
    fn names_are_escaped_and_a_flood_is_one_line() {
        let shown = shown(&read("x\n2026-12-06 INFO forged\u{202e}"));
        assert!(
            !shown.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{shown}"
        );
        let reads = UndeclaredReads::default();
        for i in 0..3 * MAX_UNDECLARED_READS {
            reads.record(read(&format!("n{i}")));
        }
        assert_eq!(reads.snapshot().len(), MAX_UNDECLARED_READS);
        assert_eq!(
            reads
                .overflow_lines
                .load(std::sync::atomic::Ordering::Acquire),
            1
        );
    }
}
