//! The migrated controller against two API servers (kube-testbed instances: the
//! local cluster holding the resources, a remote cluster holding the identity and
//! CA Secrets the peer call uses) and test-support's TLS 1.3 server, which requires
//! and verifies client certificates and records each presented leaf's serial.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use base64::Engine as _;
use kube_construct::{
    ClusterId,
    types::{
        ConditionReason, ConditionStatus, ConditionType, StatusConditionReader as _,
        fake::ManagedResource,
    },
};
use kube_testbed::{KindSpec, Testbed};
use migrated_controller::{CLUSTER_LABEL, KUBECONFIG_LABEL, Settings, client_builder, run};
use serde_json::json;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use test_support::{
    pki::TestCa,
    poll_until,
    secret::{secret_with, tls_secret},
    tls_server::VerifyingServer,
};

const NS: &str = "platform";
const IDENTITY: &str = "controller-client-certificate";
const PEER_CA: &str = "region-ca";
const LOCAL_SERIAL: u64 = 1001;
const REMOTE_SERIAL: u64 = 2002;
const MANAGED: &str = "managedresources.unikorn.unikorn-cloud.org";

/// A kubeconfig for `tb` with inline CA data and a token (what the untrusted
/// kubeconfig check accepts), as a provisioner finds one in a Secret.
fn kubeconfig(tb: &Testbed) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(tb.ca_pem());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\n\
         users:\n- name: u\n  user:\n    token: {}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
         current-context: x\n",
        tb.base_url(),
        tb.token()
    )
}

