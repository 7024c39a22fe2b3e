//! The checks in order, into one [`Report`]: the identities (a Secret through the
//! service's loader, or the SPIFFE Workload API), the peers' CA Secrets and CA
//! ConfigMaps, the chain
//! to the chain CA, each peer's handshake ([`crate::peers`]), and a principal.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use svc_tls::ClusterClient;
use svc_tls::options::{ClientIdentityOptions, IdentityConfig, PeerCa};
use svc_tls::principal::Url;

use crate::checks::chain::{self, ChainCa};
use crate::checks::secret::{self, Role};
use crate::checks::{IdentityCheck, cert, configmap, principal, problem, spiffe};
use crate::cli::{ChainCaFlag, Plan};
use crate::report::{Category, Problem, Report};

/// Runs every check the plan asks for.
pub async fn inspect(plan: &Plan) -> Report {
    let mut report = Report {
        ignored_flags: plan.ignored_flags.clone(),
        ..Report::default()
    };
    let provider = Arc::new(svc_tls::material::crypto_provider());
    let chain_file = match &plan.chain_ca {
        Some(ChainCaFlag::File(path)) => match std::fs::read(path) {
            Ok(pem) => Some(ca_from_pem(&format!("file {}", path.display()), &pem)),
            Err(error) => {
                report.error = Some(Problem {
                    kind: "ChainCaFileUnreadable".to_owned(),
                    message: format!("--chain-ca-file={}: {error}", path.display()),
                });
                report.fail(Category::Flags);
                report.settle();
                return report;
            }
        },
        _ => None,
    };
    let client = if needs_kubernetes(plan) {
        match kubernetes(plan).await {
            Ok(client) => Some(client),
            Err(problem) => {
                report.error = Some(problem);
                report.fail(Category::Environment);
                report.settle();
                return report;
            }
        }
    } else {
        None
    };
    let kube = client.as_ref().map(ClusterClient::kube);
    let mut identities = Vec::new();
    for options in &plan.identities {
        if let Some(check) = identity(options, kube, plan, &provider, &mut report).await {
            identities.push(check);
        }
    }
    for peer in plan.peers.iter().filter(|p| p.is_configured()) {
        let Some(kube) = kube else { break };
        match peer.ca() {
            Ok(PeerCa::Secret(ca)) => {
                let named_by = format!("--{}-ca-secret-namespace/-name", peer.service());
                let inspected = secret::inspect(
                    kube,
                    &ca,
                    (Role::PeerCa, &named_by),
                    &provider,
                    plan.timeout,
                )
                .await;
                record(&mut report, inspected.report);
            }
            Ok(PeerCa::ConfigMap { configmap, key }) => {
                let named_by = format!("--{}-ca-configmap-namespace/-name/-key", peer.service());
                let inspected =
                    configmap::inspect(kube, &configmap, &key, &named_by, plan.timeout).await;
                if inspected.loader_error.is_some() {
                    report.fail(Category::Secret);
                }
                report.configmaps.push(inspected);
            }
            // The platform's trust store (nothing to read), or flags svc-tls refuses
            // (the peer's client reports the error).
            _ => {}
        }
    }
    let chain_ca = match (&plan.chain_ca, kube) {
        (Some(ChainCaFlag::Secret(ca)), Some(kube)) => {
            let inspected = secret::inspect(
                kube,
                ca,
                (Role::ChainCa, "--chain-ca-secret"),
                &provider,
                plan.timeout,
            )
            .await;
            let subjects = inspected
                .report
                .certificates
                .iter()
                .chain(&inspected.report.ca_certificates)
                .map(|c| c.subject.clone())
                .collect();
            let roots = inspected.roots.clone();
            record(&mut report, inspected.report);
            roots.map(|roots| ChainCa {
                label: format!("secret {ca}"),
                roots,
                subjects,
            })
        }
        _ => chain_file,
    };
    if let Some(ca) = &chain_ca {
        for check in identities.iter().filter(|c| !c.chain.is_empty()) {
            let result = chain::check(&check.label, &check.chain, ca, &provider);
            if !result.ok {
                report.fail(Category::Chain);
            }
            report.chains.push(result);
        }
    }
    if let Some(client) = &client {
        crate::peers::handshakes(plan, client, &identities, &mut report).await;
    }
    principal_check(plan, &identities, &mut report);
    report.settle();
    report
}

