//! The emulator driven through kube-rs: CRUD, conflicts, selectors, auth, reflectors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube_testbed::{KindSpec, Rule, Testbed, TestbedOptions};
use test_support::poll_until;

mod support;
use serde_json::json;
use support::api_status;

fn secret(name: &str, labels: &[(&str, &str)]) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(name.to_string());
    s.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    s.data = Some(BTreeMap::from([(
        "k".to_string(),
        ByteString(b"v".to_vec()),
    )]));
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_over_https() {
    let tb = Testbed::start().await;
    assert!(tb.base_url().starts_with("https://127.0.0.1:"));
    assert!(tb.ca_pem().contains("BEGIN CERTIFICATE"));
    let secrets: Api<Secret> = Api::namespaced(tb.client(), "ns");

    let created = secrets
        .create(&PostParams::default(), &secret("a", &[("app", "x")]))
        .await
        .unwrap();
    let rv1: u64 = created
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    assert_eq!(
        created.metadata.generation, None,
        "built-in kinds have no generation"
    );

    let got = secrets.get("a").await.unwrap();
    assert_eq!(got.data.unwrap()["k"].0, b"v");

    // merge patch bumps the resourceVersion
    let patched = secrets
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"p": "1"}}})),
        )
        .await
        .unwrap();
    let rv2: u64 = patched
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);
    assert_eq!(patched.metadata.labels.as_ref().unwrap()["p"], "1");

    // JSON patch
    let patched = secrets
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!([{"op": "remove", "path": "/metadata/labels/p"}]))
                    .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert!(!patched.metadata.labels.as_ref().unwrap().contains_key("p"));

    // server-side apply creates and updates
    let applied = secrets
        .patch(
            "b",
            &PatchParams::apply("test").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b"}, "stringData": {"x": "y"}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.data.unwrap()["x"].0, b"y");

    // 409 on a stale replace
    let mut stale = created.clone();
    stale.metadata.labels = Some(BTreeMap::from([("stale".into(), "1".into())]));
    let e = api_status(
        secrets
            .replace("a", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert_eq!(e.reason, "Conflict");
    // ... and a fresh one succeeds
    let mut fresh = secrets.get("a").await.unwrap();
    fresh.metadata.labels = Some(BTreeMap::from([("fresh".into(), "1".into())]));
    secrets
        .replace("a", &PostParams::default(), &fresh)
        .await
        .unwrap();

    // 409 AlreadyExists on a second create, 422 on an invalid name
    let e = api_status(
        secrets
            .create(&PostParams::default(), &secret("a", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    let e = api_status(
        secrets
            .create(&PostParams::default(), &secret("Not_Valid", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));

    // delete, then 404
    secrets.delete("a", &DeleteParams::default()).await.unwrap();
    let e = api_status(secrets.get("a").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert!(tb.get("v1", "Secret", "ns", "a").is_none());
    assert!(tb.get("v1", "Secret", "ns", "b").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_scoped_and_registered_kinds_over_http() {
    let tb = Testbed::start_with(TestbedOptions {
        tls: false,
        ..Default::default()
    })
    .await;
    assert!(tb.base_url().starts_with("http://"));
    let client = tb.client();
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("team".into());
    nss.create(&PostParams::default(), &ns).await.unwrap();
    assert_eq!(
        nss.get("team")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Active")
    );

    tb.register_kind(KindSpec::namespaced(
        "unikorn-cloud.org",
        "v1alpha1",
        "HelmApplication",
        "helmapplications",
    ));
    let ar = kube::discovery::ApiResource {
        group: "unikorn-cloud.org".into(),
        version: "v1alpha1".into(),
        api_version: "unikorn-cloud.org/v1alpha1".into(),
        kind: "HelmApplication".into(),
        plural: "helmapplications".into(),
    };
    let apps: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), "team", &ar);
    let obj: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "unikorn-cloud.org/v1alpha1", "kind": "HelmApplication",
        "metadata": {"name": "app"}, "spec": {"chart": "c"}, "status": {"ignored": true}
    }))
    .unwrap();
    let created = apps.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(created.data["spec"]["chart"], "c");
    assert_eq!(created.metadata.generation, Some(1));
    // status subresource: the main resource ignores status, /status sets it
    assert!(created.data.get("status").is_none());
    let st = apps
        .patch_status(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["ready"], true);
    assert_eq!(st.metadata.generation, Some(1));
    let spec = apps
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"chart": "d"}})),
        )
        .await
        .unwrap();
    assert_eq!(spec.metadata.generation, Some(2));

    // discovery finds the registered group
    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    assert!(discovery.has_group("unikorn-cloud.org"));

    // deleting the namespace deletes its contents
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    assert!(
        tb.get(
            "unikorn-cloud.org/v1alpha1",
            "HelmApplication",
            "team",
            "app"
        )
        .is_none()
    );
}

