//! The cache-backed client against the kube-testbed API emulator alone, for what
//! only the emulator gives on cue: a service-account directory of its own, a slow
//! API, a hostile error message, dropped watches and expired history, a kind with an
//! irregular plural registered on the fly. Construction proving sync, RBAC refusals,
//! reads following writes and CRD reads run against both servers in
//! `cached_reads.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{future::Future, time::Duration};

use k8s_openapi::{
    api::core::v1::{ConfigMap, Secret},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::api::{ApiResource, GroupVersionKind};
use kube_construct::{
    cache::{CacheError, CacheState, Selection},
    client::{CachedClient, ClientError, ConstructError},
    config::InClusterSource,
    registry::{Registration, Registry, Scope},
};
use kube_testbed::{KindSpec, Testbed};
use serde_json::json;
use test_support::poll_until;

pub(crate) async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .expect("the constructor must not hang")
}

pub(crate) fn configmap(ns: &str, name: &str, value: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": ns, "name": name, "labels": {"app": "demo"}},
        "data": {"value": value},
    })
}

pub(crate) fn configmap_resource() -> ApiResource {
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
