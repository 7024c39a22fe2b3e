//! The tables and verdicts of `cargo xtask bench`, from the figures of one run.
//!
//! Ids (criterion's `full_id`, or the `id` of a sampled JSON line; sampled lines of
//! one interleaved measurement share a `paired` group, and a ratio between the
//! languages is taken only within one group):
//! - ours: `reload/<case>`, `identity-unchanged/<case>`, `identity-broken/<case>`,
//!   `identity-rotation/<case>` (with the counts `identity-rotation-parses/<case>`),
//!   `identity-racing/<case>` (counts `identity-racing-{loads,raced}/<case>`),
//!   `metrics/{rotation,broken}/{on,off}/p256-pkcs8`,
//!   `handshake/{static,reload,watched-ca,reload-x25519}/<key>/<clients>` (whole
//!   stack), `client/<server>/<key>` and `client-cpu/<server>/<key>` (the client
//!   alone against the same `rustls-server` or `go-server`),
//!   `principal/{sign,verify}/<key>`, `reconcile/<case>`, `reconcile-request/<case>`;
//!   SPIFFE mode against Secret mode: `identity-{unchanged,rotation}/spiffe-p256`
//!   (next to `.../p256-pkcs8`) and
//!   `handshake/{secret-on-svid-server,spiffe}/p256/<clients>` (one server presenting
//!   an SVID);
//! - Go: `go/x509keypair/<case>`, `go/rotation-x509keypair/<case>`,
//!   `go/reconcile/<case>`, `go/reconcile-request/<case>`,
//!   `go/ps512-{sign,verify}/<rsaN>`,
//!   `go/handshake/{static,reload,reload-x25519}/<key>/<clients>`,
//!   `go/client/<server>/<key>`, `go/client-cpu/<server>/<key>`.
//!
//! Handshakes and their key exchange: `static`, `reload` (and ours `watched-ca`) are
//! each side's default configuration, which on both sides offers a hybrid
//! post-quantum group first (ours `X25519MLKEM768`; Go 1.23 `X25519Kyber768Draft00`,
//! Go 1.24+ `X25519MLKEM768`): those `reload` rows are the "hybrid on both sides"
//! comparison. `reload-x25519` is classical X25519 only, on both sides. The Go
//! targets are judged on these two like-for-like pairs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::stats::{Bound, Estimate, Verdict, judge, ratio};

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
}

impl Default for Results {
    fn default() -> Self {
        Self {
            estimates: BTreeMap::new(),
            samples: BTreeMap::new(),
            counts: BTreeMap::new(),
            pairs: BTreeMap::new(),
            go: Err("not run".to_owned()),
        }
    }
}

impl Results {
    fn get(&self, id: &str) -> Option<Estimate> {
        self.estimates.get(id).copied()
    }

    /// Cases (`<key>-<format>`) with a figure under `group/`, in a stable order; the
    /// SPIFFE-mode case (`spiffe-p256`) has its own table.
    fn cases(&self, group: &str) -> Vec<String> {
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

fn key_order(case: &str) -> (usize, String) {
    const ORDER: [&str; 6] = ["rsa2048", "rsa3072", "rsa4096", "p256", "p384", "ed25519"];
    let key = case.split(['-', '/']).next().unwrap_or(case);
    (
        ORDER.iter().position(|k| *k == key).unwrap_or(ORDER.len()),
        case.to_owned(),
    )
}

/// The hybrid Go's `crypto/tls` offers first by default, from `go version`: the
/// `X25519Kyber768Draft00` draft up to Go 1.23, `X25519MLKEM768` from Go 1.24.
pub fn go_hybrid(version: &str) -> &'static str {
    let minor = version
        .split_whitespace()
        .find_map(|word| word.strip_prefix("go1."))
        .and_then(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u32>()
                .ok()
        });
    match minor {
        Some(minor) if minor >= 24 => "X25519MLKEM768",
        _ => "X25519Kyber768Draft00",
    }
}

