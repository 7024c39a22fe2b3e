//! Estimates with confidence intervals, ratios of them, and verdicts on targets.
//!
//! A figure is never judged on its median alone: every estimate carries a 95%
//! confidence interval (criterion's bootstrap interval of the median for criterion
//! benchmarks; for sampled results, ours and Go's, the distribution-free interval of
//! the median from order statistics), and a verdict is "met" only when the whole
//! interval of the ratio meets the target.

use std::fmt;

/// A median with its 95% confidence interval, in nanoseconds per operation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub median: f64,
    pub lower: f64,
    pub upper: f64,
}

impl Estimate {
    /// The median of `samples` with the order-statistic 95% interval: the ranks
    /// `n/2 ± 1.96·√n/2` of the sorted samples, which hold the true median with at
    /// least 95% probability whatever the distribution (binomial argument).
    /// `None` with fewer than 3 samples.
    pub fn from_samples(samples: &[f64]) -> Option<Self> {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        let n = sorted.len();
        if n < 3 {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        let half_width = 1.96 * (n as f64).sqrt() / 2.0;
        let half = n as f64 / 2.0;
        // 1-based ranks, clamped to the sample.
        let low_rank = ((half - half_width).floor() as usize).max(1);
        let high_rank = ((half + half_width).ceil() as usize + 1).min(n);
        Some(Self {
            median,
            lower: sorted[low_rank - 1].min(median),
            upper: sorted[high_rank - 1].max(median),
        })
    }

    /// The same figure as a rate: operations per second (the interval flips).
    pub fn per_second(self) -> Self {
        Self {
            median: 1e9 / self.median,
            lower: 1e9 / self.upper,
            upper: 1e9 / self.lower,
        }
    }
}

/// `self / other` with the conservative interval of a quotient of two independent
/// positive intervals: `[lower/other.upper, upper/other.lower]`.
pub fn ratio(a: Estimate, b: Estimate) -> Estimate {
    Estimate {
        median: a.median / b.median,
        lower: a.lower / b.upper,
        upper: a.upper / b.lower,
    }
}

/// Which side of the threshold the ratio must stay on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The ratio must be at most the threshold.
    AtMost,
    /// The ratio must be at least the threshold.
    AtLeast,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Met,
    NotMet,
    /// The interval straddles the threshold: this run cannot tell.
    Inconclusive,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Met => "met",
            Self::NotMet => "not met",
            Self::Inconclusive => "inconclusive",
        })
    }
}

/// Judges a ratio's whole interval against `threshold`.
pub fn judge(ratio: Estimate, bound: Bound, threshold: f64) -> Verdict {
    match bound {
        Bound::AtMost if ratio.upper <= threshold => Verdict::Met,
        Bound::AtMost if ratio.lower > threshold => Verdict::NotMet,
        Bound::AtLeast if ratio.lower >= threshold => Verdict::Met,
        Bound::AtLeast if ratio.upper < threshold => Verdict::NotMet,
        _ => Verdict::Inconclusive,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(median: f64, lower: f64, upper: f64) -> Estimate {
        Estimate {
            median,
            lower,
            upper,
        }
    }

    #[test]
    fn median_and_interval_of_samples() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let e = Estimate::from_samples(&samples).unwrap();
        assert_eq!(e.median, 50.5);
        // n = 100: ranks 50 ± 9.8 -> 40 and 61.
        assert_eq!(e.lower, 40.0);
        assert_eq!(e.upper, 61.0);
        // Order does not matter.
        let mut shuffled = samples.clone();
        shuffled.reverse();
        assert_eq!(Estimate::from_samples(&shuffled), Some(e));
    }

    #[test]
    fn small_samples_clamp_to_the_extremes() {
        let e = Estimate::from_samples(&[3.0, 1.0, 2.0, 10.0, 4.0]).unwrap();
        assert_eq!(e.median, 3.0);
        assert_eq!(e.lower, 1.0);
        assert_eq!(e.upper, 10.0);
        assert_eq!(Estimate::from_samples(&[1.0, 2.0]), None);
        assert_eq!(Estimate::from_samples(&[1.0, f64::NAN, 2.0]), None);
    }

    #[test]
    fn ratio_interval_is_conservative() {
        let r = ratio(est(10.0, 9.0, 11.0), est(20.0, 18.0, 22.0));
        assert_eq!(r.median, 0.5);
        assert!((r.lower - 9.0 / 22.0).abs() < 1e-12);
        assert!((r.upper - 11.0 / 18.0).abs() < 1e-12);
    }

    #[test]
    fn per_second_flips_the_interval() {
        let r = est(1_000_000.0, 500_000.0, 2_000_000.0).per_second();
        assert_eq!(r.median, 1000.0);
        assert_eq!(r.lower, 500.0);
        assert_eq!(r.upper, 2000.0);
    }

    #[test]
    fn verdicts_use_the_whole_interval() {
        assert_eq!(judge(est(0.4, 0.3, 0.5), Bound::AtMost, 0.5), Verdict::Met);
        assert_eq!(
            judge(est(0.4, 0.3, 0.6), Bound::AtMost, 0.5),
            Verdict::Inconclusive
        );
        assert_eq!(
            judge(est(0.7, 0.6, 0.8), Bound::AtMost, 0.5),
            Verdict::NotMet
        );
        assert_eq!(judge(est(2.0, 1.6, 2.4), Bound::AtLeast, 1.5), Verdict::Met);
        assert_eq!(
            judge(est(2.0, 1.4, 2.4), Bound::AtLeast, 1.5),
            Verdict::Inconclusive
        );
        assert_eq!(
            judge(est(1.2, 1.0, 1.4), Bound::AtLeast, 1.5),
            Verdict::NotMet
        );
        // A median on the right side with noise across the line is not "met".
        assert_eq!(
            judge(est(0.45, 0.18, 0.9), Bound::AtMost, 0.5),
            Verdict::Inconclusive
        );
    }
}
