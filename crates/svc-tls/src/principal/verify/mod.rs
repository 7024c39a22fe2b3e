//! Verifying: a token against the certificate a peer presented.
//!
//! PS512 has two paths. The fast one verifies through the aws-lc-rs provider
//! (`webpki::aws_lc_rs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY`), which requires
//! the PSS salt length to equal the hash length (64 bytes): what go-jose and
//! this crate produce, so nearly every token. When it rejects a token, the
//! general path (the `rsa` crate, salt length auto-detected as Go's verifier
//! does) decides, so tokens with another salt length still verify and a
//! tampered token is rejected by both.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rsa::pkcs8::DecodePublicKey as _;
use rsa::signature::Verifier as _;
use rsa::traits::PublicKeyParts as _;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;
use serde::de::DeserializeOwned;
use sha2::Sha512;
use x509_parser::oid_registry::{
    OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_NIST_EC_P384, OID_PKCS1_RSAENCRYPTION,
};
use x509_parser::prelude::FromDer as _;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use url::Url;

use super::jws::{
    Algorithm, AlgorithmPolicy, DEFAULT_CLOCK_SKEW, DEFAULT_MAX_PRINCIPAL_LIFETIME, Part,
    RawHeader, TokenTimes, sender_text,
};

mod claims;
mod error;
mod key;
mod options;

pub(crate) use claims::{Settled, audiences_of};
use claims::{check_audience, check_times, header_audience, header_times};
pub use error::{CertificateError, VerifyError};
use key::{PeerKey, peer_key, verify_ecdsa, verify_ps512_fast, verify_ps512_general};
pub(crate) use options::MIN_RSA_BITS;
pub use options::{DEFAULT_MAX_TOKEN_BYTES, VerifyOptions};

/// A peer's certificate (what it presented in the TLS handshake), with its public
/// key parsed once for verifying any number of principals.
#[derive(Clone)]
pub struct PeerCertificate {
    der: CertificateDer<'static>,
    key: PeerKey,
}

impl fmt::Debug for PeerCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerCertificate")
            .field("key", &self.key.name())
            .field("der_len", &self.der.len())
            .finish()
    }
}

impl PeerCertificate {
    /// Loads a DER certificate.
    ///
    /// # Errors
    /// When it is not an X.509 certificate or its public key is malformed.
    pub fn from_der(der: impl Into<CertificateDer<'static>>) -> Result<Self, CertificateError> {
        let der = der.into();
        let key = peer_key(&der)?;
        Ok(Self { der, key })
    }

    /// Loads the first `CERTIFICATE` of a PEM text.
    ///
    /// # Errors
    /// [`CertificateError::Pem`] / [`CertificateError::NoCertificate`] for bad PEM,
    /// otherwise as [`PeerCertificate::from_der`].
    pub fn from_pem(pem: &[u8]) -> Result<Self, CertificateError> {
        let der = match CertificateDer::from_pem_slice(pem) {
            Ok(der) => der,
            Err(rustls_pki_types::pem::Error::NoItemsFound) => {
                return Err(CertificateError::NoCertificate);
            }
            Err(e) => return Err(CertificateError::Pem(e)),
        };
        Self::from_der(der)
    }

