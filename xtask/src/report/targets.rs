//! The targets and their verdicts, from the figures of one run alone.

use super::anchors::anchor_targets;
use super::counted::counted_rows;
use super::go::like_for_like;
use super::results::{RECONCILE_SERVERS, Results, TargetRow, Unpaired};
use super::telemetry_tables::telemetry_targets;
use super::{
    CLIENT_CPU_BAR, CLIENT_SERVERS, SECRET_CASE, SERVER_CPU_BAR, SERVER_ROWS, SPIFFE_BAR,
    SPIFFE_CASE, server_label,
};
use crate::stats::{Bound, Estimate, Verdict};

/// Evaluates every target on the figures of this run. Every verdict comes from the
/// figures alone ([`crate::stats::judge`] on the ratio's whole interval); a ratio between the
/// languages is taken only from paired rounds.
pub fn targets(results: &Results) -> Vec<TargetRow> {
    let mut rows = Vec::new();
    let mut push = |target: String,
                    measured: Result<Option<Estimate>, Unpaired>,
                    bound: Bound,
                    threshold: f64| {
        rows.push(TargetRow::judged(target, measured, bound, threshold));
    };
    // A ratio against Go: paired, and only when Go ran.
    let versus_go = |a: &str, b: &str| results.versus_go(a, b);

    for key in ["p256", "rsa2048"] {
        let share = results.ratio(
            &format!("identity-unchanged/{key}-pkcs8"),
            &format!("handshake/static/{key}/1"),
        );
        push(
            format!("{key}: identity cost per handshake, Secret unchanged <= 1% of a handshake"),
            Ok(share),
            Bound::AtMost,
            0.01,
        );
    }
    for key in ["p256", "rsa2048"] {
        for clients in [1, 2] {
            // handshakes/s reload / static = static ns / reload ns, round by round.
            push(
                format!("{key}, {clients} client(s): reload handshakes/s >= 0.98x our static"),
                results.paired(
                    &format!("handshake/static/{key}/{clients}"),
                    &format!("handshake/reload/{key}/{clients}"),
                ),
                Bound::AtLeast,
                0.98,
            );
        }
    }
    for key in ["p256", "rsa2048"] {
        for clients in [1, 2] {
            // handshakes/s watched CA / static roots = static-roots ns / watched ns.
            push(
                format!(
                    "{key}, {clients} client(s): watched-CA handshakes/s >= 0.98x static roots \
                     (CA Secret unchanged)"
                ),
                results.paired(
                    &format!("handshake/reload/{key}/{clients}"),
                    &format!("handshake/watched-ca/{key}/{clients}"),
                ),
                Bound::AtLeast,
                0.98,
            );
        }
    }
    push(
        "p256 SPIFFE mode: identity cost per handshake, SVID unchanged <= 1% of a \
         handshake (the Secret-mode bar)"
            .to_owned(),
        Ok(results.ratio(
            &format!("identity-unchanged/{SPIFFE_CASE}"),
            "handshake/spiffe/p256/1",
        )),
        Bound::AtMost,
        0.01,
    );
    for (what, group) in [
        ("first handshake after a rotation", "rotation"),
        ("handshake on a broken Secret (a failed reload)", "broken"),
    ] {
        // Metrics on / off where the recorder is called, paired round by round.
        push(
            format!("{SECRET_CASE}: {what} with the metrics recorder <= 1.05x without"),
            results.paired(
                &format!("metrics/{group}/on/{SECRET_CASE}"),
                &format!("metrics/{group}/off/{SECRET_CASE}"),
            ),
            Bound::AtMost,
            1.05,
        );
    }
    // Identity from mounted files against from a Secret, nothing changed, paired
    // round by round (issue 51: within noise).
    push(
        format!(
            "{SECRET_CASE}: identity cost per handshake from files <= 1.05x from a Secret \
             (unchanged: within noise)"
        ),
        results.paired(
            &format!("files/unchanged/files/{SECRET_CASE}"),
            &format!("files/unchanged/secret/{SECRET_CASE}"),
        ),
        Bound::AtMost,
        1.05,
    );
    for clients in [1, 2] {
        // handshakes/s spiffe / secret = secret ns / spiffe ns, round by round.
        push(
            format!(
                "p256, {clients} client(s): SPIFFE handshakes/s >= 0.98x Secret mode, same \
                 server (no target in the issue: the reload-vs-static bar)"
            ),
            results.paired(
                &format!("handshake/secret-on-svid-server/p256/{clients}"),
                &format!("handshake/spiffe/p256/{clients}"),
            ),
            Bound::AtLeast,
            SPIFFE_BAR,
        );
    }
    // The client alone, against the same servers: CPU per handshake.
    for server in CLIENT_SERVERS {
        for key in ["p256", "rsa2048"] {
            push(
                format!(
                    "{key}, X25519 on both sides, {}: our client's CPU per handshake <= \
                     {CLIENT_CPU_BAR}x Go's",
                    server_label(server)
                ),
                versus_go(
                    &format!("client-cpu/{server}/{key}"),
                    &format!("go/client-cpu/{server}/{key}"),
                ),
                Bound::AtMost,
                CLIENT_CPU_BAR,
            );
        }
    }
    // The server alone, one client dialling ours and Go's: CPU per handshake.
    for (row, what) in SERVER_ROWS {
        if results.get(&format!("server-cpu/{row}")).is_none() {
            continue;
        }
        push(
            format!("{what}: our server's CPU per handshake <= 0.5x Go's"),
            versus_go(
                &format!("server-cpu/{row}"),
                &format!("go/server-cpu/{row}"),
            ),
            Bound::AtMost,
            SERVER_CPU_BAR,
        );
    }
    // Against Go's whole stack only like for like: the same key exchange on both sides.
    for (mode, kx) in like_for_like(results) {
        for key in ["p256", "rsa2048"] {
            for clients in [1, 2] {
                push(
                    format!(
                        "{key}, {clients} client(s), {kx}, whole stack (each side its own \
                         server): reload handshakes/s >= 1.5x Go's reload"
                    ),
                    versus_go(
                        &format!("go/handshake/{mode}/{key}/{clients}"),
                        &format!("handshake/{mode}/{key}/{clients}"),
                    ),
                    Bound::AtLeast,
                    1.5,
                );
            }
        }
    }
    for case in results.cases("reload") {
        push(
            format!("{case}: parse (our full load) <= 1.0x Go's X509KeyPair on the same bytes"),
            versus_go(&format!("reload/{case}"), &format!("go/x509keypair/{case}")),
            Bound::AtMost,
            1.0,
        );
    }
    for case in results.cases("identity-rotation") {
        push(
            format!(
                "{case}: first handshake after a rotation (the load already done by the \
                 watch) <= 0.1x Go's X509KeyPair"
            ),
            versus_go(
                &format!("identity-rotation/{case}"),
                &format!("go/rotation-x509keypair/{case}"),
            ),
            Bound::AtMost,
            0.1,
        );
    }
    // The reconcile rows on kube-testbed, then the same targets on the real
    // kube-apiserver (for the same cases: "not measured" where it did not run).
    for (server, suffix) in RECONCILE_SERVERS {
        let on = if suffix.is_empty() {
            String::new()
        } else {
            format!(", {server}")
        };
        for case in results.cases("reconcile") {
            push(
                format!("{case}{on}: a client built per reconcile <= 0.5x Go's"),
                versus_go(
                    &format!("reconcile{suffix}/{case}"),
                    &format!("go/reconcile{suffix}/{case}"),
                ),
                Bound::AtMost,
                0.5,
            );
        }
        for case in results.cases("reconcile-request") {
            push(
                format!("{case}{on}: a reconcile plus one request <= 0.05x Go's"),
                versus_go(
                    &format!("reconcile-request{suffix}/{case}"),
                    &format!("go/reconcile-request{suffix}/{case}"),
                ),
                Bound::AtMost,
                0.05,
            );
        }
    }
    for op in ["sign", "verify"] {
        for bits in ["rsa2048", "rsa3072", "rsa4096"] {
            push(
                format!("{bits}: PS512 {op} <= 0.5x go-jose"),
                versus_go(
                    &format!("principal/{op}/{bits}"),
                    &format!("go/ps512-{op}/{bits}"),
                ),
                Bound::AtMost,
                0.5,
            );
        }
    }
    rows.extend(counted_rows(results));
    rows.extend(telemetry_targets(results));
    rows.extend(anchor_targets(results));
    rows
}

