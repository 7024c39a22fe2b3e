//! Key classification and loading: what a key's DER says it is, checked against
//! the certificate before the provider loads it, and the loaded key checked
//! against the certificate after.

use std::fmt;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::sign::SigningKey;
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{PrivateKeyDer, PrivateSec1KeyDer};
use x509_parser::x509::SubjectPublicKeyInfo;

use super::der::{self, oid, tag};
use super::pem::{contains, pem_reason};
use super::{MaterialError, MaterialErrorKind, TLS_CRT, TLS_KEY};
use crate::origin::MaterialOrigin;

/// The key type of an identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// RSA with a modulus of `bits` bits (2048 to 8192).
    Rsa {
        /// Modulus size in bits.
        bits: usize,
    },
    /// ECDSA on NIST P-256.
    EcdsaP256,
    /// ECDSA on NIST P-384.
    EcdsaP384,
    /// ECDSA on NIST P-521 (signs with `ecdsa_secp521r1_sha512`, as Go's
    /// `crypto/tls` does).
    EcdsaP521,
    /// Ed25519.
    Ed25519,
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rsa { bits } => write!(f, "RSA-{bits}"),
            Self::EcdsaP256 => f.write_str("ECDSA P-256"),
            Self::EcdsaP384 => f.write_str("ECDSA P-384"),
            Self::EcdsaP521 => f.write_str("ECDSA P-521"),
            Self::Ed25519 => f.write_str("Ed25519"),
        }
    }
}

