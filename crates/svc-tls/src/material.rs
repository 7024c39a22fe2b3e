//! Bytes to identity and trust: pure functions of a Secret's data, no I/O.
//!
//! [`load_identity`] turns a `kubernetes.io/tls` Secret into an [`Identity`]
//! (the certificate chain in `tls.crt`, leaf first, and the private key in
//! `tls.key`, as a rustls [`CertifiedKey`]); [`load_trust`] turns a CA Secret
//! into a [`RootCertStore`]. Both return a typed [`MaterialError`] that names
//! the Secret and the data key, and never contains key material.
//!
//! The identity is re-loaded on every TLS handshake, so the loader is built to
//! be cheap: the PEM is decoded once, the leaf is parsed once (x509-parser,
//! without deep-parsing extensions), the key type is read from the DER before
//! the key is loaded, and the key is handed to the crypto provider in the form
//! that makes its loader succeed at the first attempt (see [`crypto_provider`]).
//! Loading a key is still the dominant cost (an RSA-2048 key takes aws-lc-rs a
//! few hundred microseconds), so the handshake path should go through an
//! [`IdentityCache`], which reuses the identity loaded from byte-identical
//! `tls.crt`/`tls.key` and re-checks only what depends on time:
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::Secret;
//! use svc_tls::material::{Identity, IdentityCache, MaterialError, crypto_provider};
//!
//! // Built once per client identity...
//! let cache = IdentityCache::new(Arc::new(crypto_provider()));
//! // ...and asked on every handshake with the Secret from the watch cache.
//! fn on_handshake(cache: &IdentityCache, secret: &Secret) -> Result<Identity, MaterialError> {
//!     cache.load(secret)
//! }
//! # let _ = on_handshake;
//! ```
//!
//! # What is checked
//!
//! - Secret type `kubernetes.io/tls`; `tls.crt` and `tls.key` present and non-empty.
//! - `tls.crt` is PEM with at least one `CERTIFICATE`; the first is the leaf and
//!   parses as X.509; the whole chain is presented as given.
//! - The leaf's key is RSA 2048 to 4096 bits, ECDSA P-256 or P-384, or Ed25519.
//! - The leaf is within its validity period (see below).
//! - `tls.key` is an unencrypted PKCS#8, PKCS#1 (RSA) or SEC1 (EC) key the
//!   provider can load, and its public key equals the leaf's.
//!
//! # Certificate validity
//!
//! A leaf outside its validity period is an **error**
//! ([`MaterialError::CertificateExpired`], [`MaterialError::CertificateNotYetValid`]),
//! not a warning. Peers reject such a certificate anyway, so presenting it can
//! only fail; refusing it at load time makes start-up fail with a clear error
//! and, during rotation, makes the handshake-time resolver keep the last good
//! identity, which is still valid because cert-manager renews well before
//! expiry. A `notBefore` slightly in the future (clock skew with the issuer) is
//! therefore harmless after start-up; at start-up the error is distinguishable
//! ([`MaterialError::is_not_yet_valid`]) so a caller can wait for it to pass.
//! Intermediate certificates are not checked here; the peer verifies the chain.

mod der;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::sign::{CertifiedKey, SigningKey};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivateSec1KeyDer};
use x509_parser::certificate::X509CertificateParser;
use x509_parser::nom::Parser;
use x509_parser::time::ASN1Time;
use x509_parser::x509::SubjectPublicKeyInfo;

pub use crate::error::MaterialError;
use crate::options::SecretRef;
use der::{oid, tag};

/// The Secret type both identity and CA Secrets must have.
pub const SECRET_TYPE_TLS: &str = "kubernetes.io/tls";
/// Data key of the certificate (chain), PEM.
pub const TLS_CRT: &str = "tls.crt";
/// Data key of the private key, PEM.
pub const TLS_KEY: &str = "tls.key";
/// Data key of the issuing CA written by cert-manager, PEM.
pub const CA_CRT: &str = "ca.crt";

