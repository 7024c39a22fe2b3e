//! HelmApplication (group `unikorn-cloud.org`, version `v1alpha1`).

use k8s_openapi::ByteString;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceSubresources, JSONSchemaProps,
};
use kube::core::{CustomResourceExt, ObjectList};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::values::{SemanticVersion, SemanticVersionConstraints, TagList};

/// The specification of a HelmApplication.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "unikorn-cloud.org",
    version = "v1alpha1",
    kind = "HelmApplication",
    namespaced,
    status = "HelmApplicationStatus",
    category = "unikorn",
    derive = "PartialEq",
    doc = "HelmApplication defines a Helm application.",
    printcolumn(
        name = "display name",
        type_ = "string",
        json_path = ".metadata.labels['unikorn-cloud\\.org/name']"
    ),
    printcolumn(
        name = "age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct HelmApplicationSpec {
    /// Tags are arbitrary user data.
    #[serde(default, skip_serializing_if = "TagList::is_empty")]
    pub tags: TagList,
    /// Documentation defines a URL to 3rd party documentation.
    pub documentation: String,
    /// License describes the licence the application is released under.
    pub license: String,
    /// Icon is a base64 encoded icon for the application.
    #[schemars(schema_with = "super::schema::bytes")]
    pub icon: ByteString,
    /// Versions are the application versions that are supported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<HelmApplicationVersion>,
}

/// One version of a HelmApplication: exactly one of chart (a Helm repository)
/// and branch (a git repository) is set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("has(self.chart) || has(self.branch)").message("either chart or branch must be specified"),
    validation = Rule::new("!(has(self.chart) && has(self.branch))").message("only one of chart or branch may be specified"),
)]
#[serde(rename_all = "camelCase")]
pub struct HelmApplicationVersion {
    /// Repo is either a Helm chart repository, or git repository.
    pub repo: String,
    /// Chart is the chart name in the repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<String>,
    /// Branch defines the branch name if the repo is a git repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Path is the path if the repo is a git repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Version is the chart version, but must also be set for Git based
    /// repositories. This value must be a semantic version.
    pub version: SemanticVersion,
    /// Release is the explicit release name for when chart resource names are
    /// dynamic. If not set, uses the application default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// Parameters is a set of static --set parameters to pass to the chart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<HelmApplicationParameter>,
    /// Namespace is the namespace to install the application to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// CreateNamespace indicates whether the chart requires a namespace to be
    /// created by the tooling, rather than the chart itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_namespace: Option<bool>,
    /// ServerSideApply allows you to bypass using kubectl apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_side_apply: Option<bool>,
    /// Dependencies capture hard dependencies on other applications that must
    /// be installed before this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<HelmApplicationDependency>,
    /// Recommends capture soft dependencies on other applications that may be
    /// installed after this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recommends: Vec<HelmApplicationRecommendation>,
}

/// A [`HelmApplicationVersion`] breaks one of the CRD's validation rules (the
/// messages are the CRD's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HelmApplicationVersionError {
    /// Neither `chart` nor `branch` is set.
    #[error("either chart or branch must be specified")]
    NeitherChartNorBranch,
    /// Both `chart` and `branch` are set.
    #[error("only one of chart or branch may be specified")]
    BothChartAndBranch,
}

impl HelmApplicationVersion {
    /// Checks the CRD's chart/branch rules client-side (the API server enforces
    /// them with CEL).
    pub fn validate(&self) -> Result<(), HelmApplicationVersionError> {
        match (&self.chart, &self.branch) {
            (None, None) => Err(HelmApplicationVersionError::NeitherChartNorBranch),
            (Some(_), Some(_)) => Err(HelmApplicationVersionError::BothChartAndBranch),
            _ => Ok(()),
        }
    }

    /// A version from a Helm chart repository.
    pub fn chart(
        repo: impl Into<String>,
        chart: impl Into<String>,
        version: SemanticVersion,
    ) -> Self {
        Self {
            repo: repo.into(),
            chart: Some(chart.into()),
            branch: None,
            path: None,
            version,
            release: None,
            parameters: Vec::new(),
            namespace: None,
            create_namespace: None,
            server_side_apply: None,
            dependencies: Vec::new(),
            recommends: Vec::new(),
        }
    }
}

/// A static `--set` parameter passed to a chart.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct HelmApplicationParameter {
    /// Name is the name of the parameter.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Value is the value of the parameter.
    #[schemars(length(min = 1))]
    pub value: String,
}

/// A hard dependency on another application.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct HelmApplicationDependency {
    /// Name of the application to depend on.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Constraints is a set of versioning constraints that must be met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<SemanticVersionConstraints>,
}

