//! The real server itself: started from the cached binaries, serving the admin,
//! refusing a restricted user until a Role is granted, with the platform's CRDs
//! installed and answering for custom resources; and kube-runtime's watch-list
//! (`sendInitialEvents`, ended by a bookmark) against it and the emulator alike.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams};
use kube_construct::types::HelmApplication;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_admin_and_reports_its_release() {
    let server = real_apiserver::shared();
    let version = server.client().apiserver_version().await.unwrap();
    assert_eq!(version.git_version, real_apiserver::kube_version());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_platform_crds_are_served() {
    let server = real_apiserver::shared();
    server.ensure_namespace("crds").await.unwrap();
    let apps: Api<HelmApplication> = Api::namespaced(server.client(), "crds");
    assert!(
        apps.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let app: HelmApplication = serde_json::from_value(serde_json::json!({
        "apiVersion": "unikorn-cloud.org/v1alpha1",
        "kind": "HelmApplication",
        "metadata": {"name": "app"},
        "spec": {"documentation": "https://docs.example", "license": "Apache-2.0", "icon": "aWNvbg=="},
    }))
    .unwrap();
    apps.create(&Default::default(), &app).await.unwrap();
    assert_eq!(
        apps.get("app").await.unwrap().metadata.name.as_deref(),
        Some("app")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restricted_user_is_refused_until_granted() {
    let server = real_apiserver::shared();
    server.ensure_namespace("rbac").await.unwrap();
    let user = server.new_user();
    let client = kube::Client::try_from(server.config_for_token(&user.token)).unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "rbac");
    match configmaps.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("a user without a Role was answered {other:?}"),
    }
    server
        .grant(
            &user,
            "rbac",
            vec![real_apiserver::rule(
                &["get", "list", "watch"],
                "",
                "configmaps",
            )],
        )
        .await
        .unwrap();
    configmaps.list(&ListParams::default()).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client, "rbac");
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("a ConfigMaps-only user was answered {other:?}"),
    }
    // A token the file does not hold: 401.
    let stranger = kube::Client::try_from(server.config_for_token("not-a-token")).unwrap();
    match Api::<ConfigMap>::namespaced(stranger, "rbac")
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 401, "{status:?}"),
        other => panic!("an unknown token was answered {other:?}"),
    }
}

/// kube-runtime's watcher with streaming lists: the initial objects arrive as watch
/// events, the initial-events-end bookmark closes the initial list (`InitDone`), and
/// a later write arrives live.
async fn watch_list_then_live(api: &impl real_apiserver::ApiServerUnderTest, ns: &str) {
    use futures::StreamExt as _;
    use kube::runtime::watcher::{self, Event};

    let configmap = |name: &str| {
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"namespace": ns, "name": name},
            "data": {"k": "v"},
        })
    };
    for name in ["a", "b", "c"] {
        api.apply(configmap(name)).await;
    }
    let client = kube::Client::try_from(api.config_for(&api.admin_token())).unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client, ns);
    let mut events =
        watcher::watcher(configmaps, watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    let deadline = std::time::Duration::from_secs(30);
    loop {
        let event = tokio::time::timeout(deadline, events.next())
            .await
            .expect("a watch event")
            .expect("the stream goes on")
            .unwrap_or_else(|e| panic!("{}: {e}", api.name()));
        match event {
            Event::Init => {}
            Event::InitApply(cm) => initial.push(cm.metadata.name.unwrap_or_default()),
            Event::InitDone => break,
            other => panic!("{}: {other:?} before the initial list ended", api.name()),
        }
    }
    initial.sort();
    assert_eq!(initial, ["a", "b", "c"], "{}", api.name());
    api.apply(configmap("d")).await;
    loop {
        let event = tokio::time::timeout(deadline, events.next())
            .await
            .expect("a live event")
            .expect("the stream goes on")
            .unwrap_or_else(|e| panic!("{}: {e}", api.name()));
        if let Event::Apply(cm) = event {
            assert_eq!(cm.metadata.name.as_deref(), Some("d"), "{}", api.name());
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_list_on_the_emulator_and_the_real_server() {
    let emulated = kube_testbed::Testbed::start().await;
    watch_list_then_live(&emulated, "watch-list").await;
    watch_list_then_live(real_apiserver::shared(), "watch-list").await;
}
