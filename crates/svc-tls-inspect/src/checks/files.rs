//! An identity from mounted files, reported per file: what the layout reads, what
//! each file holds (its size and PEM section labels, never its content), the leaf,
//! and whether the key matches it, as svc-tls's file source reads them (one `..data`
//! version, the key matched to the certificate).

use std::path::Path;

use svc_tls::files::{FileLayout, MountedFiles};
use svc_tls::identity::{FileIdentitySource, IdentitySource as _};
use svc_tls::material::{Identity, MaterialError, MaterialErrorKind};

use super::{cert, problem};
use crate::report::{FileEntry, FileSourceReport, Problem};

/// Reads `dir` with `layout` once: the report, and the identity when it loads.
pub fn inspect(
    dir: &Path,
    layout: &FileLayout,
    named_by: &str,
) -> (FileSourceReport, Option<Identity>) {
    let mut report = FileSourceReport {
        role: "identity".to_owned(),
        named_by: named_by.to_owned(),
        dir: dir.display().to_string(),
        layout: layout.name().to_owned(),
        version: std::fs::read_link(dir.join("..data"))
            .ok()
            .map(|target| target.display().to_string()),
        ..FileSourceReport::default()
    };
    let mut roles: Vec<(String, &str)> = Vec::new();
    for (role, name) in [
        ("certificate", layout.certificate_file()),
        ("key", layout.key_file()),
        ("ca", layout.ca_file()),
    ] {
        let Some(name) = name else { continue };
        match roles.iter_mut().find(|(_, n)| *n == name) {
            Some((roles, _)) => *roles = format!("{roles} and {role}"),
            None => roles.push((role.to_owned(), name)),
        }
    }
    for (role, name) in roles {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).ok();
        if role.starts_with("certificate")
            && let Some(bytes) = &bytes
        {
            report.certificates = cert::describe_all(&cert::pem_certificates(bytes));
        }
        report.files.push(FileEntry {
            role,
            path: path.display().to_string(),
            found: bytes.is_some(),
            bytes: bytes.as_ref().map(|b| b.len() as u64),
            pem_sections: bytes.as_deref().map(pem_labels).unwrap_or_default(),
        });
    }
    let read = MountedFiles::open(dir.to_path_buf(), layout.clone())
        .map_err(|e| problem(&e, &svc_tls::excerpt::chain(&e)))
        .and_then(|files| {
            FileIdentitySource::new(files)
                .current_ignoring_validity()
                .map_err(|e| {
                    let mismatch = key_mismatch(&e);
                    let mut p: Problem = problem(&e, &svc_tls::excerpt::chain(&e));
                    if mismatch {
                        p.kind = "KeyMismatch".to_owned();
                    }
                    p
                })
        });
    match read {
        Ok(identity) => {
            report.key_matches_certificate = Some(true);
            (report, Some(identity))
        }
        Err(error) => {
            if error.kind == "KeyMismatch" {
                report.key_matches_certificate = Some(false);
            }
            report.loader_error = Some(error);
            (report, None)
        }
    }
}

/// Whether `error`'s chain holds svc-tls's key-mismatch material error.
fn key_mismatch(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        // The material error itself, or the `Box` a file error holds it in (which
        // is the error object its `source()` hands out).
        let material = error
            .downcast_ref::<MaterialError>()
            .or_else(|| error.downcast_ref::<Box<MaterialError>>().map(|b| &**b));
        if let Some(material) = material
            && matches!(material.kind(), MaterialErrorKind::KeyMismatch { .. })
        {
            return true;
        }
        next = error.source();
    }
    false
}

/// The PEM sections of `bytes`, in order, named by their labels
/// (`-----BEGIN <label>-----`); a key's label is said in words (`key (PKCS#8)`), so
/// that no report ever carries a `PRIVATE KEY` marker.
fn pem_labels(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|line| {
            let label = line
                .trim()
                .strip_prefix("-----BEGIN ")?
                .strip_suffix("-----")?;
            Some(match label {
                "PRIVATE KEY" => "key (PKCS#8)".to_owned(),
                "ENCRYPTED PRIVATE KEY" => "key (encrypted PKCS#8)".to_owned(),
                "EC PRIVATE KEY" => "key (SEC1 EC)".to_owned(),
                "RSA PRIVATE KEY" => "key (PKCS#1 RSA)".to_owned(),
                other if other.contains("PRIVATE") => "key (other)".to_owned(),
                other => other.to_owned(),
            })
        })
        .collect()
}
