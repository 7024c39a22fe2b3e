//! The `kube-testbed` binary prints a base URL, CA path, token and a kubeconfig that works.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serves_and_prints_a_working_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-testbed"))
        .args(["--port", "0", "--dir"])
        .arg(dir.path())
        .args([
            "--kind",
            "unikorn-cloud.org/v1alpha1/HelmApplication/helmapplications",
        ])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    while printed.len() < 4 {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the binary printed nothing in time")
            .unwrap()
            .expect("the binary exited early");
        printed.push(line);
    }
    let value = |label: &str| {
        printed
            .iter()
            .find_map(|l| l.strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label:?} line in {printed:?}"))
            .trim()
            .to_string()
    };
    assert!(value("base URL:").starts_with("https://127.0.0.1:"));
    assert!(
        std::fs::read_to_string(value("CA:"))
            .unwrap()
            .contains("BEGIN CERTIFICATE")
    );
    assert!(!value("token:").is_empty());

    let kubeconfig = kube::config::Kubeconfig::read_from(value("kubeconfig:")).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let mut s = Secret::default();
    s.metadata.name = Some("manual".into());
    secrets.create(&PostParams::default(), &s).await.unwrap();
    assert!(secrets.get_opt("manual").await.unwrap().is_some());
    let discovery = kube::Discovery::new(client).run().await.unwrap();
    assert!(discovery.has_group("unikorn-cloud.org"));
    child.kill().await.unwrap();
}
