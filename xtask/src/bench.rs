//! `cargo xtask bench`: runs the criterion benchmarks of `benches/` and prints one
//! table of medians, then the targets we hold ourselves to, each computed from
//! figures measured in this same run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

/// Go's costs on these machines, the baseline our targets are stated against.
const GO_RELOAD_NS: &[(&str, &str, f64)] = &[
    ("RSA-2048", "rsa2048", 70_000.0),
    ("P-256", "p256", 45_000.0),
    ("P-384", "p384", 200_000.0),
    ("Ed25519", "ed25519", 50_000.0),
];
const GO_PS512_SIGN_NS: f64 = 1_200_000.0;

/// One benchmark's median, in nanoseconds per iteration.
type Medians = BTreeMap<String, f64>;

pub fn run(extra: &[String]) -> Result<(), String> {
    let root = super::workspace_root();
    let criterion_dir = root.join("target/criterion");
    // `--table-only` prints the table of the last run again without measuring.
    let table_only = extra.first().is_some_and(|arg| arg == "--table-only");
    if !table_only {
        // Only figures from this run may appear in the table.
        if criterion_dir.exists() {
            std::fs::remove_dir_all(&criterion_dir)
                .map_err(|error| format!("cannot clear {}: {error}", criterion_dir.display()))?;
        }
        let mut command = super::cargo();
        command
            .args(["bench", "--package", "platform-benches", "--benches", "--"])
            .args(extra);
        super::run_checked(&mut command)?;
    }

    let medians = collect(&criterion_dir)?;
    if medians.is_empty() {
        return Err("the benchmarks ran but left no results in target/criterion".into());
    }
    let table = render(&medians);
    println!("{table}");
    let saved = root.join("target/bench-table.md");
    std::fs::write(&saved, &table)
        .map_err(|error| format!("cannot write {}: {error}", saved.display()))?;
    eprintln!("xtask: table saved to {}", saved.display());
    Ok(())
}

/// Reads every `new/estimates.json` (median) with its `new/benchmark.json` (id).
fn collect(dir: &Path) -> Result<Medians, String> {
    let mut medians = Medians::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries = std::fs::read_dir(&current)
            .map_err(|error| format!("cannot read {}: {error}", current.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|name| name == "new") {
                    if let Some((id, median)) = read_result(&path) {
                        medians.insert(id, median);
                    }
                } else if path.file_name().is_some_and(|name| name != "report") {
                    pending.push(path);
                }
            }
        }
    }
    Ok(medians)
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn read_result(new_dir: &Path) -> Option<(String, f64)> {
    let benchmark = read_json(&new_dir.join("benchmark.json"))?;
    let estimates = read_json(&new_dir.join("estimates.json"))?;
    let id = benchmark.get("full_id")?.as_str()?.to_string();
    let median = estimates.get("median")?.get("point_estimate")?.as_f64()?;
    Some((id, median))
}

fn human(ns: f64) -> String {
    if ns >= 1_000_000.0 {
        format!("{:.2} ms", ns / 1_000_000.0)
    } else if ns >= 1_000.0 {
        format!("{:.1} us", ns / 1_000.0)
    } else {
        format!("{ns:.0} ns")
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

/// The slowest measured median among benchmarks whose id contains all `parts`.
fn worst(medians: &Medians, parts: &[&str]) -> Option<(String, f64)> {
    medians
        .iter()
        .filter(|(id, _)| parts.iter().all(|part| id.contains(part)))
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(id, ns)| (id.clone(), *ns))
}

fn render(medians: &Medians) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n## Medians (this run)\n");
    let _ = writeln!(out, "| benchmark | median |");
    let _ = writeln!(out, "|---|---:|");
    for (id, ns) in medians {
        let _ = writeln!(out, "| {id} | {} |", human(*ns));
    }

    let _ = writeln!(out, "\n## Targets\n");
    let _ = writeln!(out, "| target | measured | Go | ratio | verdict |");
    let _ = writeln!(out, "|---|---|---:|---:|---|");
    // Two figures per key type: the full load (PEM, certificate, key, match check),
    // which runs whenever the Secret's bytes differ from the last good load, and the
    // resolver's steady-state path for an unchanged Secret (bytes compared, validity
    // re-checked, the loaded identity reused). Go runs the full load every time.
    let reload_kinds = [
        ("full load, Secret changed", "reload/"),
        ("resolver path, Secret unchanged", "reload-cached/"),
    ];
    for (label, key, go_ns) in GO_RELOAD_NS {
        for (kind, group) in reload_kinds {
            // Every format of a key type must meet the target: report the slowest.
            match worst(medians, &[group, key]) {
                Some((id, ns)) => {
                    let ratio = ns / go_ns;
                    let _ = writeln!(
                        out,
                        "| reload {label} ({kind}) <= 0.5x Go | {} ({id}) | {} | {ratio:.3}x | {} |",
                        human(ns),
                        human(*go_ns),
                        verdict(ratio <= 0.5)
                    );
                }
                None => {
                    let _ = writeln!(out, "| reload {label} ({kind}) | not measured | | | |");
                }
            }
        }
    }
    if let (Some(resolve), Some(stat)) = (
        medians.get("handshake/resolve"),
        medians.get("handshake/static/1"),
    ) {
        let share = resolve / stat * 100.0;
        let _ = writeln!(
            out,
            "| resolver work per handshake < 5% of a handshake | {} vs {} handshake | | {share:.2}% | {} |",
            human(*resolve),
            human(*stat),
            verdict(share < 5.0)
        );
    }
    for concurrency in ["1", "2"] {
        let stat = medians.get(&format!("handshake/static/{concurrency}"));
        let reload = medians.get(&format!("handshake/reload/{concurrency}"));
        if let (Some(stat), Some(reload)) = (stat, reload) {
            let overhead = (reload - stat) / stat * 100.0;
            let _ = writeln!(
                out,
                "| loopback handshakes, reload vs static identity, {concurrency} client(s) < 5% | {} vs {} static | | {overhead:+.1}% | {} |",
                human(*reload),
                human(*stat),
                verdict(overhead < 5.0)
            );
        }
    }
    if let Some((id, ns)) = worst(medians, &["principal/sign-provider/rsa2048"]) {
        let ratio = ns / GO_PS512_SIGN_NS;
        let _ = writeln!(
            out,
            "| PS512 signing <= 0.5x go-jose | {} ({id}) | {} | {ratio:.2}x | {} |",
            human(ns),
            human(GO_PS512_SIGN_NS),
            verdict(ratio <= 0.5)
        );
    }
    for bits in ["rsa2048", "rsa3072", "rsa4096"] {
        let provider = medians.get(&format!("principal/sign-provider/{bits}"));
        let rsa_crate = medians.get(&format!("principal/sign-rsa-crate/{bits}"));
        if let (Some(provider), Some(rsa_crate)) = (provider, rsa_crate) {
            let _ = writeln!(
                out,
                "| PS512 signing {bits}: provider vs rsa crate | {} vs {} | | {:.2}x | {} |",
                human(*provider),
                human(*rsa_crate),
                provider / rsa_crate,
                if provider <= rsa_crate {
                    "provider faster"
                } else {
                    "rsa crate faster"
                }
            );
        }
    }
    out
}
