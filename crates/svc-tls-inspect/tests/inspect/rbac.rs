//! The RBAC docs/operations.md gives the command ("Asking directly"), as the API
//! emulator's rules: enough for a run over every kind of object it reads (an
//! identity Secret, a peer's CA Secret, a peer's CA ConfigMap, a chain CA Secret in
//! another namespace, read with `get` only); and each `list`/`watch` in it needed.

use crate::common::*;
use kube_testbed::{Rule, Testbed};
use test_support::pki::TestCa;
use test_support::secret::{secret_with, tls_secret};
use test_support::tls_server::VerifyingServer;

const INGRESS_NS: &str = "ingress-nginx";

/// The documented Roles, for these object names; `configmap_verbs` for the
/// ConfigMap rule.
fn documented(configmap_verbs: &[&str]) -> Vec<Rule> {
    vec![
        Rule::new(&["get", "list", "watch"], "", "secrets")
            .namespace(NS)
            .names(&["svc-cert", "server-ca"]),
        Rule::new(configmap_verbs, "", "configmaps")
            .namespace(NS)
            .names(&["platform-ca-bundle"]),
        Rule::new(&["get"], "", "secrets")
            .namespace(INGRESS_NS)
            .names(&["client-ca"]),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_role_is_enough_and_each_watch_in_it_needed() {
    let tb = Testbed::start().await;
    let (server_ca, clients) = (TestCa::new("server-ca"), TestCa::new("clients"));
    let leaf = clients.client_leaf("svc", 71);
    tb.upsert(tls_secret(NS, "svc-cert", &leaf.cert_pem, &leaf.key_pem));
    tb.upsert(secret_with(
        NS,
        "server-ca",
        "Opaque",
        &[("ca.crt", &server_ca.pem())],
    ));
    tb.upsert(configmap(
        "platform-ca-bundle",
        &[("ca.crt", &server_ca.pem())],
    ));
    tb.upsert(secret_with(
        INGRESS_NS,
        "client-ca",
        "Opaque",
        &[("ca.crt", &clients.pem())],
    ));
    let (region, identity) = (
        VerifyingServer::start(&server_ca, &clients).await,
        VerifyingServer::start(&server_ca, &clients).await,
    );
    let run_with = |token: &str, rules: Vec<Rule>| {
        tb.add_token(token, rules);
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = write_kubeconfig_for(dir.path(), &tb, token);
        let mut args = identity_args(&kubeconfig, "svc-cert");
        args.extend(crate::common::args(&[
            ("region-host", &region.url()),
            ("region-ca-secret-namespace", NS),
            ("region-ca-secret-name", "server-ca"),
            ("identity-host", &identity.url()),
            ("identity-ca-configmap-namespace", NS),
            ("identity-ca-configmap-name", "platform-ca-bundle"),
            ("chain-ca-secret", &format!("{INGRESS_NS}/client-ca")),
        ]));
        (dir, args)
    };
    let keys = vec![leaf.key_pem.clone()];

    let (_dir, args) = run_with("documented", documented(&["get", "list", "watch"]));
    let run = run_async(args, keys.clone()).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let json = run.json();
    assert_eq!(json["secrets"].as_array().unwrap().len(), 3, "{json:#}");
    assert_eq!(json["configmaps"][0]["roots"], 1, "{json:#}");
    assert_eq!(json["chains"][0]["ok"], true, "{json:#}");
    assert_eq!(json["peers"][0]["ok"], true, "{json:#}");
    assert_eq!(json["peers"][1]["ok"], true, "{json:#}");

    // Without list/watch on the ConfigMap, the read succeeds but the service's
    // peer client cannot follow the bundle: that peer fails.
    let (_dir, args) = run_with("no-watch", documented(&["get"]));
    let run = run_async(args, keys).await;
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    let json = run.json();
    assert_eq!(json["configmaps"][0]["roots"], 1, "{json:#}");
    let peers = json["peers"].as_array().unwrap();
    let failed: Vec<&str> = peers
        .iter()
        .filter(|p| p["ok"] == false)
        .map(|p| p["service"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["identity"], "{json:#}");
}
