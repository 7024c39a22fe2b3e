//! Dropping a `CachedClient`, or cancelling its construction, ends its watches:
//! the emulator's count of open WATCH streams returns to zero (within a second;
//! the bound only keeps a broken test from hanging).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube_construct::{cache::Selection, client::CachedClient};
use kube_testbed::Testbed;
use serde_json::json;
use test_support::poll_until;

async fn all_watches_closed(tb: &Testbed) {
    tokio::time::timeout(
        Duration::from_secs(1),
        poll_until("every WATCH stream closed", || tb.open_watches() == 0),
    )
    .await
    .unwrap_or_else(|_| panic!("{} WATCH streams still open after 1 s", tb.open_watches()));
}

fn builder(
    tb: &Testbed,
) -> impl std::future::Future<Output = Result<CachedClient, kube_construct::client::ConstructError>>
+ use<> {
    CachedClient::builder()
        .cache::<ConfigMap>(Selection::in_namespace("apps"))
        .cache::<Secret>(Selection::in_namespace("apps"))
        .sync_timeout(Duration::from_secs(60))
        .from_client(tb.client())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_cached_client_ends_its_watches() {
    let tb = Testbed::start().await;
    tb.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "apps", "name": "a"}}));
    let client = builder(&tb).await.unwrap();
    poll_until("both caches watching", || tb.open_watches() == 2).await;
    drop(client);
    all_watches_closed(&tb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_construction_ends_the_watches_already_open() {
    let tb = Testbed::start().await;
    // The first request (one cache's LIST) fails with a 500: that cache retries
    // after kube-runtime's backoff while the other syncs and opens its WATCH, so
    // construction is still waiting with a watch open.
    tb.fail_next(1, 500);
    let mut build = Box::pin(builder(&tb));
    tokio::select! {
        biased;
        done = &mut build => panic!("construction finished before it could be cancelled: ok={}", done.is_ok()),
        () = poll_until("one cache watching while the other retries", || tb.open_watches() >= 1) => {}
    }
    drop(build);
    all_watches_closed(&tb).await;
}
