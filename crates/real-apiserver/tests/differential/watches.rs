//! WATCH from a list's resourceVersion (the events after it, in order), with a label
//! selector (an object relabelled out of it is DELETED), and the streaming list
//! (`sendInitialEvents`, ended by the initial-events-end BOOKMARK), and a periodic
//! BOOKMARK.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Pair, Target, assert_same, config_map};

const LIMIT: Duration = Duration::from_secs(10);

/// A WATCH (`path` with its query) on the server at `base`, as the harness's
/// [`Target::watch`] makes it, returned once its response has begun: both servers
/// register a watch before they send its response's headers, so a write made after
/// this returns is made while the watch is open.
async fn open_watch(base: &str, ca_pem: &str, token: &str, path: &str) -> reqwest::Response {
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap()])
        .timeout(LIMIT + Duration::from_secs(5))
        .build()
        .unwrap()
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

/// The first `count` events of an opened WATCH, or those that came within `limit`
/// (read as [`Target::watch`] reads them).
async fn events(mut response: reqwest::Response, count: usize, limit: Duration) -> Vec<Value> {
    let mut events = Vec::new();
    let mut buffer = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    while events.len() < count {
        let chunk = match tokio::time::timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(chunk))) => chunk,
            _ => break,
        };
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            if let Ok(event) = serde_json::from_slice::<Value>(&line) {
                events.push(event);
            }
        }
    }
    events
}

async fn list_rv(target: &Target, path: &str) -> String {
    let (status, list) = target.send("GET", path, None, None).await;
    assert_eq!(status, 200, "{}: {list}", target.name);
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_a_list_sees_the_later_events_in_order() {
    let pair = Pair::new().await;
    let ns = pair.namespace.clone();
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    let (rv_e, rv_r) = (
        list_rv(&pair.emulated, &path).await,
        list_rv(&pair.actual, &path).await,
    );

    pair.same(
        "POST",
        &path,
        Some(&config_map(&ns, "a", json!({"app": "a"}))),
    )
    .await;
    pair.same(
        "PATCH",
        &format!("{path}/a"),
        Some(&json!({"data": {"key": "changed"}})),
    )
    .await;
    pair.same(
        "POST",
        &path,
        Some(&config_map(&ns, "b", json!({"app": "b"}))),
    )
    .await;
    // Relabelled out of `app=a`: a DELETED event for a selector watch.
    pair.same(
        "PATCH",
        &format!("{path}/a"),
        Some(&json!({"metadata": {"labels": {"app": "z"}}})),
    )
    .await;
    pair.same("DELETE", &format!("{path}/a"), None).await;

    for (query, count) in [("", 5), ("&labelSelector=app%3Da", 3)] {
        let watch = |rv: &str| format!("{path}?watch=true&resourceVersion={rv}{query}");
        let emulated = pair.emulated.watch(&watch(&rv_e), count, LIMIT).await;
        let actual = pair.actual.watch(&watch(&rv_r), count, LIMIT).await;
        assert_eq!(actual.len(), count, "{query}: {actual:#?}");
        assert_same(
            &format!("WATCH from the list's resourceVersion{query}"),
            &(200, Value::Array(emulated)),
            &(200, Value::Array(actual)),
            &[&ns],
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_ends_with_the_initial_events_bookmark() {
    let pair = Pair::new().await;
    let ns = pair.namespace.clone();
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    for name in ["b", "a", "c"] {
        pair.same("POST", &path, Some(&config_map(&ns, name, json!({}))))
            .await;
    }
    let watch = format!(
        "{path}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    );
    let emulated = pair.emulated.watch(&watch, 4, LIMIT).await;
    let actual = pair.actual.watch(&watch, 4, LIMIT).await;
    assert_eq!(actual.len(), 4, "{actual:#?}");
    assert_eq!(actual[3]["type"], "BOOKMARK");
    assert_same(
        "a streaming list",
        &(200, Value::Array(emulated)),
        &(200, Value::Array(actual)),
        &[&ns],
    );
}

/// A periodic BOOKMARK on a watch that allows them. The real server sends its first a
/// minute after the watch started or 2 s before the watch's deadline, whichever comes
/// first (kube-apiserver's watch cache): a 4 s watch gets it after about 2 s. The
/// emulator sends them every `bookmark_interval` (1 s here).
///
/// The watch cache's bookmark carries the last resourceVersion its resource's cache
/// processed, and a watcher is sent only one newer than where it started (or equal,
/// once): a LIST's resourceVersion is etcd's, which any other resource's write (the
/// API server's own leases) moves past the ConfigMaps' last event, and then no
/// bookmark comes until a ConfigMap changes (a CI run saw none in 4 s). So a ConfigMap
/// outside the watch's label selector is written once both watches are open (their
/// responses begun, not after a fixed wait): it moves the cache on and sends the watch
/// no event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_periodic_bookmark_carries_the_kind_and_a_resource_version() {
    let pair = Pair::with(kube_testbed::TestbedOptions {
        bookmark_interval: Duration::from_secs(1),
        ..Default::default()
    })
    .await;
    let ns = pair.namespace.clone();
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    pair.same(
        "POST",
        &path,
        Some(&config_map(&ns, "a", json!({"app": "a"}))),
    )
    .await;
    let (rv_e, rv_r) = (
        list_rv(&pair.emulated, &path).await,
        list_rv(&pair.actual, &path).await,
    );
    let watch = |rv: &str| {
        format!(
            "{path}?watch=true&resourceVersion={rv}&labelSelector=app%3Da&allowWatchBookmarks=true&timeoutSeconds=4"
        )
    };
    let (tb, real) = (&pair.testbed, pair.real);
    let (base_e, ca_e, token_e, watch_e) = (tb.base_url(), tb.ca_pem(), tb.token(), watch(&rv_e));
    let (base_r, ca_r, token_r, watch_r) =
        (real.base_url(), real.ca_pem(), real.token(), watch(&rv_r));
    let (open_e, open_r) = tokio::join!(
        open_watch(&base_e, &ca_e, &token_e, &watch_e),
        open_watch(&base_r, &ca_r, &token_r, &watch_r),
    );
    pair.same(
        "POST",
        &path,
        Some(&config_map(&ns, "z", json!({"app": "z"}))),
    )
    .await;
    let (emulated, actual) = tokio::join!(events(open_e, 1, LIMIT), events(open_r, 1, LIMIT));
    assert_eq!(
        actual.len(),
        1,
        "a BOOKMARK before the 4 s deadline: {actual:#?}"
    );
    assert_eq!(actual[0]["type"], "BOOKMARK", "{actual:#?}");
    assert_same(
        "a periodic bookmark",
        &(200, Value::Array(emulated)),
        &(200, Value::Array(actual)),
        &[&ns],
    );
}
