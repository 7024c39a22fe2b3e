//! The platform's CRDs, from the Rust types that generate them (kube-construct's
//! `helm_application_crd`, the manifest the platform ships; and the legacy Argo CD
//! `Application` shim, which carries no schema of its own and is installed with an
//! open one and, as Argo CD's own CRD, no status subresource), created and awaited
//! until `Established`.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceValidation, JSONSchemaProps,
};
use kube::api::{Api, PostParams};
use kube::core::CustomResourceExt as _;

/// The CRDs installed into every real server.
pub(crate) fn platform_crds() -> Vec<CustomResourceDefinition> {
    let mut argo = kube_construct::types::argo::Application::crd();
    for version in &mut argo.spec.versions {
        version.subresources = None;
        version.schema = Some(CustomResourceValidation {
            open_api_v3_schema: Some(JSONSchemaProps {
                type_: Some("object".to_owned()),
                x_kubernetes_preserve_unknown_fields: Some(true),
                ..JSONSchemaProps::default()
            }),
        });
    }
    vec![kube_construct::types::helm_application_crd(), argo]
}

pub(crate) async fn install(client: &kube::Client) -> Result<(), String> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crds = platform_crds();
    for crd in &crds {
        api.create(&PostParams::default(), crd)
            .await
            .map_err(|e| format!("creating the CRD {:?}: {e}", crd.metadata.name))?;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        loop {
            let current = api
                .get(&name)
                .await
                .map_err(|e| format!("reading the CRD {name}: {e}"))?;
            let established = current
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("the CRD {name} was not Established within 30 s"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}