/// Reads one identity's source and records its report.
async fn identity(
    options: &ClientIdentityOptions,
    kube: Option<&kube::Client>,
    plan: &Plan,
    provider: &Arc<CryptoProvider>,
    report: &mut Report,
) -> Option<IdentityCheck> {
    let prefix = options
        .prefix()
        .map(|p| format!("{p}-"))
        .unwrap_or_default();
    let label = format!("{prefix}client-certificate");
    let config = options.config().ok()?;
    let mut check = IdentityCheck {
        label,
        options: options.clone(),
        config: config.clone(),
        loaded: None,
        starts: false,
        chain: Vec::new(),
    };
    match &config {
        IdentityConfig::None => return None,
        IdentityConfig::Secret(reference) => {
            let kube = kube?;
            let named_by = format!("--{prefix}client-certificate-namespace/-name");
            let inspected = secret::inspect(
                kube,
                reference,
                (Role::Identity, &named_by),
                provider,
                plan.timeout,
            )
            .await;
            check.starts = inspected.identity.is_some()
                || inspected.report.key_matches_certificate == Some(true);
            check.loaded = inspected.identity;
            check.chain = inspected.chain;
            record(report, inspected.report);
        }
        IdentityConfig::Spiffe { server_id } => {
            let inspected = spiffe::inspect(
                &check.label,
                Some(server_id.to_string()),
                provider,
                plan.timeout,
            )
            .await;
            if let Some(category) = inspected.failed {
                report.fail(category);
            }
            check.starts = inspected.identity.is_some();
            check.chain = inspected
                .identity
                .as_ref()
                .map(|i| i.chain().to_vec())
                .unwrap_or_default();
            check.loaded = inspected.identity;
            report.spiffe = Some(inspected.report);
        }
        IdentityConfig::Files { dir, layout } => {
            // Read once, as the service's file source reads it (one `..data` version,
            // the key matched to the certificate), and each file described.
            let named_by = format!("--{prefix}client-certificate-dir/-layout");
            let (files, identity) = crate::checks::files::inspect(dir, layout, &named_by);
            match identity {
                Some(identity) => {
                    check.starts = true;
                    check.chain = identity.chain().to_vec();
                    check.loaded = Some(identity);
                }
                None => {
                    let message = files
                        .loader_error
                        .as_ref()
                        .map(|p| p.message.clone())
                        .unwrap_or_default();
                    report.error.get_or_insert(Problem {
                        kind: "IdentityFiles".to_owned(),
                        message,
                    });
                    report.fail(Category::Secret);
                }
            }
            report.files.push(files);
        }
    }
    Some(check)
}

/// Adds a Secret's report, failing the Secret category when it did not load.
fn record(report: &mut Report, secret: crate::report::SecretReport) {
    if secret.loader_error.is_some() {
        report.fail(Category::Secret);
    }
    report.secrets.push(secret);
}

fn principal_check(plan: &Plan, identities: &[IdentityCheck], report: &mut Report) {
    let Some((label, identity)) = identities
        .iter()
        .find_map(|c| c.loaded.as_ref().map(|i| (&c.label, i)))
    else {
        return;
    };
    let audience = plan
        .peers
        .iter()
        .find_map(|p| p.host().ok().flatten())
        .filter(|url| url.scheme() == "https")
        .or_else(|| Url::parse(principal::PLACEHOLDER_AUDIENCE).ok());
    let Some(audience) = audience else {
        return;
    };
    let result = principal::check(label, identity, &audience, plan.principal_policy);
    if !result.verified {
        report.fail(Category::Principal);
    }
    report.principal = Some(result);
}

fn needs_kubernetes(plan: &Plan) -> bool {
    plan.identities
        .iter()
        .any(|i| matches!(i.config(), Ok(IdentityConfig::Secret(_))))
        || plan.peers.iter().any(|p| p.is_configured())
        || matches!(plan.chain_ca, Some(ChainCaFlag::Secret(_)))
}

async fn kubernetes(plan: &Plan) -> Result<ClusterClient, Problem> {
    let resolved = plan.kube.resolve().await.map_err(|e| problem(&e, &e))?;
    ClusterClient::try_from_config(resolved.config).map_err(|e| Problem {
        kind: "KubeClient".to_owned(),
        message: format!("cannot build the Kubernetes client: {e}"),
    })
}

fn ca_from_pem(label: &str, pem: &[u8]) -> ChainCa {
    let certs = cert::pem_certificates(pem);
    let subjects = certs.iter().map(|c| cert::subject_of(c)).collect();
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(certs);
    ChainCa {
        label: label.to_owned(),
        roots,
        subjects,
    }
}
