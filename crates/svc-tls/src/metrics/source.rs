//! The one recorder of both halves' sources, [`SourceRecorder`]: the same three
//! counter families for an identity and for a trust (results by reason, the readiness
//! probe's failed reads by reason, suppressed warnings), named and classified by the
//! half ([`identity`](super::identity),
//! [`trust`](super::trust)).

use std::fmt;
use std::marker::PhantomData;
use std::time::SystemTime;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::counters::{CounterFamilies, SourceCounters};
use super::{SourceLabels, install::LabelSet};
use crate::last_good::{OutsideValidity, ReloadOrigin, ReloadRecorder, StaleWarning};

mod sealed {
    pub trait Sealed {}
}

/// A half whose sources are counted: its origin, the value it serves, its families'
/// names and how a failed reload (the origin's [`ReloadOrigin::Error`]) maps to a
/// `result`. Implemented for [`IdentityOrigin`](crate::origin::IdentityOrigin) and
/// [`TrustOrigin`](crate::origin::TrustOrigin) only.
pub trait CountedSource: sealed::Sealed + ReloadOrigin {
    /// The value its sources serve.
    type Value: ?Sized;
    /// The results family's name (without `_total`) and help.
    const RESULTS_FAMILY: (&'static str, &'static str);
    /// The suppressed-warnings family's name (without `_total`) and help.
    const SUPPRESSED_FAMILY: (&'static str, &'static str);
    /// The readiness probe's failed reads' family's name (without `_total`) and help:
    /// its `result` values are [`CountedSource::RESULTS`] but `ok`.
    const PROBE_FAMILY: (&'static str, &'static str);
    /// Every value of the `result` label: `ok` first, `other` last.
    const RESULTS: &'static [&'static str];
    /// The position in [`CountedSource::RESULTS`] of a failed reload's result.
    fn failure_index(error: &Self::Error) -> usize;

    /// The `result` label of a failed reload (a fixed set, never the error's text).
    fn failure_result(error: &Self::Error) -> &'static str {
        Self::RESULTS
            .get(Self::failure_index(error))
            .or(Self::RESULTS.last())
            .copied()
            .unwrap_or("other")
    }
}

impl sealed::Sealed for crate::origin::IdentityOrigin {}
impl sealed::Sealed for crate::origin::TrustOrigin {}

/// A half's three counter families, registered once per Prometheus registry.
pub(crate) struct SourceFamilies(CounterFamilies);

impl SourceFamilies {
    pub(crate) fn register<K: CountedSource>(registry: &mut Registry) -> Self {
        let families = CounterFamilies {
            by_result: Family::<LabelSet, Counter>::default(),
            probe_failures: Family::default(),
            suppressed: Family::default(),
            holders: Default::default(),
        };
        let (name, help) = K::RESULTS_FAMILY;
        registry.register(name, help, families.by_result.clone());
        let (name, help) = K::PROBE_FAMILY;
        registry.register(name, help, families.probe_failures.clone());
        let (name, help) = K::SUPPRESSED_FAMILY;
        registry.register(name, help, families.suppressed.clone());
        Self(families)
    }
}

/// The recorder of one source of a half `K` (an identity source is a
/// `SourceRecorder<IdentityOrigin>`): the counters of its label sets, created when it
/// is built, so that a handshake only increments an atomic.
pub struct SourceRecorder<K: CountedSource> {
    counters: SourceCounters,
    half: PhantomData<fn() -> K>,
}

impl<K: CountedSource> fmt::Debug for SourceRecorder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceRecorder")
            .field("family", &K::RESULTS_FAMILY.0)
            .field("labels", &self.counters.labels)
            .finish_non_exhaustive()
    }
}

impl<K: CountedSource> SourceRecorder<K> {
    /// The recorder of the source `labels` names; `cluster` is the cluster its
    /// Secret is read from (kept, so that its label stays its own while the series
    /// exist).
    pub(crate) fn new(
        families: &SourceFamilies,
        labels: SourceLabels,
        cluster: Option<&cluster_id::ClusterId>,
    ) -> Self {
        Self {
            counters: SourceCounters::new(&families.0, K::RESULTS, labels, cluster),
            half: PhantomData,
        }
    }

    /// The source's labels.
    pub fn labels(&self) -> &SourceLabels {
        &self.counters.labels
    }
}

impl<K: CountedSource> ReloadRecorder<K, K::Value> for SourceRecorder<K> {
    fn loaded(&self, _origin: &K, _value: &K::Value, _at: SystemTime) {
        self.counters.ok();
    }

    fn reload_failed(&self, _origin: &K, error: &K::Error, _: u64) {
        self.counters.failed_at(K::failure_index(error));
    }

    fn probe_read_failed(&self, _origin: &K, error: &K::Error) {
        self.counters.probe_failed_at(K::failure_index(error));
    }

    fn stale_warning(&self, warning: &StaleWarning<'_, K, K::Value>) {
        self.counters.suppressed(warning.suppressed);
    }

    fn outside_validity(&self, event: &OutsideValidity<'_, K, K::Value>) {
        self.counters.suppressed(event.suppressed);
    }
}
