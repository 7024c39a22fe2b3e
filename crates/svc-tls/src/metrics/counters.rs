//! The counters of one source, under the one recorder of both halves: one per
//! `result` value of a fixed list (created when the recorder is built), one per failed
//! `result` of the readiness probe's reads, and one of suppressed warnings, so that a
//! handshake only increments an atomic.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use cluster_id::ClusterId;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::{SourceLabels, install::LabelSet};
use crate::material::{MaterialError, MaterialErrorKind};

/// How many recorders hold each labelled source's series in one half's families:
/// the last one dropped removes them (see [`SourceCounters`]'s `Drop`).
pub(crate) type Holders = Arc<Mutex<HashMap<SourceLabels, usize>>>;

/// The families one source's counters live in, kept to remove its label sets.
#[derive(Clone)]
pub(crate) struct CounterFamilies {
    pub(crate) by_result: Family<LabelSet, Counter>,
    pub(crate) probe_failures: Family<LabelSet, Counter>,
    pub(crate) suppressed: Family<LabelSet, Counter>,
    pub(crate) holders: Holders,
}

/// The counters of one labelled source. `results[0]` is `ok`, the last is `other`.
///
/// Its label sets live while a recorder of the source does: the last one dropped
/// (its resolver or verifier went, with the registry entry it was built over)
/// removes them from the families, so a cluster the process let go of leaves no
/// counter series behind. A recorder built again later starts them at zero.
pub(crate) struct SourceCounters {
    pub(crate) labels: SourceLabels,
    by_result: Box<[Counter]>,
    /// The probe's failed reads: `results[1..]` (a probe installs nothing, so no `ok`).
    probe_failures: Box<[Counter]>,
    suppressed: Counter,
    results: &'static [&'static str],
    families: CounterFamilies,
    /// Keeps the cluster's [`ClusterId::metric_label`] its own while these series
    /// carry it.
    _cluster: Option<ClusterId>,
}

impl Drop for SourceCounters {
    fn drop(&mut self) {
        let mut holders = self
            .families
            .holders
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let left = holders.get_mut(&self.labels).map_or(0, |count| {
            *count = count.saturating_sub(1);
            *count
        });
        if left > 0 {
            return;
        }
        holders.remove(&self.labels);
        for (i, result) in self.results.iter().enumerate() {
            let set = self.labels.with("result", result);
            self.families.by_result.remove(&set);
            if i > 0 {
                self.families.probe_failures.remove(&set);
            }
        }
        self.families.suppressed.remove(&self.labels.set());
    }
}

impl SourceCounters {
    /// Creates the label sets of `labels` in both families. Construction path.
    pub(crate) fn new(
        families: &CounterFamilies,
        results: &'static [&'static str],
        labels: SourceLabels,
        cluster: Option<&ClusterId>,
    ) -> Self {
        // Held across the creation, so that a last recorder dropped now does not
        // remove the sets this one just took.
        let mut holders = families
            .holders
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *holders.entry(labels.clone()).or_insert(0) += 1;
        let (by_result, probe_failures, suppressed) = (
            &families.by_result,
            &families.probe_failures,
            &families.suppressed,
        );
        Self {
            probe_failures: results
                .iter()
                .skip(1)
                .map(|result| {
                    probe_failures
                        .get_or_create(&labels.with("result", result))
                        .clone()
                })
                .collect(),
            by_result: results
                .iter()
                .map(|result| {
                    by_result
                        .get_or_create(&labels.with("result", result))
                        .clone()
                })
                .collect(),
            suppressed: suppressed.get_or_create(&labels.set()).clone(),
            labels,
            results,
            families: families.clone(),
            _cluster: cluster.cloned(),
        }
    }

    /// One more `ok`.
    pub(crate) fn ok(&self) {
        if let Some(ok) = self.by_result.first() {
            ok.inc();
        }
    }

    /// One more of the result at `index` in the list (an index past it counts as the
    /// last, `other`). The recorders pass constants from [`index_of`], so a failed
    /// handshake pays no string comparison.
    pub(crate) fn failed_at(&self, index: usize) {
        let last = self.by_result.len().saturating_sub(1);
        if let Some(counter) = self.by_result.get(index.min(last)) {
            counter.inc();
        }
    }

    /// One more failed probe read of the result at `index` in the list (as
    /// [`SourceCounters::failed_at`]; `ok`, at 0, is not a failure and counts as
    /// `other`).
    pub(crate) fn probe_failed_at(&self, index: usize) {
        let last = self.probe_failures.len().saturating_sub(1);
        let at = index.checked_sub(1).unwrap_or(last).min(last);
        if let Some(counter) = self.probe_failures.get(at) {
            counter.inc();
        }
    }

    /// `n` more suppressed warnings.
    pub(crate) fn suppressed(&self, n: u64) {
        self.suppressed.inc_by(n);
    }
}

/// The position of `name` in `results`, at compile time: a name missing from the list
/// fails the build rather than counting as `other`.
pub(crate) const fn index_of(results: &[&str], name: &str) -> usize {
    let mut i = 0;
    while i < results.len() {
        if same_bytes(results[i].as_bytes(), name.as_bytes()) {
            return i;
        }
        i += 1;
    }
    panic!("a result name missing from its list")
}

const fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Where a list holds the three results of a material error: `expired`,
/// `not_yet_valid`, and `malformed` for every other problem with the bytes.
pub(crate) struct MaterialResults {
    expired: usize,
    not_yet_valid: usize,
    malformed: usize,
}

impl MaterialResults {
    /// The positions in `results`, at compile time.
    pub(crate) const fn of(results: &[&str]) -> Self {
        Self {
            expired: index_of(results, "expired"),
            not_yet_valid: index_of(results, "not_yet_valid"),
            malformed: index_of(results, "malformed"),
        }
    }

    /// The position of `error`'s result.
    pub(crate) fn index(&self, error: &MaterialError) -> usize {
        match error.kind() {
            MaterialErrorKind::CertificateExpired { .. } => self.expired,
            MaterialErrorKind::CertificateNotYetValid { .. } => self.not_yet_valid,
            _ => self.malformed,
        }
    }
}
