//! A peer's CA ConfigMap (`--S-ca-configmap-*`, e.g. a trust-manager Bundle
//! target) as the service would read it: its keys and sizes, the certificates of
//! the bundle under its key, and the verdict of svc-tls's own loader
//! (`load_configmap_trust`), so the error kinds are the service's.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use svc_tls::material::{configmap_value, load_configmap_trust};
use svc_tls::origin::ConfigMapRef;

use super::cert::{describe_all, pem_certificates};
use super::problem;
use crate::report::{ConfigMapReport, DataKey, Problem};

/// Reads `configmap` through `client` (waiting at most `timeout`) and loads the
/// bundle under `key` as the service's peer client would.
pub async fn inspect(
    client: &kube::Client,
    configmap: &ConfigMapRef,
    key: &str,
    named_by: &str,
    timeout: Duration,
) -> ConfigMapReport {
    let mut report = ConfigMapReport {
        role: "peer-ca".to_owned(),
        named_by: named_by.to_owned(),
        namespace: configmap.namespace.clone(),
        name: configmap.name.clone(),
        key: key.to_owned(),
        ..ConfigMapReport::default()
    };
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &configmap.namespace);
    let object = match tokio::time::timeout(timeout, api.get_opt(&configmap.name)).await {
        Err(_) => {
            report.loader_error = Some(Problem {
                kind: "ReadFailed".to_owned(),
                message: format!(
                    "ConfigMap {configmap} cannot be read: no answer within {timeout:?}"
                ),
            });
            return report;
        }
        Ok(Ok(Some(object))) => object,
        Ok(Ok(None)) => {
            report.loader_error = Some(Problem {
                kind: "NotFound".to_owned(),
                message: format!(
                    "CA ConfigMap {configmap} key {key}: the ConfigMap does not exist"
                ),
            });
            return report;
        }
        Ok(Err(error)) => {
            report.loader_error = Some(Problem {
                kind: "ReadFailed".to_owned(),
                message: format!(
                    "ConfigMap {configmap} cannot be read: {}",
                    svc_tls::excerpt::chain(&error)
                ),
            });
            return report;
        }
    };
    inspect_object(&object, report)
}

/// Inspects a ConfigMap already read.
pub fn inspect_object(object: &ConfigMap, mut report: ConfigMapReport) -> ConfigMapReport {
    report.found = true;
    let text = object.data.iter().flatten().map(|(k, v)| (k, v.as_bytes()));
    let binary = object
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k, v.0.as_slice()));
    let entries: Vec<(&String, &[u8])> = text.chain(binary).collect();
    report.data = entries
        .iter()
        .map(|(key, value)| DataKey {
            key: (*key).clone(),
            bytes: value.len(),
        })
        .collect();
    report.private_key_entries =
        super::keys::entries(entries.iter().map(|(k, v)| (k.as_str(), *v)), None, None);
    if let Some(value) = configmap_value(object, &report.key) {
        report.certificates = describe_all(&pem_certificates(value));
    }
    match load_configmap_trust(object, &report.key) {
        Ok(trust) => {
            report.roots = Some(trust.len());
            report.ignored_certificates = Some(trust.ignored());
        }
        Err(error) => report.loader_error = Some(problem(&error.problem, &error)),
    }
    report
}
