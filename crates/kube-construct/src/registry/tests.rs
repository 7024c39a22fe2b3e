//! Unit tests of the registry.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::Cell;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{GroupVersionKind, ObjectList, TypeMeta};
use kube::discovery::ApiResource;
use serde_json::json;

use super::platform::add_argo_shim;
use super::*;
use crate::types::argo::Application;
use crate::types::fake::ManagedResource;
use crate::types::{HelmApplication, HelmApplicationSpec, HelmApplicationVersion, SemanticVersion};

fn gvk(group: &str, version: &str, kind: &str) -> GroupVersionKind {
    GroupVersionKind::gvk(group, version, kind)
}

fn widget(registry: &mut Registry) -> Result<(), RegistryError> {
    registry.add(Registration::new::<serde_json::Value>(
        gvk("example.com", "v1", "Widget"),
        "widgets",
        Scope::Namespaced,
    ))
}

#[test]
fn platform_registers_in_order() {
    let registry = platform_registry([widget]).unwrap();
    let position = |g: &str, v: &str, k: &str| {
        registry
            .position(&gvk(g, v, k))
            .unwrap_or_else(|| panic!("{k} missing"))
    };
    let secret = position("", "v1", "Secret");
    let last_builtin = position("storage.k8s.io", "v1", "StorageClassList");
    let helm = position("unikorn-cloud.org", "v1alpha1", "HelmApplication");
    let helm_list = position("unikorn-cloud.org", "v1alpha1", "HelmApplicationList");
    let fake = position("unikorn.unikorn-cloud.org", "v1alpha1", "ManagedResource");
    let fake_list = position(
        "unikorn.unikorn-cloud.org",
        "v1alpha1",
        "ManagedResourceList",
    );
    let argo = position("argoproj.io", "v1alpha1", "Application");
    let argo_list = position("argoproj.io", "v1alpha1", "ApplicationList");
    let added = position("example.com", "v1", "Widget");
    assert!(secret < last_builtin);
    assert!(last_builtin < helm && helm < helm_list && helm_list < fake && fake < fake_list);
    assert!(fake_list < argo && argo < argo_list && argo_list < added);
    assert_eq!(added, registry.len() - 1);
    // Core v1 comes first.
    assert_eq!(registry.iter().next().unwrap().gvk().group, "");
    let order: Vec<_> = registry.iter().map(|r| r.gvk().clone()).collect();
    assert_eq!(order.len(), registry.len());
    assert_eq!(Registry::platform().unwrap().len(), registry.len() - 1);
}

#[test]
fn builtins_cover_every_group() {
    let registry = Registry::platform().unwrap();
    for group in [
        "",
        "admissionregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
    ] {
        assert!(
            registry.iter().any(|r| r.gvk().group == group),
            "group {group:?} missing"
        );
    }
    for (g, v, k, plural, scope) in [
        ("", "v1", "Secret", "secrets", Scope::Namespaced),
        ("", "v1", "SecretList", "secrets", Scope::Namespaced),
        ("", "v1", "Namespace", "namespaces", Scope::Cluster),
        ("", "v1", "Service", "services", Scope::Namespaced),
        ("apps", "v1", "Deployment", "deployments", Scope::Namespaced),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            Scope::Cluster,
        ),
        ("autoscaling", "v1", "Scale", "scale", Scope::Subresource),
    ] {
        let r = registry
            .get(&gvk(g, v, k))
            .unwrap_or_else(|| panic!("{k} missing"));
        assert_eq!((r.plural(), r.scope()), (plural, scope), "{k}");
    }
    assert!(
        registry
            .get(&gvk("", "v1", "Secret"))
            .unwrap()
            .is::<Secret>()
    );
    assert!(
        registry
            .get(&gvk("", "v1", "SecretList"))
            .unwrap()
            .is::<ObjectList<Secret>>()
    );
}

#[test]
fn api_resources() {
    let registry = Registry::platform().unwrap();
    let secret = registry.api_resource(&gvk("", "v1", "Secret")).unwrap();
    assert_eq!(secret, ApiResource::erase::<Secret>(&()));
    let list = registry.api_resource(&gvk("", "v1", "SecretList")).unwrap();
    assert_eq!(list, secret, "a list resolves to its items' resource");
    let helm = registry
        .api_resource(&gvk("unikorn-cloud.org", "v1alpha1", "HelmApplication"))
        .unwrap();
    assert_eq!(
        (helm.api_version.as_str(), helm.plural.as_str()),
        ("unikorn-cloud.org/v1alpha1", "helmapplications")
    );
    let fake = registry
        .api_resource(&gvk(
            "unikorn.unikorn-cloud.org",
            "v1alpha1",
            "ManagedResource",
        ))
        .unwrap();
    assert_eq!(fake.plural, "managedresources");
    let argo = registry
        .api_resource(&gvk("argoproj.io", "v1alpha1", "Application"))
        .unwrap();
    assert_eq!(argo.plural, "applications");
    assert_eq!(
        registry.is_namespaced(&gvk("argoproj.io", "v1alpha1", "Application")),
        Some(true)
    );
    assert_eq!(
        registry.is_namespaced(&gvk("", "v1", "Namespace")),
        Some(false)
    );

    let missing = registry
        .api_resource(&gvk("example.com", "v1", "Nope"))
        .unwrap_err();
    assert!(matches!(missing, RegistryError::NotRegistered(_)));
    assert_eq!(
        missing.to_string(),
        "example.com/v1, Kind=Nope is not registered"
    );
    let scale = registry
        .api_resource(&gvk("autoscaling", "v1", "Scale"))
        .unwrap_err();
    assert!(matches!(scale, RegistryError::Subresource(_)), "{scale}");
}

