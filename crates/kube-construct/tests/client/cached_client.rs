//! The cache-backed client against the kube-testbed API emulator: construction
//! proves sync, fails fast on permanent errors, times out naming caches; reads
//! follow writes; health degrades and recovers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{future::Future, sync::Arc, time::Duration};

use k8s_openapi::{
    api::core::v1::{ConfigMap, Namespace, Secret},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams},
    core::{Expression, Selector},
};
use kube_construct::{
    cache::{CacheError, CacheState, Selection},
    client::{CachedClient, ClientError, ConstructError},
    config::InClusterSource,
    registry::{Registration, Registry, Scope},
};
use kube_testbed::{KindSpec, Rule, Testbed};
use serde_json::json;
use test_support::poll_until;

async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .expect("the constructor must not hang")
}

fn configmap(ns: &str, name: &str, value: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": ns, "name": name, "labels": {"app": "demo"}},
        "data": {"value": value},
    })
}

fn secret(ns: &str, name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"namespace": ns, "name": name},
        "type": "Opaque",
        "data": {"k": "dmFsdWU="},
    })
}

fn configmap_resource() -> ApiResource {
    ApiResource::erase::<ConfigMap>(&())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_cluster_construction_from_a_service_account_dir() {
    let tb = Testbed::start().await;
    tb.upsert(configmap("default", "pre", "1"));
    let dir = tempfile::tempdir().unwrap();
    let env = tb.write_in_cluster_dir(dir.path());
    let source = InClusterSource::new(dir.path(), env.host, env.port);

    let client = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::in_namespace("default"))
            .in_cluster_from(&source),
    )
    .await
    .unwrap();

    let cm = client
        .get::<ConfigMap>(Some("default"), "pre")
        .unwrap()
        .unwrap();
    assert_eq!(cm.data.as_ref().unwrap()["value"], "1");
    assert_eq!(client.kube_client().default_namespace(), "default");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn construction_returns_only_after_every_cache_synced() {
    let tb = Testbed::start().await;
    for i in 0..20 {
        tb.upsert(configmap("apps", &format!("cm-{i}"), &i.to_string()));
    }
    tb.upsert(configmap("other", "elsewhere", "x"));
    tb.upsert(secret("apps", "wanted"));
    tb.upsert(secret("apps", "unwanted"));
    tb.upsert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}));

    let client = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::in_namespace("apps"))
            .cache::<Secret>(Selection::object(Some("apps"), "wanted"))
            .cache::<Namespace>(Selection::all())
            .from_client(tb.client()),
    )
    .await
    .unwrap();

    // No waiting: the stores hold everything that existed before construction.
    let all = client
        .list::<ConfigMap>(Some("apps"), &Selector::default())
        .unwrap();
    assert_eq!(all.len(), 20);
    assert!(
        client
            .get::<Secret>(Some("apps"), "wanted")
            .unwrap()
            .is_some()
    );
    assert!(client.get::<Namespace>(None, "apps").unwrap().is_some());
    let health = client.health();
    assert!(health.is_ready(), "{health}");
    assert_eq!(health.caches[0].objects, 20);
    assert_eq!(health.caches[1].objects, 1);

    // The single-object cache watches exactly that object; other names are not covered.
    let err = client.get::<Secret>(Some("apps"), "unwanted").unwrap_err();
    assert!(matches!(err, ClientError::NotCached { .. }), "{err}");
    assert!(
        err.to_string().contains("secrets.v1 apps/unwanted"),
        "{err}"
    );
    // Nor is another namespace, nor a kind that was never declared.
    assert!(matches!(
        client.get::<ConfigMap>(Some("other"), "elsewhere"),
        Err(ClientError::NotCached { .. })
    ));
    assert!(matches!(
        client.list::<ConfigMap>(None, &Selector::default()),
        Err(ClientError::NotCached { .. })
    ));
    assert!(matches!(
        client.get::<k8s_openapi::api::core::v1::Service>(Some("apps"), "x"),
        Err(ClientError::NotCached { .. })
    ));
    // A covered object that does not exist is simply absent.
    assert!(
        client
            .get::<ConfigMap>(Some("apps"), "missing")
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_resource_fails_fast_naming_it() {
    let tb = Testbed::start().await;
    tb.add_token(
        "limited",
        vec![Rule::new(&["get", "list", "watch"], "", "configmaps").namespace("apps")],
    );
    let client = kube::Client::try_from(tb.config_for_token("limited")).unwrap();

    let err = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::in_namespace("apps"))
            .cache::<Secret>(Selection::in_namespace("apps"))
            // Long enough that only a fast failure explains the result.
            .sync_timeout(Duration::from_secs(600))
            .from_client(client),
    )
    .await
    .unwrap_err();

    match &err {
        ConstructError::Cache(CacheError::Forbidden { cache, .. }) => {
            assert_eq!(cache.kind, "Secret");
            assert_eq!(cache.selection.namespace(), Some("apps"));
        }
        other => panic!("expected Forbidden, got {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("secrets.v1") && text.contains("403"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_resource_fails_fast_naming_it() {
    let tb = Testbed::start().await;
    let widgets = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let err = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::all())
            .dynamic_cache(widgets, Selection::all())
            .sync_timeout(Duration::from_secs(600))
            .from_client(tb.client()),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ConstructError::Cache(CacheError::UnknownResource { cache, .. }) if cache.kind == "Widget"),
        "{err}"
    );
    assert!(err.to_string().contains("widgets.v1.example.com"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_api_times_out_naming_the_cache() {
    let tb = Testbed::start().await;
    let client = tb.client();
    tb.set_delay(Duration::from_secs(3));
    let err = within(
        CachedClient::builder()
            .cache::<Secret>(Selection::object(Some("apps"), "slow"))
            .sync_timeout(Duration::from_millis(300))
            .from_client(client),
    )
    .await
    .unwrap_err();
    tb.set_delay(Duration::ZERO);
    match &err {
        ConstructError::Cache(CacheError::Timeout { not_ready, timeout }) => {
            assert_eq!(*timeout, Duration::from_millis(300));
            assert_eq!(not_ready.len(), 1);
            assert_eq!(not_ready[0].cache.kind, "Secret");
        }
        other => panic!("expected Timeout, got {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("secrets.v1") && text.contains("metadata.name=slow"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_reads_see_writes_through_the_client_and_by_others() {
    let tb = Testbed::start().await;
    let client = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::in_namespace("apps"))
            .from_client(tb.client()),
    )
    .await
    .unwrap();

    // Through the client.
    let created = client
        .create(&ConfigMap {
            metadata: ObjectMeta {
                name: Some("mine".into()),
                namespace: Some("apps".into()),
                ..Default::default()
            },
            data: Some([("value".to_owned(), "1".to_owned())].into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(created.metadata.resource_version.is_some());
    poll_until("created object cached", || {
        client
            .get::<ConfigMap>(Some("apps"), "mine")
            .unwrap()
            .is_some()
    })
    .await;

    let patch = Patch::Merge(json!({"data": {"value": "2"}}));
    client
        .patch::<ConfigMap, _>(Some("apps"), "mine", &PatchParams::default(), &patch)
        .await
        .unwrap();
    poll_until("patch cached", || {
        client
            .get::<ConfigMap>(Some("apps"), "mine")
            .unwrap()
            .is_some_and(|cm| cm.data.as_ref().is_some_and(|d| d["value"] == "2"))
    })
    .await;

    let mut current = (*client
        .get::<ConfigMap>(Some("apps"), "mine")
        .unwrap()
        .unwrap())
    .clone();
    current.data = Some([("value".to_owned(), "3".to_owned())].into());
    client.replace(&current).await.unwrap();
    poll_until("replace cached", || {
        client
            .get::<ConfigMap>(Some("apps"), "mine")
            .unwrap()
            .is_some_and(|cm| cm.data.as_ref().is_some_and(|d| d["value"] == "3"))
    })
    .await;

    // By someone else.
    tb.upsert(configmap("apps", "theirs", "x"));
    poll_until("other writer's object cached", || {
        client
            .get::<ConfigMap>(Some("apps"), "theirs")
            .unwrap()
            .is_some()
    })
    .await;
    let selector: Selector = Expression::Equal("app".into(), "demo".into()).into();
    assert_eq!(
        client
            .list::<ConfigMap>(Some("apps"), &selector)
            .unwrap()
            .len(),
        1,
        "only the labelled object matches"
    );

    client
        .delete::<ConfigMap>(Some("apps"), "mine")
        .await
        .unwrap();
    tb.delete("v1", "ConfigMap", "apps", "theirs");
    poll_until("deletions cached", || {
        client
            .list::<ConfigMap>(Some("apps"), &Selector::default())
            .unwrap()
            .is_empty()
    })
    .await;

    // Writes reject namespaced objects without a namespace rather than guessing one.
    let err = client.create(&ConfigMap::default()).await.unwrap_err();
    assert!(matches!(err, ClientError::MissingNamespace { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_errors_show_an_escaped_excerpt_of_the_servers_message() {
    let tb = Testbed::start().await;
    let client = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::in_namespace("apps"))
            .from_client(tb.client()),
    )
    .await
    .unwrap();
    // The cache's own WATCH is open, so the refused request is the write below.
    poll_until("the cache's watch open", || tb.open_watches() == 1).await;

    tb.fail_next_with(1, 422, test_support::hostile::status_message());
    let err = client
        .create(&ConfigMap {
            metadata: ObjectMeta {
                name: Some("refused".into()),
                namespace: Some("apps".into()),
                ..Default::default()
            },
            ..Default::default()
        })
        .await
        .unwrap_err();

    let text = err.to_string();
    assert_eq!(text, "Kubernetes API request failed");
    test_support::error_rule::assert_follows_rule("ClientError::Api", &err);
    test_support::hostile::assert_escaped_excerpt(
        &test_support::error_rule::full_chain(&err),
        "Kubernetes API request failed: ",
    );
    // The status code is kept for matching; every error in the chain is escaped.
    let ClientError::Api(api) = &err else {
        panic!("expected ClientError::Api(..), got {text:.200}");
    };
    assert_eq!(api.status_code(), Some(422));
    let mut next = std::error::Error::source(&err);
    while let Some(source) = next {
        test_support::hostile::assert_escaped_excerpt(&source.to_string(), "");
        next = source.source();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_watch_degrades_health_and_recovers() {
    let tb = Testbed::start().await;
    tb.upsert(configmap("apps", "before", "1"));
    let client = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::in_namespace("apps"))
            .from_client(tb.client()),
    )
    .await
    .unwrap();
    assert_eq!(client.health().caches[0].state, CacheState::Ready);
    // Synced means listed; the WATCH that follows must be open before it is dropped.
    poll_until("the cache's watch open", || tb.open_watches() == 1).await;

    // The watch ends and the re-watch fails: the cache is degraded.
    tb.fail_next(2, 500);
    tb.drop_watches();
    poll_until("cache degraded", || {
        client.health().caches[0].state == CacheState::Degraded
    })
    .await;
    let health = client.health();
    assert!(!health.is_ready());
    assert!(health.caches[0].last_error.is_some(), "{health}");
    assert!(health.caches[0].errors >= 1);
    // Reads keep serving the last known state.
    assert!(
        client
            .get::<ConfigMap>(Some("apps"), "before")
            .unwrap()
            .is_some()
    );

    // The re-watch succeeds after the injected failures: ready again, with no
    // change needed to prove it.
    poll_until("cache recovered", || client.health().is_ready()).await;
    assert!(client.health().caches[0].last_error.is_none());
    // And the resumed watch delivers changes.
    tb.upsert(configmap("apps", "after", "2"));
    poll_until("change after recovery cached", || {
        client
            .get::<ConfigMap>(Some("apps"), "after")
            .unwrap()
            .is_some()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_history_relists_and_recovers() {
    let tb = Testbed::start().await;
    tb.upsert(configmap("apps", "before", "1"));
    let client = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::in_namespace("apps"))
            .from_client(tb.client()),
    )
    .await
    .unwrap();
    tb.expire_history();
    poll_until("watch error recorded", || {
        client.health().caches[0].errors >= 1
    })
    .await;
    // Changed while the watch was gone: only the relist can bring this.
    tb.upsert(configmap("apps", "during", "2"));
    poll_until("relisted and ready", || {
        client.health().is_ready()
            && client
                .get::<ConfigMap>(Some("apps"), "during")
                .unwrap()
                .is_some()
    })
    .await;
    assert!(
        client
            .get::<ConfigMap>(Some("apps"), "before")
            .unwrap()
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_and_typed_reads_agree() {
    let tb = Testbed::start().await;
    tb.register_kind(KindSpec::namespaced(
        "unikorn-cloud.org",
        "v1alpha1",
        "HelmApplication",
        "helmapplications",
    ));
    tb.upsert(configmap("apps", "one", "1"));
    tb.upsert(configmap("apps", "two", "2"));
    tb.upsert(json!({
        "apiVersion": "unikorn-cloud.org/v1alpha1",
        "kind": "HelmApplication",
        "metadata": {"namespace": "apps", "name": "argo"},
        "spec": {"versions": [{"version": "1.0.0"}]},
    }));
    let helm = ApiResource {
        group: "unikorn-cloud.org".into(),
        version: "v1alpha1".into(),
        api_version: "unikorn-cloud.org/v1alpha1".into(),
        kind: "HelmApplication".into(),
        plural: "helmapplications".into(),
    };

    // Declared typed: read both ways.
    let typed = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::in_namespace("apps"))
            .dynamic_cache(helm.clone(), Selection::in_namespace("apps"))
            .from_client(tb.client()),
    )
    .await
    .unwrap();
    // Declared dynamic: read both ways.
    let dynamic = within(
        CachedClient::builder()
            .dynamic_cache(configmap_resource(), Selection::in_namespace("apps"))
            .from_client(tb.client()),
    )
    .await
    .unwrap();

    for client in [&typed, &dynamic] {
        let as_typed: Arc<ConfigMap> = client.get(Some("apps"), "one").unwrap().unwrap();
        let as_dynamic: Arc<DynamicObject> = client
            .get_dynamic(&configmap_resource(), Some("apps"), "one")
            .unwrap()
            .unwrap();
        assert_eq!(as_typed.data.as_ref().unwrap()["value"], "1");
        assert_eq!(as_dynamic.data["data"]["value"], "1");
        assert_eq!(as_dynamic.types.as_ref().unwrap().kind, "ConfigMap");
        assert_eq!(
            as_typed.metadata.resource_version,
            as_dynamic.metadata.resource_version
        );
        assert_eq!(as_typed.metadata.uid, as_dynamic.metadata.uid);

        let mut typed_names: Vec<_> = client
            .list::<ConfigMap>(Some("apps"), &Selector::default())
            .unwrap()
            .iter()
            .map(|cm| cm.metadata.name.clone().unwrap())
            .collect();
        let mut dynamic_names: Vec<_> = client
            .list_dynamic(&configmap_resource(), Some("apps"), &Selector::default())
            .unwrap()
            .iter()
            .map(|cm| cm.metadata.name.clone().unwrap())
            .collect();
        typed_names.sort();
        dynamic_names.sort();
        assert_eq!(typed_names, vec!["one", "two"]);
        assert_eq!(typed_names, dynamic_names);
    }

    // A custom resource through the dynamic cache, with its spec intact.
    let app = typed
        .get_dynamic(&helm, Some("apps"), "argo")
        .unwrap()
        .unwrap();
    assert_eq!(app.data["spec"]["versions"][0]["version"], "1.0.0");
    assert_eq!(
        app.types.as_ref().unwrap().api_version,
        "unikorn-cloud.org/v1alpha1"
    );

    // Dynamic writes reach the API and come back through the cache.
    let mut obj = DynamicObject::new("three", &configmap_resource()).within("apps");
    obj.data = json!({"data": {"value": "3"}});
    dynamic
        .create_dynamic(&configmap_resource(), &obj)
        .await
        .unwrap();
    poll_until("dynamic create cached", || {
        dynamic
            .get::<ConfigMap>(Some("apps"), "three")
            .unwrap()
            .is_some()
    })
    .await;
    dynamic
        .delete_dynamic(&configmap_resource(), Some("apps"), "three")
        .await
        .unwrap();
    poll_until("dynamic delete cached", || {
        dynamic
            .get_dynamic(&configmap_resource(), Some("apps"), "three")
            .unwrap()
            .is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_kind_is_cached_with_the_registry_plural() {
    // "octopodes" is what no plural guess produces: if the cache did not take the
    // registered resource, the testbed would answer 404 and construction would fail.
    let tb = Testbed::start().await;
    tb.register_kind(KindSpec::namespaced(
        "example.com",
        "v1",
        "Octopus",
        "octopodes",
    ));
    tb.upsert(json!({
        "apiVersion": "example.com/v1",
        "kind": "Octopus",
        "metadata": {"namespace": "sea", "name": "paul"},
        "spec": {"arms": 8},
    }));
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Octopus");
    assert_ne!(ApiResource::from_gvk(&gvk).plural, "octopodes");
    let mut registry = Registry::new();
    registry
        .add(Registration::new::<serde_json::Value>(
            gvk.clone(),
            "octopodes",
            Scope::Namespaced,
        ))
        .unwrap();

    let client = within(
        CachedClient::builder()
            .registered_cache(&registry, &gvk, Selection::in_namespace("sea"))
            .unwrap()
            .from_client(tb.client()),
    )
    .await
    .unwrap();
    let resource = registry.api_resource(&gvk).unwrap();
    assert_eq!(resource.plural, "octopodes");
    let paul = client
        .get_dynamic(&resource, Some("sea"), "paul")
        .unwrap()
        .unwrap();
    assert_eq!(paul.data["spec"]["arms"], 8);
    assert_eq!(client.health().caches[0].cache.plural, "octopodes");

    // The registry knows the scope too: a namespace on a cluster-scoped kind is refused.
    let cluster_gvk = GroupVersionKind::gvk("example.com", "v1", "Ocean");
    registry
        .add(Registration::new::<serde_json::Value>(
            cluster_gvk.clone(),
            "oceans",
            Scope::Cluster,
        ))
        .unwrap();
    let err = within(
        CachedClient::builder()
            .registered_cache(&registry, &cluster_gvk, Selection::in_namespace("sea"))
            .unwrap()
            .from_client(tb.client()),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            &err,
            ConstructError::Cache(CacheError::NamespaceOnClusterScoped { .. })
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_scoped_cache_holds_only_what_it_selects() {
    let tb = Testbed::start().await;
    tb.upsert(configmap("apps", "labelled", "1"));
    tb.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "apps", "name": "plain"}}));
    let client = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::in_namespace("apps").labels("app=demo"))
            .from_client(tb.client()),
    )
    .await
    .unwrap();
    assert_eq!(client.health().caches[0].objects, 1);
    assert!(
        client
            .get::<ConfigMap>(Some("apps"), "labelled")
            .unwrap()
            .is_some()
    );
    // Covered by the namespace, filtered out by the server-side selector.
    assert!(
        client
            .get::<ConfigMap>(Some("apps"), "plain")
            .unwrap()
            .is_none()
    );

    // An object gaining the label enters the cache; losing it, leaves.
    tb.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": "apps", "name": "plain", "labels": {"app": "demo"}}}));
    poll_until("labelled object enters", || {
        client
            .get::<ConfigMap>(Some("apps"), "plain")
            .unwrap()
            .is_some()
    })
    .await;
    tb.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "apps", "name": "labelled"}}));
    poll_until("unlabelled object leaves", || {
        client
            .get::<ConfigMap>(Some("apps"), "labelled")
            .unwrap()
            .is_none()
    })
    .await;
}
