//! `Status` bodies: 403 (a token with no grant), 404, 409 `AlreadyExists` and
//! `Conflict`, 410 `Expired` on a WATCH from a compacted resourceVersion.

use std::time::Duration;

use serde_json::json;

use real_apiserver::{Options, RealServer};

use crate::harness::{Pair, Target, assert_same, config_map, mask_digits};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_found_conflicts_and_forbidden_are_the_same_status() {
    let pair = Pair::new().await;
    let ns = pair.namespace.clone();
    let path = format!("/api/v1/namespaces/{ns}/configmaps");

    // 404 for a missing object.
    let (status, _) = pair.same("GET", &format!("{path}/missing"), None).await;
    assert_eq!(status, 404);

    // 409 AlreadyExists for a second create.
    let object = config_map(&ns, "twice", json!({"app": "a"}));
    assert_eq!(pair.same("POST", &path, Some(&object)).await.0, 201);
    assert_eq!(pair.same("POST", &path, Some(&object)).await.0, 409);

    // 409 Conflict for a PUT with a stale resourceVersion.
    let mut stale = object.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    let (status, _) = pair
        .same("PUT", &format!("{path}/twice"), Some(&stale))
        .await;
    assert_eq!(status, 409);

    // 403 for a token that may do nothing, with the same message.
    let user = pair.real.new_user();
    pair.testbed.add_token(&user.token, Vec::new());
    let emulated = pair
        .emulated
        .send("GET", &format!("{path}/twice"), None, Some(&user.token))
        .await;
    let actual = pair
        .actual
        .send("GET", &format!("{path}/twice"), None, Some(&user.token))
        .await;
    assert_eq!(actual.0, 403);
    assert_same("GET as a token with no grant", &emulated, &actual, &[&ns]);
}

/// A server of its own: etcd is compacted and the API server restarted (its watch
/// cache would otherwise still serve the history etcd no longer has).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_a_compacted_resource_version_gets_410_expired() {
    let pair = Pair::new().await;
    let own = RealServer::start(Options::default()).await.unwrap();
    let actual = Target::new("kube-apiserver", own.base_url(), &own.ca_pem(), own.token());
    let ns = pair.namespace.clone();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    assert_eq!(
        actual
            .send("POST", "/api/v1/namespaces", Some(&namespace), None)
            .await
            .0,
        201
    );
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    let object = config_map(&ns, "old", json!({"app": "a"}));
    let rv = |answer: &(u16, serde_json::Value)| {
        answer.1["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let old_e = rv(&pair.emulated.send("POST", &path, Some(&object), None).await);
    let old_r = rv(&actual.send("POST", &path, Some(&object), None).await);
    for round in 0..3 {
        let patch = json!({"data": {"round": round.to_string()}});
        pair.emulated
            .send("PATCH", &format!("{path}/old"), Some(&patch), None)
            .await;
        actual
            .send("PATCH", &format!("{path}/old"), Some(&patch), None)
            .await;
    }
    // History before the last write is gone: etcd compacted (and the API server
    // restarted, so that its watch cache starts from etcd), the emulator's expired.
    own.compact_etcd().await.unwrap();
    own.stop_apiserver(0).await;
    own.start_apiserver(0).await.unwrap();
    pair.testbed.expire_history();

    let watch = |rv: String| format!("{path}?watch=true&resourceVersion={rv}");
    let limit = Duration::from_secs(10);
    let emulated = pair.emulated.watch(&watch(old_e), 1, limit).await;
    let actual = actual.watch(&watch(old_r), 1, limit).await;
    assert_eq!(actual.len(), 1, "{actual:?}");
    assert_eq!(actual[0]["type"], "ERROR");
    assert_eq!(actual[0]["object"]["code"], 410);
    // The message names the resourceVersions: compared with digits masked.
    assert_same(
        "WATCH from a compacted resourceVersion",
        &(200, mask_digits(&serde_json::Value::Array(emulated))),
        &(200, mask_digits(&serde_json::Value::Array(actual))),
        &[&ns],
    );
}
