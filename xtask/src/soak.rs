//! `cargo xtask soak`: builds and runs the soak binary (`benches/examples/soak.rs`,
//! release profile), which does the work and prints the RSS table and the verdict.
//! xtask only orchestrates. Not part of `test` or `ci`: the full run takes minutes.
//!
//! Options are passed through: `--reloads N` (default 1 000 000), `--handshakes N`
//! (default 50 000), `--rotate-every N`, `--rounds N`, `--bound-mib F`.

use crate::process::{cargo, run_checked};

/// Runs the soak; fails when the binary reports that memory grew (or any failure).
pub(crate) fn run(args: &[String]) -> Result<(), String> {
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
