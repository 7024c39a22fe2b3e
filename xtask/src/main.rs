//! Project automation, in the cargo-xtask convention: `cargo xtask <task>`.
//!
//! - `bench`: runs every criterion benchmark in `benches/` and prints one cost table,
//!   with the targets we hold ourselves to (half of Go's cost, <5% handshake overhead).
//! - `test`: prepares what the tests need on a fresh machine (kubectl, nginx, PyJWT),
//!   then runs the whole test suite.
//! - `ci`: format check, clippy, cargo-deny (offline advisory snapshot), then `test`.

mod bench;
mod codegen;
mod prepare;

use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask <bench|test|ci>

  bench   run the benchmarks in benches/ and print the cost table
          (--table-only: print the last run's table again)
  test    install what the tests need (as root), then run the whole suite
  ci      fmt check, clippy -D warnings, cargo-deny, then test";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("bench") => bench::run(&args[1..]),
        Some("test") => test(&args[1..]),
        Some("ci") => ci(),
        Some("codegen") => codegen::run(&args[1..]),
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

/// The workspace root: xtask lives one level below it.
pub(crate) fn workspace_root() -> std::path::PathBuf {
    let manifest_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| manifest_dir.to_path_buf())
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

/// Runs a command, failing with the command line when it does not succeed.
pub(crate) fn run_checked(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    eprintln!("xtask: running {shown}");
    let status = command
        .status()
        .map_err(|error| format!("could not start {shown}: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed with {status}"))
    }
}

fn test(extra: &[String]) -> Result<(), String> {
    prepare::test_prerequisites()?;
    // The default target set: libraries, binaries, integration tests, examples and
    // doctests. Benchmarks are left to `cargo xtask bench` (criterion would run them
    // in full here).
    run_checked(cargo().args(["test", "--workspace"]).args(extra))
}

fn ci() -> Result<(), String> {
    run_checked(cargo().args(["fmt", "--all", "--", "--check"]))?;
    codegen::run(&["--check".to_owned()])?;
    run_checked(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    deny()?;
    test(&[])
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
        eprintln!(
            "xtask: advisories are checked against the offline snapshot from {}",
            std::fs::read_to_string(root.join("../shared/advisory-db/SNAPSHOT"))
                .unwrap_or_else(|_| "an unknown date".into())
                .trim()
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
