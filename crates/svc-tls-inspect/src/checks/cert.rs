//! One certificate described: subject, names, SPIFFE ID, validity, key type and
//! size. Certificates are public data; nothing here reads a private key.

use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;
use x509_parser::public_key::PublicKey;

use crate::report::CertificateInfo;

const RSA: &str = "1.2.840.113549.1.1.1";
const EC: &str = "1.2.840.10045.2.1";
const ED25519: &str = "1.3.101.112";

/// The certificates of a PEM value, as DER (sections other than `CERTIFICATE` are
/// skipped; a malformed section ends the list).
pub fn pem_certificates(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem)
        .map_while(Result::ok)
        .collect()
}

/// Describes each certificate that parses (the others are left out: the loader's
/// verdict says what is wrong with them).
pub fn describe_all(ders: &[CertificateDer<'_>]) -> Vec<CertificateInfo> {
    ders.iter().filter_map(|der| describe(der)).collect()
}

/// Describes one DER certificate, or `None` when it does not parse as X.509.
pub fn describe(der: &[u8]) -> Option<CertificateInfo> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let mut sans = Vec::new();
    let mut spiffe_id = None;
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => sans.push(format!("DNS:{dns}")),
                GeneralName::URI(uri) => {
                    if uri.starts_with("spiffe://") && spiffe_id.is_none() {
                        spiffe_id = Some((*uri).to_owned());
                    }
                    sans.push(format!("URI:{uri}"));
                }
                GeneralName::RFC822Name(mail) => sans.push(format!("email:{mail}")),
                GeneralName::IPAddress(bytes) => sans.push(format!("IP:{}", ip_text(bytes))),
                other => sans.push(format!("other:{other:?}")),
            }
        }
    }
    let validity = cert.validity();
    let not_before_unix = validity.not_before.timestamp();
    let not_after_unix = validity.not_after.timestamp();
    let now = now_unix();
    let (key_type, key_bits) = key_of(&cert);
    Some(CertificateInfo {
        subject: cert.subject().to_string(),
        issuer: cert.issuer().to_string(),
        serial: serial_hex(cert.raw_serial()),
        sans,
        spiffe_id,
        not_before: validity.not_before.to_string(),
        not_before_unix,
        not_after: validity.not_after.to_string(),
        not_after_unix,
        validity: if now < not_before_unix {
            "not yet valid"
        } else if now > not_after_unix {
            "expired"
        } else {
            "valid"
        }
        .to_owned(),
        key_type,
        key_bits,
        is_ca: cert.is_ca(),
    })
}

/// The subject of a DER certificate, or a placeholder when it does not parse.
pub fn subject_of(der: &[u8]) -> String {
    X509Certificate::from_der(der).map_or_else(
        |_| "(unparseable certificate)".to_owned(),
        |(_, cert)| cert.subject().to_string(),
    )
}

fn key_of(cert: &X509Certificate<'_>) -> (String, usize) {
    let spki = cert.public_key();
    match spki.algorithm.algorithm.to_id_string().as_str() {
        RSA => {
            let bits = spki.parsed().map_or(0, |key| match key {
                PublicKey::RSA(rsa) => rsa.key_size(),
                _ => 0,
            });
            ("RSA".to_owned(), bits)
        }
        EC => {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok())
                .map(|oid| oid.to_id_string())
                .unwrap_or_default();
            match curve.as_str() {
                "1.2.840.10045.3.1.7" => ("ECDSA P-256".to_owned(), 256),
                "1.3.132.0.34" => ("ECDSA P-384".to_owned(), 384),
                "1.3.132.0.35" => ("ECDSA P-521".to_owned(), 521),
                other => (format!("ECDSA curve {other}"), 0),
            }
        }
        ED25519 => ("Ed25519".to_owned(), 256),
        other => (format!("algorithm {other}"), 0),
    }
}

fn serial_hex(raw: &[u8]) -> String {
    let trimmed: Vec<u8> = raw.iter().copied().skip_while(|b| *b == 0).collect();
    if trimmed.is_empty() {
        return "00".to_owned();
    }
    trimmed.iter().map(|b| format!("{b:02x}")).collect()
}

fn ip_text(bytes: &[u8]) -> String {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes)
            .map_or_else(|_| String::new(), |a| IpAddr::from(a).to_string()),
        16 => <[u8; 16]>::try_from(bytes)
            .map_or_else(|_| String::new(), |a| IpAddr::from(a).to_string()),
        _ => format!("({} bytes)", bytes.len()),
    }
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
