//! What a controller needs of the client: a cache's watch shared with a kube-runtime
//! `Controller` (one WATCH per kind), status writes, a client adopted with its
//! cluster identity, and the list of reads no declaration covers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Patch, PatchParams};
use kube_construct::{
    ClusterId,
    cache::Selection,
    client::{CachedClient, ClientError, UndeclaredRead},
    types::fake::ManagedResource,
    types::{ConditionReason, ConditionStatus, ConditionType, StatusConditionWriter as _},
};
use kube_testbed::{KindSpec, Testbed};
use serde_json::json;
use test_support::poll_until;

const MANAGED: &str = "managedresources.unikorn.unikorn-cloud.org";

fn configmap(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "apps", "name": name}})
}

async fn next_name(
    stream: &mut (impl futures::Stream<Item = std::sync::Arc<ConfigMap>> + Unpin),
) -> String {
    let next = tokio::time::timeout(Duration::from_secs(10), stream.next()).await;
    next.expect("an object within 10 s")
        .expect("the stream goes on")
        .metadata
        .name
        .clone()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_watch_follows_the_cache_without_a_second_watch() {
    let tb = Testbed::start().await;
    tb.upsert(configmap("before"));
    let selection = Selection::in_namespace("apps");
    let client = CachedClient::builder()
        .cache::<ConfigMap>(selection.clone())
        .from_client(tb.client())
        .await
        .unwrap();
    let watch = client.shared_watch::<ConfigMap>(&selection).unwrap();
    assert_eq!(
        watch.store().state().len(),
        1,
        "the store is the cache's, synced"
    );
    let (mut first, mut second) = (watch.subscribe(), watch.subscribe());
    // What the cache held when the subscription started, then what the watch applies.
    assert_eq!(next_name(&mut first).await, "before");
    assert_eq!(next_name(&mut second).await, "before");
    tb.upsert(configmap("after"));
    assert_eq!(next_name(&mut first).await, "after");
    assert_eq!(next_name(&mut second).await, "after");
    // Two subscribers, one WATCH and one LIST.
    assert_eq!(tb.requests_on("watch", "configmaps"), 1);
    assert_eq!(tb.requests_on("list", "configmaps"), 1);
    // A re-list (the watch's history expired) sends every object again.
    tb.expire_history();
    let mut relisted = vec![next_name(&mut first).await, next_name(&mut first).await];
    relisted.sort();
    assert_eq!(relisted, ["after", "before"]);
    assert_eq!(tb.requests_on("list", "configmaps"), 2);

    // The subscription keeps the caches running without the client; they stop with it.
    drop((client, watch, second));
    tb.upsert(configmap("later"));
    assert_eq!(next_name(&mut first).await, "later");
    drop(first);
    poll_until("the watch ends with its last follower", || {
        tb.open_watches() == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_declared_typed_cache_can_be_shared() {
    let tb = Testbed::start().await;
    let client = CachedClient::builder()
        .cache::<ConfigMap>(Selection::in_namespace("apps"))
        .from_client(tb.client())
        .await
        .unwrap();
    for (selection, wanted) in [
        (
            Selection::in_namespace("other"),
            "ConfigMap (configmaps.v1) in namespace \"other\"",
        ),
        (
            Selection::all(),
            "ConfigMap (configmaps.v1) in all namespaces",
        ),
    ] {
        let err = client.shared_watch::<ConfigMap>(&selection).unwrap_err();
        assert!(matches!(&err, ClientError::NotDeclared { cache } if cache.selection == selection));
        assert_eq!(
            err.to_string(),
            format!(
                "no typed cache of {wanted} was declared (declare it at construction to share its watch)"
            )
        );
    }
    assert!(matches!(
        client.shared_watch::<Secret>(&Selection::in_namespace("apps")),
        Err(ClientError::NotDeclared { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_writes_change_the_status_only() {
    let tb = Testbed::start().await;
    tb.register_kind(KindSpec::namespaced(
        "unikorn.unikorn-cloud.org",
        "v1alpha1",
        "ManagedResource",
        "managedresources",
    ));
    let client = CachedClient::builder()
        .from_client(tb.client())
        .await
        .unwrap();
    let mut object = ManagedResource::new("thing");
    object.metadata.namespace = Some("apps".into());
    let created = client.create(&object).await.unwrap();

    let mut wanted = created.clone();
    wanted.status_condition_write(
        ConditionType::Available,
        ConditionStatus::True,
        ConditionReason::Provisioned,
        "done",
    );
    // A merge patch of the status (and a label, which /status ignores).
    let patch = json!({"metadata": {"labels": {"ignored": "yes"}}, "status": wanted.status});
    let patched: ManagedResource = client
        .patch_status(
            Some("apps"),
            "thing",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .unwrap();
    assert_eq!(patched.status, wanted.status);
    assert_eq!(patched.metadata.labels, None);
    assert_eq!(tb.requests_on("patch", &format!("{MANAGED}/status")), 1);

    // A replace of the status, guarded by the resourceVersion it was read at.
    let mut replaced = patched.clone();
    replaced.status.conditions.clear();
    let written = client.replace_status(&replaced).await.unwrap();
    assert!(written.status.conditions.is_empty());
    let stale = client.replace_status(&patched).await.unwrap_err();
    assert!(
        matches!(&stale, ClientError::Api(e) if e.status_code() == Some(409)),
        "{stale:?}"
    );
    assert_eq!(tb.requests_on("update", &format!("{MANAGED}/status")), 2);
    // Writes to the object itself keep the status.
    let mut relabelled = written.clone();
    relabelled.status = wanted.status.clone();
    let written = client.replace(&relabelled).await.unwrap();
    assert!(written.status.conditions.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_client_carries_its_cluster_identity_in_one_step() {
    let tb = Testbed::start().await;
    let bare = CachedClient::builder()
        .from_client(tb.client())
        .await
        .unwrap();
    let refused = bare.cluster_client().unwrap_err();
    assert!(
        refused.to_string().contains("use from_client_identified"),
        "{refused}"
    );

    let identified = CachedClient::builder()
        .from_client_identified(tb.client(), ClusterId::named("local"))
        .await
        .unwrap();
    let cluster = identified.cluster_client().unwrap();
    assert_eq!(cluster.cluster(), &ClusterId::named("local"));
    // It is the adopted client that reads.
    cluster.kube().apiserver_version().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeclared_reads_are_refused_and_listed() {
    let logs = test_support::logs::CapturedLogs::global();
    let tb = Testbed::start().await;
    let client = CachedClient::builder()
        .cache::<ConfigMap>(Selection::object(Some("apps"), "settings"))
        .from_client(tb.client())
        .await
        .unwrap();
    assert!(
        client
            .get::<ConfigMap>(Some("apps"), "settings")
            .unwrap()
            .is_none()
    );
    for _ in 0..2 {
        assert!(matches!(
            client.get::<Secret>(Some("apps"), "undeclared-token"),
            Err(ClientError::NotCached { .. })
        ));
    }
    assert!(
        client
            .list::<Secret>(Some("apps"), &Default::default())
            .is_err()
    );
    let read = |resource: &str, name: Option<&str>| UndeclaredRead {
        resource: resource.into(),
        namespace: Some("apps".into()),
        name: name.map(Into::into),
    };
    assert_eq!(
        client.undeclared_reads(),
        [
            (read("secrets.v1", None), 1),
            (read("secrets.v1", Some("undeclared-token")), 2)
        ]
    );
    assert_eq!(
        client.undeclared_reads()[1].0.to_string(),
        "get secrets.v1 apps/undeclared-token"
    );
    assert_eq!(tb.requests("get"), 0, "refused, never sent");
    // Logged once each, however often refused.
    let logged = logs
        .text()
        .lines()
        .filter(|line| {
            line.contains("read refused") && line.contains("get secrets.v1 apps/undeclared-token")
        })
        .count();
    assert_eq!(logged, 1, "{}", logs.text());
}
