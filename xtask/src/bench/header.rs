//! The environment facts above the table: when the run was, how long it took, the
//! toolchains and crypto libraries measured (rustc, Go, the locked aws-lc-rs and
//! rustls), the CPU and the load average at the start and the end. Read from the
//! machine and `Cargo.lock`, apart from the figures, which they only qualify.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::report::Results;

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

pub(super) fn header(
    root: &Path,
    results: &Results,
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
    let _ = writeln!(
        out,
        "- Go: {}",
        match &results.go {
            Ok(version) => version.clone(),
            Err(why) => format!("not measured ({why})"),
        }
    );
    let _ = writeln!(
        out,
        "- crypto provider: aws-lc-rs {} (rustls {}); Go side: Go's crypto/tls, go-jose {}",
        locked_version(&lock, "aws-lc-rs").unwrap_or_else(|| "?".into()),
        locked_version(&lock, "rustls").unwrap_or_else(|| "?".into()),
        if results.go.is_ok() {
            "v4 (Debian package)"
        } else {
            "not measured"
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
    fn versions_from_the_lock_file() {
        let lock = "[[package]]\nname = \"aws-lc-rs\"\nversion = \"1.19.0\"\n";
        assert_eq!(locked_version(lock, "aws-lc-rs").as_deref(), Some("1.19.0"));
        assert_eq!(locked_version(lock, "rustls"), None);
    }
}
