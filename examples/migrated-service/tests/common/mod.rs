//! What the test binaries of the migrated service share: a kubeconfig for the API
//! emulator (as a service's deployment would mount one), whether a program is
//! installed, free ports and child processes that end with the test. Each binary
//! uses a part of it.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use kube_testbed::Testbed;

/// Writes a kubeconfig for `tb` (its CA and admin token) into `dir`.
pub fn write_kubeconfig(dir: &Path, tb: &Testbed) -> PathBuf {
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, tb.ca_pem()).unwrap();
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: testbed\nclusters:\n- name: testbed\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\ncontexts:\n- name: testbed\n  context:\n    cluster: testbed\n    user: admin\nusers:\n- name: admin\n  user:\n    token: {token}\n",
        server = tb.base_url(),
        ca = ca.display(),
        token = tb.token(),
    );
    let path = dir.join("kubeconfig");
    std::fs::write(&path, text).unwrap();
    path
}

/// Whether `program` runs; `false` skips the test (outside CI only).
pub fn have(program: &str) -> bool {
    let present = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !present {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{program} is not installed (CI installs it with `cargo xtask prepare`: apt package prometheus)"
        );
        eprintln!(
            "SKIPPED: {program} is not installed (apt-get install prometheus, or `cargo xtask prepare` as root)"
        );
    }
    present
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed (by its own id) when dropped.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