/// The key type of an identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// RSA with a modulus of `bits` bits (2048 to 4096).
    Rsa {
        /// Modulus size in bits.
        bits: usize,
    },
    /// ECDSA on NIST P-256.
    EcdsaP256,
    /// ECDSA on NIST P-384.
    EcdsaP384,
    /// Ed25519.
    Ed25519,
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rsa { bits } => write!(f, "RSA-{bits}"),
            Self::EcdsaP256 => f.write_str("ECDSA P-256"),
            Self::EcdsaP384 => f.write_str("ECDSA P-384"),
            Self::Ed25519 => f.write_str("Ed25519"),
        }
    }
}

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
}

impl Identity {
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
            .finish_non_exhaustive()
    }
}

/// Loads the identity in a `kubernetes.io/tls` Secret, checking validity
/// against the current time. See the [module documentation](self) for what is
/// checked.
pub fn load_identity(
    secret: &Secret,
    provider: &CryptoProvider,
) -> Result<Identity, MaterialError> {
    load_identity_at(secret, provider, SystemTime::now())
}

/// [`load_identity`] with validity checked at `now`.
pub fn load_identity_at(
    secret: &Secret,
    provider: &CryptoProvider,
    now: SystemTime,
) -> Result<Identity, MaterialError> {
    let name = || secret_ref_of(secret);
    check_type(secret, &name)?;
    let cert_pem = required(secret, TLS_CRT, &name)?;
    let key_pem = required(secret, TLS_KEY, &name)?;
    load_core(&name, cert_pem, key_pem, provider, now)
}

/// The pure core of [`load_identity`]: the PEM of `tls.crt` and `tls.key` to an
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
    let name = || secret.clone();
    if cert_pem.is_empty() {
        return Err(MaterialError::EmptyKey {
            secret: name(),
            key: TLS_CRT,
        });
    }
    if key_pem.is_empty() {
        return Err(MaterialError::EmptyKey {
            secret: name(),
            key: TLS_KEY,
        });
    }
    load_core(&name, cert_pem, key_pem, provider, now)
}

/// Remembers the last identity loaded from exactly the same Secret bytes, so a
/// handshake with an unchanged Secret costs a byte comparison instead of a full
/// load.
///
/// [`load_identity`] is a pure function of `tls.crt`, `tls.key` and the time, so
/// reusing its result for identical bytes is indistinguishable from reloading,
/// as long as validity is checked against the current time on every call, which
/// [`IdentityCache::load`] does. Any change to either value (a rotation, a
/// broken edit) is a miss and gets the full load at once; a failed load is never
/// remembered, and does not evict the last good entry. The comparison is of the
/// exact bytes, not a hash.
///
/// This matters because loading an RSA key with aws-lc-rs costs hundreds of
/// microseconds (its parser runs a full key consistency check), far more than
/// the rest of a reload.
///
/// Lock-free: the entry lives in an `ArcSwapOption`; concurrent misses each load,
/// and the last one stored wins. Holds one copy of the Secret's `tls.crt` and
/// `tls.key` (the same bytes the watch cache already holds).
pub struct IdentityCache {
    provider: Arc<CryptoProvider>,
    last: arc_swap::ArcSwapOption<Cached>,
}

struct Cached {
    cert_pem: Box<[u8]>,
    key_pem: Box<[u8]>,
    identity: Identity,
}

impl IdentityCache {
    /// An empty cache loading keys with `provider` (see [`crypto_provider`]).
    pub fn new(provider: Arc<CryptoProvider>) -> Self {
        Self {
            provider,
            last: arc_swap::ArcSwapOption::empty(),
        }
    }

    /// The crypto provider keys are loaded with.
    pub fn provider(&self) -> &Arc<CryptoProvider> {
        &self.provider
    }

