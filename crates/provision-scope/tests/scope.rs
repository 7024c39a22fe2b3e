//! Scope behaviour that needs no API server: clients are built but never used, and are
//! told apart by the default namespace each was built with.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use provision_scope::{
    self as scope, Cluster, RemoteError, ResourceIdentifier, ScopeError, ScopeValue,
};
use tokio::task::JoinSet;

/// A client for a server that is never contacted, tagged with `tag` as its default namespace.
fn client(tag: &str) -> kube::Client {
    let mut config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    config.default_namespace = tag.to_owned();
    kube::Client::try_from(config).unwrap()
}

/// The root of a tree: a client with the identity of its (local) cluster.
fn root(tag: &str) -> scope::ClusterClient {
    scope::ClusterClient::new(client(tag), scope::ClusterId::named("local"))
}

fn vc_id() -> ResourceIdentifier {
    ResourceIdentifier::new("vcluster")
        .with_label("p", "proj")
        .with_label("o", "org")
}

fn wl_id() -> ResourceIdentifier {
    ResourceIdentifier::new("kubernetes")
        .with_label("k", "wl")
        .with_label("p", "proj")
        .with_label("o", "org")
}

fn vc() -> Cluster {
    Cluster::remote(client("vc"), vc_id(), "vc.example", 443)
}

fn wl() -> Cluster {
    Cluster::remote(client("wl"), wl_id(), "10.0.0.7", 6443)
}

/// Which cluster is current: its client's tag and its CD name.
fn here() -> (String, String) {
    let c = scope::cluster().unwrap();
    let name =
        c.id.as_ref()
            .map_or_else(|| "local".to_owned(), ResourceIdentifier::cluster_name);
    (c.client.default_namespace().to_owned(), name)
}

fn tag_here() -> String {
    here().0
}

#[tokio::test]
async fn accessors_outside_any_scope_name_the_missing_value() {
    assert_eq!(
        scope::provisioner().err(),
        Some(ScopeError::Missing(ScopeValue::Provisioner))
    );
    assert_eq!(
        scope::cluster().err(),
        Some(ScopeError::Missing(ScopeValue::Cluster))
    );
    assert_eq!(
        scope::cluster_client().err(),
        Some(ScopeError::Missing(ScopeValue::Cluster))
    );
    assert_eq!(
        scope::namespace().err(),
        Some(ScopeError::Missing(ScopeValue::Namespace))
    );
    let message = scope::namespace().unwrap_err().to_string();
    assert!(
        message.contains("context invalid") && message.contains("namespace"),
        "{message}"
    );
}

#[tokio::test]
async fn a_partial_scope_still_reports_what_it_lacks() {
    scope::with_namespace("ns", async {
        assert_eq!(&*scope::namespace().unwrap(), "ns");
        let err = scope::provisioner().err().unwrap();
        assert_eq!(err.value(), ScopeValue::Provisioner);
        assert!(err.to_string().contains("provisioner client"), "{err}");
        assert_eq!(scope::cluster().unwrap_err().value(), ScopeValue::Cluster);
    })
    .await;
    // A cluster without a provisioner is just as incomplete.
    scope::with_cluster(vc(), async {
        assert_eq!(tag_here(), "vc");
        assert_eq!(
            scope::provisioner().err().map(|e| e.value()),
            Some(ScopeValue::Provisioner)
        );
    })
    .await;
}

#[tokio::test]
async fn three_deep_nesting_overrides_and_restores() {
    scope::with_root(root("cp"), async {
        let root = scope::cluster().unwrap();
        assert!(root.is_local());
        assert_eq!((root.host.as_deref(), root.port), (None, None));
        assert_eq!(here(), ("cp".into(), "local".into()));
        // The root is identified: svc-tls can key the local cluster's Secrets by it.
        assert_eq!(
            scope::cluster_client_identified().unwrap().cluster(),
            &scope::ClusterId::named("local")
        );

        scope::with_cluster(vc(), async {
            assert_eq!(here(), ("vc".into(), "vcluster-proj:org".into()));
            scope::with_cluster(wl(), async {
                let c = scope::cluster().unwrap();
                assert_eq!(here(), ("wl".into(), "kubernetes-wl:proj:org".into()));
                assert_eq!((c.host.as_deref(), c.port), (Some("10.0.0.7"), Some(6443)));
                // The provisioner client is the local one however deep we are.
                assert_eq!(scope::provisioner().unwrap().default_namespace(), "cp");
            })
            .await;
            assert_eq!(here(), ("vc".into(), "vcluster-proj:org".into()));
        })
        .await;

        assert_eq!(here(), ("cp".into(), "local".into()));
    })
    .await;
    assert!(matches!(
        scope::cluster(),
        Err(ScopeError::Missing(ScopeValue::Cluster))
    ));
}

