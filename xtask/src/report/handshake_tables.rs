//! The handshake sections against Go: the client alone against the same servers, and
//! the whole stack like for like (the same key exchange on both sides).

use std::fmt::Write as _;

use super::format::{cell, go_cell, go_only, paired_cell, rate, show_ratio, with_interval};
use super::go::{go_hybrid, go_named, like_for_like};
use super::results::Results;
use super::{CLIENT_SERVERS, SERVER_ROWS, server_label};

/// Our client and Go's against the same servers: handshakes/s and CPU per handshake.
pub(super) fn render_clients(results: &Results, out: &mut String) {
    let _ = writeln!(
        out,
        "\n### Client against the same server (X25519 on both sides, one client)\n"
    );
    let _ = writeln!(
        out,
        "Our client (the resolver, X25519 only) and the legacy client on {} \
         (`GetClientCertificate` calling `tls.X509KeyPair`, `CurvePreferences` X25519) each \
         dial the same two servers, a rustls server and a crypto/tls server (each in a \
         process other than Go's client, each requiring and verifying client \
         certificates), in alternating batches. CPU per handshake: ours the client \
         thread's CPU time (`/proc/thread-self/schedstat`), Go's its process's \
         (`getrusage`, user + system: the runtime and GC included). Both negotiate \
         `TLS13_AES_128_GCM_SHA256` (each offers it first). Ours checks the server \
         chain's signature once per thread and remembers it, as a service does for a \
         peer's unchanging chain; Go's checks it on every handshake \
         ([certificate-signature-memo.md](decisions/certificate-signature-memo.md)).\n",
        go_named(results)
    );
    let _ = writeln!(
        out,
        "| server | client key | ours handshakes/s | Go handshakes/s | handshakes/s ours / Go (paired) | ours CPU per handshake | Go CPU per handshake | CPU ours / Go (paired) |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|");
    for server in CLIENT_SERVERS {
        for key in ["p256", "rsa2048"] {
            let id = |side: &str, what: &str| format!("{side}{what}/{server}/{key}");
            let _ = writeln!(
                out,
                "| {} | {key} | {} | {} | {} | {} | {} | {} |",
                server_label(server).trim_start_matches("same "),
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
    }
}

/// Our server and Go's dialled by the same client: handshakes/s and the server's CPU
/// per handshake.
pub(super) fn render_servers(results: &Results, out: &mut String) {
    if !SERVER_ROWS
        .iter()
        .any(|(row, _)| results.get(&format!("server-cpu/{row}")).is_some())
    {
        return;
    }
    let _ = writeln!(
        out,
        "\n### Server against the same client (the serving half)\n"
    );
    let _ = writeln!(
        out,
        "One rustls client (a fixed certificate, `X25519MLKEM768` negotiated with both) \
         dials our server and Go's ({}) in alternating batches, one connection at a time. \
         Ours: svc-tls's `ServerTls` (the identity resolved from its watched Secret or \
         SVID on every handshake, callers verified against the watched client CA or \
         SPIFFE bundle) on one thread, its CPU time from that thread's schedstat (the \
         watches' idle tasks on other threads not counted). Go: a process serving nothing \
         else, its CPU time from `getrusage` (the runtime, the GC and the informer \
         included). Secret rows: Go's `GetCertificate` reads the Secret through \
         controller-runtime's cache and runs `tls.X509KeyPair` on every handshake, its \
         client CAs a static pool. SPIFFE row: go-spiffe's `tlsconfig.MTLSServerConfig` \
         over an `X509Source`, callers authorized as trust-domain members, as ours.\n",
        go_named(results)
    );
    let _ = writeln!(
        out,
        "| server identity | ours handshakes/s | Go handshakes/s | ours server CPU per handshake | Go server CPU per handshake | CPU ours / Go (paired) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for (row, _) in SERVER_ROWS {
        let _ = writeln!(
            out,
            "| {row} | {} | {} | {} | {} | {} |",
            cell(results.get(&format!("server/{row}")), rate),
            go_cell(results, &format!("go/server/{row}"), rate),
            cell(results.get(&format!("server-cpu/{row}")), with_interval),
            go_cell(results, &format!("go/server-cpu/{row}"), with_interval),
            paired_cell(
                results,
                &format!("server-cpu/{row}"),
                &format!("go/server-cpu/{row}"),
                true
            ),
        );
    }
}

/// Handshakes per second against Go with the same key exchange on both sides (the
/// rows the whole-stack Go targets are judged on).
pub(super) fn render_like_for_like(results: &Results, out: &mut String) {
    let _ = writeln!(
        out,
        "\n### Like for like against Go, whole stack (each side its own server): the same key exchange on both sides (reload)\n"
    );
    let _ = writeln!(
        out,
        "Classical: ours offers X25519 only, Go sets `CurvePreferences: []tls.CurveID{{tls.X25519}}`. \
         Hybrid: each side's default configuration (the reload columns above); the two \
         hybrids differ unless Go is 1.24 or later (this run: {}).\n",
        go_named(results)
    );
    let _ = writeln!(
        out,
        "| key exchange | client key | clients | ours reload | Go reload | ours / Go (paired) |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|");
    for (mode, kx) in like_for_like(results) {
        for key in ["p256", "rsa2048"] {
            for clients in [1, 2] {
                let ours = format!("handshake/{mode}/{key}/{clients}");
                let theirs = format!("go/handshake/{mode}/{key}/{clients}");
                let _ = writeln!(
                    out,
                    "| {kx} | {key} | {clients} | {} | {} | {} |",
                    cell(results.get(&ours), rate),
                    go_cell(results, &theirs, rate),
                    paired_cell(results, &theirs, &ours, true),
                );
            }
        }
    }

    let go_hybrid = results.go.as_deref().map_or("Go's hybrid", go_hybrid);
    let _ = writeln!(
        out,
        "\nWhat the hybrid costs each side: reload handshakes/s with the hybrid over those \
         with X25519 only, paired round by round (both were measured interleaved).\n"
    );
    let _ = writeln!(
        out,
        "| client key | clients | ours X25519MLKEM768 / X25519 (paired) | Go {go_hybrid} / X25519 (paired) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|");
    for key in ["p256", "rsa2048"] {
        for clients in [1, 2] {
            let paired = |side: &str| {
                results.paired_ratio(
                    &format!("{side}handshake/reload-x25519/{key}/{clients}"),
                    &format!("{side}handshake/reload/{key}/{clients}"),
                )
            };
            let _ = writeln!(
                out,
                "| {key} | {clients} | {} | {} |",
                cell(paired(""), show_ratio),
                go_only(results, paired("go/"), show_ratio),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::report::fixtures::sample_results;
    use crate::report::render;

    #[test]
    fn the_like_for_like_table_names_both_key_exchanges() {
        let table = render(&sample_results(true));
        assert!(
            table.contains("### Like for like against Go, whole stack (each side its own server): the same key exchange on both sides"),
            "{table}"
        );
        // Medians 510 us ours, 612 us Go: 1961/s against 1634/s, 1.2x.
        assert!(
            table.contains("| X25519 on both sides | p256 | 1 | 1961 ["),
            "{table}"
        );
        assert!(
            table.contains("| 1634 [") && table.contains("| 1.200x ["),
            "{table}"
        );
        assert!(
            table.contains(
                "Go X25519Kyber768Draft00: two different hybrids) | rsa2048 | 2 | 1961 ["
            ),
            "{table}"
        );
        assert!(table.contains("ours reload / Go reload (default configurations, paired)"));
        // The hybrid's cost on each side: X25519 ns / hybrid ns, paired (Go's X25519
        // rounds are 600/1000 of its hybrid ones).
        assert!(
            table.contains("| p256 | 1 | 1.000x [1.000 – 1.000] | 0.600x [0.600 – 0.600] |"),
            "{table}"
        );
        assert!(table.contains("Go (go1.23) offers X25519Kyber768Draft00 first"));
    }
}