    /// The certificate, DER.
    pub fn der(&self) -> &CertificateDer<'static> {
        &self.der
    }

    /// The certificate's key type, e.g. `RSA` or `ECDSA P-256`.
    pub fn key_type(&self) -> &'static str {
        self.key.name()
    }

    /// Verifies `token` against this certificate and decodes its payload. Tokens
    /// longer than [`DEFAULT_MAX_TOKEN_BYTES`] are refused unread
    /// ([`VerifyError::TooLarge`]); [`PeerCertificate::verify_with_max_len`] sets
    /// another cap.
    ///
    /// # Errors
    /// A [`VerifyError`] naming why the token was rejected.
    pub fn verify<T: DeserializeOwned>(
        &self,
        token: &str,
        policy: AlgorithmPolicy,
    ) -> Result<T, VerifyError> {
        self.verify_with_max_len(token, policy, DEFAULT_MAX_TOKEN_BYTES)
    }

    /// As [`PeerCertificate::verify`], with a cap of `max_len` bytes on the token,
    /// checked before anything else.
    ///
    /// # Errors
    /// A [`VerifyError`] naming why the token was rejected.
    pub fn verify_with_max_len<T: DeserializeOwned>(
        &self,
        token: &str,
        policy: AlgorithmPolicy,
        max_len: usize,
    ) -> Result<T, VerifyError> {
        self.verify_with_options(token, &VerifyOptions::new(policy).with_max_len(max_len))
    }

    /// Verifies `token` as `options` say and decodes its payload.
    ///
    /// # Errors
    /// A [`VerifyError`] naming why the token was rejected.
    pub fn verify_with_options<T: DeserializeOwned>(
        &self,
        token: &str,
        options: &VerifyOptions,
    ) -> Result<T, VerifyError> {
        self.verify_settling(token, options, &mut Settled::default())
    }

    /// [`PeerCertificate::verify_with_options`], noting in `settled` the algorithm
    /// once the token's `alg` is accepted (for the recorder's label), and what
    /// bindings an accepted token lacked (for the readiness counters).
    pub(super) fn verify_settling<T: DeserializeOwned>(
        &self,
        token: &str,
        options: &VerifyOptions,
        settled: &mut Settled,
    ) -> Result<T, VerifyError> {
        if token.len() > options.max_len {
            return Err(VerifyError::TooLarge {
                len: token.len(),
                max: options.max_len,
            });
        }
        let payload = self.verify_bytes(token, options, settled)?;
        serde_json::from_slice(&payload).map_err(|e| match e.classify() {
            serde_json::error::Category::Data => VerifyError::PayloadType(e),
            _ => VerifyError::PayloadNotJson(e),
        })
    }

    fn verify_bytes(
        &self,
        token: &str,
        options: &VerifyOptions,
        settled: &mut Settled,
    ) -> Result<Vec<u8>, VerifyError> {
        let policy = options.policy;
        if token.is_empty() {
            return Err(VerifyError::Empty);
        }
        // No allocation per part: a token made of dots costs one pass.
        let mut parts = token.splitn(3, '.');
        let (Some(header_b64), Some(payload_b64), Some(signature_b64)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(VerifyError::SegmentCount {
                found: token.bytes().filter(|b| *b == b'.').count() + 1,
            });
        };
        if signature_b64.contains('.') {
            return Err(VerifyError::SegmentCount {
                found: token.bytes().filter(|b| *b == b'.').count() + 1,
            });
        }

        let header = decode_part(header_b64, Part::Header)?;
        let header: RawHeader =
            serde_json::from_slice(&header).map_err(VerifyError::MalformedHeader)?;
        let algorithm = accept_algorithm(&header, policy)?;
        settled.algorithm = Some(algorithm);
        let times = header_times(&header, options.times)?;
        let audience = header_audience(&header, options)?;
        if let Some(crit) = header.crit {
            return Err(VerifyError::UnsupportedCritical {
                crit: crit.iter().take(8).map(|c| sender_text(c)).collect(),
            });
        }
        let payload = decode_part(payload_b64, Part::Payload)?;
        let signature = decode_part(signature_b64, Part::Signature)?;

        // The signing input is the received ASCII, as is.
        let signing_input = &token[..header_b64.len() + 1 + payload_b64.len()];
        match (&self.key, algorithm) {
            (PeerKey::Rsa { bits, .. }, Algorithm::Ps512) if *bits < MIN_RSA_BITS => {
                return Err(VerifyError::WeakRsaKey { bits: *bits });
            }
            (
                PeerKey::Rsa {
                    public_key, key, ..
                },
                Algorithm::Ps512,
            ) => {
                if verify_ps512_fast(public_key, signing_input.as_bytes(), &signature).is_err() {
                    verify_ps512_general(key, signing_input.as_bytes(), &signature)?;
                }
            }
            (PeerKey::EcP256(point), Algorithm::Es256) => {
                verify_ecdsa(point, signing_input.as_bytes(), &signature)?;
            }
            (PeerKey::EcP384(point), Algorithm::Es384) => {
                verify_ecdsa(point, signing_input.as_bytes(), &signature)?;
            }
            (PeerKey::Unsupported(key), _) => return Err(VerifyError::UnsupportedKeyType { key }),
            (key, alg) => {
                return Err(VerifyError::AlgorithmKeyMismatch {
                    alg,
                    key: key.name(),
                });
            }
        }
        // After the signature: a time or audience error speaks of an authentic
        // token (a replay, here or from another receiver).
        check_times(times, options)?;
        check_audience(audience, options)?;
        if let Some(replay) = &options.replay {
            check_replay(replay, &header, times, options)?;
        }
        settled.without_times = times.0.is_none() || times.1.is_none();
        settled.without_audience = header.aud.is_none();
        Ok(payload)
    }
}

