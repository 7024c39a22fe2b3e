//! Key classification and loading: what a key's DER says it is (read with the
//! `pkcs8` and `pkcs1` crates and `der`), checked against the certificate before the
//! provider loads it, and the loaded key checked against the certificate after.

use std::fmt;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::sign::SigningKey;
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{PrivateKeyDer, PrivateSec1KeyDer};
use x509_parser::x509::SubjectPublicKeyInfo;

use pkcs1::{RsaPrivateKeyRef, RsaPublicKeyRef};
use pkcs8::der::asn1::{OctetStringRef, UintRef};
use pkcs8::der::{Decode, Encode, Reader, SliceReader};
use pkcs8::{AlgorithmIdentifierRef, ObjectIdentifier, PrivateKeyInfoRef};

use super::der::{EcPrivateKey, oid};
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
    let Some(alg) = oid::from_content(spki.algorithm.algorithm.as_bytes()) else {
        return Err(format!("algorithm {}", spki.algorithm.algorithm));
    };
    if alg == oid::RSA_ENCRYPTION {
        let bits = RsaPublicKeyRef::from_der(&spki.subject_public_key.data)
            .ok()
            .and_then(|key| uint_bits(&key.modulus))
            .ok_or_else(|| "RSA (malformed public key)".to_owned())?;
        return if (2048..=8192).contains(&bits) {
            Ok(KeyKind::Rsa { bits })
        } else {
            Err(format!("RSA-{bits}"))
        };
    }
    if alg == oid::EC_PUBLIC_KEY {
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.as_oid().ok())
            .and_then(|c| oid::from_content(c.as_bytes()));
        return match curve {
            Some(curve) => curve_kind(&curve).map_err(|Unsupported(what)| what),
            None => Err("ECDSA without a named curve".to_owned()),
        };
    }
    if alg == oid::ED25519 {
        return Ok(KeyKind::Ed25519);
    }
    Err(oid::describe(&alg))
}

/// Significant bits of an unsigned DER INTEGER (`None` for zero).
fn uint_bits(integer: &UintRef<'_>) -> Option<usize> {
    // `UintRef` has dropped the sign byte and any leading zero.
    let bytes = integer.as_bytes();
    let (&top, _) = bytes.split_first()?;
    (top != 0).then(|| bytes.len() * 8 - top.leading_zeros() as usize)
}

/// Bits of the modulus of a DER `RSAPrivateKey` (PKCS#1).
fn rsa_private_modulus_bits(rsa_private_key: &[u8]) -> Option<usize> {
    uint_bits(&RsaPrivateKeyRef::from_der(rsa_private_key).ok()?.modulus)
}

/// Why a key's DER cannot be used, found before loading it.
pub(super) enum Unusable {
    /// PKCS#8 `EncryptedPrivateKeyInfo`.
    Encrypted,
    /// An algorithm or curve outside [`KeyKind`] (described for the error).
    Unsupported(String),
}

/// An algorithm or curve outside [`KeyKind`], described.
struct Unsupported(String);

impl From<Unsupported> for Unusable {
    fn from(Unsupported(what): Unsupported) -> Self {
        Self::Unsupported(what)
    }
}

/// Reads a PKCS#8 key (the `pkcs8` crate's `PrivateKeyInfo`, v1 or v2); `Ok(None)`
/// when it is neither that nor an `EncryptedPrivateKeyInfo` (left to the provider to
/// reject).
fn read_pkcs8(der: &[u8]) -> Result<Option<PrivateKeyInfoRef<'_>>, Unusable> {
    match PrivateKeyInfoRef::from_der(der) {
        Ok(info) => Ok(Some(info)),
        Err(_) if is_encrypted(der) => Err(Unusable::Encrypted),
        Err(_) => Ok(None),
    }
}

/// Whether `der` has the shape of PKCS#8's `EncryptedPrivateKeyInfo`
/// (`SEQUENCE { AlgorithmIdentifier, OCTET STRING }`, RFC 5208 section 6).
fn is_encrypted(der: &[u8]) -> bool {
    let Ok(mut reader) = SliceReader::new(der) else {
        return false;
    };
    reader
        .sequence(|body| {
            AlgorithmIdentifierRef::decode(body)?;
            <&OctetStringRef>::decode(body)?;
            Ok::<_, pkcs8::der::Error>(())
        })
        .and_then(|()| reader.finish())
        .is_ok()
}

