//! The cache-backed client against kube-testbed and the real kube-apiserver alike
//! (`real_apiserver::both!`, one body each, a namespace of its own per run):
//! construction proves sync; RBAC refusals and unknown resources fail fast, naming
//! the cache; reads follow writes through the client and by others; typed, dynamic
//! and CRD reads agree; a label-scoped cache holds only what it selects.

use std::sync::Arc;

use k8s_openapi::{
    api::core::v1::{ConfigMap, Namespace, Secret},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    api::{ApiResource, DynamicObject, Patch, PatchParams},
    core::{Expression, Selector},
};
use kube_construct::{
    cache::{CacheError, Selection},
    client::{CachedClient, ClientError, ConstructError},
};
use real_apiserver::{ApiServerUnderTest, both};
use serde_json::json;
use std::time::Duration;
use test_support::poll_until;

use crate::cached_client::{configmap, configmap_resource, within};

both!(construction_returns_only_after_every_cache_synced);
both!(forbidden_resource_fails_fast_naming_it);
both!(unknown_resource_fails_fast_naming_it);
both!(cached_reads_see_writes_through_the_client_and_by_others);
both!(dynamic_and_typed_reads_agree);
both!(label_scoped_cache_holds_only_what_it_selects);

fn namespace(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
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

async fn construction_returns_only_after_every_cache_synced(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    let name = api.name();
    let other = format!("{ns}-other");
    for i in 0..20 {
        api.apply(configmap(ns, &format!("cm-{i}"), &i.to_string()))
            .await;
    }
    api.apply(configmap(&other, "elsewhere", "x")).await;
    api.apply(secret(ns, "wanted")).await;
    api.apply(secret(ns, "unwanted")).await;
    api.apply(namespace(ns)).await;

    let client = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::in_namespace(ns))
            .cache::<Secret>(Selection::object(Some(ns), "wanted"))
            .cache::<Namespace>(Selection::all())
            .from_client(api.admin_client()),
    )
    .await
    .unwrap_or_else(|e| panic!("{name}: {e}"));

    // No waiting: the stores hold everything that existed before construction.
    let all = client
        .list::<ConfigMap>(Some(ns), &Selector::default())
        .unwrap();
    assert_eq!(all.len(), 20, "{name}");
    assert!(client.get::<Secret>(Some(ns), "wanted").unwrap().is_some());
    assert!(client.get::<Namespace>(None, ns).unwrap().is_some());
    let health = client.health();
    assert!(health.is_ready(), "{name}: {health}");
    assert_eq!(health.caches[0].objects, 20, "{name}");
    assert_eq!(health.caches[1].objects, 1, "{name}");

    // The single-object cache watches exactly that object; other names are not covered.
    let err = client.get::<Secret>(Some(ns), "unwanted").unwrap_err();
    assert!(matches!(err, ClientError::NotCached { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("secrets.v1 {ns}/unwanted")),
        "{err}"
    );
    // Nor is another namespace, nor a kind that was never declared.
    assert!(matches!(
        client.get::<ConfigMap>(Some(&other), "elsewhere"),
        Err(ClientError::NotCached { .. })
    ));
    assert!(matches!(
        client.list::<ConfigMap>(None, &Selector::default()),
        Err(ClientError::NotCached { .. })
    ));
    assert!(matches!(
        client.get::<k8s_openapi::api::core::v1::Service>(Some(ns), "x"),
        Err(ClientError::NotCached { .. })
    ));
    // A covered object that does not exist is simply absent.
    assert!(
        client
            .get::<ConfigMap>(Some(ns), "missing")
            .unwrap()
            .is_none()
    );
}

/// A token allowed ConfigMaps only: the Secret cache is refused at once (403), named.
async fn forbidden_resource_fails_fast_naming_it(api: &impl ApiServerUnderTest, ns: &str) {
    let limited = api.reader_of(ns, "configmaps").await;
    let client = kube::Client::try_from(api.config_for(&limited)).unwrap();

    let err = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::in_namespace(ns))
            .cache::<Secret>(Selection::in_namespace(ns))
            // Long enough that only a fast failure explains the result.
            .sync_timeout(Duration::from_secs(600))
            .from_client(client),
    )
    .await
    .unwrap_err();

    match &err {
        ConstructError::Cache(CacheError::Forbidden { cache, .. }) => {
            assert_eq!(cache.kind, "Secret");
            assert_eq!(cache.selection.namespace(), Some(ns));
        }
        other => panic!("{}: expected Forbidden, got {other}", api.name()),
    }
    let text = err.to_string();
    assert!(
        text.contains("secrets.v1") && text.contains("403"),
        "{text}"
    );
    assert!(!text.contains(&limited), "a token in the error: {text}");
}