// also runs on the current-thread test runtime: the server has a thread of its own
#[tokio::test]
async fn selectors_filter_lists() {
    let tb = Testbed::start().await;
    let secrets: Api<Secret> = Api::namespaced(tb.client(), "ns");
    for (name, app) in [("a", "web"), ("b", "api"), ("c", "db")] {
        secrets
            .create(&PostParams::default(), &secret(name, &[("app", app)]))
            .await
            .unwrap();
    }
    let mut tls = secret("t", &[]);
    tls.type_ = Some("kubernetes.io/tls".into());
    secrets.create(&PostParams::default(), &tls).await.unwrap();

    let names = |l: kube::core::ObjectList<Secret>| {
        let mut n: Vec<String> = l
            .items
            .into_iter()
            .map(|s| s.metadata.name.unwrap())
            .collect();
        n.sort();
        n
    };
    let list = |sel: &'static str| {
        let secrets = secrets.clone();
        async move {
            names(
                secrets
                    .list(&ListParams::default().labels(sel))
                    .await
                    .unwrap(),
            )
        }
    };
    assert_eq!(list("app=web").await, ["a"]);
    assert_eq!(list("app==web").await, ["a"]);
    assert_eq!(list("app!=web").await, ["b", "c", "t"]);
    assert_eq!(list("app in (web,db)").await, ["a", "c"]);
    assert_eq!(list("app notin (web,db)").await, ["b", "t"]);
    assert_eq!(list("app").await, ["a", "b", "c"]);
    assert_eq!(list("!app").await, ["t"]);
    let by_field = |sel: &'static str| {
        let secrets = secrets.clone();
        async move {
            names(
                secrets
                    .list(&ListParams::default().fields(sel))
                    .await
                    .unwrap(),
            )
        }
    };
    assert_eq!(by_field("metadata.name=b").await, ["b"]);
    assert_eq!(by_field("type=kubernetes.io/tls").await, ["t"]);
    assert_eq!(
        by_field("metadata.namespace!=ns").await,
        Vec::<String>::new()
    );
    let e = api_status(
        secrets
            .list(&ListParams::default().fields("spec.x=1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 400);
    // namespaces scope lists
    let other: Api<Secret> = Api::namespaced(tb.client(), "other");
    assert!(
        other
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let all: Api<Secret> = Api::all(tb.client());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        4
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_token_gets_403_and_allowed_reads_work() {
    let tb = Testbed::start().await;
    tb.upsert(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x", "namespace": "ns"}}),
    );
    tb.upsert(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "y", "namespace": "ns"}}),
    );
    tb.add_token(
        "reader",
        vec![
            Rule::new(&["get", "list", "watch"], "", "secrets")
                .namespace("ns")
                .names(&["x"]),
        ],
    );
    let client = Client::try_from(tb.config_for_token("reader")).unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "ns");
    assert!(secrets.get("x").await.is_ok());
    let e = api_status(secrets.get("y").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert!(
        !e.message.contains("reader"),
        "the token must not appear in messages"
    );
    let e = api_status(
        secrets
            .delete("x", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403);
    let e = api_status(secrets.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(e.code, 403);
    assert_eq!(
        secrets
            .list(&ListParams::default().fields("metadata.name=x"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns");
    assert_eq!(api_status(cms.get("x").await.unwrap_err()).code, 403);
    // an unknown token is 401
    let stranger: Api<Secret> =
        Api::namespaced(Client::try_from(tb.config_for_token("nope")).unwrap(), "ns");
    assert_eq!(api_status(stranger.get("x").await.unwrap_err()).code, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_sees_create_patch_replace_delete() {
    for streaming in [false, true] {
        let tb = Testbed::start().await;
        let cms: Api<ConfigMap> = Api::namespaced(tb.client(), "ns");
        let mut seed = ConfigMap::default();
        seed.metadata.name = Some("seed".into());
        cms.create(&PostParams::default(), &seed).await.unwrap();

        let (reader, writer) = reflector::store();
        let cfg = if streaming {
            watcher::Config::default().streaming_lists()
        } else {
            watcher::Config::default()
        };
        let stream = reflector(writer, watcher(cms.clone(), cfg)).applied_objects();
        let task = tokio::spawn(async move {
            futures::pin_mut!(stream);
            while stream.next().await.is_some() {}
        });
        reader.wait_until_ready().await.unwrap();
        assert_eq!(reader.state().len(), 1);

        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("c".into());
        cm.data = Some(BTreeMap::from([("k".into(), "1".into())]));
        cms.create(&PostParams::default(), &cm).await.unwrap();
        let key = reflector::ObjectRef::new("c").within("ns");
        poll_until("create", || reader.get(&key).is_some()).await;

        cms.patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "2"}})),
        )
        .await
        .unwrap();
        poll_until("patch", || {
            reader
                .get(&key)
                .is_some_and(|c| c.data.as_ref().unwrap()["k"] == "2")
        })
        .await;

        let mut current = cms.get("c").await.unwrap();
        current.data = Some(BTreeMap::from([("k".into(), "3".into())]));
        cms.replace("c", &PostParams::default(), &current)
            .await
            .unwrap();
        poll_until("replace", || {
            reader
                .get(&key)
                .is_some_and(|c| c.data.as_ref().unwrap()["k"] == "3")
        })
        .await;

        cms.delete("c", &DeleteParams::default()).await.unwrap();
        poll_until("delete", || reader.get(&key).is_none()).await;
        task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_only_apis_and_strategic_merge() {
    let tb = Testbed::start().await;
    let secrets: Api<Secret> = Api::namespaced(tb.client(), "ns");
    secrets
        .create(&PostParams::default(), &secret("m", &[("app", "x")]))
        .await
        .unwrap();
    let meta = secrets.get_metadata("m").await.unwrap();
    assert_eq!(meta.metadata.labels.unwrap()["app"], "x");
    let list = secrets.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);

    // strategic merge: maps merge, `$patch: delete` removes
    let patched = secrets
        .patch(
            "m",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"app": null, "b": "2"}}, "data": {"$patch": "delete"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.metadata.labels.unwrap(),
        BTreeMap::from([("b".to_string(), "2".to_string())])
    );
    assert!(patched.data.is_none());

    // custom kinds refuse strategic merge like the apiserver (415)
    tb.register_kind(KindSpec::cluster("example.org", "v1", "Thing", "things"));
    tb.upsert(json!({"apiVersion": "example.org/v1", "kind": "Thing", "metadata": {"name": "t"}}));
    let ar = kube::discovery::ApiResource {
        group: "example.org".into(),
        version: "v1".into(),
        api_version: "example.org/v1".into(),
        kind: "Thing".into(),
        plural: "things".into(),
    };
    let things: Api<kube::api::DynamicObject> = Api::all_with(tb.client(), &ar);
    let e = api_status(
        things
            .patch(
                "t",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 415);
}

#[test]
fn testbed_is_shareable_across_tasks() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Testbed>();
}
