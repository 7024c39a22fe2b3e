//! Against one kube-testbed emulator per cluster: the control plane (local), a
//! virtual cluster and a workload cluster. Writes must land in the cluster the
//! scope names, and reach-back writes in the local one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};
use kube_testbed::Testbed;
use provision_scope::{
    self as scope, KUBERNETES_CLUSTER_LABEL, ORGANIZATION_LABEL, PROJECT_LABEL, ResourceIdentifier,
};
use serde_json::json;
use tokio::task::JoinSet;

const NS: &str = "org-proj";

type Error = Box<dyn std::error::Error + Send + Sync>;

fn vc_id() -> ResourceIdentifier {
    ResourceIdentifier::new("vcluster")
        .with_label(PROJECT_LABEL, "proj")
        .with_label(ORGANIZATION_LABEL, "org")
}

fn wl_id() -> ResourceIdentifier {
    ResourceIdentifier::new("kubernetes")
        .with_label(KUBERNETES_CLUSTER_LABEL, "wl")
        .with_label(PROJECT_LABEL, "proj")
        .with_label(ORGANIZATION_LABEL, "org")
}

/// Three emulators, each with the namespace the steps write to.
async fn clusters() -> (Testbed, Testbed, Testbed) {
    let (cp, vc, wl) = tokio::join!(Testbed::start(), Testbed::start(), Testbed::start());
    for tb in [&cp, &vc, &wl] {
        tb.upsert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}));
    }
    (cp, vc, wl)
}

/// A kubeconfig for `tb` (admin token, its CA), as a controller would find it.
fn kubeconfig_yaml(tb: &Testbed) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(tb.ca_pem());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\n\
         users:\n- name: u\n  user:\n    token: {}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
         current-context: x\n",
        tb.base_url(),
        tb.token()
    )
}

/// Stores `target`'s kubeconfig as Secret `name` (key `value`) in `holder`.
fn store_kubeconfig(holder: &Testbed, name: &str, target: &Testbed) {
    let value = base64::engine::general_purpose::STANDARD.encode(kubeconfig_yaml(target));
    holder.upsert(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "data": {"value": value},
    }));
}

/// Reads a remote cluster's kubeconfig Secret through the *current* cluster's client.
async fn remote_config(secret: &str) -> Result<scope::RemoteConfig, Error> {
    let secrets: Api<Secret> = Api::namespaced(scope::cluster_client()?, &scope::namespace()?);
    let data = secrets.get(secret).await?.data.unwrap_or_default();
    let yaml = data.get("value").ok_or("no kubeconfig in the Secret")?;
    Ok(scope::config_from_untrusted_kubeconfig(&yaml.0, None).await?)
}

/// The current cluster's CD name, or `local`.
fn here() -> String {
    let cluster = scope::cluster().unwrap();
    cluster
        .id
        .as_ref()
        .map_or_else(|| "local".to_owned(), ResourceIdentifier::cluster_name)
}

/// Creates ConfigMap `name` through `client`, recording which scope wrote it.
async fn write_with(client: kube::Client, name: &str) -> Result<(), Error> {
    let cms: Api<ConfigMap> = Api::namespaced(client, &scope::namespace()?);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    cm.data = Some(BTreeMap::from([("written-from".to_owned(), here())]));
    cms.create(&PostParams::default(), &cm).await?;
    Ok(())
}

/// A leaf step: writes to whichever cluster is current.
async fn install(name: String) -> Result<(), Error> {
    write_with(scope::cluster_client()?, &name).await
}

