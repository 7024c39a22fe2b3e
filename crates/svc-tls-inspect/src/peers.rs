//! Each configured peer: the peer client the service builds
//! (`PeerTls::from_options` with the peer's flags and the identity it presents),
//! then a real handshake with that client's configuration.

use svc_tls::options::{IdentityConfig, PeerOptions};
use svc_tls::{ClusterClient, PeerTls};

use crate::checks::IdentityCheck;
use crate::checks::{peer, problem};
use crate::cli::Plan;
use crate::report::{Category, PeerReport, Problem, Report};

/// Tries every configured peer and records the results.
pub(crate) async fn handshakes(
    plan: &Plan,
    client: &ClusterClient,
    identities: &[IdentityCheck],
    report: &mut Report,
) {
    for options in plan.peers.iter().filter(|p| p.is_configured()) {
        let result = one(plan, client, options, identities).await;
        if !result.ok && !result.skipped {
            report.fail(Category::Peer);
        }
        report.peers.push(result);
    }
}

/// The identity a peer presents: the one prefixed with the peer's name when its
/// flags are set (as the example's audit peer), else the unprefixed one.
fn identity_for<'a>(
    options: &PeerOptions,
    identities: &'a [IdentityCheck],
) -> Option<&'a IdentityCheck> {
    identities
        .iter()
        .find(|c| c.options.prefix() == Some(options.service()))
        .or_else(|| identities.iter().find(|c| c.options.prefix().is_none()))
}

async fn one(
    plan: &Plan,
    client: &ClusterClient,
    options: &PeerOptions,
    identities: &[IdentityCheck],
) -> PeerReport {
    let identity = identity_for(options, identities);
    let mut report = PeerReport {
        service: options.service().to_owned(),
        host: options.host_value().unwrap_or_default().to_owned(),
        identity: identity.map_or_else(|| "none".to_owned(), |c| c.label.clone()),
        trust: trust_label(options, identity),
        ..PeerReport::default()
    };
    let url = match options.require_host() {
        Ok(url) => url,
        Err(error) => {
            report.error = Some(problem(&error, &error));
            return report;
        }
    };
    if url.scheme() != "https" {
        report.skipped = true;
        report.error = Some(Problem {
            kind: "Plaintext".to_owned(),
            message: format!("{url} is not https: no TLS to inspect"),
        });
        return report;
    }
    if let Some(identity) = identity.filter(|c| !c.starts) {
        report.skipped = true;
        report.error = Some(Problem {
            kind: "IdentityUnusable".to_owned(),
            message: format!(
                "the service would not start with {}: see its report",
                identity.label
            ),
        });
        return report;
    }
    let fallback = svc_tls::ClientIdentityOptions::new(None);
    let identity_options = identity.map_or(&fallback, |c| &c.options);
    let tls = match PeerTls::from_options(client, options, identity_options, plan.timeout).await {
        Ok(tls) => tls,
        Err(error) => {
            report.error = Some(problem(&error, &svc_tls::excerpt::chain(&error)));
            return report;
        }
    };
    let config = match tls.config() {
        Ok(config) => config,
        Err(error) => {
            report.error = Some(problem(&error, &error));
            return report;
        }
    };
    peer::handshake(config, &url, plan.timeout, &mut report).await;
    report
}

fn trust_label(options: &PeerOptions, identity: Option<&IdentityCheck>) -> String {
    if let Some(IdentityConfig::Spiffe { server_id }) = identity.map(|c| &c.config) {
        return format!("spiffe {server_id}");
    }
    match options.ca_secret() {
        Ok(Some(ca)) => format!("ca-secret {ca}"),
        _ => "platform".to_owned(),
    }
}
