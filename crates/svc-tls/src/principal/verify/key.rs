//! The peer's public key, read from its certificate, and the signature checks with it
//! (ECDSA, PS512 fast and general paths).

use super::*;

/// The public key of a peer certificate, prepared for verifying principals.
#[derive(Clone)]
pub(super) enum PeerKey {
    Rsa {
        /// The provider's fast path (salt length 64).
        public_key: ProviderKey,
        /// The general path (any salt length).
        key: rsa::pss::VerifyingKey<Sha512>,
        bits: usize,
    },
    EcP256(ProviderKey),
    EcP384(ProviderKey),
    Unsupported(&'static str),
}

/// A public key for the crypto provider (aws-lc): parsed once, when the certificate
/// is, so that each verification skips the key parse (and, for RSA, the modulus's
/// Montgomery set-up, kept with the parsed key). When the provider refuses to parse
/// it, the bytes are verified unparsed, which fails as the parse did.
#[derive(Clone)]
pub(super) struct ProviderKey {
    algorithm: &'static dyn aws_lc_rs::signature::VerificationAlgorithm,
    pub(super) parsed: Option<aws_lc_rs::signature::ParsedPublicKey>,
    raw: Vec<u8>,
}

impl ProviderKey {
    fn new(
        algorithm: &'static dyn aws_lc_rs::signature::VerificationAlgorithm,
        raw: Vec<u8>,
    ) -> Self {
        Self {
            algorithm,
            parsed: aws_lc_rs::signature::ParsedPublicKey::new(algorithm, &raw).ok(),
            raw,
        }
    }

    fn verify(&self, message: &[u8], signature: &[u8]) -> Result<(), VerifyError> {
        match &self.parsed {
            Some(parsed) => parsed.verify_sig(message, signature),
            None => aws_lc_rs::signature::UnparsedPublicKey::new(self.algorithm, &self.raw)
                .verify(message, signature),
        }
        .map_err(|_| VerifyError::BadSignature)
    }
}

impl PeerKey {
    pub(super) fn name(&self) -> &'static str {
        match self {
            Self::Rsa { .. } => "RSA",
            Self::EcP256(_) => "ECDSA P-256",
            Self::EcP384(_) => "ECDSA P-384",
            Self::Unsupported(name) => name,
        }
    }
}

pub(super) fn peer_key(der: &CertificateDer<'_>) -> Result<PeerKey, CertificateError> {
    let (rest, cert) = x509_parser::certificate::X509Certificate::from_der(der.as_ref())
        .map_err(|e| CertificateError::X509(e.to_string()))?;
    if !rest.is_empty() {
        return Err(CertificateError::X509(
            "trailing data after the certificate".into(),
        ));
    }
    let spki = cert.public_key();
    let algorithm = &spki.algorithm.algorithm;
    if *algorithm == OID_PKCS1_RSAENCRYPTION {
        let key = rsa::PublicKey::from_public_key_der(spki.raw)
            .map_err(|e| CertificateError::RsaKey(e.to_string()))?;
        let bits = key.n().bit_width() as usize;
        return Ok(PeerKey::Rsa {
            public_key: ProviderKey::new(
                &aws_lc_rs::signature::RSA_PSS_2048_8192_SHA512,
                spki.subject_public_key.data.to_vec(),
            ),
            key: rsa::pss::VerifyingKey::new_with_auto_salt_len(key),
            bits,
        });
    }
    if *algorithm == OID_KEY_TYPE_EC_PUBLIC_KEY {
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| x509_parser::der_parser::oid::Oid::try_from(p).ok())
            .ok_or(CertificateError::EcKey)?;
        let point = spki.subject_public_key.data.to_vec();
        return Ok(if curve == OID_EC_P256 {
            PeerKey::EcP256(ProviderKey::new(
                &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED,
                point,
            ))
        } else if curve == OID_NIST_EC_P384 {
            PeerKey::EcP384(ProviderKey::new(
                &aws_lc_rs::signature::ECDSA_P384_SHA384_FIXED,
                point,
            ))
        } else {
            PeerKey::Unsupported("ECDSA (curve other than P-256/P-384)")
        });
    }
    Ok(PeerKey::Unsupported(
        match algorithm.to_id_string().as_str() {
            "1.3.101.112" => "Ed25519",
            "1.3.101.113" => "Ed448",
            "1.2.840.113549.1.1.10" => "RSASSA-PSS",
            _ => "unknown",
        },
    ))
}

/// A JWS ECDSA signature (`r||s`, RFC 7518 section 3.4) checked by the provider as
/// it is: the key's algorithm is the fixed-length one, which refuses any other
/// length.
pub(super) fn verify_ecdsa(
    point: &ProviderKey,
    message: &[u8],
    raw: &[u8],
) -> Result<(), VerifyError> {
    point.verify(message, raw)
}

/// PS512 through the aws-lc-rs provider: salt length equal to the hash length
/// (64 bytes) only, as go-jose and this crate sign. Keys of 2048 to 8192 bits.
pub(super) fn verify_ps512_fast(
    public_key: &ProviderKey,
    message: &[u8],
    signature: &[u8],
) -> Result<(), VerifyError> {
    public_key.verify(message, signature)
}

/// PS512 through the `rsa` crate, salt length auto-detected (Go's verifier
/// accepts any salt length too).
pub(super) fn verify_ps512_general(
    key: &rsa::pss::VerifyingKey<Sha512>,
    message: &[u8],
    signature: &[u8],
) -> Result<(), VerifyError> {
    let signature =
        rsa::pss::Signature::try_from(signature).map_err(|_| VerifyError::BadSignature)?;
    key.verify(message, &signature)
        .map_err(|_| VerifyError::BadSignature)
}