/// A soft dependency on another application.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct HelmApplicationRecommendation {
    /// Name of the application to recommend.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// The status of a HelmApplication: an empty object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct HelmApplicationStatus {}

/// A list of [`HelmApplication`]s (`HelmApplicationList`).
pub type HelmApplicationList = ObjectList<HelmApplication>;

/// The requested version is not defined by an application.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("version {version} not found in application {application:?}")]
pub struct VersionNotFound {
    /// The application's name.
    pub application: String,
    /// The version asked for.
    pub version: SemanticVersion,
}

impl HelmApplication {
    /// The version entry equal (by semantic-version precedence) to `version`.
    pub fn get_version(
        &self,
        version: &SemanticVersion,
    ) -> Result<&HelmApplicationVersion, VersionNotFound> {
        self.spec
            .versions
            .iter()
            .find(|v| &v.version == version)
            .ok_or_else(|| VersionNotFound {
                application: self.metadata.name.clone().unwrap_or_default(),
                version: version.clone(),
            })
    }
}

/// The HelmApplication CRD as the platform ships it.
///
/// Generated from the Rust types by kube's derive, then brought in line with the
/// platform's CRD: no status subresource (`subresources: {}`; `status` is a plain
/// object in the schema), and schema properties are not marked `nullable`
/// (controller-gen does not mark optional fields nullable). As controller-gen writes
/// it for a Go type embedding `metav1.TypeMeta` and `metav1.ObjectMeta`, the names
/// carry `listKind: HelmApplicationList` and the schema describes the top-level
/// `apiVersion` and `kind` (strings, with the Kubernetes descriptions) and `metadata`
/// (`type: object`). Prefer this over `HelmApplication::crd()`.
pub fn helm_application_crd() -> CustomResourceDefinition {
    let mut crd = HelmApplication::crd();
    crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    for version in &mut crd.spec.versions {
        version.subresources = Some(CustomResourceSubresources::default());
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            let mut value = serde_json::to_value(&*schema).unwrap_or_default();
            strip_nullable(&mut value);
            if let Ok(cleaned) = serde_json::from_value(value) {
                *schema = cleaned;
            }
            let properties = schema.properties.get_or_insert_with(Default::default);
            properties.insert(
                "apiVersion".to_owned(),
                string_property(TYPE_META_API_VERSION),
            );
            properties.insert("kind".to_owned(), string_property(TYPE_META_KIND));
            properties.insert(
                "metadata".to_owned(),
                JSONSchemaProps {
                    type_: Some("object".to_owned()),
                    ..JSONSchemaProps::default()
                },
            );
        }
    }
    crd
}

/// The description controller-gen gives `apiVersion` (from `metav1.TypeMeta`).
const TYPE_META_API_VERSION: &str = "APIVersion defines the versioned schema of this representation of an object.
Servers should convert recognized schemas to the latest internal value, and
may reject unrecognized values.
More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";

/// The description controller-gen gives `kind` (from `metav1.TypeMeta`).
const TYPE_META_KIND: &str = "Kind is a string value representing the REST resource this object represents.
Servers may infer this from the endpoint the client submits requests to.
Cannot be updated.
In CamelCase.
More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

fn string_property(description: &str) -> JSONSchemaProps {
    JSONSchemaProps {
        type_: Some("string".to_owned()),
        description: Some(description.to_owned()),
        ..JSONSchemaProps::default()
    }
}

