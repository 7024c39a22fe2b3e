//! LIST with label and field selectors, and the 400 for a field no selector knows.

use serde_json::json;

use crate::harness::{Pair, assert_same, config_map};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_with_label_and_field_selectors() {
    let pair = Pair::new().await;
    let ns = pair.namespace.clone();
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    for (name, labels) in [
        ("one", json!({"app": "a", "tier": "web"})),
        ("two", json!({"app": "b"})),
        ("three", json!({"app": "c", "tier": "db"})),
    ] {
        let (status, _) = pair
            .same("POST", &path, Some(&config_map(&ns, name, labels)))
            .await;
        assert_eq!(status, 201);
    }
    let queries = [
        String::new(),
        "?labelSelector=app%3Da".to_owned(),
        "?labelSelector=app%20in%20(a%2Cb)".to_owned(),
        "?labelSelector=app%20notin%20(a)".to_owned(),
        "?labelSelector=!tier".to_owned(),
        "?labelSelector=tier".to_owned(),
        "?labelSelector=app!%3Da%2Ctier".to_owned(),
        "?fieldSelector=metadata.name%3Dtwo".to_owned(),
        "?fieldSelector=metadata.name!%3Dtwo".to_owned(),
        format!("?fieldSelector=metadata.namespace%3D{ns}"),
    ];
    for query in queries {
        let (status, body) = pair.same("GET", &format!("{path}{query}"), None).await;
        assert_eq!(status, 200, "{query}: {body}");
    }
    // A field no selector knows: the same 400 Status, message included.
    let (status, body) = pair
        .same("GET", &format!("{path}?fieldSelector=data.key%3Done"), None)
        .await;
    assert_eq!(status, 400, "{body}");

    // A malformed label selector: the same 400 Status but for the parser's message
    // (listed in docs/testing.md: the emulator quotes the requirement, the real
    // parser names the token it expected).
    let query = format!("{path}?labelSelector=app%3D%3D%3Da");
    let (mut emulated, mut actual) = pair.send("GET", &query, None).await;
    assert_eq!(actual.0, 400, "{}", actual.1);
    for answer in [&mut emulated, &mut actual] {
        let message = answer.1["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("unable to parse requirement: "),
            "{message}"
        );
        answer.1["message"] = json!("unable to parse requirement: <parser's words>");
    }
    assert_same(&query, &emulated, &actual, &[&ns]);
}