/// The like-for-like handshake comparisons with Go: (our id's mode, Go's id's mode,
/// what the row says about the key exchange).
fn like_for_like(results: &Results) -> [(&'static str, String); 2] {
    let theirs = match results.go.as_deref().map(go_hybrid) {
        Ok("X25519MLKEM768") => "Go X25519MLKEM768: the same hybrid".to_owned(),
        Ok(other) => format!("Go {other}: two different hybrids"),
        Err(_) => "Go its default hybrid".to_owned(),
    };
    [
        ("reload-x25519", "X25519 on both sides".to_owned()),
        (
            "reload",
            format!("hybrid on both sides, each side's default (ours X25519MLKEM768, {theirs})"),
        ),
    ]
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

/// What a ratio cell shows for figures measured in different rounds.
pub const UNPAIRED: &str = "unpaired (not measured in the same rounds): no ratio";

/// Human time: ns, us, ms.
pub fn human(ns: f64) -> String {
    if ns >= 1_000_000.0 {
        format!("{:.2} ms", ns / 1_000_000.0)
    } else if ns >= 10_000.0 {
        format!("{:.1} us", ns / 1_000.0)
    } else if ns >= 1_000.0 {
        format!("{:.2} us", ns / 1_000.0)
    } else {
        format!("{ns:.0} ns")
    }
}

fn with_interval(e: Estimate) -> String {
    format!(
        "{} [{} – {}]",
        human(e.median),
        human(e.lower),
        human(e.upper)
    )
}

fn rate(e: Estimate) -> String {
    let r = e.per_second();
    format!("{:.0} [{:.0} – {:.0}]", r.median, r.lower, r.upper)
}

fn show_ratio(e: Estimate) -> String {
    // Small shares (the identity's part of a handshake) need more digits.
    let digits = if e.median.abs() < 0.1 { 5 } else { 3 };
    format!(
        "{:.digits$}x [{:.digits$} – {:.digits$}]",
        e.median, e.lower, e.upper
    )
}

const NOT_MEASURED: &str = "not measured";

/// The SPIFFE-mode case of the identity benchmarks (a P-256 SVID, what SPIRE issues).
pub const SPIFFE_CASE: &str = "spiffe-p256";
/// The Secret-mode case it is compared with.
const SECRET_CASE: &str = "p256-pkcs8";
/// SPIFFE handshakes/s against Secret mode on the same server: no target in the issue,
/// so the bar of reload against static.
const SPIFFE_BAR: f64 = 0.98;

fn cell(e: Option<Estimate>, show: fn(Estimate) -> String) -> String {
    e.map(show).unwrap_or_else(|| NOT_MEASURED.to_owned())
}

/// Evaluates every target on the figures of this run. Every verdict comes from the
/// figures alone ([`judge`] on the ratio's whole interval); a ratio between the
/// languages is taken only from paired rounds.
pub fn targets(results: &Results) -> Vec<TargetRow> {
    let mut rows = Vec::new();
    let go = results.go.is_ok();
    let mut push = |target: String,
                    measured: Result<Option<Estimate>, Unpaired>,
                    bound: Bound,
                    threshold: f64| {
        let (measured, shown) = match measured {
            Ok(measured) => (measured, None),
            Err(Unpaired) => (None, Some(UNPAIRED.to_owned())),
        };
        rows.push(TargetRow {
            target,
            measured,
            verdict: measured.map(|m| judge(m, bound, threshold)),
            shown,
        });
    };
    // A ratio against Go: paired, and only when Go ran.
    let versus_go = |a: &str, b: &str| {
        if go { results.paired(a, b) } else { Ok(None) }
    };

    for key in ["p256", "rsa2048"] {
        let share = results
            .get(&format!("identity-unchanged/{key}-pkcs8"))
            .zip(results.get(&format!("handshake/static/{key}/1")))
            .map(|(identity, handshake)| ratio(identity, handshake));
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
    {
        let share = results
            .get(&format!("identity-unchanged/{SPIFFE_CASE}"))
            .zip(results.get("handshake/spiffe/p256/1"))
            .map(|(identity, handshake)| ratio(identity, handshake));
        push(
            "p256 SPIFFE mode: identity cost per handshake, SVID unchanged <= 1% of a \
             handshake (the Secret-mode bar)"
                .to_owned(),
            Ok(share),
            Bound::AtMost,
            0.01,
        );
    }
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
                    "{key}, X25519 on both sides, {}: our client's CPU per handshake <= 0.67x \
                     Go's",
                    server_label(server)
                ),
                versus_go(
                    &format!("client-cpu/{server}/{key}"),
                    &format!("go/client-cpu/{server}/{key}"),
                ),
                Bound::AtMost,
                0.67,
            );
        }
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
    for case in results.cases("reconcile") {
        push(
            format!("{case}: a client built per reconcile <= 0.5x Go's"),
            versus_go(
                &format!("reconcile/{case}"),
                &format!("go/reconcile/{case}"),
            ),
            Bound::AtMost,
            0.5,
        );
    }
    for case in results.cases("reconcile-request") {
        push(
            format!("{case}: a reconcile plus one request <= 0.05x Go's"),
            versus_go(
                &format!("reconcile-request/{case}"),
                &format!("go/reconcile-request/{case}"),
            ),
            Bound::AtMost,
            0.05,
        );
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
    rows.extend(parse_rows(results));
    rows
}

/// The servers the client rows dial (ids `client/<server>/<key>`).
const CLIENT_SERVERS: [&str; 2] = ["rustls-server", "go-server"];

fn server_label(server: &str) -> &'static str {
    match server {
        "rustls-server" => "same rustls server",
        _ => "same crypto/tls server",
    }
}

