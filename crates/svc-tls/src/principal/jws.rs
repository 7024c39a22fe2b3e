//! JWS compact encoding: the algorithms, the protected header, the token, and
//! ECDSA signatures from DER (what the provider signs) to JWS `r||s` (verification
//! takes `r||s` as it is: the provider's fixed-length algorithms).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::header::HeaderValue;
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};

use pkcs8::der::asn1::UintRef;
use pkcs8::der::{Decode, Reader, SliceReader};

/// Which JWS algorithms may be produced and accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AlgorithmPolicy {
    /// PS512 only: what the older Go services produce and accept. For peers that still
    /// run the older verifier: an ECDSA identity cannot sign under it.
    Ps512Only,
    /// The key decides: PS512 for RSA keys, ES256 for P-256 and ES384 for P-384 keys;
    /// a verifier accepts each only with a certificate of that key type. What the
    /// newest Go client signs and verifies (SPIRE issues P-256 SVIDs by default), and
    /// the default.
    #[default]
    Ps512OrEcdsa,
}

impl AlgorithmPolicy {
    pub(super) fn ecdsa(self) -> bool {
        self == Self::Ps512OrEcdsa
    }
}

/// A JWS algorithm this module can produce or accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// RSASSA-PSS with SHA-512 (salt 64 when signing).
    Ps512,
    /// ECDSA P-256 with SHA-256, raw `r||s`.
    Es256,
    /// ECDSA P-384 with SHA-384, raw `r||s`.
    Es384,
}

impl Algorithm {
    /// The JWS `alg` name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ps512 => "PS512",
            Self::Es256 => "ES256",
            Self::Es384 => "ES384",
        }
    }

    pub(super) fn from_name(name: &str) -> Option<Self> {
        match name {
            "PS512" => Some(Self::Ps512),
            "ES256" => Some(Self::Es256),
            "ES384" => Some(Self::Es384),
            _ => None,
        }
    }

    /// The protected header `{"alg":...}` alone, base64url: what Go senders emit.
    #[cfg(test)]
    pub(super) fn encoded_header(self) -> String {
        URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"{}"}}"#, self.name()))
    }

    /// The protected header this module emits, base64url:
    /// `{"alg":...,"iat":...,"exp":...,"aud":...}` (times in seconds since the
    /// epoch; `aud` the receiver's origin, a JSON string). go-jose keeps header
    /// members it does not know (none is listed in `crit`), so Go verifiers accept
    /// it; the payload is unchanged.
    pub(super) fn encoded_header_with_times(
        self,
        iat: u64,
        exp: u64,
        aud: &str,
        jti: &str,
    ) -> String {
        // A `String` always serializes; the fallback is never taken.
        let aud = serde_json::to_string(aud).unwrap_or_else(|_| "\"\"".to_owned());
        // `jti` is base64url (no character JSON escapes).
        URL_SAFE_NO_PAD.encode(format!(
            r#"{{"alg":"{}","iat":{iat},"exp":{exp},"aud":{aud},"jti":"{jti}"}}"#,
            self.name()
        ))
    }

    /// Length of one ECDSA coordinate in bytes.
    pub(super) fn ecdsa_field_len(self) -> Option<usize> {
        match self {
            Self::Ps512 => None,
            Self::Es256 => Some(32),
            Self::Es384 => Some(48),
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a verifier requires a token to be bound to its time and its receiver:
/// issue and expiry times (`iat`, `exp`, seconds since the epoch) and an audience
/// (`aud`) in its protected header. Present times are always checked, with a
/// clock-skew allowance and the lifetime cap; a present audience is checked
/// whenever the receiver names its audiences.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenTimes {
    /// Checked when present; a token without them (from a Go sender, or an older
    /// version of this crate) is accepted, and counted
    /// ([`TokenRecorder::accepted_without_times`](super::TokenRecorder::accepted_without_times),
    /// [`TokenRecorder::accepted_without_audience`](super::TokenRecorder::accepted_without_audience))
    /// so operators can see when every sender binds its tokens. The default.
    #[default]
    CheckedWhenPresent,
    /// The strict mode: `iat`, `exp` and `aud` must all be present, and the
    /// receiver must name its audiences. A token without times is refused
    /// ([`VerifyError::MissingTimes`](super::VerifyError::MissingTimes)), one
    /// without an audience too ([`VerifyError::MissingAudience`](super::VerifyError::MissingAudience)),
    /// and a receiver that names no audience refuses every token
    /// ([`VerifyError::AudienceNotConfigured`](super::VerifyError::AudienceNotConfigured)):
    /// strict means bound to this receiver, which it cannot check without knowing
    /// its name. For receivers whose senders all sign with this crate.
    Required,
}

/// How long a token this crate signs is valid (`exp - iat`). A principal is signed
/// per request, so a minute leaves room for retries and queueing while bounding how
/// long a captured `X-Principal` can be replayed.
pub const DEFAULT_PRINCIPAL_LIFETIME: std::time::Duration = std::time::Duration::from_secs(60);

/// The clock difference tolerated between signer and verifier when checking `iat`
/// and `exp`.
pub const DEFAULT_CLOCK_SKEW: std::time::Duration = std::time::Duration::from_secs(60);

/// The longest lifetime (`exp - iat`) a verifier accepts by default: a sender
/// chooses its tokens' lifetime, and without a cap one that chose a day made
/// every captured token replayable for a day. Five times
/// [`DEFAULT_PRINCIPAL_LIFETIME`]: room for a sender that raised its lifetime for
/// slow queues or retries, while a captured token replays for at most about six
/// minutes (the cap and [`DEFAULT_CLOCK_SKEW`]). A token with `exp` but no `iat`
/// may not expire later than the cap from now; one with `iat` but no `exp` is
/// refused once older than the cap.
pub const DEFAULT_MAX_PRINCIPAL_LIFETIME: std::time::Duration = std::time::Duration::from_secs(300);

/// A signed principal: a compact JWS. Its `Debug` output never shows the token.
#[derive(Clone)]
pub struct PrincipalToken {
    pub(super) token: String,
    pub(super) header: HeaderValue,
    pub(super) algorithm: Algorithm,
    /// The origin it was signed for (its `aud`).
    pub(super) audience: String,
}

impl PrincipalToken {
    /// The compact serialization, for sending.
    pub fn as_str(&self) -> &str {
        &self.token
    }

    /// The compact serialization, owned.
    pub fn into_string(self) -> String {
        self.token
    }

    /// The algorithm it was signed with.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The receiver it was signed for: the origin (`https://host[:port]`) in its
    /// `aud` header member.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// The token as an HTTP header value, marked sensitive (kept out of HPACK
    /// indexing and debug output).
    pub fn header_value(&self) -> HeaderValue {
        self.header.clone()
    }
}

impl fmt::Debug for PrincipalToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrincipalToken")
            .field("algorithm", &self.algorithm)
            .field("audience", &self.audience)
            .field("len", &self.token.len())
            .field("token", &"<redacted>")
            .finish()
    }
}