async fn unknown_resource_fails_fast_naming_it(api: &impl ApiServerUnderTest, _ns: &str) {
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
            .from_client(api.admin_client()),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ConstructError::Cache(CacheError::UnknownResource { cache, .. }) if cache.kind == "Widget"),
        "{}: {err}",
        api.name()
    );
    assert!(err.to_string().contains("widgets.v1.example.com"), "{err}");
}

async fn cached_reads_see_writes_through_the_client_and_by_others(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    // The real server wants the namespace to exist before anything is created in it.
    api.apply(namespace(ns)).await;
    let client = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::in_namespace(ns))
            .from_client(api.admin_client()),
    )
    .await
    .unwrap();

    // Through the client.
    let created = client
        .create(&ConfigMap {
            metadata: ObjectMeta {
                name: Some("mine".into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            data: Some([("value".to_owned(), "1".to_owned())].into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(created.metadata.resource_version.is_some());
    poll_until("created object cached", || {
        client.get::<ConfigMap>(Some(ns), "mine").unwrap().is_some()
    })
    .await;

    let patch = Patch::Merge(json!({"data": {"value": "2"}}));
    client
        .patch::<ConfigMap, _>(Some(ns), "mine", &PatchParams::default(), &patch)
        .await
        .unwrap();
    let value_is = |value: &str| {
        client
            .get::<ConfigMap>(Some(ns), "mine")
            .unwrap()
            .is_some_and(|cm| cm.data.as_ref().is_some_and(|d| d["value"] == value))
    };
    poll_until("patch cached", || value_is("2")).await;

    let mut current = (*client.get::<ConfigMap>(Some(ns), "mine").unwrap().unwrap()).clone();
    current.data = Some([("value".to_owned(), "3".to_owned())].into());
    client.replace(&current).await.unwrap();
    poll_until("replace cached", || value_is("3")).await;

    // By someone else.
    api.apply(configmap(ns, "theirs", "x")).await;
    poll_until("other writer's object cached", || {
        client
            .get::<ConfigMap>(Some(ns), "theirs")
            .unwrap()
            .is_some()
    })
    .await;
    let selector: Selector = Expression::Equal("app".into(), "demo".into()).into();
    assert_eq!(
        client.list::<ConfigMap>(Some(ns), &selector).unwrap().len(),
        1,
        "{}: only the labelled object matches",
        api.name()
    );

    client.delete::<ConfigMap>(Some(ns), "mine").await.unwrap();
    api.delete("v1", "ConfigMap", ns, "theirs").await;
    poll_until("deletions cached", || {
        client
            .list::<ConfigMap>(Some(ns), &Selector::default())
            .unwrap()
            .is_empty()
    })
    .await;

    // Writes reject namespaced objects without a namespace rather than guessing one.
    let err = client.create(&ConfigMap::default()).await.unwrap_err();
    assert!(matches!(err, ClientError::MissingNamespace { .. }), "{err}");
}

/// A platform CRD kind (HelmApplication, the generated CRD on the real server, a
/// registered kind on the emulator) read dynamically beside ConfigMaps read typed and
/// dynamically.
async fn dynamic_and_typed_reads_agree(api: &impl ApiServerUnderTest, ns: &str) {
    api.serve_platform_kinds();
    api.apply(configmap(ns, "one", "1")).await;
    api.apply(configmap(ns, "two", "2")).await;
    let mut helm_app = crate::platform_types::full_helm_application();
    helm_app.metadata.name = Some("argo".into());
    helm_app.metadata.namespace = Some(ns.into());
    let versions = helm_app.spec.versions.clone();
    api.apply(serde_json::to_value(&helm_app).unwrap()).await;
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
            .cache::<ConfigMap>(Selection::in_namespace(ns))
            .dynamic_cache(helm.clone(), Selection::in_namespace(ns))
            .from_client(api.admin_client()),
    )
    .await
    .unwrap();
    // Declared dynamic: read both ways.
    let dynamic = within(
        CachedClient::builder()
            .dynamic_cache(configmap_resource(), Selection::in_namespace(ns))
            .from_client(api.admin_client()),
    )
    .await
    .unwrap();

    for client in [&typed, &dynamic] {
        let as_typed: Arc<ConfigMap> = client.get(Some(ns), "one").unwrap().unwrap();
        let as_dynamic: Arc<DynamicObject> = client
            .get_dynamic(&configmap_resource(), Some(ns), "one")
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

        let names = |mut names: Vec<String>| {
            names.sort();
            names
        };
        let typed_names = names(
            client
                .list::<ConfigMap>(Some(ns), &Selector::default())
                .unwrap()
                .iter()
                .map(|cm| cm.metadata.name.clone().unwrap())
                .collect(),
        );
        let dynamic_names = names(
            client
                .list_dynamic(&configmap_resource(), Some(ns), &Selector::default())
                .unwrap()
                .iter()
                .map(|cm| cm.metadata.name.clone().unwrap())
                .collect(),
        );
        assert_eq!(typed_names, vec!["one", "two"], "{}", api.name());
        assert_eq!(typed_names, dynamic_names);
    }

    // A custom resource through the dynamic cache, with its spec intact.
    let app = typed.get_dynamic(&helm, Some(ns), "argo").unwrap().unwrap();
    assert_eq!(
        app.data["spec"]["versions"],
        serde_json::to_value(&versions).unwrap(),
        "{}",
        api.name()
    );
    assert_eq!(
        app.types.as_ref().unwrap().api_version,
        "unikorn-cloud.org/v1alpha1"
    );

    // Dynamic writes reach the API and come back through the cache.
    let mut obj = DynamicObject::new("three", &configmap_resource()).within(ns);
    obj.data = json!({"data": {"value": "3"}});
    dynamic
        .create_dynamic(&configmap_resource(), &obj)
        .await
        .unwrap();
    poll_until("dynamic create cached", || {
        dynamic
            .get::<ConfigMap>(Some(ns), "three")
            .unwrap()
            .is_some()
    })
    .await;
    dynamic
        .delete_dynamic(&configmap_resource(), Some(ns), "three")
        .await
        .unwrap();
    poll_until("dynamic delete cached", || {
        dynamic
            .get_dynamic(&configmap_resource(), Some(ns), "three")
            .unwrap()
            .is_none()
    })
    .await;
}

async fn label_scoped_cache_holds_only_what_it_selects(api: &impl ApiServerUnderTest, ns: &str) {
    let plain = |labels: serde_json::Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": ns, "name": "plain", "labels": labels}})
    };
    api.apply(configmap(ns, "labelled", "1")).await;
    api.apply(plain(json!({}))).await;
    let client = within(
        CachedClient::builder()
            .cache::<ConfigMap>(Selection::in_namespace(ns).labels("app=demo"))
            .from_client(api.admin_client()),
    )
    .await
    .unwrap();
    assert_eq!(client.health().caches[0].objects, 1, "{}", api.name());
    assert!(
        client
            .get::<ConfigMap>(Some(ns), "labelled")
            .unwrap()
            .is_some()
    );
    // Covered by the namespace, filtered out by the server-side selector.
    assert!(
        client
            .get::<ConfigMap>(Some(ns), "plain")
            .unwrap()
            .is_none()
    );

    // An object gaining the label enters the cache; losing it, leaves.
    api.apply(plain(json!({"app": "demo"}))).await;
    poll_until("labelled object enters", || {
        client
            .get::<ConfigMap>(Some(ns), "plain")
            .unwrap()
            .is_some()
    })
    .await;
    api.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": ns, "name": "labelled", "labels": {}}}))
        .await;
    poll_until("unlabelled object leaves", || {
        client
            .get::<ConfigMap>(Some(ns), "labelled")
            .unwrap()
            .is_none()
    })
    .await;
}
