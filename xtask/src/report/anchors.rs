//! The Go anchors: what a Go service would use for what our SPIFFE mode and our
//! pooled client do, measured against ours in the same rounds. go-spiffe v2's
//! `X509Source` with `tlsconfig.MTLSClientConfig` on the same SVID server as our
//! SPIFFE mode; client-go's certificate rotation (connections closed when the client
//! certificate changes) against our pooled client across a rotation. Their tables and
//! their targets, judged like every other row (on the paired ratio's whole interval).

use std::fmt::Write as _;

use super::CLIENT_CPU_BAR;
use super::format::{cell, go_cell, paired_cell, rate, with_interval};
use super::go::go_named;
use super::results::{Results, TargetRow};
use crate::stats::Bound;

/// The go-spiffe module, as the header names it.
const GO_SPIFFE: &str = "github.com/spiffe/go-spiffe/v2";
/// The client-go module.
const CLIENT_GO: &str = "k8s.io/client-go";
/// The cases of the pooled-rotation rows (ids `pooled-rotation/<case>`).
const POOLED_CASES: [&str; 2] = ["p256-pkcs8", "rsa2048-pkcs8"];
/// The client-alone SPIFFE ids' server and case (`client/svid-server/spiffe-p256`).
const SVID_CLIENT: &str = "svid-server/spiffe-p256";

/// "go-spiffe v2.9.0" (the version the Go program was built with), or the bare name.
fn named(results: &Results, module: &str, short: &str) -> String {
    match results.go_modules.get(module) {
        Some(version) => format!("{short} {version}"),
        None => short.to_owned(),
    }
}

/// go-spiffe's client beside our SPIFFE mode on the same SVID server.
pub(super) fn render_spiffe_anchor(results: &Results, out: &mut String) {
    let spiffe = named(results, GO_SPIFFE, "go-spiffe");
    let _ = writeln!(
        out,
        "\nThe SPIFFE anchor: {spiffe}'s `X509Source` with `tlsconfig.MTLSClientConfig` on \
         {} (its SVID fetched from the same Workload API emulator, the server's SPIFFE ID \
         authorized, Go's default key exchange: X25519MLKEM768 since Go 1.24, as ours), \
         dialling the same SVID server in the same rounds. Handshakes per second, then \
         the client alone (one client; CPU per handshake: ours the client thread's, Go's \
         its process's).\n",
        go_named(results)
    );
    let _ = writeln!(
        out,
        "| clients | ours SPIFFE mode | {spiffe} | ours / Go handshakes/s (paired) | ours CPU per handshake | Go CPU per handshake | CPU ours / Go (paired) |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|");
    for clients in [1, 2] {
        let ours = format!("handshake/spiffe/p256/{clients}");
        let theirs = format!("go/handshake/spiffe/p256/{clients}");
        let _ = writeln!(
            out,
            "| {clients} | {} | {} | {} | | | |",
            cell(results.get(&ours), rate),
            go_cell(results, &theirs, rate),
            paired_cell(results, &theirs, &ours, true),
        );
    }
    let id = |side: &str, what: &str| format!("{side}{what}/{SVID_CLIENT}");
    let _ = writeln!(
        out,
        "| 1, the client alone | {} | {} | {} | {} | {} | {} |",
        cell(results.get(&id("", "client")), rate),
        go_cell(results, &id("go/", "client"), rate),
        paired_cell(results, &id("go/", "client"), &id("", "client"), true),
        cell(results.get(&id("", "client-cpu")), with_interval),
        go_cell(results, &id("go/", "client-cpu"), with_interval),
        paired_cell(
            results,
            &id("", "client-cpu"),
            &id("go/", "client-cpu"),
            true
        ),
    );
}

/// Our pooled client across a rotation beside client-go's certificate rotation.
pub(super) fn render_pooled(results: &Results, out: &mut String) {
    let client_go = named(results, CLIENT_GO, "client-go");
    let _ = writeln!(
        out,
        "\n### Pooled connections across a rotation, against client-go's certificate rotation\n"
    );
    let _ = writeln!(
        out,
        "One long-lived pooled client per side to the same crypto/tls HTTPS server (a \
         process of its own, verifying client certificates), a kept-alive connection \
         open; the client certificate is rotated and, once each side noticed, the first \
         request after the rotation is timed alone (a new connection, a full handshake \
         presenting the new certificate, which the server's answer confirms). Ours: \
         `PeerTls::client()` over a watched Secret, noticed when the resolver serves the \
         new version. The anchor, {client_go} on {}: a `rest.Config` naming certificate \
         files (a mounted Secret, swapped as the kubelet does), whose transport closes its \
         connections when the files' certificate changes; noticed when it closed them \
         (its check runs every 50 ms here, every 5 minutes by default, and the files are \
         re-read at most once a second, so its \"noticed after\" says more about those \
         periods than about cost: shown, not judged).\n",
        go_named(results)
    );
    let _ = writeln!(
        out,
        "| case | ours: first request after a rotation | {client_go}: first request after a rotation | ours / client-go (paired) | ours: noticed after | client-go: noticed after |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for case in POOLED_CASES {
        let ours = format!("pooled-rotation/{case}");
        let theirs = format!("go/pooled-rotation/{case}");
        let _ = writeln!(
            out,
            "| {case} | {} | {} | {} | {} | {} |",
            cell(results.get(&ours), with_interval),
            go_cell(results, &theirs, with_interval),
            paired_cell(results, &ours, &theirs, true),
            cell(
                results.get(&format!("pooled-rotation-noticed/{case}")),
                with_interval
            ),
            go_cell(
                results,
                &format!("go/pooled-rotation-noticed/{case}"),
                with_interval
            ),
        );
    }
}

