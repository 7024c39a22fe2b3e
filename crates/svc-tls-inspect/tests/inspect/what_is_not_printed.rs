//! What a careful operator's command warns about or keeps to itself: a CA Secret
//! holding a private key (the CA's power to issue identities, readable by whoever
//! reads the Secret) is named, with its entries; the userinfo of a peer host
//! (`user:password@`) is never printed.

use crate::common::*;
use kube_testbed::Testbed;
use serde_json::{Value, json};
use test_support::pki::TestCa;
use test_support::secret::{secret_with, tls_secret};
use test_support::tls_server::VerifyingServer;

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_secret_holding_a_key_is_flagged() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let clients = TestCa::new("clients");
    let leaf = clients.client_leaf("svc", 51);
    // Stands for the CA's key: any PEM private key is key material.
    let ca_key = clients.client_leaf("ca-key", 52).key_pem;
    tb.upsert(tls_secret(NS, "svc-cert", &leaf.cert_pem, &leaf.key_pem));
    // The CA Secret cert-manager's CA issuer reads: the CA's tls.crt and tls.key.
    tb.upsert(tls_secret(NS, "ca-with-key", &clients.pem(), &ca_key));
    // An Opaque bundle with ca.key, `kubectl apply`-ed: the annotation holds the
    // applied object's data too.
    let mut opaque = secret_with(
        NS,
        "bundle-with-key",
        "Opaque",
        &[("ca.crt", &clients.pem()), ("ca.key", &ca_key)],
    );
    let applied = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "data": {"tls.crt": "LS0t", "tls.key": "LS0t"}});
    opaque["metadata"]["annotations"] = json!({ LAST_APPLIED: applied.to_string() });
    tb.upsert(opaque);
    tb.upsert(secret_with(
        NS,
        "clean-ca",
        "Opaque",
        &[("ca.crt", &clients.pem())],
    ));
    let keys = vec![leaf.key_pem.clone(), ca_key.clone()];
    let with_ca = |ca: &str| {
        let mut args = identity_args(&kubeconfig, "svc-cert");
        args.push(format!("--chain-ca-secret={NS}/{ca}"));
        args
    };

    let run = run_async(with_ca("ca-with-key"), keys.clone()).await;
    // The trust still works: a warning, not a failure.
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let json = run.json();
    assert_eq!(json["secrets"][1]["role"], "chain-ca");
    assert_eq!(
        json["secrets"][1]["private_key_entries"],
        json!(["data[tls.key]"])
    );
    // The identity's own tls.key is what it needs: not flagged.
    assert_eq!(json["secrets"][0]["private_key_entries"], json!([]));
    let run = run_async(human(&with_ca("ca-with-key")), keys.clone()).await;
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout.lines().any(|l| l
            == format!(
                "WARNING: Secret {NS}/ca-with-key (chain-ca) holds private key material: data[tls.key]"
            )),
        "{}",
        run.stdout
    );

    let run = run_async(with_ca("bundle-with-key"), keys.clone()).await;
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(
        run.json()["secrets"][1]["private_key_entries"],
        json!([
            "data[ca.key]",
            format!("annotation {LAST_APPLIED}: data[tls.key]")
        ])
    );

    let run = run_async(human(&with_ca("clean-ca")), keys).await;
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(!run.stdout.contains("WARNING"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_userinfo_is_redacted() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let (server_ca, clients) = (TestCa::new("server-ca"), TestCa::new("clients"));
    let leaf = clients.client_leaf("svc", 61);
    tb.upsert(tls_secret(NS, "svc-cert", &leaf.cert_pem, &leaf.key_pem));
    tb.upsert(secret_with(
        NS,
        "server-ca",
        "Opaque",
        &[("ca.crt", &server_ca.pem())],
    ));
    let server = VerifyingServer::start(&server_ca, &clients).await;
    let with_userinfo = server.url().replace("https://", "https://admin:s3cr3t-pw@");
    let mut args = identity_args(&kubeconfig, "svc-cert");
    args.extend(crate::common::args(&[
        ("region-host", &with_userinfo),
        ("region-ca-secret-namespace", NS),
        ("region-ca-secret-name", "server-ca"),
        // Not a usable URL: svc-tls's error quotes the value.
        ("audit-host", "https://auditor:s3cr3t-pw@"),
    ]));
    let keys = vec![leaf.key_pem.clone()];

    let run = run_async(args.clone(), keys.clone()).await;
    for text in [&run.stdout, &run.stderr] {
        assert!(!text.contains("s3cr3t-pw"), "userinfo printed:\n{text}");
    }
    let json = run.json();
    let peers = json["peers"].as_array().unwrap();
    let region = peers.iter().find(|p| p["service"] == "region").unwrap();
    assert_eq!(
        region["host"],
        server.url().replace("https://", "https://REDACTED@"),
        "{json:#}"
    );
    // A host with user information is refused by the library (issue 50), and the
    // refusal quotes the value redacted.
    assert_eq!(region["ok"], false, "{json:#}");
    let message = region["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("user information") && message.contains("REDACTED@"),
        "{message}"
    );
    let audit = peers.iter().find(|p| p["service"] == "audit").unwrap();
    assert_eq!(audit["host"], "https://REDACTED@");
    let message = audit["error"]["message"].as_str().unwrap();
    assert!(message.contains("https://REDACTED@"), "{message}");

    let run = run_async(human(&args), keys).await;
    for text in [&run.stdout, &run.stderr] {
        assert!(!text.contains("s3cr3t-pw"), "userinfo printed:\n{text}");
    }
    assert!(
        run.stdout
            .contains(&server.url().replace("https://", "https://REDACTED@")),
        "{}",
        run.stdout
    );
    assert_eq!(Value::from(run.code), json["exit_code"]);
}
