//! The checks of a smoke run's output (`cargo xtask ci` runs `bench --quick`, then
//! these): the report and the chart it wrote exist and hold a figure of ours for every
//! benchmark group. They read the Markdown the renderer wrote, never a timing, so they
//! live apart from the run and from the figures.

use super::target_dir;

/// What `cargo xtask ci` checks after `bench --quick`: the report and the chart exist
/// and hold a figure of ours for every benchmark group. Never a timing.
pub fn check_smoke_output() -> Result<(), String> {
    let dir = target_dir(&crate::process::workspace_root()).join("bench-report");
    let doc = std::fs::read_to_string(dir.join("benchmarks.md"))
        .map_err(|e| format!("bench smoke: no report in {}: {e}", dir.display()))?;
    let svg = std::fs::read_to_string(dir.join("benchmarks.svg"))
        .map_err(|e| format!("bench smoke: no chart in {}: {e}", dir.display()))?;
    check_report(&doc, &svg)
        .and_then(|()| check_like_for_like(&doc))
        .and_then(|()| check_anchors(&doc))
        .map_err(|e| format!("bench smoke: {e}"))
}

/// The like-for-like handshake rows against Go (the ones the Go targets are judged
/// on) hold a figure of ours for both key exchanges.
fn check_like_for_like(doc: &str) -> Result<(), String> {
    if !doc.contains("### Like for like against Go") {
        return Err("the report has no like-for-like table".into());
    }
    // key exchange | key | clients | ours reload | ...
    for kx in [
        "| X25519 on both sides | p256 | 1 | ",
        "| hybrid on both sides",
    ] {
        has_figure(doc, kx, 4)?;
    }
    Ok(())
}

/// The Go anchors' tables hold our figures: the pooled-rotation row of a case, and
/// our SPIFFE mode beside go-spiffe's client. Not when the run measured no Go: our
/// pooled-rotation arm needs the Go program's HTTPS server.
fn check_anchors(doc: &str) -> Result<(), String> {
    if doc.contains("\n- Go: not measured") {
        return Ok(());
    }
    for (section, row) in [
        (
            "### Pooled connections across a rotation, against client-go's certificate rotation",
            "| p256-pkcs8 | ",
        ),
        ("The SPIFFE anchor: ", "| 1 | "),
    ] {
        let at = doc
            .find(section)
            .ok_or_else(|| format!("the report has no {section:?}"))?;
        has_figure(&doc[at..], row, 2).map_err(|e| format!("{e} (after {section:?})"))?;
    }
    Ok(())
}

/// The first row of `text` that starts with `row` holds our figure (a number) in its
/// cell `n` (the cells counted from 1).
fn has_figure(text: &str, row: &str, n: usize) -> Result<(), String> {
    let line = text
        .lines()
        .find(|l| l.starts_with(row))
        .ok_or_else(|| format!("the report has no row {row:?}"))?;
    let figure = line.split('|').nth(n).unwrap_or_default();
    if figure.trim().starts_with(|c: char| c.is_ascii_digit()) {
        Ok(())
    } else {
        Err(format!("our figure is missing in {line:?}"))
    }
}

