//! The Markdown report: its tables in order, ending with the targets and verdicts.

use std::fmt::Write as _;

use super::anchors::{render_pooled, render_spiffe_anchor};
use super::format::{NOT_MEASURED, cell, go_cell, paired_cell, rate, show_ratio, with_interval};
use super::go::{go_hybrid, go_named};
use super::handshake_tables::{render_clients, render_like_for_like, render_servers};
use super::identity_tables::{render_metrics, render_racing, render_spiffe};
use super::results::{RECONCILE_SERVERS, Results, key_order};
use super::targets::targets;
use super::telemetry_tables::render_telemetry;

/// The Markdown report (tables and targets).
pub fn render(results: &Results) -> String {
    let mut out = String::new();
    let go = results.go.is_ok();
    let _ = writeln!(
        out,
        "Medians with their 95% confidence interval in brackets; every figure from this run. \
         Every ratio between our figures and Go's is paired: both were measured in the same \
         interleaved rounds (the Go program a long-lived child of the benchmark, taking one \
         batch per command), and the ratio is the median of the per-round ratios. The Go \
         side ran {}.",
        go_named(results)
    );

    let _ = writeln!(out, "\n### Identity load per key type and format\n");
    let _ = writeln!(
        out,
        "\"Full load\" is `material::load_identity` in a loop, interleaved round by round with \
         Go's `tls.X509KeyPair` on the same bytes: \"parse ours / Go\" is the like-for-like \
         parse ratio. The first handshake after a rotation runs after the watch's loader did \
         that load off the handshake path; its ratio is to Go's `tls.X509KeyPair` measured \
         beside each rotation sample.\n"
    );
    let _ = writeln!(
        out,
        "| case | full load (ours) | Go `tls.X509KeyPair` | parse ours / Go (paired) | first handshake after a rotation (resolver) | rotation / Go X509KeyPair (paired) | Secret unchanged (resolver) | broken Secret (resolver) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut cases = results.cases("reload");
    for case in results.cases("identity-rotation") {
        if !cases.contains(&case) {
            cases.push(case);
        }
    }
    cases.sort_by_key(|case| key_order(case));
    for case in &cases {
        let _ = writeln!(
            out,
            "| {case} | {} | {} | {} | {} | {} | {} | {} |",
            cell(results.get(&format!("reload/{case}")), with_interval),
            go_cell(results, &format!("go/x509keypair/{case}"), with_interval),
            paired_cell(
                results,
                &format!("reload/{case}"),
                &format!("go/x509keypair/{case}"),
                true
            ),
            cell(
                results.get(&format!("identity-rotation/{case}")),
                with_interval
            ),
            paired_cell(
                results,
                &format!("identity-rotation/{case}"),
                &format!("go/rotation-x509keypair/{case}"),
                true
            ),
            cell(
                results.get(&format!("identity-unchanged/{case}")),
                with_interval
            ),
            cell(
                results.get(&format!("identity-broken/{case}")),
                with_interval
            ),
        );
    }

    render_racing(results, &mut out);
    render_metrics(results, &mut out);
    render_telemetry(results, &mut out);

    let reconciles = results.cases("reconcile");
    if !reconciles.is_empty() {
        let _ = writeln!(
            out,
            "\n### A peer client built per reconcile (Secrets already watched)\n"
        );
        let _ = writeln!(
            out,
            "Construction: ours `PeerTls::from_options` + `reqwest_client()`, Go \
             `TLSClientConfig` + a new `http.Transport`; each side reads the CA and \
             identity Secrets from the same API server through its watch-fed cache (ours \
             the registry's watches, Go controller-runtime's cache-backed client). Plus \
             one request (issue 30): ours \
             the construction, `PeerTls::client()` (the process's pooled client for the \
             peer) and one GET sent through `PeerClient::send` (its body cap and per-peer \
             series hook), in a task on the runtime's workers as a controller's \
             reconcile runs; Go `TLSClientConfig`, a new `http.Transport` and one GET; \
             both to the same crypto/tls HTTPS server in a process of its own, which \
             verifies client certificates. The server is shared, so the CPU row says what \
             each client costs: ours the bench process's CPU over all its threads, Go's \
             its process's (`getrusage`), per reconcile. The API server: kube-testbed, \
             then a real kube-apiserver (and etcd) that both sides read with one token \
             allowed only to get, list and watch the bench namespace's Secrets (the \
             real rows are not measured where its binaries are not built).\n"
        );
        let _ = writeln!(
            out,
            "| case | API server | what | ours | Go | ours / Go (paired) |"
        );
        let _ = writeln!(out, "|---|---|---|---:|---:|---:|");
        for case in &reconciles {
            for (server, suffix) in RECONCILE_SERVERS {
                for (what, group) in [
                    ("construction", "reconcile"),
                    ("construction + one request", "reconcile-request"),
                    (
                        "construction + one request: the client process's CPU",
                        "reconcile-request-cpu",
                    ),
                ] {
                    let ours = format!("{group}{suffix}/{case}");
                    let theirs = format!("go/{group}{suffix}/{case}");
                    let _ = writeln!(
                        out,
                        "| {case} | {server} | {what} | {} | {} | {} |",
                        cell(results.get(&ours), with_interval),
                        go_cell(results, &theirs, with_interval),
                        paired_cell(results, &ours, &theirs, true),
                    );
                }
            }
        }
    }

    render_pooled(results, &mut out);
    render_clients(results, &mut out);
    render_servers(results, &mut out);

    let _ = writeln!(
        out,
        "\n### Whole stack (each side its own server): loopback TLS 1.3 mTLS handshakes per second\n"
    );
    let go_default = match &results.go {
        Ok(version) => format!("Go ({version}) offers {} first", go_hybrid(version)),
        Err(_) => "Go not measured".to_owned(),
    };
    let _ = writeln!(
        out,
        "Each side's client against its own server (ours rustls against rustls, Go \
         crypto/tls against crypto/tls): these rows compare two TLS stacks, not two \
         clients (the client-only rows are above). Each side's default configuration: \
         ours (svc-tls's provider) offers X25519MLKEM768 first, {go_default}. Both sides \
         loop alike: one task or goroutine per client dialling in a row, the server \
         handshaking, writing one byte and closing. All seven configurations (four ours, \
         three Go's) alternate batch by batch. The ratio to Go is judged in the \
         like-for-like table below.\n"
    );
    let _ = writeln!(
        out,
        "| client key | clients | ours static | ours reload | ours reload / static (paired) | Go static | Go reload | ours reload / Go reload (default configurations, paired) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for key in ["p256", "rsa2048"] {
        for clients in [1, 2] {
            let id = |side: &str, mode: &str| format!("{side}handshake/{mode}/{key}/{clients}");
            let _ = writeln!(
                out,
                "| {key} | {clients} | {} | {} | {} | {} | {} | {} |",
                cell(results.get(&id("", "static")), rate),
                cell(results.get(&id("", "reload")), rate),
                paired_cell(results, &id("", "static"), &id("", "reload"), false),
                go_cell(results, &id("go/", "static"), rate),
                go_cell(results, &id("go/", "reload"), rate),
                paired_cell(results, &id("go/", "reload"), &id("", "reload"), true),
            );
        }
    }

    render_like_for_like(results, &mut out);

    let _ = writeln!(
        out,
        "\n### Peer trust: watched CA Secret (unchanged) against a static root store (interleaved)\n"
    );
    let _ = writeln!(
        out,
        "| client key | clients | static roots (ours reload) | watched CA Secret | watched / static roots (paired) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for key in ["p256", "rsa2048"] {
        for clients in [1, 2] {
            let id = |mode: &str| format!("handshake/{mode}/{key}/{clients}");
            let _ = writeln!(
                out,
                "| {key} | {clients} | {} | {} | {} |",
                cell(results.get(&id("reload")), rate),
                cell(results.get(&id("watched-ca")), rate),
                paired_cell(results, &id("reload"), &id("watched-ca"), false),
            );
        }
    }

    render_spiffe(results, &mut out);
    render_spiffe_anchor(results, &mut out);

    let _ = writeln!(out, "\n### X-Principal tokens\n");
    let _ = writeln!(
        out,
        "| key | sign (ours) | sign (go-jose) | sign ours / Go (paired) | verify (ours) | verify (go-jose) | verify ours / Go (paired) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for key in ["rsa2048", "rsa3072", "rsa4096", "p256", "p384"] {
        let mut row = format!("| {key} ");
        for op in ["sign", "verify"] {
            let ours = format!("principal/{op}/{key}");
            let go_id = format!("go/ps512-{op}/{key}");
            let (theirs_cell, ratio_cell) = if key.starts_with("rsa") {
                (
                    go_cell(results, &go_id, with_interval),
                    paired_cell(results, &ours, &go_id, true),
                )
            } else {
                // The Go services neither produce nor accept ES256/ES384 principals.
                ("(no Go counterpart)".to_owned(), String::new())
            };
            let _ = write!(
                row,
                "| {} | {theirs_cell} | {ratio_cell} ",
                cell(results.get(&ours), with_interval)
            );
        }
        let _ = writeln!(out, "{row}|");
    }

    let _ = writeln!(out, "\n### Targets\n");
    let _ = writeln!(
        out,
        "Each timed target is a ratio of two figures of this run, judged on its whole 95% \
         interval: \"met\" when the interval lies on the right side of the threshold, \"not met\" \
         when it lies wholly on the wrong side, \"inconclusive\" when it straddles it; nothing \
         else enters a verdict. A ratio against Go is taken only from paired rounds (figures \
         measured apart read \"unpaired\" and get no verdict). A counted target is judged on \
         its counts.\n"
    );
    let _ = writeln!(out, "| target | ratio [95% CI], or count | verdict |");
    let _ = writeln!(out, "|---|---:|---|");
    for row in targets(results) {
        let (measured, verdict) = match (row.measured, row.verdict, &row.shown) {
            (_, Some(v), Some(shown)) => (shown.clone(), v.to_string()),
            (Some(m), Some(v), None) => (show_ratio(m), v.to_string()),
            (None, None, Some(shown)) => (shown.clone(), "not judged".to_owned()),
            _ => (
                NOT_MEASURED.to_owned(),
                if go {
                    NOT_MEASURED.to_owned()
                } else {
                    "not measured (no Go in this run)".to_owned()
                },
            ),
        };
        let _ = writeln!(out, "| {} | {measured} | {verdict} |", row.target);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::sample_results;

    #[test]
    fn table_shows_intervals_and_verdicts() {
        let table = render(&sample_results(true));
        assert!(
            table.contains(
                "| rsa2048-pkcs8 | 30.6 us [30.3 us – 30.9 us] | 81.6 us [80.8 us – 82.4 us] | 0.375x [0.375 – 0.375] | 2.04 us"
            ),
            "{table}"
        );
        assert!(
            table.contains("### A peer client built per reconcile"),
            "{table}"
        );
        // The reconcile rows on both API servers, each paired with Go's on the same.
        assert!(
            table.contains(
                "| p256-pkcs8 | kube-testbed | construction | 30.6 us [30.3 us – 30.9 us] | 102.0 us"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "| p256-pkcs8 | real kube-apiserver | construction + one request | 40.8 us [40.4 us – 41.2 us] | 2.04 ms"
            ),
            "{table}"
        );
        assert!(table.contains("| not met |"), "{table}");
        assert!(table.contains("| met |"), "{table}");
        assert!(
            table.contains("### Peer trust: watched CA Secret (unchanged)"),
            "{table}"
        );
        assert!(
            table.contains("watched-CA handshakes/s >= 0.98x static roots"),
            "{table}"
        );
    }
}