/// Whether `--check` fails: some measured target is not met.
pub fn any_not_met(rows: &[TargetRow]) -> bool {
    rows.iter().any(|row| row.verdict == Some(Verdict::NotMet))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::{est, results, sample_results, verdict_of};
    use crate::report::{UNPAIRED, render};
    use crate::stats::judge;

    #[test]
    fn verdicts_on_measured_targets() {
        let rows = targets(&sample_results(true));
        assert_eq!(verdict_of(&rows, "p256: identity cost"), Some(Verdict::Met));
        // Files against a Secret, paired (1.01x), and the parses a file rotation's
        // first handshakes paid (none).
        assert_eq!(
            verdict_of(&rows, "p256-pkcs8: identity cost per handshake from files"),
            Some(Verdict::Met)
        );
        assert_eq!(
            verdict_of(
                &rows,
                "p256-pkcs8 from files: no handshake pays a key parse"
            ),
            Some(Verdict::Met)
        );
        assert_eq!(
            verdict_of(
                &rows,
                "rsa2048, 2 client(s): watched-CA handshakes/s >= 0.98x"
            ),
            Some(Verdict::Met)
        );
        // Identical paired samples: ratio exactly 1, above 0.98.
        assert_eq!(
            verdict_of(&rows, "p256, 1 client(s): reload handshakes/s >= 0.98x"),
            Some(Verdict::Met)
        );
        // Go's default (hybrid) reload twice as slow: 2x, interval above 1.5.
        assert_eq!(
            verdict_of(
                &rows,
                "rsa2048, 2 client(s), hybrid on both sides, each side's default (ours \
                 X25519MLKEM768, Go X25519Kyber768Draft00: two different hybrids), whole \
                 stack (each side its own server): reload handshakes/s >= 1.5x Go"
            ),
            Some(Verdict::Met)
        );
        // Go's X25519 reload 1.2x as slow: judged on those rows, not the default ones.
        assert_eq!(
            verdict_of(
                &rows,
                "rsa2048, 2 client(s), X25519 on both sides, whole stack (each side its own \
                 server): reload handshakes/s >= 1.5x Go"
            ),
            Some(Verdict::NotMet)
        );
        // Against Go's whole stack, only the like-for-like pairs carry a target.
        assert_eq!(
            rows.iter()
                .filter(|row| row.target.contains("Go's reload"))
                .count(),
            8
        );
        assert_eq!(
            verdict_of(&rows, "rsa2048-pkcs8: first handshake after a rotation"),
            Some(Verdict::Met)
        );
        assert_eq!(
            verdict_of(&rows, "rsa2048-pkcs8: parse (our full load) <= 1.0x"),
            Some(Verdict::Met)
        );
        assert_eq!(
            verdict_of(&rows, "p256-pkcs8: a client built per reconcile"),
            Some(Verdict::Met)
        );
        assert_eq!(
            verdict_of(&rows, "p256-pkcs8: a reconcile plus one request <= 0.05x"),
            Some(Verdict::Met)
        );
        // The same targets on the real kube-apiserver, judged on its own pairs.
        assert_eq!(
            verdict_of(
                &rows,
                "p256-pkcs8, real kube-apiserver: a client built per reconcile <= 0.5x"
            ),
            Some(Verdict::Met)
        );
        assert_eq!(
            verdict_of(
                &rows,
                "rsa2048-pkcs8, real kube-apiserver: a reconcile plus one request <= 0.05x"
            ),
            Some(Verdict::NotMet)
        );
        assert_eq!(
            verdict_of(
                &rows,
                "rsa2048, X25519 on both sides, same crypto/tls server: our client's CPU"
            ),
            Some(Verdict::Met)
        );
        assert_eq!(
            verdict_of(
                &rows,
                "p256-pkcs8: first handshake after a rotation with the metrics"
            ),
            Some(Verdict::Met)
        );
        assert_eq!(
            verdict_of(&rows, "rsa4096-pkcs8: handshakes racing the loader"),
            Some(Verdict::Met)
        );
        assert_eq!(verdict_of(&rows, "rsa4096: PS512 sign"), Some(Verdict::Met));
        assert_eq!(
            verdict_of(&rows, "rsa2048: PS512 verify"),
            Some(Verdict::NotMet)
        );
        assert!(any_not_met(&rows));
        // The table carries no typed-in explanation column.
        assert!(!render(&sample_results(true)).contains("what bounds it"));
    }

    #[test]
    fn every_row_kind_wholly_on_the_wrong_side_is_not_met() {
        let good = targets(&sample_results(true));
        let rows = targets(&results(true, true));
        // The same rows, every kind of them.
        assert_eq!(
            rows.iter().map(|r| &r.target).collect::<Vec<_>>(),
            good.iter().map(|r| &r.target).collect::<Vec<_>>()
        );
        assert!(rows.len() >= 40, "{}", rows.len());
        for row in &rows {
            assert_eq!(row.verdict, Some(Verdict::NotMet), "{row:?}");
            if let Some(m) = row.measured {
                assert!(m.lower <= m.upper, "{row:?}");
            }
        }
        // And the judge itself, both directions, an interval with width.
        for (interval, bound, bar) in [
            (est(0.95, 0.01), Bound::AtLeast, 0.98),
            (est(0.2, 0.1), Bound::AtMost, 0.1),
        ] {
            assert_eq!(judge(interval, bound, bar), Verdict::NotMet);
        }
    }

    #[test]
    fn ratios_across_languages_only_from_paired_rounds() {
        let mut r = sample_results(true);
        // Go's parse samples from another measurement (its own rounds).
        r.pairs.insert(
            "go/x509keypair/p256-pkcs8".to_owned(),
            "go-alone".to_owned(),
        );
        assert_eq!(
            r.paired("reload/p256-pkcs8", "go/x509keypair/p256-pkcs8"),
            Err(Unpaired)
        );
        // One sample more: not the same rounds either.
        r.samples
            .get_mut("go/reconcile/p256-pkcs8")
            .unwrap()
            .push(1.0);
        // Ours from criterion (no rounds) against Go's samples.
        r.samples.remove("principal/sign/rsa2048");
        r.pairs.remove("principal/sign/rsa2048");
        let rows = targets(&r);
        for target in [
            "p256-pkcs8: parse (our full load)",
            "p256-pkcs8: a client built per reconcile",
            "rsa2048: PS512 sign",
        ] {
            let row = rows
                .iter()
                .find(|row| row.target.starts_with(target))
                .unwrap();
            assert_eq!(row.verdict, None, "{row:?}");
            assert_eq!(row.measured, None, "{row:?}");
            assert_eq!(row.shown.as_deref(), Some(UNPAIRED), "{row:?}");
        }
        let table = render(&r);
        assert!(
            table.contains(&format!(
                "| p256-pkcs8: parse (our full load) <= 1.0x Go's X509KeyPair on the same bytes | {UNPAIRED} | not judged |"
            )),
            "{table}"
        );
        assert!(table.contains("| unpaired |"), "{table}");
        // The untouched pairs are still judged.
        assert_eq!(
            verdict_of(&rows, "rsa2048-pkcs8: parse (our full load)"),
            Some(Verdict::Met)
        );
        assert!(!any_not_met(&rows[..2]));
    }

    #[test]
    fn without_go_no_go_figure_or_ratio_appears() {
        let results = sample_results(false);
        let rows = targets(&results);
        for row in &rows {
            if row.target.contains("Go") || row.target.contains("go-jose") {
                assert_eq!(row.measured, None, "{}", row.target);
                assert_eq!(row.verdict, None, "{}", row.target);
            }
        }
        // Our own targets are still judged.
        assert_eq!(verdict_of(&rows, "p256: identity cost"), Some(Verdict::Met));
        assert!(!any_not_met(&rows), "unmeasured targets never fail --check");
        let table = render(&results);
        // Go's figures (80 us, 1.00 ms, 100 us, 1000/s) never show.
        for figure in ["80.0 us", "1.00 ms", "100.0 us", "| 1000 ["] {
            assert!(!table.contains(figure), "{figure} in\n{table}");
        }
        assert!(table.contains("not measured"));
    }

    #[test]
    fn the_trust_row_is_not_measured_without_its_figures() {
        let mut results = sample_results(true);
        results.samples.remove("handshake/watched-ca/p256/1");
        results.estimates.remove("handshake/watched-ca/p256/1");
        let rows = targets(&results);
        assert_eq!(
            verdict_of(&rows, "p256, 1 client(s): watched-CA handshakes/s"),
            None
        );
        let table = render(&results);
        assert!(
            table.lines().any(|l| l
                .strip_prefix("| p256 | 1 | ")
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit())
                    && rest.ends_with("| not measured | not measured |"))),
            "{table}"
        );
    }

    #[test]
    fn reconcile_rows_without_the_real_server_are_not_measured() {
        // A run where the real kube-apiserver could not start: no `-real` figures.
        let mut results = sample_results(true);
        results.samples.retain(|id, _| !id.contains("-real/"));
        results.estimates.retain(|id, _| !id.contains("-real/"));
        let rows = targets(&results);
        for target in [
            "p256-pkcs8, real kube-apiserver: a client built per reconcile",
            "rsa2048-pkcs8, real kube-apiserver: a reconcile plus one request",
        ] {
            assert_eq!(verdict_of(&rows, target), None, "{target}");
        }
        // The kube-testbed rows are judged as before; nothing fails --check.
        assert_eq!(
            verdict_of(&rows, "p256-pkcs8: a client built per reconcile"),
            Some(Verdict::Met)
        );
        assert!(!any_not_met(
            &rows
                .into_iter()
                .filter(|row| row.target.contains("real kube-apiserver"))
                .collect::<Vec<_>>()
        ));
        let table = render(&results);
        assert!(
            table.contains(
                "| p256-pkcs8 | real kube-apiserver | construction | not measured | not measured | not measured |"
            ),
            "{table}"
        );
    }

    #[test]
    fn a_missing_figure_is_not_measured_not_a_verdict() {
        let mut results = sample_results(true);
        results.estimates.remove("go/ps512-sign/rsa3072");
        results.samples.remove("go/ps512-sign/rsa3072");
        let rows = targets(&results);
        assert_eq!(verdict_of(&rows, "rsa3072: PS512 sign"), None);
        assert!(
            render(&results).contains("| rsa3072: PS512 sign <= 0.5x go-jose | not measured |")
        );
    }
}
