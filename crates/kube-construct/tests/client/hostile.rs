//! The caches against a hostile API server (kube-testbed's faults): an object over
//! the size cap and a LIST body over its cap are refused with a typed, counted
//! `LimitError`, and the cache keeps serving its last good state.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_construct::{
    cache::{CacheHealth, LimitError, Selection, WatchLimits},
    client::CachedClient,
};
use kube_testbed::{Fault, Testbed};
use serde_json::json;
use test_support::poll_until;

const SYNC: Duration = Duration::from_secs(60);

fn config_map(name: &str, value: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"namespace": "apps", "name": name},
           "data": {"v": value}})
}

fn value_of(client: &CachedClient, name: &str) -> Option<String> {
    let object = client.get::<ConfigMap>(Some("apps"), name).unwrap()?;
    object.data.as_ref()?.get("v").cloned()
}

fn health(client: &CachedClient) -> CacheHealth {
    client.health().caches.into_iter().next().unwrap()
}

/// With the default limits (no `watch_limits` call), a ConfigMap rewritten at 2 MiB
/// (over the 1 MiB object cap) is refused by name and counted; the cache keeps the
/// last good version, and the health report says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_object_is_refused_by_name_and_the_cache_keeps_its_last_good_state() {
    let tb = Testbed::start().await;
    tb.upsert(config_map("c", "good"));
    let client = CachedClient::builder()
        .cache::<ConfigMap>(Selection::in_namespace("apps"))
        .sync_timeout(SYNC)
        .from_client(tb.client())
        .await
        .unwrap();
    assert_eq!(value_of(&client, "c").as_deref(), Some("good"));

    tb.upsert(config_map("c", &"x".repeat(2 * 1024 * 1024)));
    // A later, small object proves the watch went on past the refused version.
    tb.upsert(config_map("after", "v"));
    poll_until(
        "the oversized version is refused and the watch goes on",
        || health(&client).over_limit >= 1 && value_of(&client, "after").is_some(),
    )
    .await;
    assert_eq!(value_of(&client, "c").as_deref(), Some("good"));
    let health = health(&client);
    match &health.last_limit_error {
        Some(LimitError::ObjectTooLarge { object, size, cap }) => {
            assert_eq!(object, "apps/c");
            assert_eq!(*cap, watch_ready::DEFAULT_MAX_OBJECT_BYTES);
            assert!(*size > 2 * 1024 * 1024, "{size}");
        }
        other => panic!("expected ObjectTooLarge, got {other:?}"),
    }
    let report = client.health().to_string();
    assert!(report.contains("over the cap"), "{report}");
}

/// A re-list answered with a 4 MiB body (`Fault::ReplyNextWith`) is not read past the
/// configured LIST cap: a typed, counted refusal, and the cache serves its last good
/// state meanwhile and after, once the next list succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_body_over_its_cap_is_refused_and_the_cache_keeps_serving() {
    const CAP: usize = 64 * 1024;
    let tb = Testbed::start().await;
    tb.upsert(config_map("c", "good"));
    let client = CachedClient::builder()
        .cache::<ConfigMap>(Selection::in_namespace("apps"))
        .watch_limits(WatchLimits::default().max_list_bytes(CAP))
        .sync_timeout(SYNC)
        .from_client(tb.client())
        .await
        .unwrap();
    assert_eq!(value_of(&client, "c").as_deref(), Some("good"));
    // The cache is synced once its LIST is read, before its WATCH is sent: the body
    // below must meet the re-list, not that WATCH.
    poll_until("the cache's watch is open", || tb.open_watches() == 1).await;

    // The next request (the re-list forced by the expired history) gets the body.
    tb.inject(Fault::ReplyNextWith {
        count: 1,
        status: 200,
        body: vec![b' '; 4 * 1024 * 1024],
    });
    tb.inject(Fault::ExpireHistory);
    poll_until("the hostile LIST body is refused", || {
        health(&client).over_limit >= 1
    })
    .await;
    assert_eq!(value_of(&client, "c").as_deref(), Some("good"));
    assert_eq!(
        health(&client).last_limit_error,
        Some(LimitError::BodyTooLarge {
            what: "LIST response",
            cap: CAP
        })
    );
    // The next list is read: a write after it is seen.
    tb.upsert(config_map("c", "newer"));
    poll_until("the cache follows the server again", || {
        value_of(&client, "c").as_deref() == Some("newer")
    })
    .await;
    assert_eq!(health(&client).over_limit, 1);
}
