//! `cargo xtask real-peers`: builds the real peers the real-server test tier runs
//! against, `kube-apiserver` and `etcd`, and the SPIRE tier's `spire-server` and
//! `spire-agent` (both from one module, built with cgo for SPIRE's SQLite datastore),
//! and Caddy with its standard modules (a gateway in front of svc-tls's serving half),
//! and the OpenTelemetry Collector (OTLP in, spans written to a file: the trace tests),
//! from the Go modules under `xtask/real-peers/`
//! with Go 1.26 and the Go module proxy. Each is built once per machine and kept
//! outside the repository, by component and version, under
//! `$HOME/.cache/platform-client/real-peers/<component>-<version>/bin/`
//! (`PLATFORM_CLIENT_REAL_PEERS` names another root); the Go module and build caches
//! live under that root too. A component whose binary exists and whose recorded
//! `go.mod`/`go.sum` match ours is not rebuilt.
//!
//! The test support (`crates/real-apiserver`, `crates/real-spire`) finds the binaries at the same paths and
//! fails, naming this task, when they are missing.

mod build;
mod components;

use std::path::PathBuf;

use components::COMPONENTS;

/// Entry point of the `real-peers` task.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask real-peers".into());
    }
    ensure()
}

/// Builds every component that is not cached yet (what `cargo xtask test` calls).
pub(crate) fn ensure() -> Result<(), String> {
    let root = cache_root()?;
    let go = build::find_go()?;
    for component in COMPONENTS {
        build::ensure(&go, &root, component)?;
    }
    Ok(())
}

/// The cache root: `$PLATFORM_CLIENT_REAL_PEERS`, else
/// `$HOME/.cache/platform-client/real-peers` (the test support reads the same).
fn cache_root() -> Result<PathBuf, String> {
    if let Some(root) = std::env::var_os("PLATFORM_CLIENT_REAL_PEERS") {
        return Ok(PathBuf::from(root));
    }
    let home = std::env::var_os("HOME").ok_or("HOME is not set: no cache for the real peers")?;
    Ok(PathBuf::from(home).join(".cache/platform-client/real-peers"))
}
