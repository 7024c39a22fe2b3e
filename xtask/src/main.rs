//! Project automation, in the cargo-xtask convention: `cargo xtask <task>`.
//!
//! - `bench`: measures our side (`benches/`) and the legacy Go side (`benches/go/`) in
//!   one run and prints one table with the targets judged on confidence intervals
//!   (`--quick`: smoke run; `--check`: fail when a measured target is not met).
//! - `test`: prepares what the tests need on a fresh machine (the real kube-apiserver,
//!   etcd, spire-server and spire-agent, kubectl, nginx, Prometheus, PyJWT, and Go 1.23 for one test's TLS
//!   server; the machine's Go 1.26 builds the other Go programs), runs the alert rules'
//!   unit tests (`promtool test rules
//!   docs/alerts.test.yaml`), then the whole test suite.
//! - `real-peers`: builds, once per machine and cached outside the repository by
//!   version, the real `kube-apiserver` and `etcd` the real-server test tier runs
//!   against and the real `spire-server` and `spire-agent` of the SPIRE tier (`test`
//!   does it first).
//! - `codegen`: regenerates kube-construct's built-in registry table and region-api's
//!   client from its OpenAPI document (`--check`: fail when a committed output differs).
//! - `docs-check`: every relative link (anchors against the target's headings) and
//!   every backticked repository path in the tracked Markdown leads somewhere.
//! - `layers`: checks the layering of crates' modules (which module may name which)
//!   against the rules in `layers.toml`.
//! - `soak`: a million identity reloads and tens of thousands of handshakes in one
//!   process, sampling its RSS; prints the table and "flat" or fails (not in `ci`).
//! - `release-check`: what a release of the published crates must pass
//!   (docs/versioning.md): changelog entries, rust-version, docs, features, packages
//!   built by a consumer workspace, cargo-semver-checks, cargo-release's dry run.
//! - `ci`: format check, `codegen --check`, `docs-check`, `layers`, clippy, cargo-deny
//!   (offline advisory snapshot), `release-check` but its semver and dry-run steps
//!   (those run when a release is made: docs/decisions/release-checks-at-release.md),
//!   `test`, then `bench --quick` (checks that it produces the table and chart, never a
//!   timing).

mod backports;
mod bench;
mod chart;
mod codegen;
mod docs_check;
mod golang;
mod layers;
mod prepare;
mod process;
mod real_peers;
mod release;
mod report;
mod soak;
mod stats;
mod test_summary;
mod tools;

use std::process::{Command, ExitCode};

use process::{cargo, run_checked, workspace_root};

