//! What the command's tests share: a kubeconfig for the API emulator, the binary
//! run over the wire, and the check that its output holds no key material.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use kube_testbed::Testbed;
use serde_json::Value;

pub(crate) mod nginx;

/// The namespace the tests' Secrets live in.
pub(crate) const NS: &str = "unikorn";

/// Writes a kubeconfig for `tb` (its CA and admin token) into `dir`.
pub(crate) fn write_kubeconfig(dir: &Path, tb: &Testbed) -> PathBuf {
    write_kubeconfig_for(dir, tb, &tb.token())
}

/// Writes a kubeconfig for `tb` with `token` (one `Testbed::add_token` allowed)
/// into `dir`.
pub(crate) fn write_kubeconfig_for(dir: &Path, tb: &Testbed, token: &str) -> PathBuf {
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, tb.ca_pem()).unwrap();
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: testbed\nclusters:\n- name: testbed\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\ncontexts:\n- name: testbed\n  context:\n    cluster: testbed\n    user: admin\nusers:\n- name: admin\n  user:\n    token: {token}\n",
        server = tb.base_url(),
        ca = ca.display(),
    );
    let path = dir.join("kubeconfig");
    std::fs::write(&path, text).unwrap();
    path
}

/// One run of the command.
pub(crate) struct Run {
    /// Its exit code.
    pub code: i32,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Run {
    /// The standard output as JSON.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.stdout, self.stderr))
    }
}

/// Runs the binary with `args` and `env`, in a process of its own (so the test's
/// process-wide watches and streams are not shared with it), and checks that
/// neither output holds key material: no `PRIVATE KEY` label, and no line of any of
/// `keys` (PEM private keys the test wrote into Secrets).
pub(crate) fn run(args: &[String], env: &[(&str, &str)], keys: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_svc-tls-inspect"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("SPIFFE_ENDPOINT_SOCKET")
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .output()
        .expect("the binary runs");
    let run = Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert_no_key_material(&run.stdout, keys);
    assert_no_key_material(&run.stderr, keys);
    run
}

/// `text` holds no `PRIVATE KEY` label and no base64 line of any key in `keys`.
pub(crate) fn assert_no_key_material(text: &str, keys: &[&str]) {
    assert!(
        !text.contains("PRIVATE KEY"),
        "key material printed:\n{text}"
    );
    for key in keys {
        for line in key
            .lines()
            .filter(|l| !l.starts_with("-----") && l.len() >= 16)
        {
            assert!(!text.contains(line), "a key's line printed:\n{text}");
        }
    }
}

/// `--flag=value` arguments.
pub(crate) fn args(pairs: &[(&str, &str)]) -> Vec<String> {
    pairs
        .iter()
        .map(|(flag, value)| format!("--{flag}={value}"))
        .collect()
}

/// The kubeconfig and identity flags for the Secret `NS/name`.
pub(crate) fn identity_args(kubeconfig: &Path, name: &str) -> Vec<String> {
    args(&[
        ("kubeconfig", &kubeconfig.display().to_string()),
        ("client-certificate-namespace", NS),
        ("client-certificate-name", name),
        ("output", "json"),
    ])
}

/// A ConfigMap `NS/name` with text `data`, as trust-manager writes a Bundle target.
pub(crate) fn configmap(name: &str, data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
        .collect();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": NS, "name": name},
        "data": data,
    })
}

/// The arguments without `--output=json`: the human report.
pub(crate) fn human(args: &[String]) -> Vec<String> {
    args.iter()
        .filter(|a| *a != "--output=json")
        .cloned()
        .collect()
}

/// Runs the binary on a blocking thread (the test's runtime keeps serving the API
/// emulator and the TLS servers meanwhile).
pub(crate) async fn run_async(args: Vec<String>, keys: Vec<String>) -> Run {
    tokio::task::spawn_blocking(move || {
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        run(&args, &[], &keys)
    })
    .await
    .unwrap()
}

/// `text` holds no control character other than the line ends.
pub(crate) fn assert_no_control_characters(text: &str) {
    if let Some(c) = text.chars().find(|c| c.is_control() && *c != '\n') {
        panic!("control character {c:?} printed:\n{text}");
    }
}
