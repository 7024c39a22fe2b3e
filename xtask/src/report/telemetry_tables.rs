//! What per-peer metrics and OpenTelemetry tracing cost (`benches/benches/telemetry.rs`,
//! issue 52): the table and its targets, each a paired ratio judged against a noise
//! band.

use std::fmt::Write as _;

use super::format::{cell, paired_cell, with_interval};
use super::results::{Results, TargetRow};
use crate::stats::Bound;

/// The band a cost "within noise" must stay in: the paired ratio's whole 95%
/// interval at most 1.05 (the bar of the identity metrics rows).
pub(super) const NOISE_BAR: f64 = 1.05;

/// The rows: what is compared, the id without it, the id with it.
const ROWS: [(&str, &str, &str); 4] = [
    (
        "GET on a kept-alive connection: per-peer metrics recorder (`svc_tls_peer_*`) against none",
        "telemetry/get/plain",
        "telemetry/get/metrics",
    ),
    (
        "GET on a kept-alive connection: `otel` compiled in, a subscriber at INFO and an \
         application span, no OpenTelemetry layer (off), against no subscriber",
        "telemetry/get/plain",
        "telemetry/get/otel-off",
    ),
    (
        "GET on a kept-alive connection: the OpenTelemetry layer, two spans per request \
         exported to a dropping exporter and `traceparent` sent (paid), against the layer off",
        "telemetry/get/otel-off",
        "telemetry/get/otel-paid",
    ),
    (
        "full handshake (svc-tls's client configuration, watched identity and CA): the \
         OpenTelemetry layer installed, against the same subscriber without it",
        "telemetry/handshake/off",
        "telemetry/handshake/otel",
    ),
];

/// The targets' names, one per row.
const TARGETS: [&str; 4] = [
    "GET, kept-alive connection: per-peer metrics recorder <= 1.05x without (metrics cost \
     within noise where paid)",
    "GET, kept-alive connection: `otel` on, no OpenTelemetry layer (off) <= 1.05x no \
     subscriber",
    "GET, kept-alive connection: OpenTelemetry layer, spans exported (paid) <= 1.05x the \
     layer off (tracing cost within noise where paid)",
    "full handshake: OpenTelemetry layer installed <= 1.05x without (off costs nothing \
     measurable on the handshake path)",
];

/// The table: each arm's time per operation and the paired ratio.
pub(super) fn render_telemetry(results: &Results, out: &mut String) {
    let _ = writeln!(
        out,
        "\n### Metrics and tracing cost per request and per handshake (P-256 client)\n"
    );
    let _ = writeln!(
        out,
        "Every arm in one process, in interleaved rounds (paired): a `PeerClient` GET on \
         its own kept-alive HTTP/1.1 connection to a local HTTPS server that verifies \
         the client certificate, each request in an application span, the client on a \
         current-thread runtime under the arm's subscriber; and the handshake rows' full \
         handshake with no span around it. The `otel` feature is compiled into every \
         arm (one process builds svc-tls once), so \"off\" is the feature on with no \
         OpenTelemetry layer. Judged like the metrics rows: met when the paired ratio's \
         whole 95% interval is at most {NOISE_BAR} (a {:.0}% band for noise), not met \
         when it lies wholly above, inconclusive otherwise.\n",
        (NOISE_BAR - 1.0) * 100.0
    );
    let _ = writeln!(out, "| what | without | with | with / without (paired) |");
    let _ = writeln!(out, "|---|---:|---:|---:|");
    for (what, without, with) in ROWS {
        let _ = writeln!(
            out,
            "| {what} | {} | {} | {} |",
            cell(results.get(without), with_interval),
            cell(results.get(with), with_interval),
            paired_cell(results, with, without, false),
        );
    }
}

/// The targets: each row's ratio (with / without) at most [`NOISE_BAR`].
pub(super) fn telemetry_targets(results: &Results) -> Vec<TargetRow> {
    ROWS.iter()
        .zip(TARGETS)
        .map(|((_, without, with), target)| {
            TargetRow::judged(
                target.to_owned(),
                results.paired(with, without),
                Bound::AtMost,
                NOISE_BAR,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::{paired, sample_results, verdict_of};
    use crate::report::{UNPAIRED, render, targets};
    use crate::stats::Verdict;

    #[test]
    fn within_the_band_is_met_above_it_not() {
        let rows = targets(&sample_results(true));
        for target in TARGETS {
            assert_eq!(verdict_of(&rows, target), Some(Verdict::Met), "{target}");
        }
        let mut r = sample_results(true);
        // The paid arm 1.2x the off arm in every round: not met; the others stay met.
        paired(
            &mut r,
            "telemetry/get",
            &[
                ("telemetry/get/plain", 50_000.0),
                ("telemetry/get/metrics", 50_500.0),
                ("telemetry/get/otel-off", 50_000.0),
                ("telemetry/get/otel-paid", 60_000.0),
            ],
        );
        let rows = targets(&r);
        assert_eq!(verdict_of(&rows, TARGETS[2]), Some(Verdict::NotMet));
        assert_eq!(verdict_of(&rows, TARGETS[0]), Some(Verdict::Met));
        // Straddling the band: inconclusive.
        let mut r = sample_results(true);
        let drift = |i: u32, ns: f64| ns * (1.0 + f64::from(i % 5) * 0.01);
        r.samples.insert(
            "telemetry/get/metrics".to_owned(),
            (0..20)
                .map(|i| drift(i, if i % 2 == 0 { 49_000.0 } else { 54_000.0 }))
                .collect(),
        );
        let rows = targets(&r);
        assert_eq!(verdict_of(&rows, TARGETS[0]), Some(Verdict::Inconclusive));
    }

    #[test]
    fn the_table_shows_every_row_and_the_rule() {
        let table = render(&sample_results(true));
        assert!(
            table.contains("### Metrics and tracing cost per request and per handshake"),
            "{table}"
        );
        for (what, ..) in ROWS {
            let line = table
                .lines()
                .find(|l| l.starts_with(&format!("| {what} | ")))
                .unwrap_or_else(|| panic!("no row {what} in\n{table}"));
            assert!(line.contains("x ["), "no paired ratio in {line}");
        }
        assert!(
            table.contains("whole 95% interval is at most 1.05"),
            "{table}"
        );
        // Not measured in this run: no figure, no verdict.
        let mut r = sample_results(true);
        for id in ["telemetry/handshake/off", "telemetry/handshake/otel"] {
            r.samples.remove(id);
            r.estimates.remove(id);
        }
        assert_eq!(verdict_of(&targets(&r), TARGETS[3]), None);
        // Measured apart: unpaired.
        let mut r = sample_results(true);
        r.pairs
            .insert("telemetry/get/metrics".to_owned(), "elsewhere".to_owned());
        let row = targets(&r)
            .into_iter()
            .find(|row| row.target == TARGETS[0])
            .unwrap();
        assert_eq!((row.verdict, row.shown.as_deref()), (None, Some(UNPAIRED)));
    }
}
