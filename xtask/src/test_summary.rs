//! What `cargo xtask test` says at the end: how many tests passed, failed and were
//! ignored, in all and in each real-peer tier, read from `cargo test`'s own output
//! (which it passes through unchanged).
//!
//! A test belongs to a tier by where it runs (docs/testing.md says the same):
//! - **the real kube-apiserver tier**: every test of the tier's own binaries
//!   ([`REAL_APISERVER_BINARIES`]), and elsewhere every test whose path has a
//!   `kube_apiserver` segment (the `both!` macros name the real-server half so) or
//!   whose name says `real_api_server`;
//! - **the real SPIRE tier**: every test of [`SPIRE_BINARIES`], and elsewhere every
//!   test whose path has a `spire` segment (the SPIFFE `both!` macro's real half).

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::Command;

/// Runs `cargo test` (`command`), passing its output through in order (stdout and
/// stderr merged into our stdout), then prints the [`Summary`]; fails as the command
/// does.
pub fn run_summarised(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    eprintln!("xtask: running {shown}");
    let (reader, writer) = std::io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
    let writer_too = writer
        .try_clone()
        .map_err(|e| format!("cannot share the pipe: {e}"))?;
    let mut child = command
        .stdout(writer)
        .stderr(writer_too)
        .spawn()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    // The command's own handles on the pipe must go, or reading never ends.
    command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut summary = Summary::default();
    let mut out = std::io::stdout().lock();
    for line in BufReader::new(reader).lines() {
        // A line that is not UTF-8 is passed on lossily; it is never a test line.
        let line = line.unwrap_or_else(|e| format!("(unreadable output: {e})"));
        let _ = writeln!(out, "{line}");
        summary.line(&line);
    }
    let _ = out.flush();
    drop(out);
    let status = child
        .wait()
        .map_err(|e| format!("could not wait for {shown}: {e}"))?;
    eprintln!("{}", summary.report());
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed with {status}"))
    }
}

/// Test binaries (integration test targets) whose every test runs against a real
/// kube-apiserver: real-apiserver's `server` and `differential`, svc-tls's
/// `real_server` and `real_server_disruption`.
pub const REAL_APISERVER_BINARIES: &[&str] = &[
    "server",
    "differential",
    "real_server",
    "real_server_disruption",
];

/// Test binaries whose every test runs against a real SPIRE: real-spire's `spire`.
pub const SPIRE_BINARIES: &[&str] = &["spire"];

/// Passed, failed and ignored counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub passed: u32,
    pub failed: u32,
    pub ignored: u32,
}

impl Counts {
    fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Passed => self.passed += 1,
            Outcome::Failed => self.failed += 1,
            Outcome::Ignored => self.ignored += 1,
        }
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} ignored",
            self.passed, self.failed, self.ignored
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed,
    Ignored,
}

/// The counts of a run, fed one output line at a time.
#[derive(Debug, Default)]
pub struct Summary {
    /// The test binary running now (its file name without cargo's hash).
    binary: String,
    binaries: u32,
    pub all: Counts,
    pub real_apiserver: Counts,
    pub spire: Counts,
}

impl Summary {
    /// Reads one line of `cargo test`'s output (stdout and stderr merged in order).
    pub fn line(&mut self, line: &str) {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("Running ") {
            self.binary = binary_name(rest);
            self.binaries += 1;
            return;
        }
        if let Some(rest) = trimmed.strip_prefix("Doc-tests ") {
            self.binary = format!("doctests {rest}");
            self.binaries += 1;
            return;
        }
        let Some((name, outcome)) = test_line(trimmed) else {
            return;
        };
        self.all.add(outcome);
        if self.in_real_apiserver_tier(name) {
            self.real_apiserver.add(outcome);
        }
        if self.in_spire_tier(name) {
            self.spire.add(outcome);
        }
    }

    fn in_real_apiserver_tier(&self, name: &str) -> bool {
        REAL_APISERVER_BINARIES.contains(&self.binary.as_str())
            || name.split("::").any(|segment| segment == "kube_apiserver")
            || name.contains("real_api_server")
    }

