//! Makes sure the external programs the tests drive are present.
//!
//! The tests use real parts: the `kubectl` client against the API emulator, nginx as
//! the mTLS ingress, Prometheus (and promtool) scraping the example service, PyJWT as
//! an independent JOSE implementation, the real kube-apiserver and etcd (built from
//! source by `cargo xtask real-peers`), and Go 1.23 (a TLS
//! server that knows only the Kyber draft hybrid, in svc-tls's key exchange test). On
//! a fresh machine they are installed through the system's package tools when running
//! as root; otherwise this fails with the exact command to run (Go excepted: without
//! any Go that one test is skipped, so a missing Go is only reported).

use std::process::Command;

/// One thing the tests need, how to detect it and how to install it.
struct Prerequisite {
    what: &'static str,
    present: fn() -> bool,
    apt_packages: &'static [&'static str],
    pip_packages: &'static [&'static str],
}

fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .map(|output| output.status.success())
        .unwrap_or(false)
}

fn python() -> &'static str {
    if succeeds("python3", &["--version"]) {
        "python3"
    } else {
        "python"
    }
}

const PREREQUISITES: &[Prerequisite] = &[
    Prerequisite {
        what: "kubectl (drives the API emulator in kube-testbed's tests)",
        present: || succeeds("kubectl", &["version", "--client"]),
        apt_packages: &["kubernetes-client"],
        pip_packages: &[],
    },
    Prerequisite {
        what: "nginx (the mTLS ingress in svc-tls's rotation test)",
        present: || succeeds("nginx", &["-v"]) || succeeds("/usr/sbin/nginx", &["-v"]),
        apt_packages: &["nginx"],
        pip_packages: &[],
    },
    Prerequisite {
        what: "HAProxy (a gateway in front of svc-tls's serving half)",
        present: || succeeds("haproxy", &["-v"]) || succeeds("/usr/sbin/haproxy", &["-v"]),
        apt_packages: &["haproxy"],
        pip_packages: &[],
    },
    Prerequisite {
        what: "Prometheus and promtool (scrape the example's /metrics; check and unit-test docs/alerts.yaml)",
        present: || succeeds("prometheus", &["--version"]) && succeeds("promtool", &["--version"]),
        apt_packages: &["prometheus"],
        pip_packages: &[],
    },
    Prerequisite {
        what: "PyJWT with cryptography (the independent JWS implementation in svc-tls's interop test)",
        present: || succeeds(python(), &["-c", "import jwt, cryptography"]),
        apt_packages: &[],
        pip_packages: &["pyjwt", "cryptography"],
    },
];

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Debian's Go 1.23 (bookworm-backports): the Go server of svc-tls's key exchange
/// test must be a Go without ML-KEM (Go 1.24 and later have it), so the machine's Go
/// 1.26 cannot stand in for it (`backports.rs`).
const GO_TEST_MINOR: u32 = 23;
const GO_TEST_PACKAGE: &str = "golang-1.23-go";

/// Go 1.23 for svc-tls's `key_exchange` test: installed from backports as root,
/// otherwise reported (the test skips itself when there is no Go at all).
fn go_for_tests() -> Result<(), String> {
    if super::backports::find_go_minor(GO_TEST_MINOR).is_some() {
        return Ok(());
    }
    if !is_root() {
        eprintln!(
            "xtask: no Go 1.{GO_TEST_MINOR}: svc-tls's key exchange test against a Go server \
             is skipped without Go and fails with another Go; install {GO_TEST_PACKAGE} \
             from backports (run `cargo xtask test` as root)"
        );
        return Ok(());
    }
    eprintln!(
        "xtask: missing Go 1.{GO_TEST_MINOR} (the Go 1.23 TLS server in svc-tls's key exchange test)"
    );
    super::backports::install_from_backports(&[GO_TEST_PACKAGE])?;
    match super::backports::find_go_minor(GO_TEST_MINOR) {
        Some(_) => Ok(()),
        None => Err(format!(
            "still missing after installing: Go 1.{GO_TEST_MINOR} ({GO_TEST_PACKAGE})"
        )),
    }
}

/// Installs what is missing (as root) or explains how to (otherwise).
pub fn test_prerequisites() -> Result<(), String> {
    // The real kube-apiserver and etcd of the real-server tier and SPIRE's server and
    // agent of the SPIRE tier: built from source with Go 1.26 when not cached
    // (`cargo xtask real-peers`); their tests fail without them.
    super::real_peers::ensure()?;
    go_for_tests()?;
    let missing: Vec<&Prerequisite> = PREREQUISITES
        .iter()
        .filter(|prerequisite| !(prerequisite.present)())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let apt: Vec<&str> = missing
        .iter()
        .flat_map(|p| p.apt_packages)
        .copied()
        .collect();
    let pip: Vec<&str> = missing
        .iter()
        .flat_map(|p| p.pip_packages)
        .copied()
        .collect();
    let apt_command = format!(
        "apt-get update && apt-get install -y --no-install-recommends {}",
        apt.join(" ")
    );
    let pip_command = format!("{} -m pip install --quiet {}", python(), pip.join(" "));
    for prerequisite in &missing {
        eprintln!("xtask: missing {}", prerequisite.what);
    }
    if !is_root() {
        let mut commands = Vec::new();
        if !apt.is_empty() {
            commands.push(format!("sudo sh -c '{apt_command}'"));
        }
        if !pip.is_empty() {
            commands.push(pip_command);
        }
        return Err(format!(
            "the tests need programs that are not installed; run:\n  {}",
            commands.join("\n  ")
        ));
    }
    if !apt.is_empty() {
        super::process::run_checked(
            Command::new("sh")
                .args(["-c", &apt_command])
                .env("DEBIAN_FRONTEND", "noninteractive"),
        )?;
    }
    if !pip.is_empty() {
        super::process::run_checked(Command::new("sh").args(["-c", &pip_command]))?;
    }
    let still_missing: Vec<&str> = PREREQUISITES
        .iter()
        .filter(|prerequisite| !(prerequisite.present)())
        .map(|prerequisite| prerequisite.what)
        .collect();
    if still_missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "still missing after installing: {}",
            still_missing.join("; ")
        ))
    }
}