fn check_report(doc: &str, svg: &str) -> Result<(), String> {
    for needle in [
        "### Identity load per key type and format",
        "### The first handshake racing the loader",
        "### Metrics cost where it is paid",
        "### Client against the same server",
        "### Whole stack (each side its own server): loopback TLS 1.3 mTLS handshakes per second",
        "### SPIFFE mode against Secret mode",
        "### X-Principal tokens",
        "### Targets",
        "parse (our full load) <= 1.0x Go's X509KeyPair",
        "- rustc: ",
        "- Go: ",
        "- CPU: ",
    ] {
        if !doc.contains(needle) {
            return Err(format!("the report has no {needle:?}"));
        }
    }
    // A row of each table with our figure measured (a number, not "not measured").
    for row in [
        "| rsa2048-pkcs8 | ",
        "| p256 | 1 | ",
        "| rsa2048 | ",
        "| rsa4096-pkcs8 | ",
        "| first handshake after a rotation | ",
        "| rustls server | p256 | ",
        "| crypto/tls server | rsa2048 | ",
    ] {
        has_figure(doc, row, row.matches('|').count())?;
    }
    if !(svg.starts_with("<svg") && svg.contains("<rect") && svg.contains("handshakes")) {
        return Err("the chart is not an SVG with bars and labels".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoke_check_wants_figures_not_timings() {
        let svg = "<svg><rect/><text>handshakes per second</text></svg>";
        let doc = "- rustc: x\n- Go: go1.23\n- CPU: y\n### Identity load per key type and format\n\
                   | rsa2048-pkcs8 | 1.2 ms [1 – 2] |\n\
                   ### The first handshake racing the loader\n| rsa4096-pkcs8 | 9 us [1 – 2] |\n\
                   ### Metrics cost where it is paid (P-256)\n\
                   | first handshake after a rotation | 3 us [1 – 2] |\n\
                   ### Client against the same server (X25519)\n\
                   | rustls server | p256 | 900 [800 – 1000] |\n\
                   | crypto/tls server | rsa2048 | 900 [800 – 1000] |\n\
                   ### Whole stack (each side its own server): loopback TLS 1.3 mTLS handshakes per second\n\
                   | p256 | 1 | 900 [800 – 1000] |\n\
                   ### SPIFFE mode against Secret mode (P-256)\n\
                   ### X-Principal tokens\n| rsa2048 | 500 us [1 – 2] |\n### Targets\n\
                   | rsa2048-pkcs8: parse (our full load) <= 1.0x Go's X509KeyPair on the same bytes |\n";
        assert_eq!(check_report(doc, svg), Ok(()));
        let missing = doc.replace("| p256 | 1 | 900", "| p256 | 1 | not measured");
        assert!(check_report(&missing, svg).is_err());
        assert!(check_report(doc, "<svg></svg>").is_err());
        assert!(check_report(&doc.replace("### Targets", ""), svg).is_err());
        assert!(check_report(&doc.replace("### SPIFFE mode", "### Other"), svg).is_err());
    }

    #[test]
    fn smoke_check_wants_the_like_for_like_rows() {
        let doc = "### Like for like against Go: the same key exchange on both sides (reload)\n\
                   | X25519 on both sides | p256 | 1 | 900 [800 – 1000] | not measured | |\n\
                   | hybrid on both sides, each side's default (ours X25519MLKEM768, Go its default hybrid) | p256 | 1 | 800 [700 – 900] | not measured | |\n";
        assert_eq!(check_like_for_like(doc), Ok(()));
        assert!(
            check_like_for_like(&doc.replace("| p256 | 1 | 900", "| p256 | 1 | not measured"))
                .is_err()
        );
        assert!(check_like_for_like(&doc.replace("| hybrid on", "| other")).is_err());
    }

    #[test]
    fn smoke_check_wants_the_anchor_rows_the_renderer_writes() {
        let doc = crate::report::render(&crate::report::sample_results(true));
        assert_eq!(check_anchors(&doc), Ok(()));
        let pooled = doc.replace("| p256-pkcs8 | 1.22 ms", "| p256-pkcs8 | not measured");
        assert!(check_anchors(&pooled).is_err());
        assert!(check_anchors(&doc.replace("The SPIFFE anchor: ", "")).is_err());
        let without_go = format!("\n- Go: not measured (no Go)\n{pooled}");
        assert_eq!(check_anchors(&without_go), Ok(()));
    }

    #[test]
    fn the_committed_report_passes_the_smoke_check() {
        // The checker and the renderer agree on the format (the committed report was
        // written by `render`).
        let root = crate::process::workspace_root();
        let doc = std::fs::read_to_string(root.join("docs/benchmarks.md")).unwrap();
        let svg = std::fs::read_to_string(root.join("docs/benchmarks.svg")).unwrap();
        assert_eq!(check_report(&doc, &svg), Ok(()));
    }

    #[test]
    #[ignore = "needs the report of a `cargo xtask bench --quick` run"]
    fn the_last_quick_run_passes_the_smoke_check() {
        assert_eq!(check_smoke_output(), Ok(()));
    }
}
