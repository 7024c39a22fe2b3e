//! A peer whose CA comes from a ConfigMap (`--S-ca-configmap-*`, a trust-manager
//! Bundle target): reported as trusting that bundle (not the platform's store), the
//! bundle read and checked with svc-tls's loader, the handshake made against it.

use crate::common::*;
use kube_testbed::Testbed;
use serde_json::Value;
use test_support::pki::TestCa;
use test_support::secret::tls_secret;
use test_support::tls_server::VerifyingServer;

const BUNDLE: &str = "platform-ca-bundle";
/// trust-manager's usual target key (not the default `ca.crt`, so the key flag is
/// really read).
const KEY: &str = "trust-bundle.pem";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_trusting_a_configmap_bundle_is_reported_as_such() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let (server_ca, clients, other) = (
        TestCa::new("server-ca"),
        TestCa::new("clients"),
        TestCa::new("other-root"),
    );
    let leaf = clients.client_leaf("region-service", 41);
    tb.upsert(tls_secret(NS, "svc-cert", &leaf.cert_pem, &leaf.key_pem));
    let bundle = format!("{}{}", other.pem(), server_ca.pem());
    tb.upsert(configmap(BUNDLE, &[(KEY, &bundle), ("other.pem", "x")]));
    let server = VerifyingServer::start(&server_ca, &clients).await;
    let mut args = identity_args(&kubeconfig, "svc-cert");
    args.extend(crate::common::args(&[
        ("region-host", &server.url()),
        ("region-ca-configmap-namespace", NS),
        ("region-ca-configmap-name", BUNDLE),
        ("region-ca-configmap-key", KEY),
    ]));
    let keys = vec![leaf.key_pem.clone()];

    let run = run_async(args.clone(), keys.clone()).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let json = run.json();
    let peer = &json["peers"][0];
    assert_eq!(
        peer["trust"],
        format!("ca-configmap {NS}/{BUNDLE} key {KEY}"),
        "{json:#}"
    );
    assert_eq!(peer["ok"], true, "{json:#}");
    assert_eq!(peer["server_chain"][0]["issuer"], "CN=server-ca");
    let bundle_report = &json["configmaps"][0];
    assert_eq!(bundle_report["role"], "peer-ca");
    assert_eq!(
        bundle_report["named_by"],
        "--region-ca-configmap-namespace/-name/-key"
    );
    assert_eq!(bundle_report["found"], true);
    assert_eq!(bundle_report["key"], KEY);
    assert_eq!(bundle_report["roots"], 2);
    assert_eq!(bundle_report["loader_error"], Value::Null);
    let subjects: Vec<&str> = bundle_report["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["subject"].as_str().unwrap())
        .collect();
    assert_eq!(subjects, ["CN=other-root", "CN=server-ca"]);
    assert_eq!(bundle_report["private_key_entries"], serde_json::json!([]));
    // A ConfigMap is not a Secret: nothing is read as one.
    assert_eq!(json["secrets"].as_array().unwrap().len(), 1, "{json:#}");

    let run = run_async(human(&args), keys.clone()).await;
    assert_eq!(run.code, 0, "{}", run.stdout);
    for expected in [
        format!(
            "ConfigMap {NS}/{BUNDLE} key {KEY} (peer-ca, --region-ca-configmap-namespace/-name/-key)"
        ),
        format!("trusting ca-configmap {NS}/{BUNDLE} key {KEY}"),
        "2 trust root(s)".to_owned(),
    ] {
        assert!(
            run.stdout.contains(&expected),
            "{expected:?} missing from:\n{}",
            run.stdout
        );
    }
    assert!(!run.stdout.contains("trusting platform"), "{}", run.stdout);

    // The bundle is what the handshake trusts: without the server's CA, refused.
    tb.upsert(configmap(BUNDLE, &[(KEY, &other.pem())]));
    let run = run_async(args.clone(), keys.clone()).await;
    assert_eq!(run.code, 5, "{}", run.stdout);
    let json = run.json();
    assert_eq!(
        json["peers"][0]["error"]["kind"], "UnknownIssuer",
        "{json:#}"
    );
    assert_eq!(json["configmaps"][0]["roots"], 1);

    // A bundle svc-tls's loader refuses is a failed load (exit 3), by its kind.
    tb.upsert(configmap(BUNDLE, &[("ca.crt", &server_ca.pem())]));
    let run = run_async(args, keys).await;
    assert_eq!(run.code, 3, "{}", run.stdout);
    let json = run.json();
    let error = &json["configmaps"][0]["loader_error"];
    assert_eq!(error["kind"], "MissingKey", "{json:#}");
    assert!(
        error["message"].as_str().unwrap().contains("keys ca.crt"),
        "{error}"
    );
    assert_eq!(json["failed"], serde_json::json!(["secret", "peer"]));
}
