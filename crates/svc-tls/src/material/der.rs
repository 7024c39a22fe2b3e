//! The crate's DER, all through RustCrypto's `der` crate (re-exported by `pkcs8`, with
//! `pkcs8` for PKCS#8 and `pkcs1` for RSA keys, all three already built for `rsa`):
//! the object identifiers key classification names, and SEC1's `ECPrivateKey`
//! (RFC 5915), read to find a key's curve and written to hand the provider an EC key
//! with its curve named. See
//! `docs/decisions/private-keys-read-with-der-crates.md`.
//!
//! No hand-written TLV reader: what the crates refuse (indefinite lengths, BER,
//! trailing data) is "not DER this crate understands" and left to the crypto provider
//! to reject.

use pkcs8::ObjectIdentifier;
use pkcs8::der::asn1::{BitStringRef, ContextSpecific, OctetStringRef};
use pkcs8::der::{
    self, Decode, DecodeValue, Encode, EncodeValue, Header, Length, Reader, Sequence, TagMode,
    TagNumber, Writer,
};

/// Object identifiers.
pub(crate) mod oid {
    use pkcs8::ObjectIdentifier;

    /// 1.2.840.113549.1.1.1 rsaEncryption
    pub(crate) const RSA_ENCRYPTION: ObjectIdentifier =
        ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
    /// 1.2.840.113549.1.1.10 id-RSASSA-PSS
    const RSASSA_PSS: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.10");
    /// 1.2.840.10045.2.1 id-ecPublicKey
    pub(crate) const EC_PUBLIC_KEY: ObjectIdentifier =
        ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
    /// 1.2.840.10045.3.1.7 prime256v1 (P-256)
    pub(crate) const P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
    /// 1.3.132.0.34 secp384r1 (P-384)
    pub(crate) const P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
    /// 1.3.132.0.35 secp521r1 (P-521)
    pub(crate) const P521: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.35");
    /// 1.3.101.112 Ed25519
    pub(crate) const ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");

    /// Names of the OIDs an error may meet (those above and the usual refusals).
    const NAMES: [(ObjectIdentifier, &str); 10] = [
        (RSA_ENCRYPTION, "RSA"),
        (RSASSA_PSS, "RSASSA-PSS"),
        (P256, "P-256"),
        (P384, "P-384"),
        (P521, "P-521"),
        (ObjectIdentifier::new_unwrap("1.3.132.0.10"), "secp256k1"),
        (ED25519, "Ed25519"),
        (ObjectIdentifier::new_unwrap("1.3.101.113"), "Ed448"),
        (ObjectIdentifier::new_unwrap("1.3.101.110"), "X25519"),
        (ObjectIdentifier::new_unwrap("1.2.840.10040.4.1"), "DSA"),
    ];

    /// A readable name for an algorithm or curve OID (error paths only): `P-521
    /// (1.3.132.0.35)`, or the dotted form alone for an OID without a name here.
    pub(crate) fn describe(oid: &ObjectIdentifier) -> String {
        match NAMES.iter().find(|(known, _)| known == oid) {
            Some((_, name)) => format!("{name} ({oid})"),
            None => oid.to_string(),
        }
    }

    /// The OID whose content bytes another parser hands out (x509-parser's), `None`
    /// when they are not a valid OID.
    pub(crate) fn from_content(bytes: &[u8]) -> Option<ObjectIdentifier> {
        ObjectIdentifier::from_bytes(bytes).ok()
    }
}

/// `[0]`: `ECPrivateKey.parameters` (the curve).
const PARAMETERS: TagNumber = TagNumber(0);
/// `[1]`: `ECPrivateKey.publicKey`.
const PUBLIC_KEY: TagNumber = TagNumber(1);

/// SEC1's `ECPrivateKey` (RFC 5915 section 3), version 1, with a named curve when
/// given:
///
/// ```text
/// ECPrivateKey ::= SEQUENCE {
///   version        INTEGER { ecPrivkeyVer1(1) },
///   privateKey     OCTET STRING,
///   parameters [0] EXPLICIT ECParameters {{ NamedCurve }} OPTIONAL,
///   publicKey  [1] EXPLICIT BIT STRING OPTIONAL }
/// ```
pub(crate) struct EcPrivateKey<'a> {
    /// The private scalar.
    pub(crate) private_key: &'a OctetStringRef,
    /// The named curve, when the key names it.
    pub(crate) curve: Option<ObjectIdentifier>,
    /// The public point, when the key carries it.
    pub(crate) public_key: Option<BitStringRef<'a>>,
}