fn namespace(tb: &Testbed) {
    tb.upsert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciles_in_the_remote_cluster_with_its_identity_and_one_watch_per_kind() {
    let (local, remote) = tokio::join!(Testbed::start(), Testbed::start());
    local.register_kind(KindSpec::namespaced(
        "unikorn.unikorn-cloud.org",
        "v1alpha1",
        "ManagedResource",
        "managedresources",
    ));
    namespace(&local);
    namespace(&remote);

    // The peer, and one client CA; a leaf of it in *each* cluster under the same
    // Secret name: only the serial the server records tells which cluster's was used.
    let (server_ca, client_ca) = (TestCa::new("region"), TestCa::new("platform clients"));
    for (tb, serial) in [(&local, LOCAL_SERIAL), (&remote, REMOTE_SERIAL)] {
        let leaf = client_ca.client_leaf("controller", serial);
        tb.upsert(tls_secret(NS, IDENTITY, &leaf.cert_pem, &leaf.key_pem));
        tb.upsert(secret_with(
            NS,
            PEER_CA,
            "Opaque",
            &[("ca.crt", &server_ca.pem())],
        ));
    }
    let server = VerifyingServer::start(&server_ca, &client_ca).await;

    // The remote cluster's kubeconfig, in the local cluster.
    let mut stored = secret_with(
        NS,
        "remote-a-kubeconfig",
        "Opaque",
        &[("value", &kubeconfig(&remote))],
    );
    stored["metadata"]["labels"] = json!({ KUBECONFIG_LABEL: "true" });
    local.upsert(stored);

    let settings = Settings {
        namespace: NS.to_owned(),
        peer: PeerOptions::new("region")
            .with_host(server.url().parse().unwrap())
            .with_ca_secret(NS, PEER_CA),
        identity: ClientIdentityOptions::new(None).with_secret(NS, IDENTITY),
        path: "api/v1/regions".to_owned(),
        sync_timeout: Duration::from_secs(10),
    };
    // A client adopted from elsewhere, identified in one step.
    let client = client_builder(&settings)
        .from_client_identified(local.client(), ClusterId::named("local"))
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(client.clone(), settings, async {
        let _ = stopped.await;
    }));

    let mut resource = ManagedResource::new("widget");
    resource.metadata.namespace = Some(NS.to_owned());
    resource.metadata.labels = Some([(CLUSTER_LABEL.to_owned(), "remote-a".to_owned())].into());
    client.create(&resource).await.unwrap();

    // The status, written through /status and read back from the API server.
    let available = || {
        let stored = local.get(
            "unikorn.unikorn-cloud.org/v1alpha1",
            "ManagedResource",
            NS,
            "widget",
        )?;
        let object: ManagedResource = serde_json::from_value(stored).ok()?;
        object
            .status_condition_read(&ConditionType::Available)
            .ok()
            .cloned()
    };
    poll_until("the Available condition written", || {
        available().is_some_and(|c| c.status == ConditionStatus::True)
    })
    .await;
    let condition = available().unwrap();
    assert_eq!(condition.reason, ConditionReason::Provisioned);
    assert!(
        condition
            .message
            .contains("in cluster remote-a answered 200"),
        "{}",
        condition.message
    );
    assert!(local.requests_on("patch", &format!("{MANAGED}/status")) >= 1);
    // And through the cache, which the watch brings it to.
    poll_until("the cache holds the status", || {
        client
            .get::<ManagedResource>(Some(NS), "widget")
            .unwrap()
            .is_some_and(|o| o.status_condition_read(&ConditionType::Available).is_ok())
    })
    .await;

    // The peer saw the remote cluster's leaf, never the local one's.
    let serials: Vec<_> = server.seen().iter().filter_map(|s| s.serial).collect();
    assert!(serials.contains(&REMOTE_SERIAL), "{serials:?}");
    assert!(!serials.contains(&LOCAL_SERIAL), "{serials:?}");
    // The identity and CA Secrets were watched in the remote cluster, not the local one.
    assert_eq!(remote.requests_on("watch", "secrets"), 2);
    assert_eq!(
        local.requests_on("watch", "secrets"),
        1,
        "the kubeconfig cache only"
    );

    // One watch (and one list) of the resources: the controller shares the cache's.
    assert_eq!(local.requests_on("watch", MANAGED), 1);
    assert_eq!(local.requests_on("list", MANAGED), 1);
    // Every read was declared.
    assert_eq!(client.undeclared_reads(), []);

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), controller)
        .await
        .expect("the controller stops on shutdown")
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_kubeconfig_is_reported_in_the_condition() {
    let local = Testbed::start().await;
    local.register_kind(KindSpec::namespaced(
        "unikorn.unikorn-cloud.org",
        "v1alpha1",
        "ManagedResource",
        "managedresources",
    ));
    namespace(&local);
    let settings = Settings {
        namespace: NS.to_owned(),
        peer: PeerOptions::new("region").with_host("https://127.0.0.1:9".parse().unwrap()),
        identity: ClientIdentityOptions::new(None).with_secret(NS, IDENTITY),
        path: "api/v1/regions".to_owned(),
        sync_timeout: Duration::from_secs(5),
    };
    let client = client_builder(&settings)
        .from_client_identified(local.client(), ClusterId::named("local"))
        .await
        .unwrap();
    let controller = tokio::spawn(run(client.clone(), settings, std::future::pending()));
    let mut resource = ManagedResource::new("orphan");
    resource.metadata.namespace = Some(NS.to_owned());
    resource.metadata.labels = Some([(CLUSTER_LABEL.to_owned(), "nowhere".to_owned())].into());
    client.create(&resource).await.unwrap();

    let condition = || {
        let stored = local.get(
            "unikorn.unikorn-cloud.org/v1alpha1",
            "ManagedResource",
            NS,
            "orphan",
        )?;
        let object: ManagedResource = serde_json::from_value(stored).ok()?;
        object
            .status_condition_read(&ConditionType::Available)
            .ok()
            .cloned()
    };
    poll_until("the failure written", || condition().is_some()).await;
    let condition = condition().unwrap();
    assert_eq!(condition.status, ConditionStatus::False);
    assert_eq!(condition.reason, ConditionReason::Errored);
    assert!(
        condition
            .message
            .contains("no kubeconfig for cluster nowhere: Secret platform/nowhere-kubeconfig"),
        "{}",
        condition.message
    );
    controller.abort();
}
