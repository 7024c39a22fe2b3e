//! The watch layer against a hostile API server (kube-testbed with faults): objects
//! other than the one watched, an oversized version, more objects than the cap, a
//! LIST body over its cap, and one object rewritten in a loop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use kube_runtime::watcher;
use kube_testbed::{Fault, Testbed};
use serde_json::json;
use test_support::poll_until;
use watch_ready::{Health, LimitError, WatchLimits, Watched, observe_bounded};

const SYNC: Duration = Duration::from_secs(30);

fn secret(namespace: &str, name: &str, value: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"namespace": namespace, "name": name},
           "stringData": {"v": value}})
}

fn value_of(watched: &Watched<Secret>, name: &str) -> Option<String> {
    let key = kube_runtime::reflector::ObjectRef::new(name).within("ns");
    let object = watched.store().get(&key)?;
    let data = object.data.as_ref()?.get("v")?;
    Some(String::from_utf8_lossy(&data.0).into_owned())
}

fn one(client: &Client, name: &str, limits: WatchLimits) -> Watched<Secret> {
    let health = Health::new(format!("Secret ns/{name}"));
    let api: Api<Secret> = Api::namespaced(observe_bounded(client, &health, &limits), "ns");
    Watched::spawn_one(api, "ns", name, (), health, limits, |_: &mut Secret| {})
}

/// A server that ignores the field selector sends the whole namespace: only the
/// Secret watched is kept, the rest counted, in the list and in later events alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_object_watch_keeps_only_its_object_whatever_the_server_sends() {
    let tb = Testbed::start().await;
    tb.upsert(secret("ns", "s", "mine"));
    for i in 0..50 {
        tb.upsert(secret("ns", &format!("other-{i}"), "not mine"));
    }
    tb.inject(Fault::IgnoreFieldSelectors(true));
    let watched = one(&tb.client(), "s", WatchLimits::default());
    watched.synced_within(SYNC).await.unwrap();
    assert_eq!(watched.store().len(), 1, "only the Secret watched is kept");
    assert_eq!(value_of(&watched, "s").as_deref(), Some("mine"));
    assert_eq!(watched.health().status().foreign_ignored, 50);

    tb.upsert(secret("ns", "late", "not mine"));
    poll_until("the late object is ignored", || {
        watched.health().status().foreign_ignored == 51
    })
    .await;
    assert_eq!(watched.store().len(), 1);
}

/// A version over the object cap is refused by name, counted, and the last good one
/// stays: through an update and through a re-list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_version_is_refused_by_name_and_the_last_good_kept() {
    let tb = Testbed::start().await;
    tb.upsert(secret("ns", "s", "good"));
    let watched = one(
        &tb.client(),
        "s",
        WatchLimits::default().max_object_bytes(4096),
    );
    watched.synced_within(SYNC).await.unwrap();
    tb.upsert(secret("ns", "s", &"x".repeat(16 * 1024)));
    poll_until("the oversized version is refused", || {
        watched.health().status().over_limit >= 1
    })
    .await;
    assert_eq!(value_of(&watched, "s").as_deref(), Some("good"));
    match watched.health().status().last_limit_error {
        Some(LimitError::ObjectTooLarge { object, size, cap }) => {
            assert_eq!(object, "ns/s");
            assert_eq!(cap, 4096);
            assert!(size > 16 * 1024, "{size}");
        }
        other => panic!("expected ObjectTooLarge, got {other:?}"),
    }
    // A re-list that delivers the oversized version keeps the last good one too.
    let relists = watched.health().status().relists;
    tb.inject(Fault::ExpireHistory);
    poll_until("the watch relisted and refused the version again", || {
        let status = watched.health().status();
        status.relists > relists && status.over_limit >= 2
    })
    .await;
    assert_eq!(value_of(&watched, "s").as_deref(), Some("good"));
}

/// A namespace-wide watch keeps at most its object cap of a list of thousands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_keeps_at_most_its_object_cap() {
    let tb = Testbed::start().await;
    for i in 0..1500 {
        tb.upsert(secret("ns", &format!("s-{i}"), "v"));
    }
    let limits = WatchLimits::default().max_objects(100);
    let health = Health::new("Secrets of ns");
    let api: Api<Secret> = Api::namespaced(observe_bounded(&tb.client(), &health, &limits), "ns");
    let watched = Watched::spawn_bounded(api, watcher::Config::default(), (), health, limits);
    watched.synced_within(SYNC).await.unwrap();
    assert_eq!(watched.store().len(), 100);
    let status = watched.health().status();
    assert_eq!(status.over_limit, 1, "one refusal per list");
    assert!(matches!(
        status.last_limit_error,
        Some(LimitError::TooManyObjects { cap: 100, .. })
    ));
    // A new object past the cap is refused as well.
    tb.upsert(secret("ns", "late", "v"));
    poll_until("the late object is refused", || {
        watched.health().status().over_limit == 2
    })
    .await;
    assert_eq!(watched.store().len(), 100);
}

/// A LIST body over its cap fails the list (with a typed, counted refusal) without
/// being read whole; the next list is read and the watch syncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_body_over_its_cap_is_refused_and_the_watch_recovers() {
    let tb = Testbed::start().await;
    tb.upsert(secret("ns", "s", "good"));
    tb.reply_next_with(1, 200, vec![b' '; 4 * 1024 * 1024]);
    let watched = one(
        &tb.client(),
        "s",
        WatchLimits::default().max_list_bytes(64 * 1024),
    );
    watched.synced_within(SYNC).await.unwrap();
    assert_eq!(value_of(&watched, "s").as_deref(), Some("good"));
    let status = watched.health().status();
    assert_eq!(status.over_limit, 1);
    assert_eq!(
        status.last_limit_error,
        Some(LimitError::BodyTooLarge {
            what: "LIST response",
            cap: 64 * 1024
        })
    );
}

/// One Secret rewritten in a loop: at most one version applied per interval, the
/// rest counted as coalesced, and the last version always applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_rewritten_in_a_loop_is_coalesced_and_its_last_version_applied() {
    const INTERVAL: Duration = Duration::from_millis(300);
    const WRITES: usize = 300;
    let tb = Testbed::start().await;
    tb.upsert(secret("ns", "s", "0"));
    let watched = one(
        &tb.client(),
        "s",
        WatchLimits::default().coalesce(Some(INTERVAL)),
    );
    watched.synced_within(SYNC).await.unwrap();
    let changes = watched.changes();
    // The first list's change (counted once the task has seen it).
    poll_until("the first list is counted", || *changes.borrow() >= 1).await;
    let before = *changes.borrow();
    let started = Instant::now();
    for i in 1..=WRITES {
        tb.upsert(secret("ns", "s", &i.to_string()));
    }
    let last = WRITES.to_string();
    poll_until("the last version is applied", || {
        value_of(&watched, "s").as_deref() == Some(last.as_str())
    })
    .await;
    let elapsed = started.elapsed();
    let applied = *changes.borrow() - before;
    let coalesced = watched.health().status().coalesced;
    // At most one per interval started (and the first at once).
    let allowed = u64::try_from(elapsed.as_millis() / INTERVAL.as_millis()).unwrap() + 2;
    assert!(
        applied <= allowed,
        "{applied} versions applied in {elapsed:?}"
    );
    assert!(coalesced > 0);
    assert!(
        applied + coalesced <= WRITES as u64,
        "{applied} + {coalesced}"
    );
}
