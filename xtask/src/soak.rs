//! `cargo xtask soak`: builds and runs the soak binary (`benches/examples/soak.rs`,
//! release profile), which does the work and prints the RSS table and the verdict.
//! xtask only orchestrates. Not part of `test` or `ci`: the full run takes minutes.
//!
//! Options are passed through: `--reloads N` (default 1 000 000), `--handshakes N`
//! (default 50 000), `--rotate-every N`, `--rounds N`, `--bound-mib F`; `--clusters` for
//! the cluster-growth table (issue 29).

use crate::process::{cargo, run_checked};

/// Runs the soak; fails when the binary reports that memory grew (or any failure).
/// `--clusters` runs the cluster-growth mode instead
/// (`benches/examples/clusters.rs`): 1, 10 and 100 clusters, each size in a process
/// of its own, one table row each.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if args.iter().any(|a| a == "--clusters") {
        return clusters();
    }
    run_checked(
        cargo()
            .args([
                "run",
                "--release",
                "-p",
                "platform-benches",
                "--example",
                "soak",
                "--",
            ])
            .args(args),
    )
}

/// The cluster-growth table: one process per size, since the process's registry keeps
/// its entries for the life of the process.
fn clusters() -> Result<(), String> {
    run_checked(cargo().args([
        "build",
        "--release",
        "-p",
        "platform-benches",
        "--example",
        "clusters",
    ]))?;
    println!(
        "| clusters | credentials each | watched Secrets | open watches | first construction (median) | later construction (median) | RSS per watched Secret (upper bound) | after every construction is dropped |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for size in ["1", "10", "100"] {
        run_checked(cargo().args([
            "run",
            "--quiet",
            "--release",
            "-p",
            "platform-benches",
            "--example",
            "clusters",
            "--",
            size,
        ]))?;
    }
    Ok(())
}
