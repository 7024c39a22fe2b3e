//! One Secret as the service would read it: its shape (type, data keys and sizes),
//! its certificates described, and the verdict of svc-tls's own loaders
//! (`load_identity` for a client identity, `load_trust_detailed` for a CA), so the
//! error kinds are the service's.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls_pki_types::CertificateDer;
use svc_tls::SecretRef;
use svc_tls::material::{
    CA_CRT, Identity, IdentityCache, MaterialError, MaterialErrorKind, TLS_CRT, TLS_KEY,
    load_identity, load_trust_detailed,
};

use super::cert::{describe_all, pem_certificates};
use super::problem;
use crate::report::{DataKey, Problem, SecretReport};

/// What a Secret is to the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A client identity (`--[P-]client-certificate-*`).
    Identity,
    /// A peer's CA (`--S-ca-secret-*`).
    PeerCa,
    /// The CA the chain check verifies against (`--chain-ca-secret`).
    ChainCa,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::PeerCa => "peer-ca",
            Self::ChainCa => "chain-ca",
        }
    }
}

/// A Secret inspected: the report, and what the loaders produced for the checks
/// that follow.
#[derive(Debug)]
pub struct Inspected {
    /// What is printed.
    pub report: SecretReport,
    /// The identity, when `load_identity` accepted it.
    pub identity: Option<Identity>,
    /// The roots, when `load_trust_detailed` accepted it.
    pub roots: Option<RootCertStore>,
    /// The certificates of `tls.crt` (leaf first), whatever the loader said.
    pub chain: Vec<CertificateDer<'static>>,
}

/// Reads `secret` through `client` (waiting at most `timeout`) and inspects it in
/// its `role`.
pub async fn inspect(
    client: &kube::Client,
    secret: &SecretRef,
    (role, named_by): (Role, &str),
    provider: &Arc<CryptoProvider>,
    timeout: Duration,
) -> Inspected {
    let mut report = SecretReport {
        role: role.name().to_owned(),
        named_by: named_by.to_owned(),
        namespace: secret.namespace.clone(),
        name: secret.name.clone(),
        ..SecretReport::default()
    };
    let api: Api<Secret> = Api::namespaced(client.clone(), &secret.namespace);
    let read = tokio::time::timeout(timeout, api.get_opt(&secret.name)).await;
    let object = match read {
        Err(_) => {
            report.loader_error = Some(Problem {
                kind: "ReadFailed".to_owned(),
                message: format!("Secret {secret} cannot be read: no answer within {timeout:?}"),
            });
            return unloaded(report);
        }
        Ok(Ok(Some(object))) => object,
        Ok(Ok(None)) => {
            report.loader_error = Some(Problem {
                kind: "NotFound".to_owned(),
                message: format!("Secret {secret} not found"),
            });
            return unloaded(report);
        }
        Ok(Err(error)) => {
            report.loader_error = Some(Problem {
                kind: "ReadFailed".to_owned(),
                message: format!(
                    "Secret {secret} cannot be read: {}",
                    svc_tls::excerpt::chain(&error)
                ),
            });
            return unloaded(report);
        }
    };
    inspect_object(&object, report, role, provider)
}

/// Inspects a Secret already read.
pub fn inspect_object(
    object: &Secret,
    mut report: SecretReport,
    role: Role,
    provider: &Arc<CryptoProvider>,
) -> Inspected {
    report.found = true;
    report.secret_type = object.type_.clone();
    let data = object.data.clone().unwrap_or_default();
    report.data = data
        .iter()
        .map(|(key, value)| DataKey {
            key: key.clone(),
            bytes: value.0.len(),
        })
        .collect();
    report.private_key_entries = super::keys::entries(
        data.iter()
            .map(|(key, value)| (key.as_str(), value.0.as_slice())),
        object.metadata.annotations.as_ref(),
        (role == Role::Identity).then_some(TLS_KEY),
    );
    let chain = data
        .get(TLS_CRT)
        .map(|v| pem_certificates(&v.0))
        .unwrap_or_default();
    report.certificates = describe_all(&chain);
    if let Some(ca) = data.get(CA_CRT) {
        report.ca_certificates = describe_all(&pem_certificates(&ca.0));
    }
    let mut inspected = Inspected {
        report,
        identity: None,
        roots: None,
        chain,
    };
    match role {
        Role::Identity => load_as_identity(object, &mut inspected, provider),
        Role::PeerCa | Role::ChainCa => match load_trust_detailed(object) {
            Ok(trust) => {
                inspected.report.roots = Some(trust.len());
                inspected.roots = Some((**trust.roots()).clone());
            }
            Err(error) => inspected.report.loader_error = Some(material_problem(&error)),
        },
    }
    inspected
}

fn load_as_identity(object: &Secret, inspected: &mut Inspected, provider: &Arc<CryptoProvider>) {
    let report = &mut inspected.report;
    match load_identity(object, provider) {
        Ok(identity) => {
            report.loaded_key_type = Some(identity.key_kind().to_string());
            report.key_matches_certificate = Some(true);
            inspected.identity = Some(identity);
        }
        Err(error) => {
            report.key_matches_certificate = match error.kind() {
                MaterialErrorKind::KeyMismatch { .. } => Some(false),
                _ => None,
            };
            if matches!(
                error.kind(),
                MaterialErrorKind::CertificateExpired { .. }
                    | MaterialErrorKind::CertificateNotYetValid { .. }
            ) {
                // The service starts with such a leaf (and says so): what its start-up
                // load finds about the key is known.
                let cache = IdentityCache::new(provider.clone());
                if let Ok(identity) = cache.load_ignoring_validity(object) {
                    report.loaded_key_type = Some(identity.key_kind().to_string());
                    report.key_matches_certificate = Some(true);
                }
            }
            report.loader_error = Some(material_problem(&error));
        }
    }
}

/// The loader's error as a [`Problem`]: its kind's variant name and its message
/// (svc-tls's messages are fixed texts and never contain key material).
pub fn material_problem(error: &MaterialError) -> Problem {
    problem(error.kind(), error)
}

fn unloaded(report: SecretReport) -> Inspected {
    Inspected {
        report,
        identity: None,
        roots: None,
        chain: Vec::new(),
    }
}
