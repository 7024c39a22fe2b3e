//! The crate's one DER reader and writer: classifying private keys (PKCS#8,
//! PKCS#1, SEC1) without loading them, re-encoding a PKCS#8 EC key as SEC1, and
//! converting ECDSA signatures between DER and JWS form ([`crate::principal`]).
//!
//! Only what those need: definite lengths up to 4 length bytes,
//! single-byte tags. Anything else is "not DER" and left to the crypto
//! provider to reject.

/// DER tags used here.
pub(crate) mod tag {
    pub(crate) const INTEGER: u8 = 0x02;
    pub(crate) const OCTET_STRING: u8 = 0x04;
    pub(crate) const OID: u8 = 0x06;
    pub(crate) const SEQUENCE: u8 = 0x30;
    /// `[0]` constructed, context-specific.
    pub(crate) const CTX0: u8 = 0xa0;
    /// `[1]` constructed, context-specific.
    pub(crate) const CTX1: u8 = 0xa1;
}

/// Object identifiers (DER content bytes).
pub(crate) mod oid {
    /// 1.2.840.113549.1.1.1 rsaEncryption
    pub(crate) const RSA_ENCRYPTION: &[u8] =
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
    /// 1.2.840.113549.1.1.10 id-RSASSA-PSS
    pub(crate) const RSASSA_PSS: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a];
    /// 1.2.840.10045.2.1 id-ecPublicKey
    pub(crate) const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
    /// 1.2.840.10045.3.1.7 prime256v1 (P-256)
    pub(crate) const P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
    /// 1.3.132.0.34 secp384r1 (P-384)
    pub(crate) const P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
    /// 1.3.132.0.35 secp521r1 (P-521)
    pub(crate) const P521: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x23];
    /// 1.3.132.0.10 secp256k1
    pub(crate) const SECP256K1: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x0a];
    /// 1.3.101.112 Ed25519
    pub(crate) const ED25519: &[u8] = &[0x2b, 0x65, 0x70];
    /// 1.3.101.113 Ed448
    pub(crate) const ED448: &[u8] = &[0x2b, 0x65, 0x71];
    /// 1.3.101.110 X25519
    pub(crate) const X25519: &[u8] = &[0x2b, 0x65, 0x6e];
    /// 1.2.840.10040.4.1 DSA
    pub(crate) const DSA: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x38, 0x04, 0x01];

    /// A readable name for an algorithm or curve OID (error paths only).
    pub(crate) fn describe(oid: &[u8]) -> String {
        let known = match oid {
            RSA_ENCRYPTION => Some("RSA"),
            RSASSA_PSS => Some("RSASSA-PSS"),
            P256 => Some("P-256"),
            P384 => Some("P-384"),
            P521 => Some("P-521"),
            SECP256K1 => Some("secp256k1"),
            ED25519 => Some("Ed25519"),
            ED448 => Some("Ed448"),
            X25519 => Some("X25519"),
            DSA => Some("DSA"),
            _ => None,
        };
        let dotted = dotted(oid);
        match known {
            Some(name) => format!("{name} ({dotted})"),
            None => dotted,
        }
    }

    /// The dotted form of an OID's content bytes.
    pub(crate) fn dotted(oid: &[u8]) -> String {
        let mut arcs: Vec<u128> = Vec::new();
        let mut acc: u128 = 0;
        for &b in oid {
            acc = (acc << 7) | u128::from(b & 0x7f);
            if b & 0x80 == 0 {
                if arcs.is_empty() {
                    let (first, second) = match acc {
                        0..40 => (0, acc),
                        40..80 => (1, acc - 40),
                        _ => (2, acc - 80),
                    };
                    arcs.push(first);
                    arcs.push(second);
                } else {
                    arcs.push(acc);
                }
                acc = 0;
            }
        }
        arcs.iter()
            .map(u128::to_string)
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// One TLV: `(tag, value, rest)`.
pub(crate) fn read_tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (len_bytes, rest) = rest.split_at(n);
        let len = len_bytes
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, rest)
    };
    if rest.len() < len {
        return None;
    }
    let (value, rest) = rest.split_at(len);
    Some((tag, value, rest))
}

/// Reads a TLV with the expected tag.
pub(crate) fn expect(input: &[u8], want: u8) -> Option<(&[u8], &[u8])> {
    let (tag, value, rest) = read_tlv(input)?;
    (tag == want).then_some((value, rest))
}

/// Appends a DER TLV.
pub(crate) fn write_tlv(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    out.push(tag);
    let len = value.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        let significant = &bytes[skip..];
        out.push(0x80 | significant.len() as u8);
        out.extend_from_slice(significant);
    }
    out.extend_from_slice(value);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn tlv_round_trip_short_and_long() {
        for len in [0usize, 1, 127, 128, 255, 256, 70_000] {
            let value = vec![7u8; len];
            let mut out = Vec::new();
            write_tlv(&mut out, tag::OCTET_STRING, &value);
            out.push(0xff);
            let (t, v, rest) = read_tlv(&out).unwrap();
            assert_eq!(t, tag::OCTET_STRING);
            assert_eq!(v, &value[..]);
            assert_eq!(rest, &[0xff]);
        }
    }

    #[test]
    fn truncated_or_indefinite_is_rejected() {
        assert!(read_tlv(&[]).is_none());
        assert!(read_tlv(&[0x30]).is_none());
        assert!(read_tlv(&[0x30, 0x05, 0x00]).is_none());
        assert!(read_tlv(&[0x30, 0x80, 0x00, 0x00]).is_none());
        assert!(read_tlv(&[0x30, 0x82, 0x01]).is_none());
    }

    #[test]
    fn oids_are_named() {
        assert_eq!(oid::dotted(oid::P521), "1.3.132.0.35");
        assert_eq!(oid::dotted(oid::RSA_ENCRYPTION), "1.2.840.113549.1.1.1");
        assert_eq!(oid::describe(oid::P521), "P-521 (1.3.132.0.35)");
        assert_eq!(oid::describe(&[0x2a, 0x03]), "1.2.3");
    }
}
