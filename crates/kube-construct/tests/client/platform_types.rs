//! Round trips of every platform type through the kube-testbed API emulator:
//! what a client writes comes back with every field kept, through typed and
//! dynamic (registry-resolved) reads alike; and through a real kube-apiserver with
//! the CRDs we generate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kube_construct::registry::{Registry, gvk_of};
use kube_construct::types::argo::{
    Application, ApplicationDestination, ApplicationHealth, ApplicationHealthStatus,
    ApplicationIgnoreDifference, ApplicationSource, ApplicationSourceHelm, ApplicationSpec,
    ApplicationStatus, ApplicationSync, ApplicationSyncAutomation, ApplicationSyncOption,
    ApplicationSyncPolicy, ApplicationSyncStatus, HelmParameter, NamespaceMetadata,
};
use kube_construct::types::fake::ManagedResource;
use kube_construct::types::{
    Condition, ConditionReason, ConditionStatus, ConditionType, HelmApplication,
    HelmApplicationDependency, HelmApplicationParameter, HelmApplicationRecommendation,
    HelmApplicationSpec, HelmApplicationStatus, HelmApplicationVersion, SemanticVersion,
    SemanticVersionConstraints, Tag, TagList, update_condition_at,
};
use kube_testbed::{KindSpec, Testbed};
use serde_json::Value;

const NS: &str = "platform";

/// Metadata fields the API server sets.
const SERVER_SET: [&str; 5] = [
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
];

/// Asserts that `got` holds exactly what was `sent`, apart from the metadata
/// the server adds.
fn assert_kept(sent: &Value, got: &Value) {
    let sent = sent.as_object().unwrap();
    let mut got = got.as_object().unwrap().clone();
    let mut metadata = got.remove("metadata").unwrap();
    let metadata = metadata.as_object_mut().unwrap();
    for field in SERVER_SET {
        if !sent["metadata"].as_object().unwrap().contains_key(field) {
            metadata.remove(field);
        }
    }
    assert_eq!(
        &Value::Object(metadata.clone()),
        &sent["metadata"],
        "metadata"
    );
    let mut rest = sent.clone();
    rest.remove("metadata");
    assert_eq!(Value::Object(got), Value::Object(rest));
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(NS.into()),
        labels: Some(BTreeMap::from([
            // A valid label value: the real API server refuses "cilium display"
            // (422), which the emulator stored.
            (
                "unikorn-cloud.org/name".to_owned(),
                format!("{name}-display"),
            ),
            ("app".to_owned(), "test".to_owned()),
        ])),
        annotations: Some(BTreeMap::from([(
            "unikorn-cloud.org/description".to_owned(),
            "a test object".to_owned(),
        )])),
        ..ObjectMeta::default()
    }
}

fn version(text: &str) -> SemanticVersion {
    SemanticVersion::parse(text).unwrap()
}

