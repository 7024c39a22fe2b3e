//! How a figure shows in a table cell: times, rates, ratios, "not measured".

use super::results::{Results, Unpaired};
use crate::stats::Estimate;

/// Human time: ns, us, ms.
pub fn human(ns: f64) -> String {
    if ns >= 1_000_000_000.0 {
        format!("{:.3} s", ns / 1_000_000_000.0)
    } else if ns >= 1_000_000.0 {
        format!("{:.2} ms", ns / 1_000_000.0)
    } else if ns >= 10_000.0 {
        format!("{:.1} us", ns / 1_000.0)
    } else if ns >= 1_000.0 {
        format!("{:.2} us", ns / 1_000.0)
    } else {
        format!("{ns:.0} ns")
    }
}

pub(super) fn with_interval(e: Estimate) -> String {
    format!(
        "{} [{} – {}]",
        human(e.median),
        human(e.lower),
        human(e.upper)
    )
}

pub(super) fn rate(e: Estimate) -> String {
    let r = e.per_second();
    format!("{:.0} [{:.0} – {:.0}]", r.median, r.lower, r.upper)
}

pub(super) fn show_ratio(e: Estimate) -> String {
    // Small shares (the identity's part of a handshake) need more digits.
    let digits = if e.median.abs() < 0.1 { 5 } else { 3 };
    format!(
        "{:.digits$}x [{:.digits$} – {:.digits$}]",
        e.median, e.lower, e.upper
    )
}

pub(super) const NOT_MEASURED: &str = "not measured";

pub(super) fn cell(e: Option<Estimate>, show: fn(Estimate) -> String) -> String {
    e.map(show).unwrap_or_else(|| NOT_MEASURED.to_owned())
}

/// A figure of Go's: "not measured" whenever Go did not run in this run.
pub(super) fn go_cell(results: &Results, id: &str, show: fn(Estimate) -> String) -> String {
    go_only(results, results.get(id), show)
}

/// A cell that only a run with Go can fill.
pub(super) fn go_only(
    results: &Results,
    e: Option<Estimate>,
    show: fn(Estimate) -> String,
) -> String {
    if results.go.is_ok() {
        cell(e, show)
    } else {
        NOT_MEASURED.to_owned()
    }
}

/// A paired ratio's cell: the ratio, "unpaired" when the figures were not measured
/// in the same rounds, empty when one is missing (or Go did not run, for `go`).
pub(super) fn paired_cell(results: &Results, a: &str, b: &str, go: bool) -> String {
    if go && results.go.is_err() {
        return String::new();
    }
    match results.paired(a, b) {
        Ok(Some(e)) => show_ratio(e),
        Ok(None) => NOT_MEASURED.to_owned(),
        Err(Unpaired) => "unpaired".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_units() {
        assert_eq!(human(150.0), "150 ns");
        assert_eq!(human(1_500.0), "1.50 us");
        assert_eq!(human(40_000.0), "40.0 us");
        assert_eq!(human(2_500_000.0), "2.50 ms");
        assert_eq!(human(1_018_440_000.0), "1.018 s");
    }
}