    /// [`load_identity`], reusing the previous result when `tls.crt` and
    /// `tls.key` are byte-for-byte the same as last time.
    pub fn load(&self, secret: &Secret) -> Result<Identity, MaterialError> {
        self.load_at(secret, SystemTime::now())
    }

    /// [`IdentityCache::load`] with validity checked at `now`.
    pub fn load_at(&self, secret: &Secret, now: SystemTime) -> Result<Identity, MaterialError> {
        let name = || secret_ref_of(secret);
        check_type(secret, &name)?;
        let cert_pem = required(secret, TLS_CRT, &name)?;
        let key_pem = required(secret, TLS_KEY, &name)?;
        if let Some(cached) = &*self.last.load()
            && *cached.cert_pem == *cert_pem
            && *cached.key_pem == *key_pem
            && cached.identity.not_before <= now
            && now <= cached.identity.not_after
        {
            return Ok(cached.identity.clone());
        }
        // A miss, or a hit outside the validity period (the full load then
        // reports the precise error).
        let identity = load_core(&name, cert_pem, key_pem, &self.provider, now)?;
        self.last.store(Some(Arc::new(Cached {
            cert_pem: cert_pem.into(),
            key_pem: key_pem.into(),
            identity: identity.clone(),
        })));
        Ok(identity)
    }

    /// Forgets the remembered identity (the next load is a full one).
    pub fn clear(&self) {
        self.last.store(None);
    }
}

impl fmt::Debug for IdentityCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = self.last.load();
        f.debug_struct("IdentityCache")
            .field("last", &last.as_ref().map(|c| &c.identity))
            .finish_non_exhaustive()
    }
}

/// The trust roots in a CA Secret, with how many certificates were not usable.
#[derive(Debug, Clone)]
pub struct Trust {
    /// Every usable certificate of `tls.crt` and `ca.crt`, as a root.
    pub roots: RootCertStore,
    /// Certificates found but not usable as trust anchors.
    pub ignored: usize,
}

/// Loads CA trust from a `kubernetes.io/tls` Secret: every certificate in
/// `tls.crt` and, when present, `ca.crt` (the cert-manager convention) becomes
/// a root. `tls.crt` must be present (as in the Go code); an empty `tls.crt` is
/// accepted when `ca.crt` supplies certificates. Unusable certificates among
/// usable ones are skipped with a warning; none usable is an error.
pub fn load_trust(secret: &Secret) -> Result<RootCertStore, MaterialError> {
    let trust = load_trust_detailed(secret)?;
    if trust.ignored > 0 {
        tracing::warn!(
            secret = %secret_ref_of(secret),
            ignored = trust.ignored,
            used = trust.roots.len(),
            "some CA certificates are not usable as trust roots and were skipped"
        );
    }
    Ok(trust.roots)
}

/// [`load_trust`] without logging, reporting how many certificates were skipped.
pub fn load_trust_detailed(secret: &Secret) -> Result<Trust, MaterialError> {
    let name = || secret_ref_of(secret);
    check_type(secret, &name)?;
    let data = secret.data.as_ref();
    let tls_crt = data
        .and_then(|d| d.get(TLS_CRT))
        .ok_or_else(|| MaterialError::MissingKey {
            secret: name(),
            key: TLS_CRT,
        })?;
    let ca_crt = data.and_then(|d| d.get(CA_CRT)).filter(|v| !v.0.is_empty());
    let mut certs = Vec::new();
    if !tls_crt.0.is_empty() {
        certs.extend(read_certificates(&name, TLS_CRT, &tls_crt.0)?);
    }
    if let Some(ca) = ca_crt {
        certs.extend(read_certificates(&name, CA_CRT, &ca.0)?);
    }
    if certs.is_empty() {
        return Err(MaterialError::EmptyKey {
            secret: name(),
            key: TLS_CRT,
        });
    }
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(MaterialError::NoUsableRoot {
            secret: name(),
            keys: if ca_crt.is_some() {
                "tls.crt, ca.crt"
            } else {
                TLS_CRT
            },
            ignored,
        });
    }
    Ok(Trust { roots, ignored })
}

