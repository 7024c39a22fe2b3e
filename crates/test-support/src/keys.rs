//! Private keys in the encodings Secrets carry, for tests and benches.
//!
//! rcgen serializes keys as PKCS#8 only; cert-manager, Go and OpenSSL also write
//! PKCS#1 (`RSA PRIVATE KEY`) and SEC1 (`EC PRIVATE KEY`). The conversions read and
//! write DER with the `der`/`pkcs8` crates (no hand-written DER walker), so every test
//! and benchmark feeds the loaders the same bytes a real Secret would hold.
//!
//! Test support: malformed input panics here, as a failed test should.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine as _;
use pkcs8::der::asn1::AnyRef;
use pkcs8::der::{Decode, Encode, Reader, SliceReader, Tag, TagNumber, Tagged};
use rcgen::KeyPair;

/// How a private key is written into `tls.key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyFormat {
    /// `PRIVATE KEY` (PKCS#8), what rcgen and cert-manager's default write.
    Pkcs8,
    /// `RSA PRIVATE KEY` (PKCS#1), what `openssl rsa -traditional` writes.
    Pkcs1,
    /// `EC PRIVATE KEY` (SEC1) with the named curve, as Go's
    /// `x509.MarshalECPrivateKey` writes it.
    Sec1,
    /// SEC1 without the optional curve parameters (the curve must then come from
    /// the certificate).
    Sec1NoCurve,
}

/// `key` as a PEM block in `format`.
pub fn key_pem(key: &KeyPair, format: KeyFormat) -> String {
    let pkcs8 = key.serialize_der();
    match format {
        KeyFormat::Pkcs8 => pem("PRIVATE KEY", &pkcs8),
        KeyFormat::Pkcs1 => pem("RSA PRIVATE KEY", &pkcs8_inner(&pkcs8).0),
        KeyFormat::Sec1 => pem("EC PRIVATE KEY", &to_sec1(&pkcs8, true)),
        KeyFormat::Sec1NoCurve => pem("EC PRIVATE KEY", &to_sec1(&pkcs8, false)),
    }
}

/// One PEM block: `label` around the base64 of `der`, 64 characters a line.
pub fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The elements of a DER SEQUENCE.
pub fn sequence_elements(der: &[u8]) -> Vec<AnyRef<'_>> {
    let sequence = AnyRef::from_der(der).unwrap();
    assert_eq!(sequence.tag(), Tag::Sequence);
    let mut reader = SliceReader::new(sequence.value()).unwrap();
    let mut elements = Vec::new();
    while !reader.is_finished() {
        elements.push(reader.decode::<AnyRef<'_>>().unwrap());
    }
    elements
}

/// A DER TLV of `tag` around `value`.
pub fn tlv_of(tag: Tag, value: &[u8]) -> Vec<u8> {
    AnyRef::new(tag, value).unwrap().to_der().unwrap()
}

/// The private key inside a PKCS#8 PrivateKeyInfo (PKCS#1 for RSA, SEC1 for EC),
/// and the algorithm parameters as a TLV (the curve OID for EC; empty when absent).
pub fn pkcs8_inner(pkcs8: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let parsed = pkcs8::PrivateKeyInfoRef::try_from(pkcs8).unwrap();
    let params = parsed
        .algorithm
        .parameters
        .map(|p| p.to_der().unwrap())
        .unwrap_or_default();
    (parsed.private_key.as_bytes().to_vec(), params)
}

/// PKCS#8 EC -> SEC1 ECPrivateKey, with or without the named curve; the `[1]`
/// public key is kept as it is.
pub fn to_sec1(pkcs8: &[u8], with_curve: bool) -> Vec<u8> {
    let (inner, curve_oid) = pkcs8_inner(pkcs8);
    let elements = sequence_elements(&inner);
    let (version, private) = (elements[0], elements[1]);
    let mut content = version.to_der().unwrap();
    content.extend(private.to_der().unwrap());
    if with_curve {
        let tag = Tag::ContextSpecific {
            constructed: true,
            number: TagNumber(0),
        };
        content.extend(tlv_of(tag, &curve_oid));
    }
    for element in &elements[2..] {
        if let Tag::ContextSpecific {
            number: TagNumber(1),
            ..
        } = element.tag()
        {
            content.extend(element.to_der().unwrap());
        }
    }
    tlv_of(Tag::Sequence, &content)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sec1_keeps_the_private_scalar_and_names_the_curve_only_when_asked() {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let pkcs8 = key.serialize_der();
        let (inner, curve) = pkcs8_inner(&pkcs8);
        let with = to_sec1(&pkcs8, true);
        let without = to_sec1(&pkcs8, false);
        // The private scalar (second element) is the same in all three encodings.
        let scalar = sequence_elements(&inner)[1].value().to_vec();
        assert_eq!(sequence_elements(&with)[1].value(), scalar.as_slice());
        assert_eq!(sequence_elements(&without)[1].value(), scalar.as_slice());
        assert!(with.windows(curve.len()).any(|w| w == curve.as_slice()));
        assert!(!without.windows(curve.len()).any(|w| w == curve.as_slice()));
        assert!(key_pem(&key, KeyFormat::Sec1).starts_with("-----BEGIN EC PRIVATE KEY-----\n"));
    }

    #[test]
    fn pkcs1_is_the_rsa_key_inside_pkcs8() {
        let key =
            KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048).unwrap();
        let pkcs8 = key.serialize_der();
        let (inner, _) = pkcs8_inner(&pkcs8);
        // RSAPrivateKey: version, modulus, public exponent, ... (9 integers).
        assert_eq!(sequence_elements(&inner).len(), 9);
        assert!(key_pem(&key, KeyFormat::Pkcs1).starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
    }
}