impl<'a> DecodeValue<'a> for EcPrivateKey<'a> {
    type Error = der::Error;

    fn decode_value<R: Reader<'a>>(reader: &mut R, header: Header) -> der::Result<Self> {
        if u8::decode(reader)? != 1 {
            return Err(reader.error(header.tag().value_error()));
        }
        Ok(Self {
            private_key: reader.decode()?,
            curve: reader.context_specific(PARAMETERS, TagMode::Explicit)?,
            public_key: reader.context_specific(PUBLIC_KEY, TagMode::Explicit)?,
        })
    }
}

impl EcPrivateKey<'_> {
    fn explicit<T>(tag_number: TagNumber, value: T) -> ContextSpecific<T> {
        ContextSpecific {
            tag_number,
            tag_mode: TagMode::Explicit,
            value,
        }
    }
}

impl EncodeValue for EcPrivateKey<'_> {
    fn value_len(&self) -> der::Result<Length> {
        1u8.encoded_len()?
            + self.private_key.encoded_len()?
            + self
                .curve
                .map(|c| Self::explicit(PARAMETERS, c))
                .encoded_len()?
            + self
                .public_key
                .map(|k| Self::explicit(PUBLIC_KEY, k))
                .encoded_len()?
    }

    fn encode_value(&self, writer: &mut impl Writer) -> der::Result<()> {
        1u8.encode(writer)?;
        self.private_key.encode(writer)?;
        self.curve
            .map(|c| Self::explicit(PARAMETERS, c))
            .encode(writer)?;
        self.public_key
            .map(|k| Self::explicit(PUBLIC_KEY, k))
            .encode(writer)
    }
}

impl<'a> Sequence<'a> for EcPrivateKey<'a> {}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn oids_are_named() {
        assert_eq!(oid::describe(&oid::P521), "P-521 (1.3.132.0.35)");
        assert_eq!(
            oid::describe(&ObjectIdentifier::new_unwrap("1.3.101.113")),
            "Ed448 (1.3.101.113)"
        );
        assert_eq!(
            oid::describe(&ObjectIdentifier::new_unwrap("1.2.3")),
            "1.2.3"
        );
        assert_eq!(
            oid::from_content(oid::RSA_ENCRYPTION.as_bytes()),
            Some(oid::RSA_ENCRYPTION)
        );
    }

    #[test]
    fn sec1_round_trips_with_and_without_its_optional_fields() {
        let scalar = [7u8; 32];
        let point = [4u8; 65];
        for (curve, public_key) in [
            (None, None),
            (Some(oid::P256), None),
            (None, Some(BitStringRef::from_bytes(&point).unwrap())),
            (
                Some(oid::P384),
                Some(BitStringRef::from_bytes(&point).unwrap()),
            ),
        ] {
            let key = EcPrivateKey {
                private_key: OctetStringRef::new(&scalar).unwrap(),
                curve,
                public_key,
            };
            let der = key.to_der().unwrap();
            let back = EcPrivateKey::from_der(&der).unwrap();
            assert_eq!(back.private_key.as_bytes(), &scalar);
            assert_eq!(back.curve, curve);
            assert_eq!(back.public_key, public_key);
        }
    }

    #[test]
    fn another_version_truncation_or_trailing_bytes_is_refused() {
        let key = EcPrivateKey {
            private_key: OctetStringRef::new(&[1u8; 32]).unwrap(),
            curve: Some(oid::P256),
            public_key: None,
        };
        let der = key.to_der().unwrap();
        let mut version_2 = der.clone();
        // SEQUENCE header (2 bytes), INTEGER tag and length, then the version.
        version_2[4] = 2;
        assert!(EcPrivateKey::from_der(&version_2).is_err());
        assert!(EcPrivateKey::from_der(&der[..der.len() - 1]).is_err());
        let mut trailing = der.clone();
        trailing.push(0);
        assert!(EcPrivateKey::from_der(&trailing).is_err());
    }
}