fn secret_ref_of(secret: &Secret) -> SecretRef {
    SecretRef::new(
        secret.metadata.namespace.clone().unwrap_or_default(),
        secret.metadata.name.clone().unwrap_or_default(),
    )
}

fn check_type(secret: &Secret, name: &dyn Fn() -> SecretRef) -> Result<(), MaterialError> {
    if secret.type_.as_deref() == Some(SECRET_TYPE_TLS) {
        Ok(())
    } else {
        Err(MaterialError::WrongType {
            secret: name(),
            found: secret.type_.clone(),
        })
    }
}

fn required<'a>(
    secret: &'a Secret,
    key: &'static str,
    name: &dyn Fn() -> SecretRef,
) -> Result<&'a [u8], MaterialError> {
    match secret.data.as_ref().and_then(|d| d.get(key)) {
        None => Err(MaterialError::MissingKey {
            secret: name(),
            key,
        }),
        Some(ByteString(v)) if v.is_empty() => Err(MaterialError::EmptyKey {
            secret: name(),
            key,
        }),
        Some(ByteString(v)) => Ok(v),
    }
}

fn load_core(
    name: &dyn Fn() -> SecretRef,
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
    now: SystemTime,
) -> Result<Identity, MaterialError> {
    let chain = read_certificates(name, TLS_CRT, cert_pem)?;
    let Some(leaf) = chain.first() else {
        return Err(MaterialError::NoCertificate {
            secret: name(),
            key: TLS_CRT,
        });
    };

    let (_, cert) = X509CertificateParser::new()
        .with_deep_parse_extensions(false)
        .parse(leaf.as_ref())
        .map_err(|e| MaterialError::InvalidCertificate {
            secret: name(),
            key: TLS_CRT,
            reason: e.to_string(),
        })?;
    let tbs = &cert.tbs_certificate;
    let spki = &tbs.subject_pki;

    let cert_kind =
        cert_key_kind(spki).map_err(|algorithm| MaterialError::UnsupportedAlgorithm {
            secret: name(),
            key: TLS_CRT,
            algorithm,
        })?;

    let not_before = to_system_time(&tbs.validity.not_before);
    let not_after = to_system_time(&tbs.validity.not_after);
    if now < not_before {
        return Err(MaterialError::CertificateNotYetValid {
            secret: name(),
            key: TLS_CRT,
            not_before,
            not_before_text: tbs.validity.not_before.to_string(),
        });
    }
    if now > not_after {
        return Err(MaterialError::CertificateExpired {
            secret: name(),
            key: TLS_CRT,
            not_after,
            not_after_text: tbs.validity.not_after.to_string(),
        });
    }

    let signing_key = load_key(name, key_pem, cert_kind, provider)?;
    check_match(name, signing_key.as_ref(), spki)?;

    let serial_hex = serial_hex(tbs.raw_serial());
    Ok(Identity {
        certified_key: Arc::new(CertifiedKey::new(chain, signing_key)),
        serial_hex,
        not_before,
        not_after,
        key_kind: cert_kind,
    })
}

/// Every `CERTIFICATE` section of `pem`, in order; other sections are skipped.
fn read_certificates(
    name: &dyn Fn() -> SecretRef,
    key: &'static str,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, MaterialError> {
    let mut chain = Vec::with_capacity(2);
    for item in CertificateDer::pem_slice_iter(pem) {
        chain.push(item.map_err(|e| MaterialError::NotPem {
            secret: name(),
            key,
            reason: pem_reason(&e),
        })?);
    }
    if chain.is_empty() {
        return Err(if contains(pem, b"-----BEGIN ") {
            MaterialError::NoCertificate {
                secret: name(),
                key,
            }
        } else {
            MaterialError::NotPem {
                secret: name(),
                key,
                reason: "no PEM section (expected -----BEGIN CERTIFICATE-----)",
            }
        });
    }
    Ok(chain)
}

