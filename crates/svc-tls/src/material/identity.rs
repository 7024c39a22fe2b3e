//! Where a key meets its certificate: the PEM of `tls.crt` and `tls.key` to one
//! [`Identity`] (as rustls's `CertifiedKey::from_der` is for rustls).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Secret;
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use x509_parser::certificate::X509CertificateParser;
use x509_parser::nom::Parser;
use x509_parser::time::ASN1Time;

use super::key::{KeyKind, cert_key_kind, check_match, load_key, load_key_der};
use super::pem::read_certificates;
use super::secret::{check_type, required, secret_ref_of, within_cap};
use super::{MaterialError, MaterialErrorKind, TLS_CRT, TLS_KEY};
use crate::origin::{MaterialOrigin, SecretRef};

/// A loaded client identity: the certificate chain and signing key, ready to
/// present, plus the leaf's serial, validity and key type.
///
/// Cheap to clone (reference counted). `Debug` shows the serial, `notAfter`
/// and key type only, never key material.
#[derive(Clone)]
pub struct Identity {
    certified_key: Arc<CertifiedKey>,
    serial_hex: Arc<str>,
    not_before: SystemTime,
    not_after: SystemTime,
    key_kind: KeyKind,
    spiffe_id: Option<Arc<str>>,
}

impl Identity {
    /// The SPIFFE ID of an identity from the SPIFFE Workload API (`None` for a
    /// Secret's identity).
    pub fn spiffe_id(&self) -> Option<&str> {
        self.spiffe_id.as_deref()
    }

    /// The same identity, known to carry `spiffe_id` (its leaf's URI SAN).
    pub(crate) fn with_spiffe_id(mut self, spiffe_id: &str) -> Self {
        self.spiffe_id = Some(Arc::from(spiffe_id));
        self
    }

    /// The chain (leaf first) and signing key, as rustls presents them.
    pub fn certified_key(&self) -> &Arc<CertifiedKey> {
        &self.certified_key
    }

    /// The leaf's serial number: lowercase hex of the unsigned integer, without
    /// separators or leading zero bytes (e.g. `"1a2b"`; `"00"` for zero).
    pub fn serial_hex(&self) -> &str {
        &self.serial_hex
    }

    /// The leaf's `notBefore`.
    pub fn not_before(&self) -> SystemTime {
        self.not_before
    }

    /// The leaf's `notAfter`.
    pub fn not_after(&self) -> SystemTime {
        self.not_after
    }

    /// The key type.
    pub fn key_kind(&self) -> KeyKind {
        self.key_kind
    }

    /// The leaf certificate (DER).
    pub fn leaf_der(&self) -> &CertificateDer<'static> {
        // Invariant: an Identity is only built from a non-empty chain.
        &self.certified_key.cert[0]
    }

    /// The whole chain as presented (leaf first).
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.certified_key.cert
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("serial", &self.serial_hex)
            .field("not_after", &self.not_after)
            .field("key_kind", &self.key_kind)
            .field("spiffe_id", &self.spiffe_id)
            .finish_non_exhaustive()
    }
}

/// Loads the identity in a `kubernetes.io/tls` Secret, checking validity
/// against the current time. See the [module documentation](crate::material) for what is
/// checked.
pub fn load_identity(
    secret: &Secret,
    provider: &CryptoProvider,
) -> Result<Identity, MaterialError> {
    load_identity_at(secret, provider, SystemTime::now())
}

/// [`load_identity`](super::load_identity) with validity checked at `now`.
pub fn load_identity_at(
    secret: &Secret,
    provider: &CryptoProvider,
    now: SystemTime,
) -> Result<Identity, MaterialError> {
    let name = || secret_ref_of(secret);
    check_type(secret, &name)?;
    let cert_pem = required(secret, TLS_CRT, &name)?;
    let key_pem = required(secret, TLS_KEY, &name)?;
    load_core(&name, cert_pem, key_pem, provider, Some(now))
}

