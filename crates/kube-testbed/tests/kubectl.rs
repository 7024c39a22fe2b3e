//! The real `kubectl` against the emulator: create secret tls, get -o yaml,
//! apply -f, delete, and get -w observing a change.
//!
//! kubectl must be installed (Debian: `apt-get install kubernetes-client`); the
//! test fails, it does not skip, when it is missing. `KUBECTL` overrides the path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use kube_testbed::Testbed;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn kubectl_path() -> PathBuf {
    if let Ok(p) = std::env::var("KUBECTL") {
        return PathBuf::from(p);
    }
    let from_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("kubectl"))
            .find(|p| p.is_file())
    });
    match from_path {
        Some(p) => p,
        None => panic!(
            "kubectl is not installed: these tests need the real kubectl. Install it \
             (Debian/Ubuntu: `apt-get install kubernetes-client`) or set KUBECTL=/path/to/kubectl"
        ),
    }
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    home: PathBuf,
}

impl Kubectl {
    fn new(tb: &Testbed, dir: &Path) -> Self {
        let ca = dir.join("ca.crt");
        std::fs::write(&ca, tb.ca_pem()).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: tb\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: tb\n  user:\n    token: {}\ncontexts:\n- name: tb\n  context:\n    cluster: tb\n    user: tb\n    namespace: default\ncurrent-context: tb\n",
                tb.base_url(),
                ca.display(),
                tb.token()
            ),
        )
        .unwrap();
        Kubectl {
            bin: kubectl_path(),
            kubeconfig,
            home: dir.to_path_buf(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .arg("--cache-dir")
            .arg(self.home.join("cache"))
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", &self.home)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }

    /// Run to completion (bounded), returning stdout; panics with stderr on failure.
    async fn run(&self, args: &[&str]) -> String {
        let out = tokio::time::timeout(Duration::from_secs(60), self.command(args).output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.display()));
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn tls_pair(dir: &Path) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["svc.example".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    (c, k)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_get_apply_delete() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::new(&tb, dir.path());
    let (crt, key) = tls_pair(dir.path());

    let out = k
        .run(&[
            "create",
            "secret",
            "tls",
            "web-tls",
            "--cert",
            crt.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
            "-n",
            "apps",
        ])
        .await;
    assert!(out.contains("web-tls"), "{out}");
    let stored = tb
        .get("v1", "Secret", "apps", "web-tls")
        .expect("secret stored");
    assert_eq!(stored["type"], "kubernetes.io/tls");
    assert!(
        stored["data"]["tls.crt"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );

    let yaml = k
        .run(&["get", "secret", "web-tls", "-n", "apps", "-o", "yaml"])
        .await;
    let doc: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(doc["type"], "kubernetes.io/tls");
    assert_eq!(doc["metadata"]["name"], "web-tls");
    assert_eq!(doc["data"]["tls.key"], stored["data"]["tls.key"]);

    // apply creates, then updates
    let manifest = dir.path().join("cm.yaml");
    let write = |v: &str| {
        std::fs::write(
            &manifest,
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: apps\ndata:\n  level: \"{v}\"\n"),
        )
        .unwrap()
    };
    write("1");
    let out = k.run(&["apply", "-f", manifest.to_str().unwrap()]).await;
    assert!(out.contains("created"), "{out}");
    write("2");
    let out = k.run(&["apply", "-f", manifest.to_str().unwrap()]).await;
    assert!(out.contains("configured"), "{out}");
    assert_eq!(
        tb.get("v1", "ConfigMap", "apps", "settings").unwrap()["data"]["level"],
        "2"
    );

    let out = k
        .run(&["delete", "configmap", "settings", "-n", "apps"])
        .await;
    assert!(out.contains("deleted"), "{out}");
    assert!(tb.get("v1", "ConfigMap", "apps", "settings").is_none());
    k.run(&["delete", "secret", "web-tls", "-n", "apps"]).await;
    assert!(tb.get("v1", "Secret", "apps", "web-tls").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_observes_a_change() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::new(&tb, dir.path());
    tb.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "first", "namespace": "default"}}));

    let mut child = k
        .command(&["get", "configmaps", "-w", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let next = async |lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>| {
        tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("kubectl get -w printed nothing in time")
            .unwrap()
            .expect("kubectl get -w ended early")
    };
    assert_eq!(next(&mut lines).await, "configmap/first");
    // a change made after the watch started shows up
    tb.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "second", "namespace": "default"}}));
    assert_eq!(next(&mut lines).await, "configmap/second");
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_other_built_in_kinds() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::new(&tb, dir.path());
    k.run(&["create", "namespace", "team"]).await;
    assert_eq!(
        tb.get("v1", "Namespace", "", "team").unwrap()["status"]["phase"],
        "Active"
    );
    k.run(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=fast",
        "-n",
        "team",
    ])
    .await;
    assert_eq!(
        tb.get("v1", "ConfigMap", "team", "settings").unwrap()["data"]["mode"],
        "fast"
    );
    k.run(&[
        "create",
        "service",
        "clusterip",
        "web",
        "--tcp=80:8080",
        "-n",
        "team",
    ])
    .await;
    let svc = tb.get("v1", "Service", "team", "web").unwrap();
    assert_eq!(svc["spec"]["ports"][0]["port"], 80);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(svc["spec"]["selector"]["app"], "web");
    // deleting the namespace takes its contents along
    k.run(&["delete", "namespace", "team"]).await;
    assert!(tb.get("v1", "ConfigMap", "team", "settings").is_none());
    let out = k
        .run(&["get", "configmaps,services", "-A", "-o", "name"])
        .await;
    assert!(out.trim().is_empty(), "{out}");
}