pub(crate) fn full_helm_application() -> HelmApplication {
    let mut app = HelmApplication::new(
        "cilium",
        HelmApplicationSpec {
            tags: TagList::from(vec![Tag::new("network", "cni"), Tag::new("tier", "core")]),
            documentation: "https://docs.cilium.io".into(),
            license: "Apache-2.0".into(),
            icon: ByteString(b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>\x00\xff".to_vec()),
            versions: vec![
                HelmApplicationVersion {
                    repo: "https://helm.cilium.io".into(),
                    chart: Some("cilium".into()),
                    branch: None,
                    path: None,
                    version: version("v1.15.3-rc.1+build.7"),
                    release: Some("cilium-release".into()),
                    parameters: vec![HelmApplicationParameter {
                        name: "ipam.mode".into(),
                        value: "kubernetes".into(),
                    }],
                    namespace: Some("kube-system".into()),
                    create_namespace: Some(true),
                    server_side_apply: Some(false),
                    dependencies: vec![
                        HelmApplicationDependency {
                            name: "cert-manager".into(),
                            constraints: Some(
                                SemanticVersionConstraints::new(">= 1.12, < 2").unwrap(),
                            ),
                        },
                        HelmApplicationDependency {
                            name: "prometheus-crds".into(),
                            constraints: None,
                        },
                    ],
                    recommends: vec![HelmApplicationRecommendation {
                        name: "hubble-ui".into(),
                    }],
                },
                HelmApplicationVersion {
                    repo: "https://github.com/cilium/cilium".into(),
                    chart: None,
                    branch: Some("main".into()),
                    path: Some("install/kubernetes/cilium".into()),
                    version: version("1.16"),
                    release: None,
                    parameters: Vec::new(),
                    namespace: None,
                    create_namespace: None,
                    server_side_apply: Some(true),
                    dependencies: Vec::new(),
                    recommends: Vec::new(),
                },
            ],
        },
    );
    app.metadata = meta("cilium");
    app.status = Some(HelmApplicationStatus::default());
    app
}

fn managed_resource() -> ManagedResource {
    let mut resource = ManagedResource::new("managed");
    resource.metadata = meta("managed");
    let at = |s| Time(Timestamp::from_second(s).unwrap());
    let conditions = &mut resource.status.conditions;
    update_condition_at(
        conditions,
        ConditionType::Available,
        ConditionStatus::True,
        ConditionReason::Provisioned,
        "provisioned",
        at(1_700_000_000),
    );
    update_condition_at(
        conditions,
        ConditionType::Healthy,
        ConditionStatus::False,
        ConditionReason::Degraded,
        "one pod is crash-looping",
        at(1_700_000_100),
    );
    conditions.push(Condition {
        type_: ConditionType::from("Custom"),
        status: ConditionStatus::Unknown,
        last_transition_time: at(1_700_000_200),
        reason: ConditionReason::from("SomethingElse"),
        message: String::new(),
    });
    resource
}

fn full_application() -> Application {
    let mut app = Application::new(
        "cilium-app",
        ApplicationSpec {
            project: "default".into(),
            source: ApplicationSource {
                repo_url: "https://helm.cilium.io".into(),
                chart: Some("cilium".into()),
                path: Some("charts/cilium".into()),
                target_revision: "1.15.3".into(),
                helm: Some(ApplicationSourceHelm {
                    release_name: Some("cilium".into()),
                    values: Some("ipam:\n  mode: kubernetes\n".into()),
                    parameters: vec![HelmParameter {
                        name: "hubble.enabled".into(),
                        value: "true".into(),
                    }],
                }),
            },
            destination: ApplicationDestination {
                name: "cluster-abc:project:org".into(),
                namespace: "kube-system".into(),
            },
            sync_policy: ApplicationSyncPolicy {
                sync_options: vec![
                    ApplicationSyncOption::CreateNamespace,
                    ApplicationSyncOption::ServerSideApply,
                ],
                automated: Some(ApplicationSyncAutomation {
                    self_heal: true,
                    prune: true,
                }),
                managed_namespace_metadata: Some(NamespaceMetadata {
                    labels: BTreeMap::from([("team".to_owned(), "net".to_owned())]),
                    annotations: BTreeMap::from([("note".to_owned(), "managed".to_owned())]),
                }),
            },
            ignore_differences: vec![ApplicationIgnoreDifference {
                group: "apps".into(),
                kind: "Deployment".into(),
                json_pointers: vec!["/spec/replicas".into()],
            }],
        },
    );
    app.metadata = meta("cilium-app");
    app.status = Some(ApplicationStatus {
        health: Some(ApplicationHealth {
            status: ApplicationHealthStatus::Healthy,
        }),
        sync: Some(ApplicationSync {
            status: ApplicationSyncStatus::Synced,
        }),
    });
    app
}

async fn testbed() -> Testbed {
    let tb = Testbed::start().await;
    // The platform's CRDs: HelmApplication and the Argo Application have no
    // status subresource; ManagedResource is a fixture, written whole.
    tb.register_kind(
        KindSpec::namespaced(
            "unikorn-cloud.org",
            "v1alpha1",
            "HelmApplication",
            "helmapplications",
        )
        .status_subresource(false),
    );
    tb.register_kind(
        KindSpec::namespaced(
            "unikorn.unikorn-cloud.org",
            "v1alpha1",
            "ManagedResource",
            "managedresources",
        )
        .status_subresource(false),
    );
    tb.register_kind(
        KindSpec::namespaced("argoproj.io", "v1alpha1", "Application", "applications")
            .status_subresource(false),
    );
    tb
}

/// Creates `object`, reads it back typed and dynamically (through the
/// registry's ApiResource and decoder), and checks every field was kept.
async fn round_trip<K>(client: kube::Client, registry: &Registry, object: &K)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug
        + 'static,
{
    let name = object.meta().name.clone().unwrap();
    let sent = registry.encode_value(object).unwrap();

    let api: Api<K> = Api::namespaced(client.clone(), NS);
    let created = api.create(&PostParams::default(), object).await.unwrap();
    assert_kept(&sent, &serde_json::to_value(&created).unwrap());

    let typed = api.get(&name).await.unwrap();
    let typed_json = serde_json::to_value(&typed).unwrap();
    assert_kept(&sent, &typed_json);

    let resource = registry.api_resource(&gvk_of::<K>()).unwrap();
    let dynamic_api: Api<DynamicObject> = Api::namespaced_with(client, NS, &resource);
    let dynamic = dynamic_api.get(&name).await.unwrap();
    assert_kept(&sent, &serde_json::to_value(&dynamic).unwrap());
    let decoded: K = registry.decode(&dynamic).unwrap();
    assert_eq!(
        serde_json::to_value(&decoded).unwrap(),
        typed_json,
        "dynamic and typed reads agree"
    );
    let any = registry.decode_any(&dynamic).unwrap();
    assert!(any.is::<K>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_platform_type_round_trips_through_the_api() {
    let tb = testbed().await;
    let registry = Registry::platform().unwrap();
    round_trip(tb.client(), &registry, &full_helm_application()).await;
    round_trip(tb.client(), &registry, &managed_resource()).await;
    round_trip(tb.client(), &registry, &full_application()).await;
}

/// The same round trips through a real kube-apiserver, where the CRDs are the ones we
/// generate (`helm_application_crd`: a structural schema, so a field it does not
/// describe would be pruned on write; the Argo shim with an open schema). The
/// ManagedResource fixture has no CRD of ours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_platform_crds_keep_every_field_on_a_real_api_server() {
    let server = real_apiserver::shared();
    server.ensure_namespace(NS).await.unwrap();
    let registry = Registry::platform().unwrap();
    round_trip(server.client(), &registry, &full_helm_application()).await;
    round_trip(server.client(), &registry, &full_application()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_values_survive_the_round_trip() {
    let tb = testbed().await;
    let client = tb.client();

    let sent = full_helm_application();
    let api: Api<HelmApplication> = Api::namespaced(client.clone(), NS);
    api.create(&PostParams::default(), &sent).await.unwrap();
    let got = api.get("cilium").await.unwrap();
    assert_eq!(got.spec, sent.spec);
    assert_eq!(got.status, sent.status);
    // The exact version text survives, not just an equal version.
    assert_eq!(
        got.spec.versions[0].version.as_str(),
        "v1.15.3-rc.1+build.7"
    );
    assert_eq!(got.spec.versions[1].version.as_str(), "1.16");
    assert_eq!(got.spec.icon, sent.spec.icon);

    let sent = managed_resource();
    let api: Api<ManagedResource> = Api::namespaced(client.clone(), NS);
    api.create(&PostParams::default(), &sent).await.unwrap();
    let got = api.get("managed").await.unwrap();
    assert_eq!(got.status, sent.status);

    let sent = full_application();
    let api: Api<Application> = Api::namespaced(client, NS);
    api.create(&PostParams::default(), &sent).await.unwrap();
    let got = api.get("cilium-app").await.unwrap();
    assert_eq!(got.spec, sent.spec);
    assert_eq!(got.status, sent.status);
}

/// A cache of a platform CRD kind, on either server: proven synced at construction
/// (every HelmApplication that existed is there), then following a create and an
/// update.
async fn helm_application_cache(api: &impl real_apiserver::ApiServerUnderTest, ns: &str) {
    use kube_construct::{cache::Selection, client::CachedClient};

    let name = api.name();
    let app = |app_name: &str, license: &str| {
        let mut app = full_helm_application();
        app.metadata.name = Some(app_name.to_owned());
        app.metadata.namespace = Some(ns.to_owned());
        app.spec.license = license.to_owned();
        serde_json::to_value(&app).unwrap()
    };
    api.apply(app("first", "MIT")).await;
    api.apply(app("second", "MIT")).await;
    let client = kube::Client::try_from(api.config_for(&api.admin_token())).unwrap();
    let cached = CachedClient::builder()
        .cache::<HelmApplication>(Selection::in_namespace(ns))
        .from_client(client)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let listed = |cached: &CachedClient| {
        cached
            .list::<HelmApplication>(Some(ns), &kube::core::Selector::default())
            .unwrap()
    };
    assert_eq!(listed(&cached).len(), 2, "{name}: synced at construction");
    api.apply(app("third", "MIT")).await;
    api.apply(app("first", "BSD-3-Clause")).await;
    test_support::poll_until("the cache follows a create and an update", || {
        let apps = listed(&cached);
        apps.len() == 3
            && apps.iter().any(|a| {
                a.metadata.name.as_deref() == Some("first") && a.spec.license == "BSD-3-Clause"
            })
    })
    .await;
    let third = cached
        .get::<HelmApplication>(Some(ns), "third")
        .unwrap()
        .unwrap();
    assert_eq!(
        third.spec.versions,
        full_helm_application().spec.versions,
        "{name}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_helm_application_cache_on_the_emulator_and_a_real_api_server() {
    helm_application_cache(&testbed().await, "cached-apps").await;
    helm_application_cache(real_apiserver::shared(), "cached-apps").await;
}
