//! The region service through its generated client (`region-api`), built once at
//! start-up when `--region-host` is set: the service lists the regions each round,
//! presenting its identity and a signed principal, against a TLS server that
//! requires client certificates and answers as the region service does.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::sync::{Arc, Mutex};

use common::write_kubeconfig;
use kube_testbed::Testbed;
use platform_client_compat::tls::principal::{PRINCIPAL_HEADER, PeerCertificate, Principal};
use test_support::pki::TestCa;
use test_support::secret::secret_with;
use test_support::tls_server::{Reply, VerifyingServer};

const NS: &str = "platform";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_lists_regions_through_the_generated_client() {
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("peers"), TestCa::new("platform clients"));
    let leaf = client_ca.client_leaf("billing", 11);
    tb.upsert(secret_with(
        NS,
        "billing-client-certificate",
        "kubernetes.io/tls",
        &[("tls.crt", &leaf.cert_pem), ("tls.key", &leaf.key_pem)],
    ));
    tb.upsert(secret_with(
        NS,
        "peers-ca",
        "Opaque",
        &[("ca.crt", &server_ca.pem())],
    ));
    // One server for both peers: the identity service's whoami and the region
    // service's listRegions; the principals it receives are kept.
    let actors = Arc::new(Mutex::new(Vec::new()));
    let seen_actors = actors.clone();
    let server = VerifyingServer::builder(&server_ca, &client_ca)
        .handler(Arc::new(move |seen, parts| {
            let actor = parts
                .headers
                .get(PRINCIPAL_HEADER)
                .and_then(|token| {
                    let cert = PeerCertificate::from_der(seen.leaf.clone()?).ok()?;
                    cert.verify::<Principal>(token.to_str().ok()?, Default::default())
                        .ok()
                })
                .and_then(|p| p.actor);
            seen_actors
                .lock()
                .unwrap()
                .push((parts.uri.path().to_owned(), actor));
            Reply {
                status: 200,
                body: serde_json::json!([
                    {"metadata": {"id": "r1", "name": "uk-west-1"},
                     "spec": {"type": "openstack", "features": {"physicalNetworks": false}}},
                    {"metadata": {"id": "r2", "name": "uk-east-1"},
                     "spec": {"type": "kubernetes", "features": {"physicalNetworks": true}}},
                ])
                .to_string(),
            }
        }))
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let args = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--client-certificate-namespace={NS}"),
        "--client-certificate-name=billing-client-certificate".to_owned(),
        format!("--identity-host={}", server.url()),
        format!("--identity-ca-secret-namespace={NS}"),
        "--identity-ca-secret-name=peers-ca".to_owned(),
        format!("--region-host={}", server.url()),
        format!("--region-ca-secret-namespace={NS}"),
        "--region-ca-secret-name=peers-ca".to_owned(),
        "--organization-id=org-7".to_owned(),
        "--actor=billing".to_owned(),
        "--requests=2".to_owned(),
    ];
    let home = dir.path().to_owned();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_migrated-service"))
            .args(&args)
            .env_remove("KUBECONFIG")
            .env("HOME", &home)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_eq!(
        stdout
            .matches("region: 2 regions: uk-west-1, uk-east-1")
            .count(),
        2,
        "{stdout}"
    );
    let regions: Vec<_> = actors
        .lock()
        .unwrap()
        .iter()
        .filter(|(path, _)| path.contains("/regions"))
        .cloned()
        .collect();
    assert_eq!(
        regions,
        vec![
            (
                "/api/v1/organizations/org-7/regions".to_owned(),
                Some("billing".to_owned())
            );
            2
        ],
        "each listRegions carried a principal signed by the presented identity"
    );
}