fn strip_nullable(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            if matches!(map.get("nullable"), Some(serde_json::Value::Bool(_))) {
                map.remove("nullable");
            }
            map.values_mut().for_each(strip_nullable);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_nullable),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn crd_matches_the_platform() {
        let crd = serde_json::to_value(helm_application_crd()).unwrap();
        assert_eq!(
            crd["metadata"]["name"],
            "helmapplications.unikorn-cloud.org"
        );
        let spec = &crd["spec"];
        assert_eq!(spec["group"], "unikorn-cloud.org");
        assert_eq!(spec["scope"], "Namespaced");
        assert_eq!(spec["names"]["kind"], "HelmApplication");
        assert_eq!(spec["names"]["plural"], "helmapplications");
        assert_eq!(spec["names"]["singular"], "helmapplication");
        assert_eq!(spec["names"]["categories"], json!(["unikorn"]));
        assert_eq!(spec["names"]["listKind"], "HelmApplicationList");
        let versions = spec["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 1);
        let version = &versions[0];
        assert_eq!(version["name"], "v1alpha1");
        assert_eq!(version["served"], true);
        assert_eq!(version["storage"], true);
        assert_eq!(
            version["additionalPrinterColumns"],
            json!([
                {"name": "display name", "type": "string", "jsonPath": ".metadata.labels['unikorn-cloud\\.org/name']"},
                {"name": "age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            ])
        );
        // No status subresource.
        assert_eq!(version["subresources"], json!({}));

        let schema = &version["schema"]["openAPIV3Schema"];
        assert_eq!(schema["required"], json!(["spec"]));
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["status"]["type"], "object");
        // The top level as controller-gen writes it for metav1.TypeMeta and
        // metav1.ObjectMeta (the descriptions as in the Go repository's
        // charts/core/crds/unikorn-cloud.org_helmapplications.yaml).
        assert_eq!(
            schema["properties"]["apiVersion"],
            json!({
                "type": "string",
                "description": "APIVersion defines the versioned schema of this representation of an object.\nServers should convert recognized schemas to the latest internal value, and\nmay reject unrecognized values.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
            })
        );
        assert_eq!(
            schema["properties"]["kind"],
            json!({
                "type": "string",
                "description": "Kind is a string value representing the REST resource this object represents.\nServers may infer this from the endpoint the client submits requests to.\nCannot be updated.\nIn CamelCase.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
            })
        );
        assert_eq!(schema["properties"]["metadata"], json!({"type": "object"}));
        let mut top: Vec<_> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        top.sort_unstable();
        assert_eq!(top, ["apiVersion", "kind", "metadata", "spec", "status"]);
        let spec_schema = &schema["properties"]["spec"];
        let mut required: Vec<_> = spec_schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        required.sort_unstable();
        assert_eq!(required, ["documentation", "icon", "license"]);
        assert_eq!(
            spec_schema["properties"]["icon"],
            json!({"type": "string", "format": "byte", "description": "Icon is a base64 encoded icon for the application."})
        );
        let item = &spec_schema["properties"]["versions"]["items"];
        assert_eq!(
            item["x-kubernetes-validations"],
            json!([
                {"rule": "has(self.chart) || has(self.branch)", "message": "either chart or branch must be specified"},
                {"rule": "!(has(self.chart) && has(self.branch))", "message": "only one of chart or branch may be specified"},
            ])
        );
        let mut required: Vec<_> = item["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        required.sort_unstable();
        assert_eq!(required, ["repo", "version"]);
        assert_eq!(
            item["properties"]["version"]["pattern"],
            crate::types::values::SEMVER_PATTERN
        );
        assert_eq!(item["properties"]["createNamespace"]["type"], "boolean");
        assert_eq!(
            item["properties"]["parameters"]["items"]["properties"]["value"]["minLength"],
            1
        );
        assert_eq!(
            item["properties"]["dependencies"]["items"]["required"],
            json!(["name"])
        );
        assert_eq!(
            item["properties"]["recommends"]["items"]["properties"]["name"]["minLength"],
            1
        );
        assert!(
            !crd.to_string().contains("\"nullable\""),
            "controller-gen does not mark optional fields nullable"
        );
    }

    #[test]
    fn json_field_names_and_omission() {
        let minimal = HelmApplication::new(
            "cilium",
            HelmApplicationSpec {
                tags: TagList::default(),
                documentation: "https://docs".into(),
                license: "Apache-2.0".into(),
                icon: ByteString(b"<svg/>".to_vec()),
                versions: vec![HelmApplicationVersion::chart(
                    "https://helm.cilium.io",
                    "cilium",
                    SemanticVersion::parse("1.15.0").unwrap(),
                )],
            },
        );
        assert_eq!(
            serde_json::to_value(&minimal).unwrap(),
            json!({
                "apiVersion": "unikorn-cloud.org/v1alpha1",
                "kind": "HelmApplication",
                "metadata": {"name": "cilium"},
                "spec": {
                    "documentation": "https://docs",
                    "license": "Apache-2.0",
                    "icon": "PHN2Zy8+",
                    "versions": [{"repo": "https://helm.cilium.io", "chart": "cilium", "version": "1.15.0"}],
                },
            })
        );
        let found = minimal
            .get_version(&SemanticVersion::parse("v1.15").unwrap())
            .unwrap();
        assert_eq!(found.chart.as_deref(), Some("cilium"));
        let mut version = minimal.spec.versions[0].clone();
        assert_eq!(version.validate(), Ok(()));
        version.branch = Some("main".into());
        let both = version.validate().unwrap_err();
        assert_eq!(
            both.to_string(),
            "only one of chart or branch may be specified"
        );
        version.chart = None;
        assert_eq!(version.validate(), Ok(()));
        version.branch = None;
        let neither = version.validate().unwrap_err();
        assert_eq!(
            neither.to_string(),
            "either chart or branch must be specified"
        );

        let missing = minimal
            .get_version(&SemanticVersion::parse("2.0.0").unwrap())
            .unwrap_err();
        assert_eq!(
            missing.to_string(),
            "version 2.0.0 not found in application \"cilium\""
        );
    }
}