/// The key kind of a certificate's SubjectPublicKeyInfo, or a description of the
/// unsupported algorithm.
pub(super) fn cert_key_kind(spki: &SubjectPublicKeyInfo<'_>) -> Result<KeyKind, String> {
    let alg = spki.algorithm.algorithm.as_bytes();
    match alg {
        oid::RSA_ENCRYPTION => {
            let bits = rsa_modulus_bits(&spki.subject_public_key.data)
                .ok_or_else(|| "RSA (malformed public key)".to_owned())?;
            if (2048..=8192).contains(&bits) {
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
                Some(oid::P521) => Ok(KeyKind::EcdsaP521),
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
    integer_bits(modulus)
}

/// Bits of the modulus of a DER `RSAPrivateKey` (PKCS#1: version, then modulus).
fn rsa_private_modulus_bits(rsa_private_key: &[u8]) -> Option<usize> {
    let (seq, _) = der::expect(rsa_private_key, tag::SEQUENCE)?;
    let (_version, rest) = der::expect(seq, tag::INTEGER)?;
    let (modulus, _) = der::expect(rest, tag::INTEGER)?;
    integer_bits(modulus)
}

/// Significant bits of a DER INTEGER's content (a leading sign byte ignored).
fn integer_bits(integer: &[u8]) -> Option<usize> {
    let skip = integer.iter().take_while(|&&b| b == 0).count();
    let significant = integer.get(skip..)?;
    let (&top, _) = significant.split_first()?;
    Some((significant.len() - 1) * 8 + (8 - top.leading_zeros() as usize))
}

/// Why a key's DER cannot be used, found before loading it.
pub(super) enum Unusable {
    /// PKCS#8 `EncryptedPrivateKeyInfo`.
    Encrypted,
    /// An algorithm or curve outside [`KeyKind`] (described for the error).
    Unsupported(String),
}

/// The parts of a PKCS#8 `PrivateKeyInfo` classification needs. This is the
/// crate's one PKCS#8 reader.
struct Pkcs8<'a> {
    /// The algorithm OID (content bytes).
    algorithm: &'a [u8],
    /// The curve OID (content bytes) for EC keys, when present.
    curve: Option<&'a [u8]>,
    /// The `privateKey` OCTET STRING's content (PKCS#1, SEC1 or a raw key).
    private_key: Option<&'a [u8]>,
}

/// Reads a PKCS#8 key's algorithm and inner key; `Ok(None)` when it is not DER
/// this reader understands (left to the provider to reject).
fn read_pkcs8(der: &[u8]) -> Result<Option<Pkcs8<'_>>, Unusable> {
    let Some((info, _)) = der::expect(der, tag::SEQUENCE) else {
        return Ok(None);
    };
    // EncryptedPrivateKeyInfo starts with an AlgorithmIdentifier SEQUENCE;
    // PrivateKeyInfo with the INTEGER version.
    if info.first() == Some(&tag::SEQUENCE) {
        return Err(Unusable::Encrypted);
    }
    let Some((_version, rest)) = der::expect(info, tag::INTEGER) else {
        return Ok(None);
    };
    let Some((alg_id, rest)) = der::expect(rest, tag::SEQUENCE) else {
        return Ok(None);
    };
    let Some((algorithm, params)) = der::expect(alg_id, tag::OID) else {
        return Ok(None);
    };
    Ok(Some(Pkcs8 {
        algorithm,
        curve: der::expect(params, tag::OID).map(|(curve, _)| curve),
        private_key: der::expect(rest, tag::OCTET_STRING).map(|(inner, _)| inner),
    }))
}

/// The key kind a curve OID names, or why it is not supported.
fn curve_kind(curve: &[u8]) -> Result<KeyKind, Unusable> {
    match curve {
        oid::P256 => Ok(KeyKind::EcdsaP256),
        oid::P384 => Ok(KeyKind::EcdsaP384),
        oid::P521 => Ok(KeyKind::EcdsaP521),
        other => Err(Unusable::Unsupported(format!(
            "ECDSA curve {}",
            oid::describe(other)
        ))),
    }
}

/// The key kind a private key's DER names (PKCS#1, SEC1 with a named curve, or
/// a PKCS#8 algorithm OID), read without loading the key. `Ok(None)` when the
/// DER does not say (e.g. SEC1 without curve parameters): the provider decides.
pub(super) fn classify_der(key: &PrivateKeyDer<'_>) -> Result<Option<KeyKind>, Unusable> {
    match key {
        PrivateKeyDer::Pkcs1(pkcs1) => Ok(
            rsa_private_modulus_bits(pkcs1.secret_pkcs1_der()).map(|bits| KeyKind::Rsa { bits })
        ),
        PrivateKeyDer::Sec1(sec1) => Ok(sec1_curve(sec1.secret_sec1_der())),
        PrivateKeyDer::Pkcs8(pkcs8) => match read_pkcs8(pkcs8.secret_pkcs8_der())? {
            None => Ok(None),
            Some(parts) => pkcs8_kind(&parts),
        },
        _ => Ok(None),
    }
}

fn pkcs8_kind(parts: &Pkcs8<'_>) -> Result<Option<KeyKind>, Unusable> {
    match parts.algorithm {
        oid::RSA_ENCRYPTION => Ok(parts
            .private_key
            .and_then(rsa_private_modulus_bits)
            .map(|bits| KeyKind::Rsa { bits })),
        oid::ED25519 => Ok(Some(KeyKind::Ed25519)),
        oid::EC_PUBLIC_KEY => parts.curve.map(curve_kind).transpose(),
        other => Err(Unusable::Unsupported(oid::describe(other))),
    }
}

/// [`classify_der`], also returning the key in the form the provider loads
/// fastest (PKCS#8 EC keys as SEC1 with named-curve parameters).
fn classify(
    key: PrivateKeyDer<'static>,
) -> Result<(Option<KeyKind>, PrivateKeyDer<'static>), Unusable> {
    let PrivateKeyDer::Pkcs8(pkcs8) = &key else {
        return Ok((classify_der(&key)?, key));
    };
    let Some(parts) = read_pkcs8(pkcs8.secret_pkcs8_der())? else {
        return Ok((None, key));
    };
    let kind = pkcs8_kind(&parts)?;
    let sec1 = match (parts.algorithm, parts.curve, parts.private_key) {
        (oid::EC_PUBLIC_KEY, Some(curve), Some(inner)) => sec1_with_curve(inner, curve),
        _ => None,
    };
    match sec1 {
        Some(sec1) => Ok((kind, PrivateKeyDer::Sec1(PrivateSec1KeyDer::from(sec1)))),
        None => Ok((kind, key)),
    }
}

/// The curve named in a SEC1 `ECPrivateKey`'s parameters, when supported.
fn sec1_curve(sec1: &[u8]) -> Option<KeyKind> {
    let (body, _) = der::expect(sec1, tag::SEQUENCE)?;
    let (_version, rest) = der::expect(body, tag::INTEGER)?;
    let (_private, rest) = der::expect(rest, tag::OCTET_STRING)?;
    let (params, _) = der::expect(rest, tag::CTX0)?;
    let (curve, _) = der::expect(params, tag::OID)?;
    curve_kind(curve).ok()
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

/// Whether a key of kind `key` can belong to a certificate with a `cert` key.
/// RSA sizes are not compared here: a different key is caught by
/// [`check_match`] with the public keys compared.
fn same_type(key: KeyKind, cert: KeyKind) -> bool {
    match (key, cert) {
        (KeyKind::Rsa { .. }, KeyKind::Rsa { .. }) => true,
        (key, cert) => key == cert,
    }
}

fn describe_key(kind: KeyKind) -> String {
    match kind {
        KeyKind::Rsa { .. } => "an RSA key".to_owned(),
        other => format!("an {other} key"),
    }
}

pub(super) fn load_key(
    name: &dyn Fn() -> MaterialOrigin,
    key_pem: &[u8],
    cert_kind: KeyKind,
    provider: &CryptoProvider,
) -> Result<Arc<dyn SigningKey>, MaterialError> {
    let encrypted = || MaterialError::new(name(), Some(TLS_KEY), MaterialErrorKind::EncryptedKey);
    let key = match PrivateKeyDer::from_pem_slice(key_pem) {
        Ok(key) => key,
        Err(_) if contains(key_pem, b"ENCRYPTED") => return Err(encrypted()),
        Err(pem::Error::NoItemsFound) if contains(key_pem, b"-----BEGIN ") => {
            return Err(MaterialError::new(
                name(),
                Some(TLS_KEY),
                MaterialErrorKind::NoPrivateKey,
            ));
        }
        Err(pem::Error::NoItemsFound) => {
            return Err(MaterialError::new(
                name(),
                Some(TLS_KEY),
                MaterialErrorKind::NotPem {
                    reason: "no PEM section (expected -----BEGIN PRIVATE KEY-----)",
                },
            ));
        }
        Err(e) => {
            return Err(MaterialError::new(
                name(),
                Some(TLS_KEY),
                MaterialErrorKind::NotPem {
                    reason: pem_reason(&e),
                },
            ));
        }
    };

    load_key_der(name, key, cert_kind, provider)
}

/// [`load_key`] for a key already out of its PEM (as the SPIFFE Workload API hands
/// out PKCS#8 DER).
pub(super) fn load_key_der(
    name: &dyn Fn() -> MaterialOrigin,
    key: PrivateKeyDer<'static>,
    cert_kind: KeyKind,
    provider: &CryptoProvider,
) -> Result<Arc<dyn SigningKey>, MaterialError> {
    let encrypted = || MaterialError::new(name(), Some(TLS_KEY), MaterialErrorKind::EncryptedKey);
    let (class, key) = match classify(key) {
        Ok(classified) => classified,
        Err(Unusable::Encrypted) => return Err(encrypted()),
        Err(Unusable::Unsupported(algorithm)) => {
            return Err(MaterialError::new(
                name(),
                Some(TLS_KEY),
                MaterialErrorKind::UnsupportedAlgorithm { algorithm },
            ));
        }
    };
    if let Some(class) = class
        && !same_type(class, cert_kind)
    {
        return Err(MaterialError::new(
            name(),
            Some(TLS_KEY),
            MaterialErrorKind::KeyMismatch {
                cert_key: TLS_CRT,
                detail: format!(
                    "{TLS_KEY} holds {}, the certificate has an {cert_kind} key",
                    describe_key(class)
                ),
            },
        ));
    }

    provider.key_provider.load_private_key(key).map_err(|_| {
        MaterialError::new(
            name(),
            Some(TLS_KEY),
            MaterialErrorKind::UnparseableKey {
                reason: match class {
                    Some(_) => "the crypto provider rejected the key (malformed or inconsistent)",
                    None => "not a PKCS#8, PKCS#1 or SEC1 key the crypto provider can load",
                },
            },
        )
    })
}

/// The key's public key (as derived by the provider) must equal the leaf's.
pub(super) fn check_match(
    name: &dyn Fn() -> MaterialOrigin,
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
    Err(MaterialError::new(name(), Some(TLS_KEY), MaterialErrorKind::KeyMismatch { cert_key: TLS_CRT, detail: "the public key derived from the private key differs from the certificate's (SubjectPublicKeyInfo compared byte for byte)".to_owned() }))
}
#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

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