fn pem_reason(e: &pem::Error) -> &'static str {
    match e {
        pem::Error::MissingSectionEnd { .. } => "a PEM section has no matching END line",
        pem::Error::IllegalSectionStart { .. } => "a PEM BEGIN line is malformed",
        pem::Error::Base64Decode(_) => "a PEM section is not valid base64",
        pem::Error::SectionTooLarge => "a PEM section is too large",
        pem::Error::NoItemsFound => "no PEM section",
        _ => "malformed PEM",
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
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

/// The key kind of a certificate's SubjectPublicKeyInfo, or a description of the
/// unsupported algorithm.
fn cert_key_kind(spki: &SubjectPublicKeyInfo<'_>) -> Result<KeyKind, String> {
    let alg = spki.algorithm.algorithm.as_bytes();
    match alg {
        oid::RSA_ENCRYPTION => {
            let bits = rsa_modulus_bits(&spki.subject_public_key.data)
                .ok_or_else(|| "RSA (malformed public key)".to_owned())?;
            if (2048..=4096).contains(&bits) {
                Ok(KeyKind::Rsa { bits })
            } else {
                Err(format!("RSA-{bits}"))
            }
        }
        oid::EC_PUBLIC_KEY => {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok());
            match curve.as_ref().map(|c| c.as_bytes()) {
                Some(oid::P256) => Ok(KeyKind::EcdsaP256),
                Some(oid::P384) => Ok(KeyKind::EcdsaP384),
                Some(other) => Err(format!("ECDSA curve {}", oid::describe(other))),
                None => Err("ECDSA without a named curve".to_owned()),
            }
        }
        oid::ED25519 => Ok(KeyKind::Ed25519),
        other => Err(oid::describe(other)),
    }
}

/// Bits of the modulus of a DER `RSAPublicKey`.
fn rsa_modulus_bits(rsa_public_key: &[u8]) -> Option<usize> {
    let (seq, _) = der::expect(rsa_public_key, tag::SEQUENCE)?;
    let (modulus, _) = der::expect(seq, tag::INTEGER)?;
    let skip = modulus.iter().take_while(|&&b| b == 0).count();
    let significant = modulus.get(skip..)?;
    let (&top, _) = significant.split_first()?;
    Some((significant.len() - 1) * 8 + (8 - top.leading_zeros() as usize))
}

/// What the key DER says it is, before loading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyClass {
    Rsa,
    Ec(Option<KeyKind>),
    Ed25519,
}

