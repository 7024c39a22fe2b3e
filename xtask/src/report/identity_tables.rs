//! The sections on the identity path: the first handshake racing the loader, the
//! metrics recorder's cost, SPIFFE mode against Secret mode.

use std::fmt::Write as _;

use super::format::{NOT_MEASURED, cell, paired_cell, rate, show_ratio, with_interval};
use super::results::Results;
use super::{SECRET_CASE, SPIFFE_CASE};
use crate::stats::Estimate;

/// The racing first handshake beside the quiet one, and the loads each version cost.
pub(super) fn render_racing(results: &Results, out: &mut String) {
    let racing: Vec<String> = results.cases("identity-racing");
    if racing.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n### The first handshake racing the loader\n");
    let _ = writeln!(
        out,
        "Quiet: the first handshake after a rotation, once the watch's loader has loaded \
         the new version. Racing: {RACERS_TEXT} threads making handshakes (one every 100 us \
         or so each) from the moment the watch cache holds the new version, without waiting \
         for the loader, until it is presented: the slowest handshake per version that \
         started while the loader was busy (or each thread's first). Full loads: \
         certificate-and-key parses each new version cost in all (`IdentityCache::full_loads`: \
         the loader's and any handshake's); one is single flight.\n"
    );
    let _ = writeln!(
        out,
        "| case | quiet first handshake | racing first handshake | racing / quiet | full loads per new version (median, most) | versions whose handshakes started while the loader was busy |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for case in &racing {
        let quiet = format!("identity-rotation/{case}");
        let race = format!("identity-racing/{case}");
        let loads = results
            .counts
            .get(&format!("identity-racing-loads/{case}"))
            .map_or_else(
                || NOT_MEASURED.to_owned(),
                |loads| {
                    let most = loads.iter().copied().fold(0.0, f64::max);
                    let median = Estimate::from_samples(loads).map_or(most, |e| e.median);
                    format!("{median:.0}, {most:.0}")
                },
            );
        let raced = results
            .counts
            .get(&format!("identity-racing-raced/{case}"))
            .map_or_else(
                || NOT_MEASURED.to_owned(),
                |raced| {
                    format!(
                        "{} of {}",
                        raced.iter().filter(|r| **r > 0.0).count(),
                        raced.len()
                    )
                },
            );
        let _ = writeln!(
            out,
            "| {case} | {} | {} | {} | {loads} | {raced} |",
            cell(results.get(&quiet), with_interval),
            cell(results.get(&race), with_interval),
            cell(results.ratio(&race, &quiet), show_ratio),
        );
    }
}

const RACERS_TEXT: &str = "four";

/// The metrics recorder's cost where it is paid.
pub(super) fn render_metrics(results: &Results, out: &mut String) {
    let _ = writeln!(out, "\n### Metrics cost where it is paid (P-256)\n");
    let _ = writeln!(
        out,
        "Two resolvers, each over a Secret of its own, alike but for svc-tls's Prometheus \
         recorder (feature `metrics`): the first handshake after a rotation (both Secrets \
         rotated, both loads awaited, the two handshakes timed in alternating order), and a \
         handshake on a broken Secret (a failed reload, counted by the recorder), in \
         interleaved batches.\n"
    );
    let _ = writeln!(
        out,
        "| path | recorder installed | no recorder | with / without (paired) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|");
    for (what, group) in [
        ("first handshake after a rotation", "rotation"),
        ("handshake on a broken Secret", "broken"),
    ] {
        let on = format!("metrics/{group}/on/{SECRET_CASE}");
        let off = format!("metrics/{group}/off/{SECRET_CASE}");
        let _ = writeln!(
            out,
            "| {what} | {} | {} | {} |",
            cell(results.get(&on), with_interval),
            cell(results.get(&off), with_interval),
            paired_cell(results, &on, &off, false),
        );
    }
}

