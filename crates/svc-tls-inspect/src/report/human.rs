//! The report for people: one block per Secret and CA ConfigMap, then the SPIFFE
//! answer, the chain checks, the peers and the principal, then the ignored flags,
//! the warnings, and the verdict and its exit code.
//!
//! Every value someone else wrote (certificate text, data keys, messages, flag
//! names, hosts) is escaped and cut ([`text::value`], [`text::message`]), and each
//! line is escaped once more as it is written, so nothing reaches the terminal as a
//! control sequence or a line of its own.

use std::fmt::Write;

use super::{
    CertificateInfo, ConfigMapReport, DataKey, FileSourceReport, Problem, Report, SecretReport,
};
use crate::text::{self, MAX_SANS, message, value as v};

/// Renders `report` as text.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    if let Some(problem) = &report.error {
        line(&mut out, 0, &format!("error: {}", problem_text(problem)));
    }
    for secret in &report.secrets {
        render_secret(&mut out, secret);
    }
    for configmap in &report.configmaps {
        render_configmap(&mut out, configmap);
    }
    for files in &report.files {
        render_files(&mut out, files);
    }
    if let Some(spiffe) = &report.spiffe {
        line(
            &mut out,
            0,
            &format!(
                "SPIFFE Workload API {} (for --{}-source=spiffe, server ID {})",
                v(&spiffe.endpoint),
                v(&spiffe.identity),
                v(spiffe.server_id.as_deref().unwrap_or("-"))
            ),
        );
        verdict(
            &mut out,
            spiffe.loader_error.as_ref(),
            "the default X509-SVID loads",
        );
        for svid in &spiffe.svids {
            line(&mut out, 1, &format!("SVID {}", v(&svid.spiffe_id)));
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
                    v(&bundle.trust_domain),
                    bundle.authorities.len()
                ),
            );
            for cert in &bundle.authorities {
                line(
                    &mut out,
                    2,
                    &format!("{} (not after {})", v(&cert.subject), v(&cert.not_after)),
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
        let head = format!("chain: {} against {}", v(&chain.identity), v(&chain.ca));
        line(&mut out, 0, &head);
        let roots: Vec<String> = chain.roots.iter().map(|r| v(r)).collect();
        line(&mut out, 1, &format!("roots: {}", roots.join("; ")));
        verdict(&mut out, chain.error.as_ref(), "chains to the CA");
    }
    for peer in &report.peers {
        line(
            &mut out,
            0,
            &format!(
                "peer {} at {} presenting {}, trusting {}",
                v(&peer.service),
                v(&peer.host),
                v(&peer.identity),
                v(&peer.trust)
            ),
        );
        if let (Some(version), Some(group)) = (&peer.tls_version, &peer.key_exchange_group) {
            line(
                &mut out,
                1,
                &format!(
                    "handshake: {version}, key exchange {group}, ALPN {}",
                    v(peer.alpn.as_deref().unwrap_or("none"))
                ),
            );
        }
        for (i, cert) in peer.server_chain.iter().enumerate() {
            line(
                &mut out,
                1,
                &format!(
                    "server chain [{i}]: {} (issuer {}, not after {})",
                    v(&cert.subject),
                    v(&cert.issuer),
                    v(&cert.not_after)
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
                v(&principal.identity),
                v(&principal.audience),
                principal
                    .algorithm
                    .as_deref()
                    .map(|a| format!(" ({})", v(a)))
                    .unwrap_or_default()
            ),
        );
        verdict(&mut out, principal.error.as_ref(), "signed and verified");
    }
    if !report.ignored_flags.is_empty() {
        let flags: Vec<String> = report.ignored_flags.iter().map(|f| v(f)).collect();
        line(
            &mut out,
            0,
            &format!(
                "ignored flags (the service's own, not read here): {}",
                flags.join(" ")
            ),
        );
    }
    for warning in warnings(report) {
        line(&mut out, 0, &warning);
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
            v(&secret.namespace),
            v(&secret.name),
            secret.role,
            v(&secret.named_by)
        ),
    );
    if secret.found {
        line(
            out,
            1,
            &format!(
                "type {}, data: {}",
                v(secret.secret_type.as_deref().unwrap_or("(unset)")),
                data_keys(&secret.data)
            ),
        );
    }
    if !secret.private_key_entries.is_empty() {
        line(
            out,
            1,
            &format!(
                "WARNING: holds private key material its role ({}) does not need: {}",
                secret.role,
                entries(&secret.private_key_entries)
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
        line(out, 1, &format!("key: {}", v(kind)));
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

fn render_files(out: &mut String, files: &FileSourceReport) {
    line(
        out,
        0,
        &format!(
            "files in {} ({} layout; {}, {})",
            v(&files.dir),
            v(&files.layout),
            files.role,
            v(&files.named_by)
        ),
    );
    if let Some(version) = &files.version {
        line(out, 1, &format!("..data -> {}", v(version)));
    }
    for file in &files.files {
        let found = match file.bytes {
            Some(bytes) if file.found => {
                let sections: Vec<String> = file.pem_sections.iter().map(|s| v(s)).collect();
                format!(
                    "{bytes} bytes, PEM: {}",
                    if sections.is_empty() {
                        "none".to_owned()
                    } else {
                        sections.join(", ")
                    }
                )
            }
            _ => "not found".to_owned(),
        };
        line(out, 1, &format!("{} {}: {found}", file.role, v(&file.path)));
    }
    for (i, cert) in files.certificates.iter().enumerate() {
        line(out, 1, &format!("certificate [{i}]"));
        render_cert(out, 2, cert);
    }
    if let Some(matches) = files.key_matches_certificate {
        line(
            out,
            1,
            if matches {
                "key matches the certificate"
            } else {
                "key does NOT match the certificate"
            },
        );
    }
    verdict(
        out,
        files.loader_error.as_ref(),
        "the service's file source loads it",
    );
}

fn render_configmap(out: &mut String, configmap: &ConfigMapReport) {
    line(
        out,
        0,
        &format!(
            "ConfigMap {}/{} key {} ({}, {})",
            v(&configmap.namespace),
            v(&configmap.name),
            v(&configmap.key),
            configmap.role,
            v(&configmap.named_by)
        ),
    );
    if configmap.found {
        line(out, 1, &format!("data: {}", data_keys(&configmap.data)));
    }
    if !configmap.private_key_entries.is_empty() {
        line(
            out,
            1,
            &format!(
                "WARNING: holds private key material (a ConfigMap should hold certificates only): {}",
                entries(&configmap.private_key_entries)
            ),
        );
    }
    for (i, cert) in configmap.certificates.iter().enumerate() {
        line(out, 1, &format!("{} [{i}]", v(&configmap.key)));
        render_cert(out, 2, cert);
    }
    if let Some(roots) = configmap.roots {
        let ignored = configmap.ignored_certificates.unwrap_or_default();
        let skipped = if ignored > 0 {
            format!(", {ignored} certificate(s) not usable as roots")
        } else {
            String::new()
        };
        line(out, 1, &format!("{roots} trust root(s){skipped}"));
    }
    verdict(
        out,
        configmap.loader_error.as_ref(),
        "the service's loader accepts it",
    );
}

/// One line per object holding private key material its role does not need,
/// repeated after the report so it is not lost among the blocks.
fn warnings(report: &Report) -> Vec<String> {
    let secrets = report
        .secrets
        .iter()
        .filter(|s| !s.private_key_entries.is_empty())
        .map(|s| {
            format!(
                "WARNING: Secret {}/{} ({}) holds private key material: {}",
                v(&s.namespace),
                v(&s.name),
                s.role,
                entries(&s.private_key_entries)
            )
        });
    let configmaps = report
        .configmaps
        .iter()
        .filter(|c| !c.private_key_entries.is_empty())
        .map(|c| {
            format!(
                "WARNING: ConfigMap {}/{} holds private key material: {}",
                v(&c.namespace),
                v(&c.name),
                entries(&c.private_key_entries)
            )
        });
    secrets.chain(configmaps).collect()
}

fn entries(entries: &[String]) -> String {
    entries.iter().map(|e| v(e)).collect::<Vec<_>>().join(", ")
}

fn data_keys(data: &[DataKey]) -> String {
    data.iter()
        .map(|d| format!("{} ({} bytes)", v(&d.key), d.bytes))
        .collect::<Vec<_>>()
        .join(", ")
}

fn render_cert(out: &mut String, depth: usize, cert: &CertificateInfo) {
    line(out, depth, &format!("subject: {}", v(&cert.subject)));
    line(out, depth, &format!("issuer: {}", v(&cert.issuer)));
    if !cert.sans.is_empty() {
        let mut sans: Vec<String> = cert.sans.iter().take(MAX_SANS).map(|s| v(s)).collect();
        if cert.sans.len() > MAX_SANS {
            sans.push(format!("… and {} more", cert.sans.len() - MAX_SANS));
        }
        line(out, depth, &format!("SANs: {}", sans.join(", ")));
    }
    if let Some(id) = &cert.spiffe_id {
        line(out, depth, &format!("SPIFFE ID: {}", v(id)));
    }
    line(
        out,
        depth,
        &format!(
            "valid {} .. {} ({})",
            v(&cert.not_before),
            v(&cert.not_after),
            cert.validity
        ),
    );
    line(
        out,
        depth,
        &format!(
            "key: {} ({} bits){}, serial {}",
            v(&cert.key_type),
            cert.key_bits,
            if cert.is_ca { ", CA" } else { "" },
            v(&cert.serial)
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
    format!("[{}] {}", v(&problem.kind), message(&problem.message))
}

/// Writes one line, escaped once more as a whole (escaping is idempotent: the
/// escaped values pass unchanged, and nothing unescaped reaches the terminal).
fn line(out: &mut String, depth: usize, text: &str) {
    let text = text::shown(text, usize::MAX / 8);
    let _ = writeln!(out, "{}{text}", "  ".repeat(depth));
}