/// Classifies the key DER; returns the key in the form the provider loads
/// fastest (EC keys as SEC1 with named-curve parameters).
fn classify(
    key: PrivateKeyDer<'static>,
) -> Result<(Option<KeyClass>, PrivateKeyDer<'static>), Classified> {
    match &key {
        PrivateKeyDer::Pkcs1(_) => Ok((Some(KeyClass::Rsa), key)),
        PrivateKeyDer::Sec1(sec1) => {
            let class = sec1_curve(sec1.secret_sec1_der()).map(|c| KeyClass::Ec(Some(c)));
            Ok((class.or(Some(KeyClass::Ec(None))), key))
        }
        PrivateKeyDer::Pkcs8(pkcs8) => {
            let der = pkcs8.secret_pkcs8_der();
            let Some((info, _)) = der::expect(der, tag::SEQUENCE) else {
                return Ok((None, key));
            };
            // EncryptedPrivateKeyInfo starts with an AlgorithmIdentifier SEQUENCE;
            // PrivateKeyInfo with the INTEGER version.
            if info.first() == Some(&tag::SEQUENCE) {
                return Err(Classified::Encrypted);
            }
            let Some((_version, rest)) = der::expect(info, tag::INTEGER) else {
                return Ok((None, key));
            };
            let Some((alg_id, rest)) = der::expect(rest, tag::SEQUENCE) else {
                return Ok((None, key));
            };
            let Some((alg, params)) = der::expect(alg_id, tag::OID) else {
                return Ok((None, key));
            };
            match alg {
                oid::RSA_ENCRYPTION => Ok((Some(KeyClass::Rsa), key)),
                oid::ED25519 => Ok((Some(KeyClass::Ed25519), key)),
                oid::EC_PUBLIC_KEY => {
                    let Some((curve, _)) = der::expect(params, tag::OID) else {
                        return Ok((Some(KeyClass::Ec(None)), key));
                    };
                    let kind = match curve {
                        oid::P256 => KeyKind::EcdsaP256,
                        oid::P384 => KeyKind::EcdsaP384,
                        other => {
                            return Err(Classified::Unsupported(format!(
                                "ECDSA curve {}",
                                oid::describe(other)
                            )));
                        }
                    };
                    let sec1 = der::expect(rest, tag::OCTET_STRING)
                        .and_then(|(inner, _)| sec1_with_curve(inner, curve));
                    match sec1 {
                        Some(sec1) => Ok((
                            Some(KeyClass::Ec(Some(kind))),
                            PrivateKeyDer::Sec1(PrivateSec1KeyDer::from(sec1)),
                        )),
                        None => Ok((Some(KeyClass::Ec(Some(kind))), key)),
                    }
                }
                other => Err(Classified::Unsupported(oid::describe(other))),
            }
        }
        _ => Ok((None, key)),
    }
}

enum Classified {
    Encrypted,
    Unsupported(String),
}

/// The curve named in a SEC1 `ECPrivateKey`'s parameters, when supported.
fn sec1_curve(sec1: &[u8]) -> Option<KeyKind> {
    let (body, _) = der::expect(sec1, tag::SEQUENCE)?;
    let (_version, rest) = der::expect(body, tag::INTEGER)?;
    let (_private, rest) = der::expect(rest, tag::OCTET_STRING)?;
    let (params, _) = der::expect(rest, tag::CTX0)?;
    let (curve, _) = der::expect(params, tag::OID)?;
    match curve {
        oid::P256 => Some(KeyKind::EcdsaP256),
        oid::P384 => Some(KeyKind::EcdsaP384),
        _ => None,
    }
}

/// The SEC1 `ECPrivateKey` inside a PKCS#8 key, with the named curve as
/// parameters (PKCS#8 encoders usually omit them there). With the curve named,
/// a provider trying curves in turn rejects the wrong ones without any
/// arithmetic.
fn sec1_with_curve(inner: &[u8], curve: &[u8]) -> Option<Vec<u8>> {
    let (body, _) = der::expect(inner, tag::SEQUENCE)?;
    let (version, rest) = der::expect(body, tag::INTEGER)?;
    let (private, rest) = der::expect(rest, tag::OCTET_STRING)?;
    let mut content = Vec::with_capacity(body.len() + curve.len() + 8);
    der::write_tlv(&mut content, tag::INTEGER, version);
    der::write_tlv(&mut content, tag::OCTET_STRING, private);
    let rest = match der::read_tlv(rest) {
        Some((tag::CTX0, _, after)) => after,
        _ => rest,
    };
    let mut named = Vec::with_capacity(curve.len() + 2);
    der::write_tlv(&mut named, tag::OID, curve);
    der::write_tlv(&mut content, tag::CTX0, &named);
    // The optional [1] public key (and anything after) is kept as is.
    if let Some((tag::CTX1, _, _)) = der::read_tlv(rest) {
        content.extend_from_slice(rest);
    }
    let mut out = Vec::with_capacity(content.len() + 4);
    der::write_tlv(&mut out, tag::SEQUENCE, &content);
    Some(out)
}