/// The pure core of [`load_identity`](super::load_identity): the PEM of `tls.crt` and `tls.key` to an
/// identity, checking validity against the current time. `secret` only names
/// the source in errors.
pub fn load_identity_from_pem(
    secret: &SecretRef,
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<Identity, MaterialError> {
    load_identity_from_pem_at(secret, cert_pem, key_pem, provider, SystemTime::now())
}

/// [`load_identity_from_pem`] with validity checked at `now`.
pub fn load_identity_from_pem_at(
    secret: &SecretRef,
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
    now: SystemTime,
) -> Result<Identity, MaterialError> {
    let name = || MaterialOrigin::from(secret.clone());
    if cert_pem.is_empty() {
        return Err(MaterialError::new(
            name(),
            Some(TLS_CRT),
            MaterialErrorKind::EmptyKey,
        ));
    }
    if key_pem.is_empty() {
        return Err(MaterialError::new(
            name(),
            Some(TLS_KEY),
            MaterialErrorKind::EmptyKey,
        ));
    }
    within_cap(cert_pem, TLS_CRT, &name)?;
    within_cap(key_pem, TLS_KEY, &name)?;
    load_core(&name, cert_pem, key_pem, provider, Some(now))
}

/// The identity in the PEM of a certificate file and a key file (one file for both
/// in a pod-certificate credential bundle) read from `dir`: the same checks as a
/// Secret's, the key matched to the leaf. `now: None` skips the validity check (at
/// start-up only). The caller caps the sizes as it reads.
pub(crate) fn load_identity_from_files(
    dir: &str,
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
    now: Option<SystemTime>,
) -> Result<Identity, MaterialError> {
    let name = || MaterialOrigin::Files {
        dir: dir.to_owned(),
    };
    load_core(&name, cert_pem, key_pem, provider, now)
}

/// Loads `cert_pem` and `key_pem`; `now: None` skips the validity check (used only
/// at start-up, where an expired or not-yet-valid leaf is served and reported
/// rather than stopping the service).
pub(super) fn load_core(
    name: &dyn Fn() -> MaterialOrigin,
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
    now: Option<SystemTime>,
) -> Result<Identity, MaterialError> {
    let chain = read_certificates(name, TLS_CRT, cert_pem)?;
    build_identity(name, chain, KeyInput::Pem(key_pem), provider, now)
}

/// The private key as the source holds it.
pub(crate) enum KeyInput<'a> {
    /// PEM (a Secret's `tls.key`).
    Pem(&'a [u8]),
    /// DER (a SPIFFE X509-SVID's PKCS#8 key).
    Der(PrivateKeyDer<'static>),
}

/// The chain (leaf first) and key to an identity: the leaf parsed once, its key type
/// and validity checked, the key loaded and matched to the leaf.
pub(crate) fn build_identity(
    name: &dyn Fn() -> MaterialOrigin,
    chain: Vec<CertificateDer<'static>>,
    key: KeyInput<'_>,
    provider: &CryptoProvider,
    now: Option<SystemTime>,
) -> Result<Identity, MaterialError> {
    let Some(leaf) = chain.first() else {
        return Err(MaterialError::new(
            name(),
            Some(TLS_CRT),
            MaterialErrorKind::NoCertificate,
        ));
    };

    let invalid = |reason: String| {
        MaterialError::new(
            name(),
            Some(TLS_CRT),
            MaterialErrorKind::InvalidCertificate { reason },
        )
    };
    let (rest, cert) = X509CertificateParser::new()
        .with_deep_parse_extensions(false)
        .parse(leaf.as_ref())
        .map_err(|e| invalid(e.to_string()))?;
    // Peers' webpki refuses a certificate with bytes after its DER SEQUENCE, so such
    // a leaf would fail every handshake: refuse it here, where the Secret is named.
    if !rest.is_empty() {
        return Err(invalid(format!(
            "{} bytes of trailing data after the certificate",
            rest.len()
        )));
    }
    let tbs = &cert.tbs_certificate;
    let spki = &tbs.subject_pki;

    let cert_kind = cert_key_kind(spki).map_err(|algorithm| {
        MaterialError::new(
            name(),
            Some(TLS_CRT),
            MaterialErrorKind::UnsupportedAlgorithm { algorithm },
        )
    })?;

    let not_before = to_system_time(&tbs.validity.not_before);
    let not_after = to_system_time(&tbs.validity.not_after);
    if let Some(now) = now
        && now < not_before
    {
        return Err(MaterialError::new(
            name(),
            Some(TLS_CRT),
            MaterialErrorKind::CertificateNotYetValid {
                not_before,
                not_before_text: tbs.validity.not_before.to_string(),
            },
        ));
    }
    if let Some(now) = now
        && now > not_after
    {
        return Err(MaterialError::new(
            name(),
            Some(TLS_CRT),
            MaterialErrorKind::CertificateExpired {
                not_after,
                not_after_text: tbs.validity.not_after.to_string(),
            },
        ));
    }

    let signing_key = match key {
        KeyInput::Pem(pem) => load_key(name, pem, cert_kind, provider)?,
        KeyInput::Der(der) => load_key_der(name, der, cert_kind, provider)?,
    };
    check_match(name, signing_key.as_ref(), spki)?;

    let serial_hex = serial_hex(tbs.raw_serial());
    Ok(Identity {
        certified_key: Arc::new(CertifiedKey::new(chain, signing_key)),
        serial_hex,
        not_before,
        not_after,
        key_kind: cert_kind,
        spiffe_id: None,
    })
}

fn to_system_time(t: &ASN1Time) -> SystemTime {
    let secs = t.timestamp();
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::from_secs(secs.unsigned_abs()))
            .unwrap_or(UNIX_EPOCH)
    }
}

fn serial_hex(raw: &[u8]) -> Arc<str> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let skip = raw.iter().take_while(|&&b| b == 0).count();
    let digits = &raw[skip.min(raw.len().saturating_sub(1))..];
    let mut s = String::with_capacity(digits.len() * 2);
    for &b in digits {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    if s.is_empty() {
        s.push_str("00");
    }
    Arc::from(s)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn serial_is_unsigned_lowercase_hex() {
        assert_eq!(&*serial_hex(&[0x00, 0x8f, 0x0a]), "8f0a");
        assert_eq!(&*serial_hex(&[0x01]), "01");
        assert_eq!(&*serial_hex(&[0x00]), "00");
        assert_eq!(&*serial_hex(&[]), "00");
    }
}