const USAGE: &str =
    "usage: cargo xtask <bench|test|ci|real-peers|codegen|docs-check|layers|release-check|soak>

  bench   measure ours (benches/) and Go's (benches/go/, built with Go 1.26+ and
          modules from the Go module proxy) in one run, print the table, write
          docs/benchmarks.md and docs/benchmarks.svg
          (--quick: smoke run written under target/bench-report/;
           --check: exit non-zero when a measured target is not met)
  test    install what the tests need (as root), run the alert rules' unit
          tests (promtool test rules docs/alerts.test.yaml), then the whole suite
  real-peers
          build the real kube-apiserver, etcd, spire-server and spire-agent
          (Go 1.26, the Go module proxy) once per machine, cached under
          $HOME/.cache/platform-client/real-peers/<component>-<version>/
  ci      fmt check, codegen --check, docs-check, layers, clippy -D warnings,
          cargo-deny, release-check but semver and the dry run (a release runs
          them), test, then bench --quick
  codegen regenerate kube-construct's built-in registry table and region-api's
          client from its OpenAPI document (--check: fail when either differs)
  docs-check
          every relative link, anchor and backticked repository path in the
          tracked Markdown leads somewhere
  release-check
          what a release must pass (docs/versioning.md): changelog entries,
          rust-version, docs, features, packages built by a consumer workspace,
          cargo-semver-checks against release/baseline, cargo-release dry run
          (--only step,step)
  layers  check that modules name only the modules layers.toml allows them to
          (prints each forbidden path with file and line; fails when any)
  soak    a million identity reloads and 50 000 handshakes, RSS sampled; prints
          the table and the verdict, fails unless memory stayed flat
          (--reloads N, --handshakes N for shorter runs; not part of ci)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("bench") => bench::run(&args[1..]),
        Some("test") => test(&args[1..]),
        Some("ci") => ci(),
        Some("real-peers") => real_peers::run(&args[1..]),
        Some("codegen") => codegen::run(&args[1..]),
        Some("docs-check") => docs_check::run(&args[1..]),
        Some("layers") => layers::run(&args[1..]),
        Some("soak") => soak::run(&args[1..]),
        Some("release-check") => release::run(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("unknown or missing task\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn test(extra: &[String]) -> Result<(), String> {
    prepare::test_prerequisites()?;
    alert_rule_tests()?;
    // Go 1.26+ for svc-tls's go-jose interop test, which builds its Go verifier with
    // modules from the Go module proxy as `cargo xtask bench` builds benches/go: the
    // test finds the toolchain through $GO and gets the same environment (the local
    // toolchain, -mod=readonly, the module and build caches outside the repository).
    let (go, version) = golang::ensure()?;
    eprintln!("xtask: {version} for the go-jose interop test");
    // The default target set: libraries, binaries, integration tests, examples and
    // doctests. Benchmarks are left to `cargo xtask bench` (criterion would run them
    // in full here).
    // The output passes through unchanged; at the end, the counts in all and in
    // each real-peer tier (test_summary.rs says which tests those are).
    test_summary::run_summarised(
        cargo()
            // Every test binary runs even when one fails, so a run reports every
            // failure at once; any failure still fails the task.
            .args(["test", "--workspace", "--no-fail-fast"])
            .args(extra)
            .env("GO", go)
            .envs(golang::environment()),
    )
}

/// `promtool test rules docs/alerts.test.yaml`: the alert rules' unit tests (each rule
/// fires on the series it is for, stays silent on healthy ones, honours its `for:`).
/// Run first because it takes a second and a failing case fails the whole task, as
/// CI must; promtool is Debian's `prometheus` package, which `test_prerequisites`
/// has just made sure of.
fn alert_rule_tests() -> Result<(), String> {
    let tests = workspace_root().join("docs/alerts.test.yaml");
    run_checked(Command::new("promtool").args(["test", "rules"]).arg(&tests)).map_err(|e| {
        format!(
            "the alert rules' unit tests ({}) failed: {e}",
            tests.display()
        )
    })
}

fn ci() -> Result<(), String> {
    // The real peers (Go builds, once per machine) are built beside the checks below
    // rather than after them: their module downloads and the checks' single-crate
    // stretches leave a core idle that the other fills (a cold run's largest phases).
    let peers = std::thread::spawn(real_peers::ensure);
    run_checked(cargo().args(["fmt", "--all", "--", "--check"]))?;
    codegen::run(&["--check".to_owned()])?;
    docs_check::run(&[])?;
    layers::run(&[])?;
    run_checked(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    deny()?;
    release::every_change()?;
    peers
        .join()
        .map_err(|_| "the real peers' build panicked".to_owned())??;
    test(&[])?;
    bench_smoke()
}

/// `bench --quick`, checked for its table and chart; never for a timing.
fn bench_smoke() -> Result<(), String> {
    bench::run(&["--quick".to_owned()])?;
    bench::check_smoke_output()
}

/// cargo-deny against the offline advisory snapshot in `../shared/advisory-db`.
fn deny() -> Result<(), String> {
    let root = workspace_root();
    let install = root.join("../shared/advisory-db/install");
    if install.exists() {
        let home = std::env::var("CARGO_HOME")
            .unwrap_or_else(|_| format!("{}/.cargo", std::env::var("HOME").unwrap_or_default()));
        run_checked(
            Command::new("bash")
                .arg(&install)
                .arg(format!("{home}/advisory-dbs")),
        )?;
        let snapshot = std::fs::read_to_string(root.join("../shared/advisory-db/SNAPSHOT"))
            .map_err(|e| format!("../shared/advisory-db/SNAPSHOT: {e}"))?;
        // "<commit> <ISO-8601 date>": cargo-deny dates the database by the mtime of
        // .git/FETCH_HEAD, which `install` sets to now. Date it by the snapshot
        // instead, so deny.toml's maximum-db-staleness bounds the snapshot's age.
        let date = snapshot
            .split_whitespace()
            .nth(1)
            .ok_or_else(|| format!("SNAPSHOT has no date: {:?}", snapshot.trim()))?;
        run_checked(Command::new("touch").arg("-d").arg(date).arg(format!(
            "{home}/advisory-dbs/advisory-db-3157b0e258782691/.git/FETCH_HEAD"
        )))?;
        eprintln!(
            "xtask: advisories are checked against the offline snapshot from {} (dated {date})",
            snapshot.trim()
        );
    } else {
        return Err(format!(
            "{} is missing: cargo-deny cannot check advisories offline without it",
            install.display()
        ));
    }
    // cargo-deny reads `cargo metadata` offline, which needs every platform's crates
    // downloaded (crates.io is reachable; the advisory database's host is not).
    run_checked(cargo().args(["fetch", "--quiet"]))?;
    run_checked(cargo().args(["deny", "--offline", "check"]))
}