fn class_matches(class: KeyClass, cert: KeyKind) -> bool {
    match (class, cert) {
        (KeyClass::Rsa, KeyKind::Rsa { .. }) | (KeyClass::Ed25519, KeyKind::Ed25519) => true,
        (KeyClass::Ec(None), KeyKind::EcdsaP256 | KeyKind::EcdsaP384) => true,
        (KeyClass::Ec(Some(k)), cert) => k == cert,
        _ => false,
    }
}

fn describe_class(class: KeyClass) -> String {
    match class {
        KeyClass::Rsa => "an RSA key".to_owned(),
        KeyClass::Ec(None) => "an ECDSA key".to_owned(),
        KeyClass::Ec(Some(kind)) => format!("an {kind} key"),
        KeyClass::Ed25519 => "an Ed25519 key".to_owned(),
    }
}

fn load_key(
    name: &dyn Fn() -> SecretRef,
    key_pem: &[u8],
    cert_kind: KeyKind,
    provider: &CryptoProvider,
) -> Result<Arc<dyn SigningKey>, MaterialError> {
    let encrypted = || MaterialError::EncryptedKey {
        secret: name(),
        key: TLS_KEY,
    };
    let key = match PrivateKeyDer::from_pem_slice(key_pem) {
        Ok(key) => key,
        Err(_) if contains(key_pem, b"ENCRYPTED") => return Err(encrypted()),
        Err(pem::Error::NoItemsFound) if contains(key_pem, b"-----BEGIN ") => {
            return Err(MaterialError::NoPrivateKey {
                secret: name(),
                key: TLS_KEY,
            });
        }
        Err(pem::Error::NoItemsFound) => {
            return Err(MaterialError::NotPem {
                secret: name(),
                key: TLS_KEY,
                reason: "no PEM section (expected -----BEGIN PRIVATE KEY-----)",
            });
        }
        Err(e) => {
            return Err(MaterialError::NotPem {
                secret: name(),
                key: TLS_KEY,
                reason: pem_reason(&e),
            });
        }
    };

    let (class, key) = match classify(key) {
        Ok(classified) => classified,
        Err(Classified::Encrypted) => return Err(encrypted()),
        Err(Classified::Unsupported(algorithm)) => {
            return Err(MaterialError::UnsupportedAlgorithm {
                secret: name(),
                key: TLS_KEY,
                algorithm,
            });
        }
    };
    if let Some(class) = class
        && !class_matches(class, cert_kind)
    {
        return Err(MaterialError::KeyMismatch {
            secret: name(),
            key: TLS_KEY,
            cert_key: TLS_CRT,
            detail: format!(
                "{TLS_KEY} holds {}, the certificate has an {cert_kind} key",
                describe_class(class)
            ),
        });
    }

    provider
        .key_provider
        .load_private_key(key)
        .map_err(|_| MaterialError::UnparseableKey {
            secret: name(),
            key: TLS_KEY,
            reason: match class {
                Some(_) => "the crypto provider rejected the key (malformed or inconsistent)",
                None => "not a PKCS#8, PKCS#1 or SEC1 key the crypto provider can load",
            },
        })
}

/// The key's public key (as derived by the provider) must equal the leaf's.
fn check_match(
    name: &dyn Fn() -> SecretRef,
    key: &dyn SigningKey,
    cert_spki: &SubjectPublicKeyInfo<'_>,
) -> Result<(), MaterialError> {
    // A provider that cannot derive the public key (e.g. a remote signer)
    // cannot be checked; rustls treats that as "unknown", and so do we.
    let Some(key_spki) = key.public_key() else {
        return Ok(());
    };
    // Byte comparison of the DER SubjectPublicKeyInfo, as rustls's own
    // `CertifiedKey::keys_match` does: a certificate whose SPKI encodes the same
    // key differently (odd parameters, unused bits, a compressed point) is
    // reported as a mismatch rather than guessed at.
    if key_spki.as_ref() == cert_spki.raw {
        return Ok(());
    }
    Err(MaterialError::KeyMismatch {
        secret: name(),
        key: TLS_KEY,
        cert_key: TLS_CRT,
        detail: "the public key derived from the private key differs from the certificate's (SubjectPublicKeyInfo compared byte for byte)".to_owned(),
    })
}

