//! The watch layer against the kube-testbed API emulator: sync, refusals that fail
//! at once, and the timeout naming the last error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject},
};
use kube_runtime::watcher;
use kube_testbed::Testbed;
use serde_json::json;
use watch_ready::{Health, RefusalReason, WaitError, WatchState, Watched, observe};

fn secrets(client: &Client, health: &Health) -> Api<Secret> {
    Api::namespaced(observe(client, health), "ns")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syncs_and_serves_the_store() {
    let tb = Testbed::start().await;
    tb.upsert(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": "ns", "name": "s"}}),
    );
    let health = Health::new("Secret ns/s");
    let watched = Watched::spawn(
        secrets(&tb.client(), &health),
        watcher::Config::default(),
        (),
        health,
    );
    watched
        .synced_within(Duration::from_secs(30))
        .await
        .unwrap();
    assert!(watched.is_synced());
    assert_eq!(watched.health().status().state, WatchState::Ready);
    assert_eq!(watched.store().state().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_watch_fails_at_once() {
    let tb = Testbed::start().await;
    tb.add_token("none", vec![]);
    let client = Client::try_from(tb.config_for_token("none")).unwrap();
    let health = Health::new("Secret ns/s");
    let watched = Watched::spawn(
        secrets(&client, &health),
        watcher::Config::default(),
        (),
        health,
    );
    // A bound far beyond the test's run: only the refusal can end the wait.
    match watched.synced_within(Duration::from_secs(600)).await {
        Err(Some(WaitError::Refused(refusal))) => {
            assert_eq!(refusal.reason, RefusalReason::Forbidden);
            assert_eq!(refusal.code, 403);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_resource_fails_at_once() {
    let tb = Testbed::start().await;
    let widgets = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let health = Health::new("widgets");
    let api: Api<DynamicObject> = Api::all_with(observe(&tb.client(), &health), &widgets);
    let watched = Watched::spawn(api, watcher::Config::default(), widgets, health);
    match watched.synced_within(Duration::from_secs(600)).await {
        Err(Some(WaitError::Refused(refusal))) => {
            assert_eq!(refusal.reason, RefusalReason::NotFound);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_times_out_with_its_last_error() {
    let tb = Testbed::start().await;
    let client = tb.client();
    tb.stop().await;
    let health = Health::new("Secret ns/s");
    let watched = Watched::spawn(
        secrets(&client, &health),
        watcher::Config::default(),
        (),
        health,
    );
    assert_eq!(
        watched.synced_within(Duration::from_millis(500)).await,
        Err(None)
    );
    let status = watched.health().status();
    assert_eq!(status.state, WatchState::Syncing);
    assert!(status.last_error.is_some());
    assert!(status.errors >= 1);
    assert!(!watched.is_synced());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_falls_behind_is_sent_every_object_again() {
    use futures::StreamExt as _;
    let tb = Testbed::start().await;
    let health = Health::new("Secrets in ns");
    let watched = Watched::spawn(
        secrets(&tb.client(), &health),
        watcher::Config::default(),
        (),
        health,
    );
    watched
        .synced_within(Duration::from_secs(30))
        .await
        .unwrap();
    let mut changes = Box::pin(watched.subscribe());
    // More changes than the buffer holds, while the subscriber reads none.
    let total = 400;
    for i in 0..total {
        tb.upsert(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": "ns", "name": format!("s{i}")}}));
    }
    test_support::poll_until("the store holds every Secret", || {
        watched.store().len() == total
    })
    .await;
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < total {
        let next = tokio::time::timeout(Duration::from_secs(10), changes.next())
            .await
            .expect("every object within 10 s")
            .expect("the stream goes on");
        seen.insert(next.metadata.name.clone().unwrap());
    }
    assert_eq!(seen.len(), total, "none missed");
}
