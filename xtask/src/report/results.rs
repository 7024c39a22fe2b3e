//! A run's figures by id, the ratio of two of them taken round by round, and the
//! outcome of one target (what the targets and the counted targets produce).

use std::collections::BTreeMap;

use super::{SPIFFE_CASE, UNPAIRED};
use crate::stats::{Bound, Estimate, Verdict, judge, ratio};

/// The API servers the reconcile rows read from: the label the report shows, and
/// the suffix of the rows' groups (`reconcile<suffix>/<case>`, `go/reconcile<suffix>/...`).
pub(super) const RECONCILE_SERVERS: [(&str, &str); 2] =
    [("kube-testbed", ""), ("real kube-apiserver", "-real")];

/// Everything measured in one run.
#[derive(Debug)]
pub struct Results {
    /// Every estimate, ours and Go's, by id.
    pub estimates: BTreeMap<String, Estimate>,
    /// Raw samples of the sampled benchmarks (for paired ratios), by id.
    pub samples: BTreeMap<String, Vec<f64>>,
    /// Counts per event (unit `count`), by id: e.g. the key parses each first
    /// handshake after a rotation paid (`identity-rotation-parses/<case>`).
    pub counts: BTreeMap<String, Vec<f64>>,
    /// The interleaved measurement each sampled id came from (its `paired` group):
    /// sample `i` of every id of one group was taken in the same round `i`.
    pub pairs: BTreeMap<String, String>,
    /// Whether the Go program ran in this run; why not, if it did not.
    pub go: Result<String, String>,
    /// The Go modules the program was built with and their versions (`go version
    /// -m`), for the tables that name one (go-spiffe, client-go).
    pub go_modules: BTreeMap<String, String>,
}

impl Default for Results {
    fn default() -> Self {
        Self {
            estimates: BTreeMap::new(),
            samples: BTreeMap::new(),
            counts: BTreeMap::new(),
            pairs: BTreeMap::new(),
            go: Err("not run".to_owned()),
            go_modules: BTreeMap::new(),
        }
    }
}

impl Results {
    pub(crate) fn get(&self, id: &str) -> Option<Estimate> {
        self.estimates.get(id).copied()
    }

    /// `a / b` of two figures measured apart (no pairing): `None` unless both were.
    pub(super) fn ratio(&self, a: &str, b: &str) -> Option<Estimate> {
        self.get(a).zip(self.get(b)).map(|(a, b)| ratio(a, b))
    }

    /// The counts whose id starts with `prefix`, by the rest of the id.
    pub(super) fn counted<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a [f64])> + 'a {
        self.counts
            .iter()
            .filter_map(move |(id, counts)| Some((id.strip_prefix(prefix)?, counts.as_slice())))
    }

    /// Cases (`<key>-<format>`) with a figure under `group/`, in a stable order; the
    /// SPIFFE-mode case (`spiffe-p256`) has its own table.
    pub(crate) fn cases(&self, group: &str) -> Vec<String> {
        let prefix = format!("{group}/");
        let mut cases: Vec<String> = self
            .estimates
            .keys()
            .filter_map(|id| id.strip_prefix(&prefix).map(str::to_owned))
            .filter(|case| case != SPIFFE_CASE)
            .collect();
        cases.sort_by_key(|case| key_order(case));
        cases
    }

    /// The ratio of the per-round figures of two interleaved sampled benchmarks
    /// (`a[i] / b[i]`), whose drift cancels round by round: `None` unless both were
    /// measured in the same interleaved rounds (one `paired` group, as many samples).
    pub fn paired_ratio(&self, a: &str, b: &str) -> Option<Estimate> {
        self.paired(a, b).ok().flatten()
    }

    /// [`Results::paired`] of our figure and Go's: not measured when Go did not run.
    pub(super) fn versus_go(&self, a: &str, b: &str) -> Result<Option<Estimate>, Unpaired> {
        if self.go.is_ok() {
            self.paired(a, b)
        } else {
            Ok(None)
        }
    }

    /// [`Results::paired_ratio`], telling a figure not measured (`Ok(None)`) from two
    /// figures that were measured but not in the same rounds (`Err(Unpaired)`): a
    /// ratio between them would compare different windows of a shared machine, and
    /// is refused.
    pub fn paired(&self, a: &str, b: &str) -> Result<Option<Estimate>, Unpaired> {
        let (Some(x), Some(y)) = (self.samples.get(a), self.samples.get(b)) else {
            return if self.estimates.contains_key(a) && self.estimates.contains_key(b) {
                // Both measured, one of them not by rounds (criterion): unpaired.
                Err(Unpaired)
            } else {
                Ok(None)
            };
        };
        match (self.pairs.get(a), self.pairs.get(b)) {
            (Some(g), Some(h)) if g == h && x.len() == y.len() => {}
            _ => return Err(Unpaired),
        }
        let ratios: Vec<f64> = x.iter().zip(y).map(|(x, y)| x / y).collect();
        Ok(Estimate::from_samples(&ratios))
    }
}

/// Two figures measured in different rounds (or one not by rounds): no ratio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unpaired;

pub(super) fn key_order(case: &str) -> (usize, String) {
    const ORDER: [&str; 6] = ["rsa2048", "rsa3072", "rsa4096", "p256", "p384", "ed25519"];
    let key = case.split(['-', '/']).next().unwrap_or(case);
    (
        ORDER.iter().position(|k| *k == key).unwrap_or(ORDER.len()),
        case.to_owned(),
    )
}

/// One target's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetRow {
    pub target: String,
    /// The ratio with its interval, or `None` when a figure was not measured (or the
    /// two figures were not measured in the same rounds).
    pub measured: Option<Estimate>,
    pub verdict: Option<Verdict>,
    /// How the figure is shown when it is not a ratio (a count), or why there is
    /// none ("unpaired").
    pub shown: Option<String>,
}

impl TargetRow {
    /// A timed target: the ratio judged on its whole interval against `threshold`;
    /// no verdict when a figure was not measured, "unpaired" (and no verdict) when
    /// the two were measured in different rounds.
    pub(super) fn judged(
        target: String,
        measured: Result<Option<Estimate>, Unpaired>,
        bound: Bound,
        threshold: f64,
    ) -> Self {
        let (measured, shown) = match measured {
            Ok(measured) => (measured, None),
            Err(Unpaired) => (None, Some(UNPAIRED.to_owned())),
        };
        Self {
            target,
            measured,
            verdict: measured.map(|m| judge(m, bound, threshold)),
            shown,
        }
    }

    /// A counted target: met when no event went wrong (`wrong` of them did).
    pub(super) fn counted(target: String, wrong: usize, shown: String) -> Self {
        Self {
            target,
            measured: None,
            verdict: Some(if wrong == 0 {
                Verdict::Met
            } else {
                Verdict::NotMet
            }),
            shown: Some(shown),
        }
    }
}