#[tokio::test]
async fn runners_compose_in_either_order() {
    scope::with_namespace(
        "outer-ns",
        scope::with_cluster(vc(), async {
            assert_eq!(tag_here(), "vc");
            assert_eq!(&*scope::namespace().unwrap(), "outer-ns");
        }),
    )
    .await;
    scope::with_cluster(
        vc(),
        scope::with_namespace("inner-ns", async {
            assert_eq!(tag_here(), "vc");
            assert_eq!(&*scope::namespace().unwrap(), "inner-ns");
        }),
    )
    .await;
    // Replacing one value leaves the others.
    scope::with_root(
        root("cp"),
        scope::with_namespace("a", async {
            scope::with_provisioner(client("other"), async {
                assert_eq!(scope::provisioner().unwrap().default_namespace(), "other");
                assert_eq!(tag_here(), "cp");
                assert_eq!(&*scope::namespace().unwrap(), "a");
            })
            .await;
            scope::with_namespace("b", async {
                assert_eq!(&*scope::namespace().unwrap(), "b")
            })
            .await;
            assert_eq!(&*scope::namespace().unwrap(), "a");
            assert_eq!(scope::provisioner().unwrap().default_namespace(), "cp");
        }),
    )
    .await;
}

#[tokio::test]
async fn sync_runners_nest_inside_async_scopes_and_restore() {
    scope::with_root(root("cp"), async {
        let seen = scope::sync_with_cluster(wl(), || {
            let inner = scope::sync_with_namespace("n1", || {
                scope::sync_with_provisioner(client("p2"), || {
                    (
                        tag_here(),
                        scope::namespace().unwrap().to_string(),
                        scope::provisioner().unwrap(),
                    )
                })
            });
            // Outside the namespace closure, there is no namespace again.
            assert!(matches!(
                scope::namespace(),
                Err(ScopeError::Missing(ScopeValue::Namespace))
            ));
            inner
        });
        assert_eq!((seen.0.as_str(), seen.1.as_str()), ("wl", "n1"));
        assert_eq!(seen.2.default_namespace(), "p2");
        assert_eq!(tag_here(), "cp");
        assert_eq!(scope::provisioner().unwrap().default_namespace(), "cp");
    })
    .await;
}

#[test]
fn sync_runners_work_without_a_runtime_or_outer_scope() {
    let ns = scope::sync_with_namespace("solo", || scope::namespace().unwrap().to_string());
    assert_eq!(ns, "solo");
    assert!(matches!(
        scope::sync_with_namespace("solo", scope::cluster),
        Err(ScopeError::Missing(ScopeValue::Cluster))
    ));
    assert!(matches!(
        scope::namespace(),
        Err(ScopeError::Missing(ScopeValue::Namespace))
    ));
}

#[tokio::test]
async fn joined_children_each_keep_their_own_scope() {
    scope::with_root(root("cp"), async {
        let child = |cluster: Cluster, want: &'static str| {
            scope::with_cluster(cluster, async move {
                let mut seen = Vec::new();
                for _ in 0..5 {
                    seen.push(tag_here());
                    // Hand the thread to the sibling between every check.
                    tokio::task::yield_now().await;
                }
                assert!(seen.iter().all(|t| t == want), "{want}: {seen:?}");
                assert_eq!(scope::provisioner().unwrap().default_namespace(), "cp");
            })
        };
        let local_child = async {
            for _ in 0..5 {
                assert_eq!(tag_here(), "cp");
                tokio::task::yield_now().await;
            }
        };
        tokio::join!(child(vc(), "vc"), child(wl(), "wl"), local_child);
        futures::future::join_all([child(wl(), "wl"), child(vc(), "vc")]).await;
        assert_eq!(tag_here(), "cp");
    })
    .await;
}

