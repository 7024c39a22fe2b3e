//! A custom resource with a status subresource: what a create, a write of the main
//! resource and a write of `/status` each keep and change (status, generation).

use std::time::Duration;

use kube_testbed::KindSpec;
use serde_json::json;

use crate::harness::Pair;

const GROUP: &str = "diff.example.org";

/// The CRD on the real server (once: the server is shared by the binary's tests),
/// awaited until Established; the same kind registered on the emulator.
async fn widgets(pair: &Pair) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    });
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, body) = pair.actual.send("POST", path, Some(&crd), None).await;
    assert!(status == 201 || status == 409, "{status}: {body}");
    for _ in 0..100 {
        let (_, crd) = pair
            .actual
            .send("GET", &format!("{path}/widgets.{GROUP}"), None, None)
            .await;
        let established = crd["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Established" && c["status"] == "True");
        if established {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    pair.testbed.register_kind(
        KindSpec::namespaced(GROUP, "v1", "Widget", "widgets").status_subresource(true),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_subresource_splits_writes_the_same_way() {
    let pair = Pair::new().await;
    widgets(&pair).await;
    let ns = pair.namespace.clone();
    let path = format!("/apis/{GROUP}/v1/namespaces/{ns}/widgets");
    let widget = json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": ns},
        "spec": {"size": 1},
        "status": {"phase": "ignored on create"},
    });
    assert_eq!(pair.same("POST", &path, Some(&widget)).await.0, 201);

    // /status changes the status only (the spec change in the same body is dropped).
    let status_patch = json!({"spec": {"size": 9}, "status": {"phase": "Ready"}});
    assert_eq!(
        pair.same("PATCH", &format!("{path}/w/status"), Some(&status_patch))
            .await
            .0,
        200
    );

    // The main resource keeps the status (the status change is dropped) and bumps the
    // generation for a spec change.
    let main_patch = json!({"spec": {"size": 2}, "status": {"phase": "dropped"}});
    let (status, body) = pair
        .same("PATCH", &format!("{path}/w"), Some(&main_patch))
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["status"]["phase"], "Ready");
    assert_eq!(body["metadata"]["generation"], 2);

    // A metadata-only change: no new generation.
    let label_patch = json!({"metadata": {"labels": {"x": "y"}}});
    let (_, body) = pair
        .same("PATCH", &format!("{path}/w"), Some(&label_patch))
        .await;
    assert_eq!(body["metadata"]["generation"], 2);
    pair.same("GET", &format!("{path}/w/status"), None).await;
    pair.same("GET", &path, None).await;
}