/// Counted, not timed (no Go needed): the key parses each first handshake after a
/// rotation paid, and the full loads each new version cost with handshakes racing
/// the loader.
fn parse_rows(results: &Results) -> Vec<TargetRow> {
    let mut rows = Vec::new();
    for case in results.cases("identity-rotation") {
        let Some(parses) = results
            .counts
            .get(&format!("identity-rotation-parses/{case}"))
        else {
            continue;
        };
        let paid = parses.iter().filter(|n| **n > 0.0).count();
        rows.push(TargetRow {
            target: format!("{case}: no handshake pays a key parse after a rotation"),
            measured: None,
            verdict: Some(if paid == 0 {
                Verdict::Met
            } else {
                Verdict::NotMet
            }),
            shown: Some(format!("{paid} of {} handshakes", parses.len())),
        });
    }
    for (id, loads) in &results.counts {
        let Some(case) = id.strip_prefix("identity-racing-loads/") else {
            continue;
        };
        let extra = loads.iter().filter(|n| **n > 1.0).count();
        let most = loads.iter().copied().fold(0.0, f64::max);
        rows.push(TargetRow {
            target: format!(
                "{case}: handshakes racing the loader: one full load per new version \
                 (single flight)"
            ),
            measured: None,
            verdict: Some(if extra == 0 {
                Verdict::Met
            } else {
                Verdict::NotMet
            }),
            shown: Some(format!(
                "{extra} of {} versions loaded more than once (most: {most:.0})",
                loads.len()
            )),
        });
    }
    rows
}

/// Whether `--check` fails: some measured target is not met.
pub fn any_not_met(rows: &[TargetRow]) -> bool {
    rows.iter().any(|row| row.verdict == Some(Verdict::NotMet))
}

/// A paired ratio's cell: the ratio, "unpaired" when the figures were not measured
/// in the same rounds, empty when one is missing (or Go did not run, for `go`).
fn paired_cell(results: &Results, a: &str, b: &str, go: bool) -> String {
    if go && results.go.is_err() {
        return String::new();
    }
    match results.paired(a, b) {
        Ok(Some(e)) => show_ratio(e),
        Ok(None) => NOT_MEASURED.to_owned(),
        Err(Unpaired) => "unpaired".to_owned(),
    }
}

/// The Go version of this run, for the tables' text.
fn go_named(results: &Results) -> String {
    match &results.go {
        Ok(version) => format!(
            "Go {}",
            version
                .split_whitespace()
                .find(|word| word.starts_with("go1"))
                .unwrap_or(version)
        ),
        Err(_) => "Go (not measured in this run)".to_owned(),
    }
}