/// The SPIFFE-mode tables: identity per handshake and handshakes per second, each
/// next to Secret mode (P-256).
pub(super) fn render_spiffe(results: &Results, out: &mut String) {
    let _ = writeln!(
        out,
        "\n### SPIFFE mode against Secret mode (P-256, one server presenting an SVID)\n"
    );
    let _ = writeln!(
        out,
        "Identity per handshake through the resolver (`ResolvesClientCert::resolve`): \
         Secret mode watches a `kubernetes.io/tls` Secret, SPIFFE mode reads the SVID \
         streamed by the Workload API emulator. The share of a handshake divides by the \
         same mode's 1-client handshake on the SVID server.\n"
    );
    let _ = writeln!(
        out,
        "| mode | identity unchanged (resolver) | first handshake after a rotation | unchanged / handshake |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|");
    for (mode, case, handshake) in [
        (
            "Secret (p256-pkcs8)",
            SECRET_CASE,
            "handshake/secret-on-svid-server/p256/1",
        ),
        (
            "SPIFFE (P-256 SVID)",
            SPIFFE_CASE,
            "handshake/spiffe/p256/1",
        ),
    ] {
        let unchanged = results.get(&format!("identity-unchanged/{case}"));
        let share = results.ratio(&format!("identity-unchanged/{case}"), handshake);
        let _ = writeln!(
            out,
            "| {mode} | {} | {} | {} |",
            cell(unchanged, with_interval),
            cell(
                results.get(&format!("identity-rotation/{case}")),
                with_interval
            ),
            cell(share, show_ratio),
        );
    }
    let versus = |group: &str| {
        results.ratio(
            &format!("{group}/{SPIFFE_CASE}"),
            &format!("{group}/{SECRET_CASE}"),
        )
    };
    let _ = writeln!(
        out,
        "| SPIFFE / Secret | {} | {} | |",
        cell(versus("identity-unchanged"), show_ratio),
        cell(versus("identity-rotation"), show_ratio),
    );

    let _ = writeln!(
        out,
        "\nHandshakes per second on the same server (interleaved): Secret mode verifies the \
         server against the agent's CA as a static root store, SPIFFE mode against the \
         streamed bundle with the server's SPIFFE ID authorized.\n"
    );
    let _ = writeln!(
        out,
        "| client key | clients | Secret mode | SPIFFE mode | SPIFFE / Secret (paired) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for clients in [1, 2] {
        let id = |mode: &str| format!("handshake/{mode}/p256/{clients}");
        let paired = results.paired_ratio(&id("secret-on-svid-server"), &id("spiffe"));
        let _ = writeln!(
            out,
            "| p256 | {clients} | {} | {} | {} |",
            cell(results.get(&id("secret-on-svid-server")), rate),
            cell(results.get(&id("spiffe")), rate),
            cell(paired, show_ratio),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::SPIFFE_CASE;
    use crate::report::fixtures::{sample_results, verdict_of};
    use crate::report::{render, targets};
    use crate::stats::Verdict;

    #[test]
    fn spiffe_mode_has_its_own_rows_and_verdicts() {
        let results = sample_results(true);
        let rows = targets(&results);
        // Paired ratio 500/505 per round: 0.990, above 0.98 on its whole interval.
        assert_eq!(
            verdict_of(&rows, "p256, 1 client(s): SPIFFE handshakes/s >= 0.98x"),
            Some(Verdict::Met)
        );
        assert_eq!(
            verdict_of(&rows, "p256 SPIFFE mode: identity cost per handshake"),
            Some(Verdict::Met)
        );
        // The SPIFFE case is no key/format case: no rotation-vs-Go target, no row in
        // the per-key table.
        assert!(
            rows.iter().all(|row| !row.target.starts_with(SPIFFE_CASE)),
            "{rows:?}"
        );
        let table = render(&results);
        assert!(!table.contains(&format!("| {SPIFFE_CASE} |")), "{table}");
        assert!(
            table.contains("### SPIFFE mode against Secret mode"),
            "{table}"
        );
        assert!(
            table.contains("| SPIFFE (P-256 SVID) | 120 ns [118 ns – 122 ns] | 900 ns"),
            "{table}"
        );
        // SPIFFE / Secret unchanged: 120 / 150.
        assert!(table.contains("| SPIFFE / Secret | 0.800x"), "{table}");
        assert!(table.contains("| SPIFFE / Secret (paired) |"), "{table}");
        // The paired ratio (500/505 every round); the other tables' ratios are 1.
        assert!(table.contains("| 0.990x ["), "{table}");
    }

    #[test]
    fn spiffe_rows_without_their_figures_are_not_measured() {
        let mut results = sample_results(true);
        for id in [
            "handshake/spiffe/p256/1".to_owned(),
            format!("identity-unchanged/{SPIFFE_CASE}"),
        ] {
            results.samples.remove(&id);
            results.estimates.remove(&id);
        }
        let rows = targets(&results);
        assert_eq!(
            verdict_of(&rows, "p256, 1 client(s): SPIFFE handshakes/s"),
            None
        );
        assert_eq!(
            verdict_of(&rows, "p256 SPIFFE mode: identity cost per handshake"),
            None
        );
        let table = render(&results);
        assert!(
            table.contains("| SPIFFE (P-256 SVID) | not measured | 900 ns"),
            "{table}"
        );
        assert!(
            table.lines().any(|l| l
                .strip_prefix("| p256 | 1 | ")
                .is_some_and(|rest| rest.ends_with("| not measured | not measured |"))),
            "{table}"
        );
        assert!(
            table.contains("| SPIFFE / Secret | not measured |"),
            "{table}"
        );
    }
}