/// Where ConfigMap `name` is, and which scope wrote it, per cluster (cp, vc, wl).
fn locate(tbs: [&Testbed; 3], name: &str) -> [Option<String>; 3] {
    tbs.map(|tb| {
        tb.get("v1", "ConfigMap", NS, name)
            .map(|cm| cm["data"]["written-from"].as_str().unwrap().to_owned())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_land_in_the_scoped_cluster_three_deep() {
    let (cp, vc, wl) = clusters().await;
    // Each remote's kubeconfig is only readable from its parent cluster.
    store_kubeconfig(&cp, "vc-kubeconfig", &vc);
    store_kubeconfig(&vc, "wl-kubeconfig", &wl);

    let wl_port = wl.port();
    // The emulators listen on 127.0.0.1: allowed here, refused by default.
    scope::with_root(
        cp.cluster_client(),
        scope::with_destinations(
            scope::Destinations::new().allow_loopback(),
            Box::pin(scope::with_namespace(NS, async {
                install("at-cp".into()).await?;
                let vc_config = remote_config("vc-kubeconfig").await?;
                scope::with_remote_cluster(vc_config, vc_id(), async {
                    install("at-vc".into()).await?;
                    // The workload kubeconfig lives in the vcluster: reading it with the local
                    // client would fail.
                    let wl_config = remote_config("wl-kubeconfig").await?;
                    scope::with_remote_cluster(wl_config, wl_id(), async {
                        let cluster = scope::cluster()?;
                        assert_eq!(cluster.id, Some(wl_id()));
                        assert_eq!(
                            (cluster.host.as_deref(), cluster.port),
                            (Some("127.0.0.1"), Some(wl_port))
                        );
                        install("at-wl".into()).await?;
                        // Reach back: bookkeeping goes to the provisioner (local) cluster.
                        write_with(scope::provisioner()?, "wl-done").await?;
                        Ok::<(), Error>(())
                    })
                    .await??;
                    // Back in the vcluster once the workload step is done.
                    install("at-vc-after".into()).await?;
                    Ok::<(), Error>(())
                })
                .await??;
                install("at-cp-after".into()).await?;
                Ok::<(), Error>(())
            })),
        ),
    )
    .await
    .unwrap();

    let tbs = [&cp, &vc, &wl];
    let vc_name = vc_id().cluster_name();
    let wl_name = wl_id().cluster_name();
    let s = |v: &str| Some(v.to_owned());
    assert_eq!(locate(tbs, "at-cp"), [s("local"), None, None]);
    assert_eq!(locate(tbs, "at-vc"), [None, s(&vc_name), None]);
    assert_eq!(locate(tbs, "at-wl"), [None, None, s(&wl_name)]);
    assert_eq!(locate(tbs, "wl-done"), [s(&wl_name), None, None]);
    assert_eq!(locate(tbs, "at-vc-after"), [None, s(&vc_name), None]);
    assert_eq!(locate(tbs, "at-cp-after"), [s("local"), None, None]);
    assert_eq!(locate(tbs, "wl-kubeconfig"), [None, None, None]); // a Secret, not a ConfigMap

    // Reading the workload kubeconfig needs the vcluster's client: from the root it is not found.
    let from_root = scope::with_root(
        cp.cluster_client(),
        scope::with_namespace(NS, remote_config("wl-kubeconfig")),
    )
    .await;
    let err = from_root.unwrap_err();
    assert!(
        matches!(err.downcast_ref::<kube::Error>(), Some(kube::Error::Api(status)) if status.code == 404),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_children_write_to_their_own_clusters() {
    let (cp, vc, wl) = clusters().await;
    let vc_cluster =
        || scope::remote_cluster(scope::RemoteConfig::trusted(vc.kube_config()), vc_id()).unwrap();
    let wl_cluster =
        || scope::remote_cluster(scope::RemoteConfig::trusted(wl.kube_config()), wl_id()).unwrap();

    scope::with_root(
        cp.cluster_client(),
        scope::with_namespace(NS, async {
            // Joined in one task: each child keeps its own scope across awaits.
            let joined = |cluster, prefix: &'static str| {
                scope::with_cluster(cluster, async move {
                    for i in 0..3 {
                        install(format!("{prefix}-{i}")).await?;
                    }
                    Ok::<(), Error>(())
                })
            };
            let (a, b, c) = tokio::join!(
                joined(vc_cluster(), "join-vc"),
                joined(wl_cluster(), "join-wl"),
                joined(scope::cluster().unwrap().as_ref().clone(), "join-cp"),
            );
            a?;
            b?;
            c?;

            // Spawned from inside each cluster's scope, into one JoinSet and as tasks.
            let mut set = JoinSet::new();
            let mut handles = Vec::new();
            for (cluster, prefix) in [(vc_cluster(), "set-vc"), (wl_cluster(), "set-wl")] {
                scope::with_cluster(cluster, async {
                    for i in 0..3 {
                        scope::spawn_in(&mut set, install(format!("{prefix}-{i}")));
                    }
                    handles.push(scope::spawn(install(format!("{prefix}-task"))));
                })
                .await;
            }
            handles.push(scope::spawn(install("set-cp-task".into())));
            while let Some(result) = set.join_next().await {
                result??;
            }
            for handle in handles {
                handle.await??;
            }
            Ok::<(), Error>(())
        }),
    )
    .await
    .unwrap();

    let tbs = [&cp, &vc, &wl];
    let vc_name = vc_id().cluster_name();
    let wl_name = wl_id().cluster_name();
    let s = |v: &str| Some(v.to_owned());
    for i in 0..3 {
        assert_eq!(
            locate(tbs, &format!("join-cp-{i}")),
            [s("local"), None, None]
        );
        for (kind, idx, name) in [("vc", 1, &vc_name), ("wl", 2, &wl_name)] {
            let mut want = [None, None, None];
            want[idx] = s(name);
            assert_eq!(locate(tbs, &format!("join-{kind}-{i}")), want);
            assert_eq!(locate(tbs, &format!("set-{kind}-{i}")), want);
            assert_eq!(locate(tbs, &format!("set-{kind}-task")), want);
        }
    }
    assert_eq!(locate(tbs, "set-cp-task"), [s("local"), None, None]);
    // Nothing else was written anywhere.
    assert_eq!(cp.list("v1", "ConfigMap").len(), 4);
    assert_eq!(vc.list("v1", "ConfigMap").len(), 7);
    assert_eq!(wl.list("v1", "ConfigMap").len(), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_outside_its_scope_fails_typed_and_writes_nothing() {
    let cp = Testbed::start().await;
    cp.upsert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}));
    // A cluster but no namespace.
    let err = scope::with_root(cp.cluster_client(), install("orphan".into()))
        .await
        .unwrap_err();
    let err = err.downcast::<scope::ScopeError>().unwrap();
    assert_eq!(
        *err,
        scope::ScopeError::Missing(scope::ScopeValue::Namespace)
    );
    assert!(cp.list("v1", "ConfigMap").is_empty());
}