/// The Markdown report (tables and targets).
pub fn render(results: &Results) -> String {
    let mut out = String::new();
    let go = results.go.is_ok();
    let go_cell = |id: &str, show: fn(Estimate) -> String| -> String {
        if go {
            cell(results.get(id), show)
        } else {
            NOT_MEASURED.to_owned()
        }
    };
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
            go_cell(&format!("go/x509keypair/{case}"), with_interval),
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

    let reconciles = results.cases("reconcile");
    if !reconciles.is_empty() {
        let _ = writeln!(
            out,
            "\n### A peer client built per reconcile (Secrets already watched)\n"
        );
        let _ = writeln!(
            out,
            "Construction: ours `PeerTls::from_options` + `reqwest_client()`, Go \
             `TLSClientConfig` + a new `http.Transport`. Plus one request (issue 30): ours \
             the construction, `PeerTls::client()` (the process's pooled client for the \
             peer) and one GET; Go `TLSClientConfig`, a new `http.Transport` and one GET; \
             both to the same crypto/tls HTTPS server in a process of its own, which \
             verifies client certificates.\n"
        );
        let _ = writeln!(out, "| case | what | ours | Go | ours / Go (paired) |");
        let _ = writeln!(out, "|---|---|---:|---:|---:|");
        for case in &reconciles {
            for (what, group) in [
                ("construction", "reconcile"),
                ("construction + one request", "reconcile-request"),
            ] {
                let ours = format!("{group}/{case}");
                let theirs = format!("go/{group}/{case}");
                let _ = writeln!(
                    out,
                    "| {case} | {what} | {} | {} | {} |",
                    cell(results.get(&ours), with_interval),
                    go_cell(&theirs, with_interval),
                    paired_cell(results, &ours, &theirs, true),
                );
            }
        }
    }

    render_clients(results, &mut out);

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
                go_cell(&id("go/", "static"), rate),
                go_cell(&id("go/", "reload"), rate),
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
                    go_cell(&go_id, with_interval),
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

/// The racing first handshake beside the quiet one, and the loads each version cost.
fn render_racing(results: &Results, out: &mut String) {
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
        let quiet = results.get(&format!("identity-rotation/{case}"));
        let race = results.get(&format!("identity-racing/{case}"));
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
            cell(quiet, with_interval),
            cell(race, with_interval),
            cell(quiet.zip(race).map(|(q, r)| ratio(r, q)), show_ratio),
        );
    }
}

const RACERS_TEXT: &str = "four";

