//! The environment facts above the table: when the run was, how long it took, the
//! toolchains and libraries measured (rustc, the locked aws-lc-rs and rustls; the Go
//! and the Go modules the legacy program was built with, read from the binary by `go
//! version -m`), the CPU and the load average at the start and the end. Read from the
//! machine, `Cargo.lock` and the Go binary, apart from the figures, which they only
//! qualify.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::golang::BuildInfo;

/// The Go modules the header names when the legacy program depends on them.
const GO_MODULES: &[&str] = &[
    "github.com/go-jose/go-jose/v4",
    "sigs.k8s.io/controller-runtime",
    "k8s.io/client-go",
    "github.com/spiffe/go-spiffe/v2",
];

/// The Go line: what the binary was built with (`go1.26.8`, then each module of
/// [`GO_MODULES`] it has with its version), or why Go was not measured.
fn go_line(go: Result<&BuildInfo, &str>) -> String {
    match go {
        Err(why) => format!("not measured ({why})"),
        Ok(info) => {
            let modules: Vec<String> = GO_MODULES
                .iter()
                .filter_map(|m| info.module(m).map(|v| format!("{m} {v}")))
                .collect();
            if modules.is_empty() {
                format!("{} (benches/go built with no module of note)", info.go)
            } else {
                format!(
                    "{} (benches/go built with {}, from the Go module proxy)",
                    info.go,
                    modules.join(", ")
                )
            }
        }
    }
}

fn command_line(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// A package's version in Cargo.lock.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let needle = format!("name = \"{name}\"\nversion = \"");
    let start = lock.find(&needle)? + needle.len();
    let end = lock[start..].find('"')? + start;
    Some(lock[start..end].to_owned())
}

/// The 1-minute load average (`/proc/loadavg`).
pub(super) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

/// The header: `go` is what the Go program was built with, or why Go did not run.
pub(super) fn header(
    root: &Path,
    go: Result<&BuildInfo, &str>,
    quick: bool,
    elapsed: std::time::Duration,
    load_at_start: &str,
) -> String {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap_or_default();
    let rustc = command_line(
        &std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()),
        &["-V"],
    )
    .unwrap_or_else(|| "rustc: unknown".into());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
            })
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Run of {} UTC ({}, {:.0} s including the build)\n",
        command_line("date", &["-u", "+%Y-%m-%d %H:%M"]).unwrap_or_default(),
        if quick {
            "`cargo xtask bench --quick`: a smoke run, figures too short to judge"
        } else {
            "`cargo xtask bench`"
        },
        elapsed.as_secs_f64()
    );
    let _ = writeln!(out, "- rustc: {rustc}");
    let _ = writeln!(out, "- Go: {}", go_line(go));
    let _ = writeln!(
        out,
        "- crypto provider: aws-lc-rs {} (rustls {}); Go side: Go's crypto/tls, go-jose {}",
        locked_version(&lock, "aws-lc-rs").unwrap_or_else(|| "?".into()),
        locked_version(&lock, "rustls").unwrap_or_else(|| "?".into()),
        match go {
            Err(_) => "not measured",
            Ok(info) => info
                .module("github.com/go-jose/go-jose/v4")
                .unwrap_or("v4 (version unknown)"),
        }
    );
    let _ = writeln!(
        out,
        "- CPU: {cpu}, {cores} cores available; load average (1 min) at the start of the \
         run: {load_at_start}, at the end: {}",
        load_average()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_go_line_names_go_and_the_modules_of_note() {
        let info = BuildInfo {
            go: "go1.26.8".into(),
            modules: vec![
                ("github.com/go-jose/go-jose/v4".into(), "v4.1.9".into()),
                ("golang.org/x/net".into(), "v0.40.0".into()),
                ("k8s.io/client-go".into(), "v0.35.0".into()),
            ],
        };
        assert_eq!(
            go_line(Ok(&info)),
            "go1.26.8 (benches/go built with github.com/go-jose/go-jose/v4 v4.1.9, \
             k8s.io/client-go v0.35.0, from the Go module proxy)"
        );
        assert_eq!(go_line(Err("not run")), "not measured (not run)");
    }

    #[test]
    fn versions_from_the_lock_file() {
        let lock = "[[package]]\nname = \"aws-lc-rs\"\nversion = \"1.19.0\"\n";
        assert_eq!(locked_version(lock, "aws-lc-rs").as_deref(), Some("1.19.0"));
        assert_eq!(locked_version(lock, "rustls"), None);
    }
}