/// The key kind a curve OID names, or why it is not supported.
fn curve_kind(curve: &ObjectIdentifier) -> Result<KeyKind, Unsupported> {
    match *curve {
        c if c == oid::P256 => Ok(KeyKind::EcdsaP256),
        c if c == oid::P384 => Ok(KeyKind::EcdsaP384),
        c if c == oid::P521 => Ok(KeyKind::EcdsaP521),
        other => Err(Unsupported(format!(
            "ECDSA curve {}",
            oid::describe(&other)
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
            Some(info) => pkcs8_kind(&info),
        },
        _ => Ok(None),
    }
}

fn pkcs8_kind(info: &PrivateKeyInfoRef<'_>) -> Result<Option<KeyKind>, Unusable> {
    let algorithm = info.algorithm.oid;
    if algorithm == oid::RSA_ENCRYPTION {
        return Ok(
            rsa_private_modulus_bits(info.private_key.as_bytes()).map(|bits| KeyKind::Rsa { bits })
        );
    }
    if algorithm == oid::ED25519 {
        return Ok(Some(KeyKind::Ed25519));
    }
    if algorithm == oid::EC_PUBLIC_KEY {
        return Ok(match info.algorithm.parameters_oid() {
            Ok(curve) => Some(curve_kind(&curve)?),
            Err(_) => None,
        });
    }
    Err(Unusable::Unsupported(oid::describe(&algorithm)))
}

/// [`classify_der`], also returning the key in the form the provider loads
/// fastest (PKCS#8 EC keys as SEC1 with named-curve parameters).
fn classify(
    key: PrivateKeyDer<'static>,
) -> Result<(Option<KeyKind>, PrivateKeyDer<'static>), Unusable> {
    let PrivateKeyDer::Pkcs8(pkcs8) = &key else {
        return Ok((classify_der(&key)?, key));
    };
    let Some(info) = read_pkcs8(pkcs8.secret_pkcs8_der())? else {
        return Ok((None, key));
    };
    let kind = pkcs8_kind(&info)?;
    let sec1 = match (info.algorithm.oid, info.algorithm.parameters_oid()) {
        (algorithm, Ok(curve)) if algorithm == oid::EC_PUBLIC_KEY => {
            sec1_with_curve(info.private_key.as_bytes(), curve)
        }
        _ => None,
    };
    match sec1 {
        Some(sec1) => Ok((kind, PrivateKeyDer::Sec1(PrivateSec1KeyDer::from(sec1)))),
        None => Ok((kind, key)),
    }
}

/// The curve named in a SEC1 `ECPrivateKey`'s parameters, when supported.
fn sec1_curve(sec1: &[u8]) -> Option<KeyKind> {
    curve_kind(&EcPrivateKey::from_der(sec1).ok()?.curve?).ok()
}

/// The SEC1 `ECPrivateKey` inside a PKCS#8 key, with the named curve as
/// parameters (PKCS#8 encoders usually omit them there). With the curve named,
/// a provider trying curves in turn rejects the wrong ones without any
/// arithmetic. The public key, when present, is kept.
fn sec1_with_curve(inner: &[u8], curve: ObjectIdentifier) -> Option<Vec<u8>> {
    let key = EcPrivateKey::from_der(inner).ok()?;
    EcPrivateKey {
        curve: Some(curve),
        ..key
    }
    .to_der()
    .ok()
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
        // The top byte 0x80 needs a leading zero in DER: 257 bytes, 2048 bits.
        let mut modulus = vec![0x80];
        modulus.resize(256, 0x01);
        let key = RsaPublicKeyRef {
            modulus: UintRef::new(&modulus).unwrap(),
            public_exponent: UintRef::new(&[0x01, 0x00, 0x01]).unwrap(),
        };
        let der = key.to_der().unwrap();
        let back = RsaPublicKeyRef::from_der(&der).unwrap();
        assert_eq!(uint_bits(&back.modulus), Some(2048));
        assert_eq!(uint_bits(&UintRef::new(&[0x00, 0x01]).unwrap()), Some(1));
    }

    fn der_of(pem: &str) -> PrivateKeyDer<'static> {
        PrivateKeyDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    /// Each key type in each encoding a Secret carries, generated here, is classified
    /// from its DER alone, and a PKCS#8 EC key is handed on as SEC1 naming its curve,
    /// which the provider loads.
    #[test]
    fn generated_keys_are_classified_in_every_encoding() {
        use test_support::keys::{KeyAlg, KeyFormat, key_pem};
        let provider = super::super::crypto_provider();
        for (alg, kind, formats) in [
            (
                KeyAlg::Rsa2048,
                Some(KeyKind::Rsa { bits: 2048 }),
                &[KeyFormat::Pkcs8, KeyFormat::Pkcs1][..],
            ),
            (
                KeyAlg::P256,
                Some(KeyKind::EcdsaP256),
                &[KeyFormat::Pkcs8, KeyFormat::Sec1][..],
            ),
            (
                KeyAlg::P384,
                Some(KeyKind::EcdsaP384),
                &[KeyFormat::Pkcs8, KeyFormat::Sec1][..],
            ),
            (
                KeyAlg::P521,
                Some(KeyKind::EcdsaP521),
                &[KeyFormat::Pkcs8, KeyFormat::Sec1][..],
            ),
            (
                KeyAlg::Ed25519,
                Some(KeyKind::Ed25519),
                &[KeyFormat::Pkcs8][..],
            ),
            // Without its curve a SEC1 key does not say: the provider decides.
            (KeyAlg::P256, None, &[KeyFormat::Sec1NoCurve][..]),
        ] {
            let key = alg.generate();
            for &format in formats {
                let der = der_of(&key_pem(&key, format));
                let what = format!("{alg:?} {format:?}");
                assert_eq!(classify_der(&der).ok(), Some(kind), "{what}");
                let (classified, handed_on) = classify(der).ok().unwrap();
                assert_eq!(classified, kind, "{what}");
                if matches!(alg, KeyAlg::P256 | KeyAlg::P384 | KeyAlg::P521) {
                    if let PrivateKeyDer::Sec1(sec1) = &handed_on
                        && format == KeyFormat::Pkcs8
                    {
                        let named = EcPrivateKey::from_der(sec1.secret_sec1_der()).unwrap();
                        assert!(named.curve.is_some(), "{what}: the curve is named");
                        assert!(named.public_key.is_some(), "{what}: the point is kept");
                    } else if format == KeyFormat::Pkcs8 {
                        panic!("{what}: a PKCS#8 EC key is handed on as SEC1");
                    }
                }
                provider
                    .key_provider
                    .load_private_key(handed_on)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
            }
        }
    }

    /// An `EncryptedPrivateKeyInfo` is recognised by its whole shape, so other DER
    /// that merely opens with a nested SEQUENCE (which the hand-written reader took
    /// for an encrypted key) is left to the provider, which refuses it.
    #[test]
    fn only_the_whole_encrypted_shape_is_an_encrypted_key() {
        use pkcs8::der::Tag;
        use pkcs8::der::asn1::AnyRef;
        let tlv = |tag, value: &[u8]| AnyRef::new(tag, value).unwrap().to_der().unwrap();
        let pbes2 = ObjectIdentifier::new_unwrap("1.2.840.113549.1.5.13");
        let algorithm = tlv(
            Tag::Sequence,
            &[pbes2.to_der().unwrap(), tlv(Tag::Sequence, &[])].concat(),
        );
        let encrypted = tlv(
            Tag::Sequence,
            &[algorithm.clone(), tlv(Tag::OctetString, &[0xa5; 64])].concat(),
        );
        let pkcs8 = |der: Vec<u8>| PrivateKeyDer::Pkcs8(der.into());
        assert!(matches!(
            classify_der(&pkcs8(encrypted)),
            Err(Unusable::Encrypted)
        ));
        // A nested SEQUENCE, then an INTEGER: neither shape.
        let nested = tlv(
            Tag::Sequence,
            &[algorithm, tlv(Tag::Integer, &[0x01])].concat(),
        );
        assert!(matches!(classify_der(&pkcs8(nested)), Ok(None)));
    }
}