/// A token's `jti` against the receiver's replay cache, kept until the token's `exp`
/// plus the skew (an untimed token, which the strict mode refuses before this, is
/// kept for the longest lifetime).
fn check_replay(
    replay: &super::ReplayCache,
    header: &super::jws::RawHeader,
    (_, exp): (Option<u64>, Option<u64>),
    options: &VerifyOptions,
) -> Result<(), VerifyError> {
    let jti = match &header.jti {
        None if options.jti_optional => return Ok(()),
        None => return Err(VerifyError::MissingJti),
        Some(serde_json::Value::String(jti))
            if !jti.is_empty()
                && jti.len() <= super::replay::MAX_JTI_BYTES
                && jti.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            jti
        }
        Some(_) => return Err(VerifyError::MalformedJti),
    };
    let now = options
        .now
        .unwrap_or_else(std::time::SystemTime::now)
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let until = exp
        .unwrap_or_else(|| now.saturating_add(options.max_lifetime.as_secs()))
        .saturating_add(options.clock_skew.as_secs());
    replay
        .accept(jti, until, now)
        .map_err(|refused| match refused {
            super::replay::Refused::Replayed => VerifyError::Replayed,
            super::replay::Refused::Full { capacity } => VerifyError::ReplayCacheFull { capacity },
        })
}

/// Verifies `token` against `certificate` and decodes its payload into `T`.
///
/// # Errors
/// A [`VerifyError`] naming why the token was rejected.
pub fn verify<T: DeserializeOwned>(
    token: &str,
    certificate: &PeerCertificate,
    policy: AlgorithmPolicy,
) -> Result<T, VerifyError> {
    certificate.verify(token, policy)
}

fn decode_part(part: &str, which: Part) -> Result<Vec<u8>, VerifyError> {
    URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| VerifyError::Base64 { part: which })
}