/// A part of a compact JWS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The protected header.
    Header,
    /// The payload.
    Payload,
    /// The signature.
    Signature,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Header => "header",
            Self::Payload => "payload",
            Self::Signature => "signature",
        })
    }
}

/// A value from the sender, cut for an error message: at most 64 characters
/// (then `…`; [`watch_ready::excerpt::cut`], the one cut). Errors show it
/// Debug-escaped, so a `\n` in a token cannot forge a log line and a huge value
/// cannot flood the log.
pub(super) fn sender_text(value: &str) -> String {
    watch_ready::excerpt::cut(value, watch_ready::excerpt::SENDER_TEXT_CHARS)
}

/// The protected header: a JSON object, every member name unique.
pub(super) struct RawHeader {
    pub(super) alg: Option<serde_json::Value>,
    pub(super) crit: Option<Vec<String>>,
    pub(super) iat: Option<serde_json::Value>,
    pub(super) exp: Option<serde_json::Value>,
    pub(super) aud: Option<serde_json::Value>,
    pub(super) jti: Option<serde_json::Value>,
}

impl<'de> Deserialize<'de> for RawHeader {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct HeaderVisitor;
        impl<'de> Visitor<'de> for HeaderVisitor {
            type Value = RawHeader;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JWS protected header object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawHeader, A::Error> {
                let mut seen = std::collections::HashSet::new();
                let mut header = RawHeader {
                    alg: None,
                    crit: None,
                    iat: None,
                    exp: None,
                    aud: None,
                    jti: None,
                };
                while let Some(name) = map.next_key::<String>()? {
                    let value: serde_json::Value = map.next_value()?;
                    match name.as_str() {
                        "alg" => header.alg = Some(value),
                        "iat" => header.iat = Some(value),
                        "exp" => header.exp = Some(value),
                        "aud" => header.aud = Some(value),
                        "jti" => header.jti = Some(value),
                        "crit" => {
                            header.crit = Some(match value {
                                serde_json::Value::Array(names) => names
                                    .into_iter()
                                    .map(|n| match n {
                                        serde_json::Value::String(s) => s,
                                        other => other.to_string(),
                                    })
                                    .collect(),
                                other => vec![other.to_string()],
                            });
                        }
                        _ => {}
                    }
                    if !seen.insert(name) {
                        return Err(serde::de::Error::custom("duplicate header member"));
                    }
                }
                Ok(header)
            }
        }
        deserializer.deserialize_map(HeaderVisitor)
    }
}

