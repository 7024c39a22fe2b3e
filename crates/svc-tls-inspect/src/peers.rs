//! Each configured peer: the peer client the service builds
//! (`PeerTls::from_options` with the peer's flags and the identity it presents),
//! then a real handshake with that client's configuration.

use svc_tls::options::{IdentityConfig, PeerCa, PeerOptions};
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

/// Peers that present their own prefixed identity only, never the platform's: the
/// audit collector is outside the platform, and the Go services present it no
/// certificate unless `--audit-client-certificate-*` is set.
const OWN_IDENTITY_ONLY: [&str; 1] = ["audit"];

/// The identity a peer presents: the one prefixed with the peer's name when the
/// service declares it (as the example's audit peer; none when its flags are
/// unset), else the unprefixed one, except for the peers of [`OWN_IDENTITY_ONLY`],
/// which then present none, as Go.
fn identity_for<'a>(
    options: &PeerOptions,
    identities: &'a [IdentityCheck],
) -> Option<&'a IdentityCheck> {
    let own = identities
        .iter()
        .find(|c| c.options.prefix() == Some(options.service()));
    if OWN_IDENTITY_ONLY.contains(&options.service()) {
        return own.filter(|c| !matches!(c.config, IdentityConfig::None));
    }
    own.or_else(|| identities.iter().find(|c| c.options.prefix().is_none()))
}

/// One peer's report, with the host's userinfo (`user:password@`, a credential)
/// redacted wherever it was written: the host and every message.
async fn one(
    plan: &Plan,
    client: &ClusterClient,
    options: &PeerOptions,
    identities: &[IdentityCheck],
) -> PeerReport {
    let mut report = unredacted(plan, client, options, identities).await;
    let secrets = userinfo(options.host_value().unwrap_or_default());
    if !secrets.is_empty() {
        let scrub = |text: &mut String| {
            for secret in &secrets {
                *text = text.replace(secret.as_str(), REDACTED);
            }
        };
        scrub(&mut report.host);
        if let Some(problem) = &mut report.error {
            scrub(&mut problem.message);
        }
    }
    report
}

/// What replaces a host's userinfo.
const REDACTED: &str = "REDACTED@";

/// The userinfo of a host value with its `@`, as written (`user:password@`, up to
/// the authority's last `@`) and as the URL parser serializes it (percent-encoded);
/// empty when there is none. Replacing `userinfo@` (never a bare user name) leaves
/// the rest of a message alone.
fn userinfo(host: &str) -> Vec<String> {
    let rest = host.split_once("://").map_or(host, |(_, rest)| rest);
    let authority = rest.find(['/', '?', '#']).map_or(rest, |end| &rest[..end]);
    let Some((raw, _)) = authority.rsplit_once('@') else {
        return Vec::new();
    };
    let mut found = vec![format!("{raw}@")];
    if let Ok(url) = url::Url::parse(host) {
        found.push(match url.password() {
            Some(password) => format!("{}:{password}@", url.username()),
            None => format!("{}@", url.username()),
        });
    }
    found.retain(|s| s != "@");
    found.sort_by_key(|s| std::cmp::Reverse(s.len()));
    found.dedup();
    found
}

async fn unredacted(
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

/// What the peer's server is verified against, as `PeerTls::from_options` chooses:
/// the SPIFFE bundle in SPIFFE mode, else the CA Secret, the CA ConfigMap's bundle,
/// or the platform's trust store when no CA flag is set (`invalid CA flags` when
/// svc-tls refuses them: the peer's error says why).
fn trust_label(options: &PeerOptions, identity: Option<&IdentityCheck>) -> String {
    if let Some(IdentityConfig::Spiffe { server_id }) = identity.map(|c| &c.config) {
        return format!("spiffe {server_id}");
    }
    match options.ca() {
        Ok(PeerCa::Secret(ca)) => format!("ca-secret {ca}"),
        Ok(PeerCa::ConfigMap { configmap, key }) => format!("ca-configmap {configmap} key {key}"),
        Ok(PeerCa::Platform) => "platform".to_owned(),
        Ok(PeerCa::File(path)) => format!("ca-file {}", path.display()),
        Ok(PeerCa::ClusterTrustBundles(bundles)) => format!("ca-cluster-trust-bundles {bundles}"),
        _ => "invalid CA flags".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::userinfo;

    #[test]
    fn userinfo_is_found_as_written_and_as_serialized() {
        assert_eq!(
            userinfo("https://us er:pa%73s@host:8443/p@th"),
            ["us%20er:pa%73s@", "us er:pa%73s@"]
        );
        assert_eq!(userinfo("user:pw@host:443"), ["user:pw@"]);
        assert!(userinfo("https://host/a@b").is_empty());
        assert!(userinfo("https://@host/").is_empty());
        assert!(userinfo("").is_empty());
    }
}