// The join handle deliberately escapes the scope it was spawned in.
#[allow(clippy::async_yields_async)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawned_children_carry_the_scope_of_their_spawn_site() {
    scope::with_root(root("cp"), async {
        // Plain tokio::spawn loses the scope; that is why the helpers exist.
        let plain = tokio::spawn(async { scope::cluster().map(|_| ()) })
            .await
            .unwrap();
        assert_eq!(plain, Err(ScopeError::Missing(ScopeValue::Cluster)));

        let handle = scope::with_cluster(vc(), async {
            scope::with_namespace("vc-ns", async {
                scope::spawn(async {
                    tokio::task::yield_now().await;
                    (
                        tag_here(),
                        scope::namespace().unwrap().to_string(),
                        scope::provisioner().unwrap(),
                    )
                })
            })
            .await
        })
        .await;
        // The spawner has left the vcluster scope; the child has not.
        assert_eq!(tag_here(), "cp");
        let (tag, ns, provisioner) = handle.await.unwrap();
        assert_eq!((tag.as_str(), ns.as_str()), ("vc", "vc-ns"));
        assert_eq!(provisioner.default_namespace(), "cp");

        // A nested scope inside a spawned task overrides the carried one.
        let nested = scope::spawn(scope::with_cluster(wl(), async { tag_here() }))
            .await
            .unwrap();
        assert_eq!(nested, "wl");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_set_children_each_see_their_own_scope() {
    let mut set = JoinSet::new();
    scope::with_root(root("cp"), async {
        for (i, cluster) in [vc(), wl()].into_iter().cycle().take(8).enumerate() {
            let want = cluster.client.default_namespace().to_owned();
            scope::sync_with_cluster(cluster, || {
                scope::spawn_in(&mut set, async move {
                    tokio::task::yield_now().await;
                    (
                        i,
                        want,
                        tag_here(),
                        scope::provisioner().unwrap().default_namespace().to_owned(),
                    )
                });
            });
        }
        // The local-cluster child, spawned from the root scope.
        scope::spawn_in(&mut set, async {
            (99, "cp".to_owned(), tag_here(), "cp".to_owned())
        });
    })
    .await;

    let mut indexes = BTreeSet::new();
    while let Some(result) = set.join_next().await {
        let (i, want, seen, provisioner) = result.unwrap();
        assert_eq!(seen, want, "child {i}");
        assert_eq!(provisioner, "cp", "child {i}");
        indexes.insert(i);
    }
    assert_eq!(indexes.len(), 9);
}

#[tokio::test]
async fn remote_step_derives_the_endpoint_and_inherits_the_rest() {
    let config =
        scope::RemoteConfig::trusted(kube::Config::new("https://[fd00::1]".parse().unwrap()));
    let seen = scope::with_root(
        root("cp"),
        scope::with_namespace("ns", async {
            scope::with_remote_cluster(config, wl_id(), async {
                let c = scope::cluster().unwrap();
                (
                    c.id.clone(),
                    c.host.clone(),
                    c.port,
                    scope::provisioner().unwrap().default_namespace().to_owned(),
                    scope::namespace().unwrap().to_string(),
                )
            })
            .await
        }),
    )
    .await
    .unwrap();
    assert_eq!(seen.0, Some(wl_id()));
    assert_eq!((seen.1.as_deref(), seen.2), (Some("fd00::1"), Some(443)));
    assert_eq!((seen.3.as_str(), seen.4.as_str()), ("cp", "ns"));
}

#[tokio::test]
async fn remote_step_with_a_bad_server_does_not_run_the_children() {
    let config =
        scope::RemoteConfig::trusted(kube::Config::new("ftp://files.example".parse().unwrap()));
    let mut ran = false;
    let result = scope::with_remote_cluster(config, vc_id(), async { ran = true }).await;
    assert!(
        matches!(result, Err(RemoteError::UnsupportedScheme { ref scheme }) if scheme == "ftp"),
        "{result:?}"
    );
    assert!(!ran);
}
