//! The report for people: one block per Secret, then the SPIFFE answer, the chain
//! checks, the peers and the principal, then the verdict and its exit code.

use std::fmt::Write;

use super::{CertificateInfo, Problem, Report, SecretReport};

/// Renders `report` as text.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    if let Some(problem) = &report.error {
        line(&mut out, 0, &format!("error: {}", problem_text(problem)));
    }
    for secret in &report.secrets {
        render_secret(&mut out, secret);
    }
    if let Some(spiffe) = &report.spiffe {
        line(
            &mut out,
            0,
            &format!(
                "SPIFFE Workload API {} (for --{}-source=spiffe, server ID {})",
                spiffe.endpoint,
                spiffe.identity,
                spiffe.server_id.as_deref().unwrap_or("-")
            ),
        );
        verdict(
            &mut out,
            spiffe.loader_error.as_ref(),
            "the default X509-SVID loads",
        );
        for svid in &spiffe.svids {
            line(&mut out, 1, &format!("SVID {}", svid.spiffe_id));
            for cert in &svid.certificates {
                render_cert(&mut out, 2, cert);
            }
        }
        for bundle in &spiffe.bundles {
            line(
                &mut out,
                1,
                &format!(
                    "bundle {} ({} authorities)",
                    bundle.trust_domain,
                    bundle.authorities.len()
                ),
            );
            for cert in &bundle.authorities {
                line(
                    &mut out,
                    2,
                    &format!("{} (not after {})", cert.subject, cert.not_after),
                );
            }
        }
        if let Some(problem) = &spiffe.error {
            line(
                &mut out,
                1,
                &format!("listing failed: {}", problem_text(problem)),
            );
        }
    }
    for chain in &report.chains {
        let head = format!("chain: {} against {}", chain.identity, chain.ca);
        line(&mut out, 0, &head);
        line(&mut out, 1, &format!("roots: {}", chain.roots.join("; ")));
        verdict(&mut out, chain.error.as_ref(), "chains to the CA");
    }
    for peer in &report.peers {
        line(
            &mut out,
            0,
            &format!(
                "peer {} at {} presenting {}, trusting {}",
                peer.service, peer.host, peer.identity, peer.trust
            ),
        );
        if let (Some(version), Some(group)) = (&peer.tls_version, &peer.key_exchange_group) {
            line(
                &mut out,
                1,
                &format!(
                    "handshake: {version}, key exchange {group}, ALPN {}",
                    peer.alpn.as_deref().unwrap_or("none")
                ),
            );
        }
        for (i, cert) in peer.server_chain.iter().enumerate() {
            line(
                &mut out,
                1,
                &format!(
                    "server chain [{i}]: {} (issuer {}, not after {})",
                    cert.subject, cert.issuer, cert.not_after
                ),
            );
        }
        match peer.client_certificate_accepted {
            Some(true) => line(
                &mut out,
                1,
                &format!(
                    "client certificate accepted (HTTP {})",
                    peer.http_status.unwrap_or_default()
                ),
            ),
            Some(false) => line(&mut out, 1, "client certificate REFUSED"),
            None => {}
        }
        if peer.skipped {
            line(
                &mut out,
                1,
                &format!(
                    "skipped: {}",
                    peer.error.as_ref().map(problem_text).unwrap_or_default()
                ),
            );
        } else {
            verdict(&mut out, peer.error.as_ref(), "ok");
        }
    }
    if let Some(principal) = &report.principal {
        line(
            &mut out,
            0,
            &format!(
                "principal: signed with {} for {}{}",
                principal.identity,
                principal.audience,
                principal
                    .algorithm
                    .as_deref()
                    .map(|a| format!(" ({a})"))
                    .unwrap_or_default()
            ),
        );
        verdict(&mut out, principal.error.as_ref(), "signed and verified");
    }
    if !report.ignored_flags.is_empty() {
        line(
            &mut out,
            0,
            &format!("ignored flags: {}", report.ignored_flags.join(" ")),
        );
    }
    let failed: Vec<String> = report
        .failed
        .iter()
        .map(|c| format!("{c:?}").to_lowercase())
        .collect();
    if report.ok {
        line(&mut out, 0, "result: ok (exit 0)");
    } else {
        line(
            &mut out,
            0,
            &format!(
                "result: FAILED {} (exit {})",
                failed.join(", "),
                report.exit_code
            ),
        );
    }
    out
}

fn render_secret(out: &mut String, secret: &SecretReport) {
    line(
        out,
        0,
        &format!(
            "Secret {}/{} ({}, {})",
            secret.namespace, secret.name, secret.role, secret.named_by
        ),
    );
    if secret.found {
        let keys: Vec<String> = secret
            .data
            .iter()
            .map(|d| format!("{} ({} bytes)", d.key, d.bytes))
            .collect();
        line(
            out,
            1,
            &format!(
                "type {}, data: {}",
                secret.secret_type.as_deref().unwrap_or("(unset)"),
                keys.join(", ")
            ),
        );
    }
    for (i, cert) in secret.certificates.iter().enumerate() {
        line(out, 1, &format!("tls.crt [{i}]"));
        render_cert(out, 2, cert);
    }
    for (i, cert) in secret.ca_certificates.iter().enumerate() {
        line(out, 1, &format!("ca.crt [{i}]"));
        render_cert(out, 2, cert);
    }
    if let Some(kind) = &secret.loaded_key_type {
        line(out, 1, &format!("key: {kind}"));
    }
    match secret.key_matches_certificate {
        Some(true) => line(out, 1, "key matches the certificate"),
        Some(false) => line(out, 1, "key does NOT match the certificate"),
        None => {}
    }
    if let Some(roots) = secret.roots {
        line(out, 1, &format!("{roots} trust root(s)"));
    }
    verdict(
        out,
        secret.loader_error.as_ref(),
        "the service's loader accepts it",
    );
}

fn render_cert(out: &mut String, depth: usize, cert: &CertificateInfo) {
    line(out, depth, &format!("subject: {}", cert.subject));
    line(out, depth, &format!("issuer: {}", cert.issuer));
    if !cert.sans.is_empty() {
        line(out, depth, &format!("SANs: {}", cert.sans.join(", ")));
    }
    if let Some(id) = &cert.spiffe_id {
        line(out, depth, &format!("SPIFFE ID: {id}"));
    }
    line(
        out,
        depth,
        &format!(
            "valid {} .. {} ({})",
            cert.not_before, cert.not_after, cert.validity
        ),
    );
    line(
        out,
        depth,
        &format!(
            "key: {} ({} bits){}, serial {}",
            cert.key_type,
            cert.key_bits,
            if cert.is_ca { ", CA" } else { "" },
            cert.serial
        ),
    );
}

fn verdict(out: &mut String, problem: Option<&Problem>, ok_text: &str) {
    match problem {
        None => line(out, 1, &format!("OK: {ok_text}")),
        Some(problem) => line(out, 1, &format!("FAILED: {}", problem_text(problem))),
    }
}

fn problem_text(problem: &Problem) -> String {
    format!("[{}] {}", problem.kind, problem.message)
}

fn line(out: &mut String, depth: usize, text: &str) {
    let _ = writeln!(out, "{}{text}", "  ".repeat(depth));
}
