//! PEM sections of a Secret's data keys.

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::{self, PemObject};

use super::{MaterialError, MaterialErrorKind};
use crate::origin::MaterialOrigin;

/// Every `CERTIFICATE` section of `pem`, in order; other sections are skipped.
pub(super) fn read_certificates(
    name: &dyn Fn() -> MaterialOrigin,
    key: &'static str,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, MaterialError> {
    let mut chain = Vec::with_capacity(2);
    for item in CertificateDer::pem_slice_iter(pem) {
        chain.push(item.map_err(|e| {
            MaterialError::new(
                name(),
                Some(key),
                MaterialErrorKind::NotPem {
                    reason: pem_reason(&e),
                },
            )
        })?);
    }
    if chain.is_empty() {
        return Err(if contains(pem, b"-----BEGIN ") {
            MaterialError::new(name(), Some(key), MaterialErrorKind::NoCertificate)
        } else {
            MaterialError::new(
                name(),
                Some(key),
                MaterialErrorKind::NotPem {
                    reason: "no PEM section (expected -----BEGIN CERTIFICATE-----)",
                },
            )
        });
    }
    Ok(chain)
}

pub(super) fn pem_reason(e: &pem::Error) -> &'static str {
    match e {
        pem::Error::MissingSectionEnd { .. } => "a PEM section has no matching END line",
        pem::Error::IllegalSectionStart { .. } => "a PEM BEGIN line is malformed",
        pem::Error::Base64Decode(_) => "a PEM section is not valid base64",
        pem::Error::SectionTooLarge => "a PEM section is too large",
        pem::Error::NoItemsFound => "no PEM section",
        _ => "malformed PEM",
    }
}

pub(super) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
