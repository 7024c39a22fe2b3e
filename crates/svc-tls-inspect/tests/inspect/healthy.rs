//! A healthy service, inspected over the wire: its identity Secret in the API
//! emulator, its peer a TLS server that verifies client certificates. Exit 0 and the
//! JSON fields right; the human report says the same; bad flags exit 2.

use crate::common::*;
use kube_testbed::Testbed;
use serde_json::Value;
use test_support::pki::TestCa;
use test_support::secret::{secret_with, tls_secret};
use test_support::tls_server::VerifyingServer;

struct World {
    _tb: Testbed,
    _dir: tempfile::TempDir,
    server: VerifyingServer,
    args: Vec<String>,
    key_pem: String,
}

/// The API emulator with the identity Secret (a leaf of `clients`, serial 7), the
/// server's CA Secret (an Opaque `ca.crt`) and the ingress's client CA Secret; a
/// verifying server trusting `clients`; the service's flags, as Helm renders them,
/// with two flags of the service's own.
async fn world() -> World {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let (server_ca, clients) = (TestCa::new("server-ca"), TestCa::new("clients"));
    let leaf = clients.client_leaf("region-service", 7);
    tb.upsert(tls_secret(
        NS,
        "region-client-cert",
        &leaf.cert_pem,
        &leaf.key_pem,
    ));
    tb.upsert(secret_with(
        NS,
        "server-ca",
        "Opaque",
        &[("ca.crt", &server_ca.pem())],
    ));
    tb.upsert(secret_with(
        NS,
        "ingress-client-ca",
        "Opaque",
        &[("ca.crt", &clients.pem())],
    ));
    let server = VerifyingServer::start(&server_ca, &clients).await;
    let mut args = identity_args(&kubeconfig, "region-client-cert");
    args.extend(crate::common::args(&[
        ("identity-host", &server.url()),
        ("identity-ca-secret-namespace", NS),
        ("identity-ca-secret-name", "server-ca"),
        ("audit-host", ""),
        ("chain-ca-secret", &format!("{NS}/ingress-client-ca")),
        ("metrics-bind-address", ":8080"),
    ]));
    args.push("--leader-elect".into());
    World {
        _tb: tb,
        _dir: dir,
        server,
        args,
        key_pem: leaf.key_pem,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_secret_and_peer_pass_with_every_field_reported() {
    let w = world().await;
    let run = tokio::task::spawn_blocking({
        let args = w.args.clone();
        let key = w.key_pem.clone();
        move || run(&args, &[], &[&key])
    })
    .await
    .unwrap();
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let json = run.json();
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["ok"], true);
    assert_eq!(json["exit_code"], 0);
    assert_eq!(json["failed"], Value::Array(vec![]));

    let secrets = json["secrets"].as_array().unwrap();
    let identity = &secrets[0];
    assert_eq!(identity["role"], "identity");
    assert_eq!(identity["name"], "region-client-cert");
    assert_eq!(identity["found"], true);
    assert_eq!(identity["secret_type"], "kubernetes.io/tls");
    let keys: Vec<&str> = identity["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["tls.crt", "tls.key"]);
    assert!(identity["data"][1]["bytes"].as_u64().unwrap() > 100);
    let leaf = &identity["certificates"][0];
    assert_eq!(leaf["subject"], "CN=region-service");
    assert_eq!(leaf["issuer"], "CN=clients");
    assert_eq!(leaf["serial"], "07");
    assert_eq!(leaf["key_type"], "ECDSA P-256");
    assert_eq!(leaf["key_bits"], 256);
    assert_eq!(leaf["validity"], "valid");
    assert!(leaf["not_after_unix"].as_i64().unwrap() > leaf["not_before_unix"].as_i64().unwrap());
    assert_eq!(identity["loaded_key_type"], "ECDSA P-256");
    assert_eq!(identity["key_matches_certificate"], true);
    assert_eq!(identity["loader_error"], Value::Null);
    for secret in secrets {
        assert_eq!(secret["private_key_entries"], serde_json::json!([]));
    }
    // The peer's CA and the chain CA, both read as svc-tls reads a CA Secret.
    assert_eq!(secrets[1]["role"], "peer-ca");
    assert_eq!(secrets[1]["roots"], 1);
    assert_eq!(secrets[2]["role"], "chain-ca");
    assert_eq!(secrets[2]["ca_certificates"][0]["subject"], "CN=clients");

    assert_eq!(json["chains"][0]["ok"], true, "{json:#}");
    assert_eq!(
        json["chains"][0]["ca"],
        format!("secret {NS}/ingress-client-ca")
    );

    let peers = json["peers"].as_array().unwrap();
    assert_eq!(
        peers.len(),
        1,
        "the empty --audit-host is not a peer: {json:#}"
    );
    let peer = &peers[0];
    assert_eq!(peer["service"], "identity");
    assert_eq!(peer["ok"], true, "{json:#}");
    assert_eq!(peer["trust"], format!("ca-secret {NS}/server-ca"));
    assert_eq!(peer["tls_version"], "TLSv1_3");
    assert_eq!(peer["key_exchange_group"], "X25519MLKEM768");
    assert_eq!(peer["client_certificate_accepted"], true);
    assert_eq!(peer["http_status"], 200);
    assert_eq!(peer["server_chain"][0]["issuer"], "CN=server-ca");
    assert!(
        peer["server_chain"][0]["sans"]
            .as_array()
            .unwrap()
            .contains(&Value::from("IP:127.0.0.1"))
    );
    // The handshake was real, and presented the Secret's certificate.
    assert_eq!(w.server.seen().last().and_then(|s| s.serial), Some(7));

    let principal = &json["principal"];
    assert_eq!(principal["signed"], true);
    assert_eq!(principal["verified"], true);
    assert_eq!(principal["algorithm"], "ES256");
    assert_eq!(principal["audience"], w.server.url().trim_end_matches('/'));

    let ignored = json["ignored_flags"].as_array().unwrap();
    assert_eq!(
        ignored,
        &[
            Value::from("--metrics-bind-address"),
            Value::from("--leader-elect")
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_human_report_says_the_same() {
    let w = world().await;
    let args: Vec<String> = w
        .args
        .iter()
        .filter(|a| *a != "--output=json")
        .cloned()
        .collect();
    let key = w.key_pem.clone();
    let run = tokio::task::spawn_blocking(move || run(&args, &[], &[&key]))
        .await
        .unwrap();
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    for expected in [
        "Secret unikorn/region-client-cert (identity, --client-certificate-namespace/-name)",
        "subject: CN=region-service",
        "key matches the certificate",
        "OK: the service's loader accepts it",
        "OK: chains to the CA",
        "handshake: TLSv1_3, key exchange X25519MLKEM768",
        "client certificate accepted (HTTP 200)",
        "signed and verified",
        "ignored flags (the service's own, not read here): --metrics-bind-address --leader-elect\nresult: ok (exit 0)\n",
    ] {
        assert!(
            run.stdout.contains(expected),
            "{expected:?} missing from:\n{}",
            run.stdout
        );
    }
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    let run = run(
        &args(&[("client-certificate-namespace", NS), ("output", "json")]),
        &[],
        &[],
    );
    assert_eq!(run.code, 2, "{}", run.stdout);
    let json = run.json();
    assert_eq!(json["failed"][0], "flags");
    assert_eq!(json["error"]["kind"], "HalfSetReference");
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--client-certificate-name")
    );
}