/// DER `SEQUENCE { INTEGER r, INTEGER s }` (what the provider signs) to JWS `r||s`,
/// each `len` bytes (RFC 7518 section 3.4), read with the `der` crate: `None` for
/// anything but that exact shape or an integer longer than `len`. (The other way is
/// the provider's: verification takes `r||s` as it is, through the `*_FIXED`
/// algorithms.)
pub(super) fn ecdsa_der_to_raw(der: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut reader = SliceReader::new(der).ok()?;
    let (r, s) = reader
        .sequence(|body| {
            Ok::<_, pkcs8::der::Error>((UintRef::decode(body)?, UintRef::decode(body)?))
        })
        .ok()?;
    reader.finish().ok()?;
    let mut raw = vec![0u8; 2 * len];
    let (raw_r, raw_s) = raw.split_at_mut(len);
    for (integer, out) in [(r, raw_r), (s, raw_s)] {
        let digits = integer.as_bytes();
        let start = len.checked_sub(digits.len())?;
        out.get_mut(start..)?.copy_from_slice(digits);
    }
    Some(raw)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn header_with_times_keeps_alg_first() {
        let decoded = URL_SAFE_NO_PAD
            .decode(Algorithm::Es256.encoded_header_with_times(
                10,
                70,
                "https://peer:8443",
                "AAECAwQFBgcICQoLDA0ODw",
            ))
            .unwrap();
        assert_eq!(
            decoded,
            br#"{"alg":"ES256","iat":10,"exp":70,"aud":"https://peer:8443","jti":"AAECAwQFBgcICQoLDA0ODw"}"#
        );
    }

    #[test]
    fn header_is_exactly_alg_ps512() {
        assert_eq!(Algorithm::Ps512.encoded_header(), "eyJhbGciOiJQUzUxMiJ9");
        let decoded = URL_SAFE_NO_PAD
            .decode(Algorithm::Ps512.encoded_header())
            .unwrap();
        assert_eq!(decoded, br#"{"alg":"PS512"}"#);
    }

    /// `r` and `s` as DER INTEGERs in a SEQUENCE, as a signer writes them.
    fn signature_der(r: &[u8], s: &[u8]) -> Vec<u8> {
        use pkcs8::der::Encode;
        let (r, s) = (UintRef::new(r).unwrap(), UintRef::new(s).unwrap());
        let body = [r.to_der().unwrap(), s.to_der().unwrap()].concat();
        let mut der = vec![0x30, u8::try_from(body.len()).unwrap()];
        der.extend_from_slice(&body);
        der
    }

    #[test]
    fn ecdsa_der_to_raw_pads_short_integers_and_drops_sign_bytes() {
        for len in [32usize, 48] {
            for (r0, s0) in [(0x80u8, 0x01u8), (0x00, 0x7f), (0xff, 0x00)] {
                let mut raw = vec![0x11u8; 2 * len];
                raw[0] = r0;
                raw[len] = s0;
                if s0 == 0 {
                    raw[len + 1] = 0; // two leading zero bytes in s
                }
                let der = signature_der(&raw[..len], &raw[len..]);
                assert_eq!(ecdsa_der_to_raw(&der, len).unwrap(), raw);
            }
        }
        let too_long = signature_der(&[0x11; 33], &[0x11; 32]);
        assert!(ecdsa_der_to_raw(&too_long, 32).is_none());
        let mut trailing = signature_der(&[0x11; 32], &[0x11; 32]);
        trailing.push(0);
        assert!(ecdsa_der_to_raw(&trailing, 32).is_none());
        assert!(ecdsa_der_to_raw(&[0x30, 0x03, 0x02, 0x01], 32).is_none());
    }

    /// What the provider signs (DER), converted, verifies as JWS `r||s` through the
    /// provider's fixed-length algorithm: the two halves of the conversion agree, over
    /// enough signatures that short `r` and `s` occur.
    #[test]
    fn provider_signatures_converted_verify_in_fixed_form() {
        use aws_lc_rs::rand::SystemRandom;
        use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair, UnparsedPublicKey};
        let rng = SystemRandom::new();
        for (signing, verifying, len) in [
            (
                &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
                &signature::ECDSA_P256_SHA256_FIXED,
                32,
            ),
            (
                &signature::ECDSA_P384_SHA384_ASN1_SIGNING,
                &signature::ECDSA_P384_SHA384_FIXED,
                48,
            ),
        ] {
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(signing, &rng).unwrap();
            let pair = EcdsaKeyPair::from_pkcs8(signing, pkcs8.as_ref()).unwrap();
            let public = UnparsedPublicKey::new(verifying, pair.public_key().as_ref().to_vec());
            for i in 0..600u32 {
                let message = i.to_be_bytes();
                let der = pair.sign(&rng, &message).unwrap();
                let raw = ecdsa_der_to_raw(der.as_ref(), len).unwrap();
                public.verify(&message, &raw).unwrap();
            }
        }
    }
}
