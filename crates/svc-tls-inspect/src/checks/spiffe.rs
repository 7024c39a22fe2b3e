//! SPIFFE mode: what the agent hands out. The default SVID goes through svc-tls's
//! own start-up (`WorkloadApiSource::connect`, the loader the service uses, so its
//! errors are the service's); every SVID and every trust domain's bundle is listed
//! from one `FetchX509Context` answer.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls::crypto::CryptoProvider;
use spiffe::workload_api::WorkloadApiClient;
use svc_tls::material::{CertificateValidity, Identity};
use svc_tls::spiffe::{SpiffeEndpoint, SpiffeStartError, WorkloadApiSource};

use super::cert::describe;
use super::problem;
use crate::report::{BundleReport, Category, Problem, SpiffeReport, SvidReport};

/// What the SPIFFE check found, and the identity for the checks that follow.
#[derive(Debug)]
pub struct Inspected {
    /// What is printed.
    pub report: SpiffeReport,
    /// The default SVID, when the service's loader accepted it and it is valid now.
    pub identity: Option<Identity>,
    /// The failed check's category, if one failed.
    pub failed: Option<Category>,
}

/// Asks the Workload API in `SPIFFE_ENDPOINT_SOCKET`, as the service would.
pub async fn inspect(
    label: &str,
    server_id: Option<String>,
    provider: &Arc<CryptoProvider>,
    timeout: Duration,
) -> Inspected {
    let mut inspected = Inspected {
        report: SpiffeReport {
            identity: label.to_owned(),
            server_id,
            ..SpiffeReport::default()
        },
        identity: None,
        failed: None,
    };
    let endpoint = match SpiffeEndpoint::from_env() {
        Ok(endpoint) => endpoint,
        Err(error) => {
            inspected.report.error = Some(problem(&error, &error));
            inspected.failed = Some(Category::Environment);
            return inspected;
        }
    };
    inspected.report.endpoint = endpoint.as_str().to_owned();
    match WorkloadApiSource::connect(endpoint.clone(), provider.clone(), timeout).await {
        Ok(source) => match source.svid() {
            Some(Ok(identity)) => judge_validity(identity, &mut inspected),
            Some(Err(error)) => {
                inspected.report.loader_error = Some(problem(error.kind(), &error));
                inspected.failed = Some(Category::Secret);
            }
            None => {
                inspected.report.loader_error = Some(Problem {
                    kind: "NoSvid".to_owned(),
                    message: "the Workload API sent no X509-SVID".to_owned(),
                });
                inspected.failed = Some(Category::Secret);
            }
        },
        Err(error) => {
            let (problem, category) = start_problem(&error);
            inspected.report.loader_error = Some(problem);
            inspected.failed = Some(category);
            return inspected;
        }
    }
    list(&endpoint, &mut inspected.report, timeout).await;
    inspected
}

fn judge_validity(identity: Identity, inspected: &mut Inspected) {
    let kind = match CertificateValidity::of(&identity, SystemTime::now()) {
        CertificateValidity::Valid => {
            inspected.identity = Some(identity);
            return;
        }
        CertificateValidity::Expired { .. } => "CertificateExpired",
        CertificateValidity::NotYetValid { .. } => "CertificateNotYetValid",
    };
    let validity = CertificateValidity::of(&identity, SystemTime::now());
    inspected.report.loader_error = Some(Problem {
        kind: kind.to_owned(),
        message: format!(
            "the X509-SVID {}: {validity}",
            identity.spiffe_id().unwrap_or_default()
        ),
    });
    inspected.failed = Some(Category::Secret);
}

/// The start-up error as the service reports it: an unusable SVID by its material
/// kind (a Secret-like failure), the agent unreachable as the environment.
fn start_problem(error: &SpiffeStartError) -> (Problem, Category) {
    match error {
        SpiffeStartError::InvalidSvid { error: svid, .. } => {
            (problem(svid.kind(), error), Category::Secret)
        }
        SpiffeStartError::NoIdentityIssued { .. } => (problem(error, error), Category::Secret),
        other => (problem(other, other), Category::Environment),
    }
}

/// Every SVID and bundle of one `FetchX509Context` answer.
async fn list(endpoint: &SpiffeEndpoint, report: &mut SpiffeReport, timeout: Duration) {
    let fetched = tokio::time::timeout(timeout, async {
        let client = WorkloadApiClient::connect_to(endpoint.as_str()).await?;
        client.fetch_x509_context().await
    })
    .await;
    let context = match fetched {
        Ok(Ok(context)) => context,
        Ok(Err(error)) => {
            report.error = Some(problem(&error, &error));
            return;
        }
        Err(_) => {
            report.error = Some(Problem {
                kind: "Timeout".to_owned(),
                message: format!(
                    "no X.509 context from {} within {timeout:?}",
                    endpoint.as_str()
                ),
            });
            return;
        }
    };
    report.svids = context
        .svids()
        .iter()
        .map(|svid| SvidReport {
            spiffe_id: svid.spiffe_id().to_string(),
            certificates: svid
                .cert_chain()
                .iter()
                .filter_map(|c| describe(c.as_bytes()))
                .collect(),
        })
        .collect();
    let mut bundles: Vec<BundleReport> = context
        .bundle_set()
        .iter()
        .map(|(trust_domain, bundle)| BundleReport {
            trust_domain: trust_domain.to_string(),
            authorities: bundle
                .authorities()
                .iter()
                .filter_map(|c| describe(c.as_bytes()))
                .collect(),
        })
        .collect();
    bundles.sort_by(|a, b| a.trust_domain.cmp(&b.trust_domain));
    report.bundles = bundles;
}