    fn in_spire_tier(&self, name: &str) -> bool {
        SPIRE_BINARIES.contains(&self.binary.as_str())
            || name.split("::").any(|segment| segment == "spire")
    }

    /// The lines printed at the end of the run.
    pub fn report(&self) -> String {
        format!(
            "xtask: tests: {} ({} test binaries and doctest runs)\n\
             xtask: real kube-apiserver tier: {}\n\
             xtask: real SPIRE tier: {}",
            self.all, self.binaries, self.real_apiserver, self.spire
        )
    }
}

/// `tests/real_server.rs (target/debug/deps/real_server-0123abcd)` → `real_server`.
fn binary_name(running: &str) -> String {
    let path = running
        .rsplit_once('(')
        .map_or(running, |(_, path)| path.trim_end_matches(')'));
    let file = path.rsplit('/').next().unwrap_or(path);
    match file.rsplit_once('-') {
        Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_owned(),
        _ => file.to_owned(),
    }
}

/// `test a::b ... ok` → (`a::b`, passed). Other lines (`test result:`, output a
/// test printed) are not test lines.
fn test_line(line: &str) -> Option<(&str, Outcome)> {
    let rest = line.strip_prefix("test ")?;
    let (name, verdict) = rest.rsplit_once(" ... ")?;
    let outcome = match verdict {
        "ok" => Outcome::Passed,
        "FAILED" => Outcome::Failed,
        v if v == "ignored" || v.starts_with("ignored,") => Outcome::Ignored,
        _ => return None,
    };
    Some((name, outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(lines: &str) -> Summary {
        let mut summary = Summary::default();
        for line in lines.lines() {
            summary.line(line);
        }
        summary
    }

    #[test]
    fn tests_are_counted_in_all_and_in_their_tiers() {
        let s = summary(
            "     Running unittests src/lib.rs (target/debug/deps/svc_tls-0f3a9c2b1d4e5f60)
test a ... ok
test b ... FAILED
test c ... ignored
test d ... ignored, needs a network
     Running tests/configmap_trust/main.rs (target/debug/deps/configmap_trust-0123456789abcdef)
test both::replaced::kube_apiserver ... ok
test both::replaced::kube_testbed ... ok
test result: ok. 2 passed; 0 failed; 0 ignored
     Running tests/server.rs (target/debug/deps/server-89abcdef01234567)
test admin_is_served ... ok
     Running tests/spiffe_tiers.rs (target/debug/deps/spiffe_tiers-89abcdef01234567)
test renewal::spire ... ok
test renewal::spiffe_testbed ... ok
test federation::spire ... FAILED
     Running tests/controller.rs (target/debug/deps/controller-89abcdef01234567)
test reconciles_with_a_real_api_server_as_the_remote_cluster ... ok
   Doc-tests svc_tls
test crates/svc-tls/src/lib.rs - (line 5) ... ok
",
        );
        assert_eq!(
            s.all,
            Counts {
                passed: 8,
                failed: 2,
                ignored: 2
            }
        );
        assert_eq!(
            s.real_apiserver,
            Counts {
                passed: 3,
                failed: 0,
                ignored: 0
            }
        );
        assert_eq!(
            s.spire,
            Counts {
                passed: 1,
                failed: 1,
                ignored: 0
            }
        );
        assert_eq!(s.binaries, 6);
        assert!(
            s.report()
                .contains("real SPIRE tier: 1 passed, 1 failed, 0 ignored")
        );
    }

    #[test]
    fn a_test_that_prints_a_look_alike_line_is_not_counted_twice() {
        let s = summary("test x ... ok\ntest result: ok. 1 passed\nsome test ... output\n");
        assert_eq!(s.all.passed, 1);
    }

    #[test]
    fn binary_names_lose_their_hash_only() {
        assert_eq!(
            binary_name("tests/real_server.rs (target/debug/deps/real_server-5f0a)"),
            "real_server"
        );
        assert_eq!(binary_name("weird"), "weird");
        assert_eq!(
            binary_name("x (target/debug/deps/end-to-end-zz)"),
            "end-to-end-zz"
        );
    }
}