/// The anchors' targets. The SPIFFE client's CPU per handshake has the bar of the
/// Secret-mode client rows (`CLIENT_CPU_BAR` of Go's on the same server); the first request after
/// a rotation has no target in the issue, so the least a replacement owes its anchor:
/// not slower than client-go's (<= 1.0x).
pub(super) fn anchor_targets(results: &Results) -> Vec<TargetRow> {
    let row = |target: String, a: &str, b: &str, bound: Bound, threshold: f64| {
        TargetRow::judged(target, results.versus_go(a, b), bound, threshold)
    };
    let mut rows = vec![row(
        format!(
            "p256 SPIFFE mode, same SVID server: our client's CPU per handshake <= \
             {CLIENT_CPU_BAR}x go-spiffe's (X509Source, MTLSClientConfig)"
        ),
        &format!("client-cpu/{SVID_CLIENT}"),
        &format!("go/client-cpu/{SVID_CLIENT}"),
        Bound::AtMost,
        CLIENT_CPU_BAR,
    )];
    for case in POOLED_CASES {
        rows.push(row(
            format!(
                "{case}: first request through the pooled client after a rotation <= 1.0x \
                 client-go's (certificate rotation; no target in the issue)"
            ),
            &format!("pooled-rotation/{case}"),
            &format!("go/pooled-rotation/{case}"),
            Bound::AtMost,
            1.0,
        ));
    }
    rows
}

#[cfg(test)]
mod tests {
    use crate::report::fixtures::{paired, results, sample_results, verdict_of};
    use crate::report::{render, targets};
    use crate::stats::Verdict;

    #[test]
    fn the_anchor_rows_are_judged_on_their_paired_ratios() {
        let rows = targets(&sample_results(true));
        // Fixture: our SPIFFE client 300 us CPU against go-spiffe's 600 us: 0.5x.
        assert_eq!(
            verdict_of(&rows, "p256 SPIFFE mode, same SVID server"),
            Some(Verdict::Met)
        );
        // Ours 1.2 ms against client-go's 2 ms: 0.6x.
        assert_eq!(
            verdict_of(&rows, "p256-pkcs8: first request through the pooled client"),
            Some(Verdict::Met)
        );
        let bad = targets(&results(true, true));
        assert_eq!(
            verdict_of(&bad, "p256 SPIFFE mode, same SVID server"),
            Some(Verdict::NotMet)
        );
        assert_eq!(
            verdict_of(
                &bad,
                "rsa2048-pkcs8: first request through the pooled client"
            ),
            Some(Verdict::NotMet)
        );
        // Without Go: no figure, no verdict.
        let none = targets(&sample_results(false));
        assert_eq!(
            verdict_of(&none, "p256-pkcs8: first request through the pooled client"),
            None
        );
    }

    #[test]
    fn figures_from_different_rounds_get_no_anchor_ratio() {
        let mut r = sample_results(true);
        // client-go's samples re-measured in a group of their own.
        paired(
            &mut r,
            "elsewhere",
            &[("go/pooled-rotation/p256-pkcs8", 2_000_000.0)],
        );
        let rows = targets(&r);
        let row = rows
            .iter()
            .find(|row| row.target.starts_with("p256-pkcs8: first request through"))
            .unwrap();
        assert_eq!(row.verdict, None);
        assert!(row.shown.as_deref().unwrap().starts_with("unpaired"));
    }

    #[test]
    fn the_tables_name_the_anchor_modules_and_their_versions() {
        let mut r = sample_results(true);
        r.go_modules.insert(
            "github.com/spiffe/go-spiffe/v2".to_owned(),
            "v2.9.0".to_owned(),
        );
        r.go_modules
            .insert("k8s.io/client-go".to_owned(), "v0.37.2".to_owned());
        let table = render(&r);
        assert!(
            table.contains("| clients | ours SPIFFE mode | go-spiffe v2.9.0 |"),
            "{table}"
        );
        assert!(
            table.contains("| client-go v0.37.2: first request after a rotation |"),
            "{table}"
        );
        // 1.2 ms / 2 ms every round (the medians drift 2% alike).
        assert!(
            table.contains("| p256-pkcs8 | 1.22 ms [")
                && table.contains("| 0.600x [0.600 – 0.600] |"),
            "{table}"
        );
        assert!(table.contains("| 1, the client alone | "), "{table}");
        let without = render(&sample_results(false));
        assert!(
            without.contains("| rsa2048-pkcs8 | 1.22 ms [") && without.contains("| not measured |"),
            "{without}"
        );
    }
}