/// The aws-lc-rs crypto provider with a key loader that reads the key type from
/// the DER first and calls only the matching aws-lc-rs loader.
///
/// rustls's own aws-lc-rs key provider tries RSA, then ECDSA P-256, P-384, P-521,
/// then Ed25519, and each failed attempt on a PKCS#8 key fully parses it (for
/// Ed25519 and EC keys that includes a scalar multiplication). An Ed25519 key is
/// thus parsed five times and a P-384 PKCS#8 key three times. This provider
/// parses each key once. Everything else (cipher suites, key exchange,
/// signature verification) is `rustls::crypto::aws_lc_rs::default_provider()`.
/// Keys this loader does not recognise go to rustls's loader unchanged.
pub fn crypto_provider() -> CryptoProvider {
    CryptoProvider {
        key_provider: &KEY_TYPE_DISPATCH,
        ..rustls::crypto::aws_lc_rs::default_provider()
    }
}

static KEY_TYPE_DISPATCH: KeyTypeDispatch = KeyTypeDispatch;

#[derive(Debug)]
struct KeyTypeDispatch;

impl rustls::crypto::KeyProvider for KeyTypeDispatch {
    fn load_private_key(
        &self,
        key_der: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
        use rustls::crypto::aws_lc_rs::sign;
        match (key_class(&key_der), &key_der) {
            (Some(KeyClass::Ec(_)), _) => sign::any_ecdsa_type(&key_der),
            (Some(KeyClass::Ed25519), PrivateKeyDer::Pkcs8(pkcs8)) => sign::any_eddsa_type(pkcs8),
            // RSA is rustls's first attempt anyway.
            _ => rustls::crypto::aws_lc_rs::default_provider()
                .key_provider
                .load_private_key(key_der),
        }
    }

    fn fips(&self) -> bool {
        rustls::crypto::aws_lc_rs::default_provider()
            .key_provider
            .fips()
    }
}

/// The key type named in a key's DER (PKCS#1, SEC1, or a PKCS#8 algorithm OID).
fn key_class(key: &PrivateKeyDer<'_>) -> Option<KeyClass> {
    match key {
        PrivateKeyDer::Pkcs1(_) => Some(KeyClass::Rsa),
        PrivateKeyDer::Sec1(_) => Some(KeyClass::Ec(None)),
        PrivateKeyDer::Pkcs8(pkcs8) => {
            let (info, _) = der::expect(pkcs8.secret_pkcs8_der(), tag::SEQUENCE)?;
            let (_version, rest) = der::expect(info, tag::INTEGER)?;
            let (alg_id, _) = der::expect(rest, tag::SEQUENCE)?;
            let (alg, _) = der::expect(alg_id, tag::OID)?;
            match alg {
                oid::RSA_ENCRYPTION => Some(KeyClass::Rsa),
                oid::EC_PUBLIC_KEY => Some(KeyClass::Ec(None)),
                oid::ED25519 => Some(KeyClass::Ed25519),
                _ => None,
            }
        }
        _ => None,
    }
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

    #[test]
    fn rsa_bits_ignore_sign_byte() {
        // SEQUENCE { INTEGER 0x00 0x80 .. (2048 bits), INTEGER 65537 }
        let mut modulus = vec![0x00, 0x80];
        modulus.resize(257, 0x01);
        let mut content = Vec::new();
        der::write_tlv(&mut content, tag::INTEGER, &modulus);
        der::write_tlv(&mut content, tag::INTEGER, &[0x01, 0x00, 0x01]);
        let mut key = Vec::new();
        der::write_tlv(&mut key, tag::SEQUENCE, &content);
        assert_eq!(rsa_modulus_bits(&key), Some(2048));
    }
}