#[test]
fn same_type_again_is_a_no_op() {
    let mut registry = Registry::platform().unwrap();
    let before = registry.len();
    registry.register_with_list::<Secret>().unwrap();
    registry.register::<HelmApplication>().unwrap();
    add_argo_shim(&mut registry).unwrap();
    assert_eq!(registry.len(), before);
}

#[test]
fn another_type_for_a_registered_kind_is_an_error() {
    let mut registry = Registry::platform().unwrap();
    let before = registry.len();
    let error = registry
        .add(Registration::new::<ConfigMap>(
            gvk("", "v1", "Secret"),
            "secrets",
            Scope::Namespaced,
        ))
        .unwrap_err();
    let RegistryError::Conflict(conflict) = &error else {
        panic!("{error}")
    };
    assert_eq!(conflict.gvk, gvk("", "v1", "Secret"));
    assert!(conflict.existing.ends_with("::Secret") && conflict.new.ends_with("::ConfigMap"));
    assert!(
        error
            .to_string()
            .starts_with("v1, Kind=Secret is already registered as"),
        "{error}"
    );
    // Same type with another plural or scope conflicts too.
    assert!(
        registry
            .add(Registration::new::<Secret>(
                gvk("", "v1", "Secret"),
                "secretz",
                Scope::Namespaced
            ))
            .is_err()
    );
    assert!(
        registry
            .add(Registration::new::<Secret>(
                gvk("", "v1", "Secret"),
                "secrets",
                Scope::Cluster
            ))
            .is_err()
    );
    assert_eq!(registry.len(), before);
    assert!(
        registry
            .get(&gvk("", "v1", "Secret"))
            .unwrap()
            .is::<Secret>()
    );
}

#[test]
fn a_list_conflict_rolls_back_its_item() {
    let mut registry = Registry::new();
    registry
        .add(Registration::new::<serde_json::Value>(
            gvk("", "v1", "SecretList"),
            "secrets",
            Scope::Namespaced,
        ))
        .unwrap();
    assert!(registry.register_with_list::<Secret>().is_err());
    assert_eq!(registry.len(), 1);
    assert!(!registry.contains(&gvk("", "v1", "Secret")));
}

#[test]
fn invalid_registrations_are_refused() {
    let mut registry = Registry::new();
    let empty_kind = registry.add(Registration::new::<serde_json::Value>(
        gvk("x.io", "v1", ""),
        "xs",
        Scope::Cluster,
    ));
    assert!(matches!(empty_kind, Err(RegistryError::Invalid { .. })));
    let empty_plural = registry.add(Registration::new::<serde_json::Value>(
        gvk("x.io", "v1", "X"),
        "",
        Scope::Cluster,
    ));
    assert!(matches!(empty_plural, Err(RegistryError::Invalid { .. })));
    assert!(registry.is_empty());
}

#[test]
fn first_failing_addition_stops_the_build() {
    let third_ran = Cell::new(false);
    type Adder<'a> = Box<dyn FnOnce(&mut Registry) -> Result<(), RegistryError> + 'a>;
    let additions: Vec<Adder<'_>> = vec![
        Box::new(widget),
        Box::new(|r: &mut Registry| {
            r.add(Registration::new::<ConfigMap>(
                gvk("", "v1", "Namespace"),
                "namespaces",
                Scope::Cluster,
            ))
        }),
        Box::new(|_: &mut Registry| {
            third_ran.set(true);
            Ok(())
        }),
    ];
    let error = platform_registry(additions).unwrap_err();
    let RegistryError::Addition { index, source } = &error else {
        panic!("{error}")
    };
    assert_eq!(*index, 1);
    assert!(matches!(**source, RegistryError::Conflict(_)));
    assert_eq!(error.to_string(), "registry addition #1 failed");
    assert!(
        source.to_string().contains("v1, Kind=Namespace"),
        "{source}"
    );
    assert!(
        !third_ran.get(),
        "additions after the failing one must not run"
    );

    // Boxed additions of the public alias type work too.
    let ok: Vec<Addition> = vec![Box::new(widget), Box::new(|_: &mut Registry| Ok(()))];
    assert!(
        platform_registry(ok)
            .unwrap()
            .contains(&gvk("example.com", "v1", "Widget"))
    );
}