fn accept_algorithm(header: &RawHeader, policy: AlgorithmPolicy) -> Result<Algorithm, VerifyError> {
    let alg = match &header.alg {
        None => return Err(VerifyError::MissingAlgorithm),
        Some(serde_json::Value::String(alg)) => alg.as_str(),
        Some(other) => {
            return Err(VerifyError::AlgorithmNotAllowed {
                alg: sender_text(&other.to_string()),
                policy,
            });
        }
    };
    if alg.eq_ignore_ascii_case("none") {
        return Err(VerifyError::AlgorithmNone);
    }
    if alg
        .as_bytes()
        .get(..2)
        .is_some_and(|p| p.eq_ignore_ascii_case(b"HS"))
    {
        return Err(VerifyError::Hmac {
            alg: sender_text(alg),
        });
    }
    match Algorithm::from_name(alg) {
        Some(Algorithm::Ps512) => Ok(Algorithm::Ps512),
        Some(ecdsa) if policy.ecdsa() => Ok(ecdsa),
        _ => Err(VerifyError::AlgorithmNotAllowed {
            alg: sender_text(alg),
            policy,
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{self, RsaKeyPair, RsaPssSaltLength, RsaSignatureEncoding};
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    use super::*;

    const SALT_64: RsaSignatureEncoding =
        signature::RSA_PSS_SHA512.with_pss_salt_length(RsaPssSaltLength::Custom(64));
    const SALT_32: RsaSignatureEncoding =
        signature::RSA_PSS_SHA512.with_pss_salt_length(RsaPssSaltLength::Custom(32));

    /// A compact PS512 token over `payload`, signed with the given salt length.
    fn token(key: &RsaKeyPair, encoding: &'static RsaSignatureEncoding, payload: &[u8]) -> String {
        let mut input = Algorithm::Ps512.encoded_header();
        input.push('.');
        URL_SAFE_NO_PAD.encode_string(payload, &mut input);
        let mut sig = vec![0; key.public_modulus_len()];
        key.sign(encoding, &SystemRandom::new(), input.as_bytes(), &mut sig)
            .unwrap();
        input.push('.');
        URL_SAFE_NO_PAD.encode_string(&sig, &mut input);
        input
    }

    fn parts(token: &str) -> (&str, Vec<u8>) {
        let (input, sig) = token.rsplit_once('.').unwrap();
        (input, URL_SAFE_NO_PAD.decode(sig).unwrap())
    }

    #[test]
    fn ps512_fast_and_general_paths_agree_and_other_salts_take_the_general_path() {
        let generated =
            rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048)
                .unwrap();
        let cert = rcgen::CertificateParams::new(vec!["peer.svc.test".into()])
            .unwrap()
            .self_signed(&generated)
            .unwrap();
        let peer = PeerCertificate::from_der(cert.der().clone()).unwrap();
        let PeerKey::Rsa {
            public_key, key, ..
        } = &peer.key
        else {
            panic!("not an RSA peer key");
        };
        assert!(
            public_key.parsed.is_some(),
            "the provider parses the key once, with the certificate"
        );
        let signer = RsaKeyPair::from_pkcs8(&generated.serialize_der()).unwrap();
        let payload = br#"{"actor":"a"}"#;

        // Salt 64 (what go-jose and this crate sign): both paths accept it.
        let good = token(&signer, &SALT_64, payload);
        let (input, sig) = parts(&good);
        verify_ps512_fast(public_key, input.as_bytes(), &sig).unwrap();
        verify_ps512_general(key, input.as_bytes(), &sig).unwrap();

        // Tampered payload: both paths reject it, and so does the whole verifier.
        let (header, _) = input.split_once('.').unwrap();
        let tampered_input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(br#"{"actor":"b"}"#));
        assert!(verify_ps512_fast(public_key, tampered_input.as_bytes(), &sig).is_err());
        assert!(verify_ps512_general(key, tampered_input.as_bytes(), &sig).is_err());
        let tampered = format!("{tampered_input}.{}", URL_SAFE_NO_PAD.encode(&sig));
        assert!(matches!(
            peer.verify::<serde_json::Value>(&tampered, AlgorithmPolicy::default()),
            Err(VerifyError::BadSignature)
        ));

        // Salt 32: the fast path cannot verify it, the general path does, and
        // the whole verifier accepts it.
        let other_salt = token(&signer, &SALT_32, payload);
        let (input, sig) = parts(&other_salt);
        assert!(verify_ps512_fast(public_key, input.as_bytes(), &sig).is_err());
        verify_ps512_general(key, input.as_bytes(), &sig).unwrap();
        let value: serde_json::Value = peer
            .verify(&other_salt, AlgorithmPolicy::default())
            .unwrap();
        assert_eq!(value["actor"], "a");
        let value: serde_json::Value = peer.verify(&good, AlgorithmPolicy::default()).unwrap();
        assert_eq!(value["actor"], "a");
    }
}