/// The metrics recorder's cost where it is paid.
fn render_metrics(results: &Results, out: &mut String) {
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

/// Our client and Go's against the same servers: handshakes/s and CPU per handshake.
fn render_clients(results: &Results, out: &mut String) {
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
         (`getrusage`, user + system: the runtime and GC included).\n",
        go_named(results)
    );
    let _ = writeln!(
        out,
        "| server | client key | ours handshakes/s | Go handshakes/s | handshakes/s ours / Go (paired) | ours CPU per handshake | Go CPU per handshake | CPU ours / Go (paired) |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|");
    let go = results.go.is_ok();
    for server in CLIENT_SERVERS {
        for key in ["p256", "rsa2048"] {
            let id = |side: &str, what: &str| format!("{side}{what}/{server}/{key}");
            let go_cell = |id: String, show: fn(Estimate) -> String| {
                if go {
                    cell(results.get(&id), show)
                } else {
                    NOT_MEASURED.to_owned()
                }
            };
            let _ = writeln!(
                out,
                "| {} | {key} | {} | {} | {} | {} | {} | {} |",
                server_label(server).trim_start_matches("same "),
                cell(results.get(&id("", "client")), rate),
                go_cell(id("go/", "client"), rate),
                paired_cell(results, &id("go/", "client"), &id("", "client"), true),
                cell(results.get(&id("", "client-cpu")), with_interval),
                go_cell(id("go/", "client-cpu"), with_interval),
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

/// Handshakes per second against Go with the same key exchange on both sides (the
/// rows the whole-stack Go targets are judged on).
fn render_like_for_like(results: &Results, out: &mut String) {
    let go = results.go.is_ok();
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
                let go_cell = if go {
                    cell(results.get(&theirs), rate)
                } else {
                    NOT_MEASURED.to_owned()
                };
                let _ = writeln!(
                    out,
                    "| {kx} | {key} | {clients} | {} | {go_cell} | {} |",
                    cell(results.get(&ours), rate),
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
            let theirs = if go {
                cell(paired("go/"), show_ratio)
            } else {
                NOT_MEASURED.to_owned()
            };
            let _ = writeln!(
                out,
                "| {key} | {clients} | {} | {theirs} |",
                cell(paired(""), show_ratio),
            );
        }
    }
}

/// The SPIFFE-mode tables: identity per handshake and handshakes per second, each
/// next to Secret mode (P-256).
fn render_spiffe(results: &Results, out: &mut String) {
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
        let share = unchanged
            .zip(results.get(handshake))
            .map(|(identity, handshake)| ratio(identity, handshake));
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
        results
            .get(&format!("{group}/{SPIFFE_CASE}"))
            .zip(results.get(&format!("{group}/{SECRET_CASE}")))
            .map(|(spiffe, secret)| ratio(spiffe, secret))
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
    use super::*;

    fn est(median: f64, spread: f64) -> Estimate {
        Estimate {
            median,
            lower: median * (1.0 - spread),
            upper: median * (1.0 + spread),
        }
    }

    /// Interleaved samples of `series` (id, median ns), one group: 20 rounds, each
    /// id's round `i` at the same drift, so per-round ratios are exact.
    fn paired(r: &mut Results, group: &str, series: &[(&str, f64)]) {
        for (id, ns) in series {
            let samples: Vec<f64> = (0..20)
                .map(|i| ns * (1.0 + f64::from(i % 5) * 0.01))
                .collect();
            r.estimates
                .insert((*id).to_owned(), Estimate::from_samples(&samples).unwrap());
            r.samples.insert((*id).to_owned(), samples);
            r.pairs.insert((*id).to_owned(), group.to_owned());
        }
    }

    /// A run's figures. `bad`: every ratio wholly on the wrong side of its bar.
    fn results(go: bool, bad: bool) -> Results {
        let mut r = Results {
            go: if go {
                Ok("go1.23".into())
            } else {
                Err("no Go".into())
            },
            ..Default::default()
        };
        let pick = |good: f64, wrong: f64| if bad { wrong } else { good };
        for case in ["rsa2048-pkcs8", "p256-pkcs8"] {
            // Parse: ours 30 us, Go 80 us (met); bad: ours 160 us.
            paired(
                &mut r,
                &format!("reload/{case}"),
                &[
                    (&format!("reload/{case}"), pick(30_000.0, 160_000.0)),
                    (&format!("go/x509keypair/{case}"), 80_000.0),
                ],
            );
            paired(
                &mut r,
                &format!("rotation/{case}"),
                &[
                    (
                        &format!("identity-rotation/{case}"),
                        pick(2_000.0, 40_000.0),
                    ),
                    (&format!("go/rotation-x509keypair/{case}"), 80_000.0),
                ],
            );
            // Ours 0.3x Go's (met).
            paired(
                &mut r,
                &format!("reconcile/{case}"),
                &[
                    (&format!("reconcile/{case}"), pick(30_000.0, 100_000.0)),
                    (&format!("go/reconcile/{case}"), 100_000.0),
                ],
            );
            paired(
                &mut r,
                &format!("request/{case}"),
                &[
                    (
                        &format!("reconcile-request/{case}"),
                        pick(20_000.0, 1_000_000.0),
                    ),
                    (&format!("go/reconcile-request/{case}"), 1_000_000.0),
                ],
            );
            r.estimates.insert(
                format!("identity-unchanged/{case}"),
                est(pick(150.0, 50_000.0), 0.02),
            );
            r.estimates
                .insert(format!("identity-broken/{case}"), est(300.0, 0.02));
        }
        r.estimates.insert(
            format!("identity-unchanged/{SPIFFE_CASE}"),
            est(pick(120.0, 50_000.0), 0.02),
        );
        r.estimates
            .insert(format!("identity-rotation/{SPIFFE_CASE}"), est(900.0, 0.05));
        for group in ["rotation", "broken"] {
            paired(
                &mut r,
                &format!("metrics/{group}"),
                &[
                    (
                        &format!("metrics/{group}/on/{SECRET_CASE}"),
                        pick(1_000.0, 2_000.0),
                    ),
                    (&format!("metrics/{group}/off/{SECRET_CASE}"), 1_000.0),
                ],
            );
        }
        for bits in ["rsa2048", "rsa3072", "rsa4096"] {
            // Sign: 0.4x Go (met); verify: 0.9x Go (not met).
            paired(
                &mut r,
                &format!("sign/{bits}"),
                &[
                    (
                        &format!("principal/sign/{bits}"),
                        pick(400_000.0, 1_000_000.0),
                    ),
                    (&format!("go/ps512-sign/{bits}"), 1_000_000.0),
                ],
            );
            paired(
                &mut r,
                &format!("verify/{bits}"),
                &[
                    (&format!("principal/verify/{bits}"), 90_000.0),
                    (&format!("go/ps512-verify/{bits}"), 100_000.0),
                ],
            );
        }
        for key in ["p256", "rsa2048"] {
            for clients in [1, 2] {
                let mut series = Vec::new();
                for (side, ns) in [("", 500_000.0), ("go/", 1_000_000.0)] {
                    for mode in ["static", "reload", "watched-ca", "reload-x25519"] {
                        if side == "go/" && mode == "watched-ca" {
                            continue;
                        }
                        // Go's X25519 handshakes only 1.2x as slow as ours: the
                        // like-for-like classical target is not met.
                        let ns = match (side, mode) {
                            ("go/", "reload-x25519") => 600_000.0,
                            ("go/", _) => pick(ns, 250_000.0),
                            ("", "reload") if bad => 1_000_000.0,
                            ("", "watched-ca") if bad => 2_000_000.0,
                            _ => ns,
                        };
                        series.push((format!("{side}handshake/{mode}/{key}/{clients}"), ns));
                    }
                }
                let series: Vec<(&str, f64)> =
                    series.iter().map(|(id, ns)| (id.as_str(), *ns)).collect();
                paired(&mut r, &format!("{key}/{clients}"), &series);
            }
            // The client alone: ours half Go's CPU (met).
            let mut series = Vec::new();
            for server in CLIENT_SERVERS {
                series.push((format!("client/{server}/{key}"), 700_000.0));
                series.push((format!("go/client/{server}/{key}"), 800_000.0));
                series.push((
                    format!("client-cpu/{server}/{key}"),
                    pick(300_000.0, 900_000.0),
                ));
                series.push((format!("go/client-cpu/{server}/{key}"), 600_000.0));
            }
            let series: Vec<(&str, f64)> =
                series.iter().map(|(id, ns)| (id.as_str(), *ns)).collect();
            paired(&mut r, &format!("client/{key}"), &series);
        }
        for clients in [1, 2] {
            paired(
                &mut r,
                &format!("spiffe/{clients}"),
                &[
                    (
                        &format!("handshake/secret-on-svid-server/p256/{clients}"),
                        500_000.0,
                    ),
                    (
                        &format!("handshake/spiffe/p256/{clients}"),
                        pick(505_000.0, 1_000_000.0),
                    ),
                ],
            );
        }
        r.counts.insert(
            "identity-rotation-parses/rsa2048-pkcs8".to_owned(),
            vec![if bad { 1.0 } else { 0.0 }; 40],
        );
        r.counts.insert(
            "identity-racing-loads/rsa4096-pkcs8".to_owned(),
            vec![if bad { 2.0 } else { 1.0 }; 40],
        );
        r
    }

    fn sample_results(go: bool) -> Results {
        results(go, false)
    }

    fn verdict_of(rows: &[TargetRow], target: &str) -> Option<Verdict> {
        rows.iter()
            .find(|row| row.target.starts_with(target))
            .unwrap_or_else(|| panic!("no target {target}"))
            .verdict
    }

    #[test]
    fn verdicts_on_measured_targets() {
        let rows = targets(&sample_results(true));
        assert_eq!(verdict_of(&rows, "p256: identity cost"), Some(Verdict::Met));
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
    fn key_parses_after_rotations_are_counted_not_timed() {
        let mut results = sample_results(false);
        results.counts.clear();
        let rows = targets(&results);
        assert!(
            !rows
                .iter()
                .any(|row| row.target.contains("no handshake pays")),
            "no count, no row"
        );
        results.counts.insert(
            "identity-rotation-parses/rsa2048-pkcs8".to_owned(),
            vec![0.0; 40],
        );
        let rows = targets(&results);
        assert_eq!(
            verdict_of(&rows, "rsa2048-pkcs8: no handshake pays"),
            Some(Verdict::Met)
        );
        assert!(render(&results).contains(
            "| rsa2048-pkcs8: no handshake pays a key parse after a rotation | 0 of 40 handshakes | met |"
        ));
        let mut one = vec![0.0; 40];
        one[7] = 1.0;
        results
            .counts
            .insert("identity-rotation-parses/rsa2048-pkcs8".to_owned(), one);
        let rows = targets(&results);
        let row = rows
            .iter()
            .find(|row| row.target.starts_with("rsa2048-pkcs8: no handshake pays"))
            .unwrap();
        assert_eq!(row.verdict, Some(Verdict::NotMet));
        assert_eq!(row.shown.as_deref(), Some("1 of 40 handshakes"));
        assert!(any_not_met(&rows));
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

    #[test]
    fn go_hybrid_from_the_version() {
        assert_eq!(
            go_hybrid("go version go1.23.5 linux/amd64"),
            "X25519Kyber768Draft00"
        );
        assert_eq!(go_hybrid("go1.23"), "X25519Kyber768Draft00");
        assert_eq!(
            go_hybrid("go version go1.24rc1 linux/amd64"),
            "X25519MLKEM768"
        );
        assert_eq!(
            go_hybrid("go version go1.26.0 linux/amd64"),
            "X25519MLKEM768"
        );
    }

    #[test]
    fn human_units() {
        assert_eq!(human(150.0), "150 ns");
        assert_eq!(human(1_500.0), "1.50 us");
        assert_eq!(human(40_000.0), "40.0 us");
        assert_eq!(human(2_500_000.0), "2.50 ms");
    }
}
