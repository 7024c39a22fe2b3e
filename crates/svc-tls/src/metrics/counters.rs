//! The counters of one source, shared by the identity and trust recorders: one per
//! `result` value of a fixed list (created when the recorder is built) and one of
//! suppressed warnings, so that a handshake only increments an atomic.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::{LabelSet, SourceLabels};

/// The counters of one labelled source. `RESULTS[0]` is `ok`, the last is `other`.
pub(crate) struct SourceCounters<const N: usize> {
    pub(crate) labels: SourceLabels,
    results: &'static [&'static str; N],
    by_result: [Counter; N],
    suppressed: Counter,
}

impl<const N: usize> SourceCounters<N> {
    /// Creates the label sets of `labels` in both families. Construction path.
    pub(crate) fn new(
        by_result: &Family<LabelSet, Counter>,
        suppressed: &Family<LabelSet, Counter>,
        results: &'static [&'static str; N],
        labels: SourceLabels,
    ) -> Self {
        Self {
            by_result: results.map(|result| {
                by_result
                    .get_or_create(&labels.with("result", result))
                    .clone()
            }),
            suppressed: suppressed.get_or_create(&labels.set()).clone(),
            results,
            labels,
        }
    }

    /// One more `ok`.
    pub(crate) fn ok(&self) {
        self.by_result[0].inc();
    }

    /// One more `result` (a value outside the list counts as the last, `other`).
    pub(crate) fn failed(&self, result: &str) {
        let index = self
            .results
            .iter()
            .position(|r| *r == result)
            .unwrap_or(N - 1);
        self.by_result[index].inc();
    }

    /// `n` more suppressed warnings.
    pub(crate) fn suppressed(&self, n: u64) {
        self.suppressed.inc_by(n);
    }
}
