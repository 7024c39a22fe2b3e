//! ClusterTrustBundles (`certificates.k8s.io/v1`, cluster-scoped; issue 51): creates
//! and their name rules (a signer's bundle is named with the signer's prefix), LIST by
//! `spec.signerName` and labels, a WATCH selected by signer, and the 400 for a field
//! a bundle has no selector for (`metadata.namespace`: the kind is cluster-scoped).

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Pair, Target, assert_same};

const PATH: &str = "/apis/certificates.k8s.io/v1/clustertrustbundles";

/// A bundle of `signer` (none when empty) named `name`, with `labels`.
fn bundle(name: &str, signer: &str, labels: Value) -> Value {
    let mut spec = json!({"trustBundle": test_support::pki::TestCa::new("CA").pem()});
    if !signer.is_empty() {
        spec["signerName"] = json!(signer);
    }
    json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "ClusterTrustBundle",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    })
}

/// The answer without the PEM (each server was sent the same, but generated per
/// object by this test: compared as present).
fn without_pem(mut answer: (u16, Value)) -> (u16, Value) {
    fn strip(value: &mut Value) {
        if let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut)
            && spec.contains_key("trustBundle")
        {
            spec.insert("trustBundle".into(), json!("<pem>"));
        }
        if let Some(items) = value.get_mut("items").and_then(Value::as_array_mut) {
            items.iter_mut().for_each(strip);
        }
        if let Some(object) = value.get_mut("object") {
            strip(object);
        }
    }
    strip(&mut answer.1);
    answer
}

/// The resourceVersion of a LIST of every bundle on `target`.
async fn list_rv(target: &Target) -> String {
    let (status, list) = target.send("GET", PATH, None, None).await;
    assert_eq!(status, 200, "{}: {list}", target.name);
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundles_are_named_listed_and_watched_by_signer_the_same_way() {
    let pair = Pair::new().await;
    // Cluster-scoped: names and signers carry the test's namespace (normalised away)
    // so that the shared real server's other tests never see them.
    let ns = pair.namespace.clone();
    let signer = format!("{ns}.example.com/platform");
    let other = format!("{ns}-other.example.com/platform");
    let prefix = |signer: &str| format!("{}:", signer.replace('/', ":"));
    let names = [&ns as &str];
    let same = |what: String, a: (u16, Value), b: (u16, Value)| {
        assert_same(&what, &without_pem(a), &without_pem(b), &names);
    };

    // The v1 API is served by default on v1.37 (GA: no feature gate, no runtime
    // config); v1beta1 is not served unless enabled.
    let (beta, _) = pair
        .actual
        .send("GET", "/apis/certificates.k8s.io/v1beta1", None, None)
        .await;
    assert_eq!(
        beta, 404,
        "v1beta1 is off by default on kube-apiserver v1.37"
    );

    // Creates: the same object back, and the same 422 for a name without the
    // signer's prefix, and for a ':' in the name of a bundle without a signer. A
    // WATCH selected by the signer from the LIST's resourceVersion before them gets
    // the signer's two bundles, in order, and nothing else.
    let (emulated_rv, actual_rv) = (list_rv(&pair.emulated).await, list_rv(&pair.actual).await);
    for object in [
        bundle(
            &format!("{}a", prefix(&signer)),
            &signer,
            json!({"tier": "prod"}),
        ),
        bundle(
            &format!("{}a", prefix(&other)),
            &other,
            json!({"tier": "prod"}),
        ),
        bundle(
            &format!("{}b", prefix(&signer)),
            &signer,
            json!({"tier": "dev"}),
        ),
        bundle(&format!("{ns}-unsigned"), "", json!({})),
    ] {
        let (a, b) = pair.send("POST", PATH, Some(&object)).await;
        assert_eq!(b.0, 201, "{}", b.1);
        same(format!("POST {}", object["metadata"]["name"]), a, b);
    }
    let watch = |rv: &str| {
        format!("{PATH}?watch=true&resourceVersion={rv}&fieldSelector=spec.signerName%3D{signer}")
    };
    let limit = Duration::from_secs(10);
    let emulated = pair.emulated.watch(&watch(&emulated_rv), 2, limit).await;
    let actual = pair.actual.watch(&watch(&actual_rv), 2, limit).await;
    assert_eq!(actual.len(), 2, "the signer's two bundles: {actual:?}");
    same(
        "WATCH by signer".to_owned(),
        (200, Value::Array(emulated)),
        (200, Value::Array(actual)),
    );
    for (name, signer) in [
        (format!("{ns}.example.com:wrong:c"), signer.as_str()),
        (format!("{ns}:unsigned"), ""),
    ] {
        let (a, b) = pair
            .send("POST", PATH, Some(&bundle(&name, signer, json!({}))))
            .await;
        assert_eq!(b.0, 422, "{}", b.1);
        same(format!("POST {name}"), a, b);
    }

    // LIST by signer, with and without labels, and by name.
    for query in [
        format!("?fieldSelector=spec.signerName%3D{signer}"),
        format!("?fieldSelector=spec.signerName%3D{signer}&labelSelector=tier%3Dprod"),
        format!("?fieldSelector=spec.signerName%3D{other}"),
        format!("?fieldSelector=metadata.name%3D{}b", prefix(&signer)),
    ] {
        let (a, b) = pair.send("GET", &format!("{PATH}{query}"), None).await;
        assert_eq!(b.0, 200, "{query}: {}", b.1);
        same(format!("GET {query}"), a, b);
    }
    // No namespace field on a cluster-scoped kind: the same 400, message included.
    let query = format!("{PATH}?fieldSelector=metadata.namespace%3D{ns}");
    let (a, b) = pair.send("GET", &query, None).await;
    assert_eq!(b.0, 400, "{}", b.1);
    same(query, a, b);

    // Cleaned up: the real server is shared by the binary's tests.
    for name in [
        format!("{}a", prefix(&signer)),
        format!("{}b", prefix(&signer)),
        format!("{}a", prefix(&other)),
        format!("{ns}-unsigned"),
    ] {
        let (a, b) = pair.send("DELETE", &format!("{PATH}/{name}"), None).await;
        same(format!("DELETE {name}"), a, b);
    }
}