fn secret() -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some("s".into()),
            namespace: Some("ns".into()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        string_data: Some([("a".to_owned(), "b".to_owned())].into()),
        ..Secret::default()
    }
}

#[test]
fn encode_and_decode_built_ins() {
    let registry = Registry::platform().unwrap();
    let dynamic = registry.encode(&secret()).unwrap();
    assert_eq!(
        dynamic.types,
        Some(TypeMeta {
            api_version: "v1".into(),
            kind: "Secret".into()
        })
    );
    assert_eq!(dynamic.data["type"], "kubernetes.io/tls");
    assert_eq!(dynamic.metadata.name.as_deref(), Some("s"));

    assert_eq!(registry.decode::<Secret>(&dynamic).unwrap(), secret());
    let any = registry.decode_any(&dynamic).unwrap();
    assert_eq!(any.gvk(), &gvk("", "v1", "Secret"));
    assert!(any.is::<Secret>());
    assert_eq!(any.downcast::<Secret>().unwrap(), secret());

    let mismatch = registry.decode::<ConfigMap>(&dynamic).unwrap_err();
    assert!(
        matches!(mismatch, DecodeError::TypeMismatch { .. }),
        "{mismatch}"
    );
    assert!(
        mismatch
            .to_string()
            .starts_with("v1, Kind=Secret is registered as"),
        "{mismatch}"
    );
}

#[test]
fn decode_errors_name_the_problem() {
    let registry = Registry::platform().unwrap();
    let mut untyped = registry.encode(&secret()).unwrap();
    untyped.types = None;
    assert!(matches!(
        registry.decode_any(&untyped),
        Err(DecodeError::MissingTypeMeta)
    ));

    let unknown =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    let error = registry.decode_value_any(unknown).unwrap_err();
    assert_eq!(
        error.to_string(),
        "example.com/v1, Kind=Widget is not registered"
    );

    let bad_version = json!({"apiVersion": "a/b/c", "kind": "X"});
    assert!(matches!(
        registry.decode_value_any(bad_version),
        Err(DecodeError::InvalidApiVersion(_))
    ));

    let wrong_shape =
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": 5}});
    let error = registry.decode_value::<Secret>(wrong_shape).unwrap_err();
    assert!(matches!(error, DecodeError::Deserialize { .. }));
    assert!(
        error
            .to_string()
            .starts_with("cannot decode v1, Kind=Secret as"),
        "{error}"
    );
}

#[test]
fn encode_requires_the_registered_type() {
    let registry = Registry::new();
    let error = registry.encode(&secret()).unwrap_err();
    assert!(matches!(error, EncodeError::NotRegistered(_)));
    assert_eq!(error.to_string(), "v1, Kind=Secret is not registered");

    let mut registry = Registry::new();
    registry
        .add(Registration::new::<serde_json::Value>(
            gvk("", "v1", "Secret"),
            "secrets",
            Scope::Namespaced,
        ))
        .unwrap();
    assert!(matches!(
        registry.encode(&secret()),
        Err(EncodeError::TypeMismatch { .. })
    ));
}

#[test]
fn platform_types_through_dynamic_objects() {
    let registry = Registry::platform().unwrap();
    let mut helm = HelmApplication::new(
        "app",
        HelmApplicationSpec {
            tags: Default::default(),
            documentation: "d".into(),
            license: "l".into(),
            icon: k8s_openapi::ByteString(vec![1, 2, 3]),
            versions: vec![HelmApplicationVersion::chart(
                "r",
                "c",
                SemanticVersion::parse("v1.0").unwrap(),
            )],
        },
    );
    helm.status = Some(Default::default());
    let dynamic = registry.encode(&helm).unwrap();
    assert_eq!(dynamic.data["spec"]["versions"][0]["version"], "v1.0");
    assert_eq!(registry.decode::<HelmApplication>(&dynamic).unwrap(), helm);

    let fake = ManagedResource::new("m");
    let dynamic = registry.encode(&fake).unwrap();
    assert_eq!(
        registry
            .decode_any(&dynamic)
            .unwrap()
            .downcast::<ManagedResource>()
            .unwrap(),
        fake
    );

    let mut app = Application::new("a", Default::default());
    app.spec.project = "default".into();
    let dynamic = registry.encode(&app).unwrap();
    assert_eq!(
        dynamic.types.as_ref().unwrap().api_version,
        "argoproj.io/v1alpha1"
    );
    assert_eq!(registry.decode::<Application>(&dynamic).unwrap(), app);

    // Lists decode into ObjectList of their items.
    let list = json!({
        "apiVersion": "v1",
        "kind": "NamespaceList",
        "metadata": {"resourceVersion": "7"},
        "items": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}],
    });
    let decoded = registry
        .decode_value_any(list)
        .unwrap()
        .downcast::<ObjectList<Namespace>>()
        .unwrap();
    assert_eq!(decoded.items[0].metadata.name.as_deref(), Some("a"));
    assert_eq!(decoded.metadata.resource_version.as_deref(), Some("7"));
}
