//! SPIFFE mode over the wire: the Workload API emulator as the agent, a verifying
//! server presenting an SVID of the same trust domain. The SVIDs and bundles the
//! agent hands out are listed, the peer accepts the SVID (exit 0); a server with
//! another SPIFFE ID is refused (exit 5); an agent that is gone is exit 7.

use crate::common::*;
use kube_testbed::Testbed;
use spiffe_testbed::{SvidInfo, WorkloadApi};
use test_support::pki::TestCa;
use test_support::tls_server::VerifyingServer;

const SERVER_ID: &str = "spiffe://example.org/region";

async fn server(svid: &SvidInfo, agent: &WorkloadApi) -> VerifyingServer {
    let unused = TestCa::new("unused");
    VerifyingServer::builder(&unused, &unused)
        .server_chain(svid.chain.clone(), &svid.key_pem())
        .client_roots(agent.bundle())
        .start()
        .await
}

fn spiffe_args(kubeconfig: &std::path::Path, server: &VerifyingServer) -> Vec<String> {
    args(&[
        ("kubeconfig", &kubeconfig.display().to_string()),
        ("client-certificate-source", "spiffe"),
        ("spiffe-server-id", SERVER_ID),
        ("region-host", &server.url()),
        ("output", "json"),
    ])
}

async fn run_async(args: Vec<String>, endpoint: String, keys: Vec<String>) -> Run {
    tokio::task::spawn_blocking(move || {
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        run(&args, &[("SPIFFE_ENDPOINT_SOCKET", &endpoint)], &keys)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_svids_and_bundles_are_listed_and_the_peer_accepts() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let agent = WorkloadApi::start("example.org").await;
    let workload = agent.set_workload_id("spiffe://example.org/ns/unikorn/sa/svc");
    let server_svid = agent.issue(SERVER_ID);
    let server = server(&server_svid, &agent).await;
    let keys = vec![workload.key_pem(), server_svid.key_pem()];
    let run = run_async(
        spiffe_args(&kubeconfig, &server),
        agent.endpoint(),
        keys.clone(),
    )
    .await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let json = run.json();
    let spiffe = &json["spiffe"];
    assert_eq!(spiffe["endpoint"], agent.endpoint());
    assert_eq!(spiffe["server_id"], SERVER_ID);
    assert_eq!(spiffe["loader_error"], serde_json::Value::Null);
    assert_eq!(spiffe["svids"][0]["spiffe_id"], workload.spiffe_id);
    let leaf = &spiffe["svids"][0]["certificates"][0];
    assert_eq!(leaf["spiffe_id"], workload.spiffe_id);
    assert_eq!(leaf["serial"], format!("{:02x}", workload.serial));
    assert_eq!(spiffe["bundles"][0]["trust_domain"], "example.org");
    assert_eq!(
        spiffe["bundles"][0]["authorities"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(spiffe["bundles"][0]["authorities"][0]["is_ca"], true);
    // No Secret is named in SPIFFE mode.
    assert_eq!(json["secrets"], serde_json::json!([]));

    let peer = &json["peers"][0];
    assert_eq!(peer["trust"], format!("spiffe {SERVER_ID}"));
    assert_eq!(peer["ok"], true, "{json:#}");
    assert_eq!(peer["client_certificate_accepted"], true);
    assert_eq!(peer["server_chain"][0]["spiffe_id"], SERVER_ID);
    assert_eq!(
        server.seen().last().and_then(|s| s.serial),
        Some(workload.serial)
    );
    assert_eq!(json["principal"]["verified"], true);
    assert_eq!(json["principal"]["identity"], "client-certificate");

    // A server presenting another workload's SVID is not the one the flags name.
    let impostor = server_with_id(&agent, "spiffe://example.org/impostor").await;
    let run = run_async(
        spiffe_args(&kubeconfig, &impostor),
        agent.endpoint(),
        keys.clone(),
    )
    .await;
    assert_eq!(run.code, 5, "{}", run.stdout);
    let peer = &run.json()["peers"][0];
    assert_eq!(peer["ok"], false);
    assert_eq!(peer["tls_version"], serde_json::Value::Null, "{peer:#}");

    // The agent gone: the environment, not the SVID.
    agent.stop().await;
    let run = run_async(
        args(&[
            ("client-certificate-source", "spiffe"),
            ("spiffe-server-id", SERVER_ID),
            ("timeout", "2s"),
            ("output", "json"),
        ]),
        agent.endpoint(),
        keys,
    )
    .await;
    assert_eq!(run.code, 7, "{}", run.stdout);
    assert_eq!(run.json()["failed"], serde_json::json!(["environment"]));
}

async fn server_with_id(agent: &WorkloadApi, id: &str) -> VerifyingServer {
    server(&agent.issue(id), agent).await
}
