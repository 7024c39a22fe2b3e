//! Principal signing and verification: round trips, the wire format, and the tamper
//! and algorithm-confusion matrix (each rejection asserts its error variant).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
use support::keys;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use keys::Fixture;
use rsa::pkcs8::DecodePublicKey as _;
use rsa::signature::Verifier as _;
use rustls::SignatureScheme;
use serde::Deserialize;
use svc_tls::principal::{
    Algorithm, AlgorithmPolicy, CertificateError, Part, PeerCertificate, Principal, SignError,
    VerifyError, sign_with_key, verify,
};

const DEFAULT: AlgorithmPolicy = AlgorithmPolicy::Ps512Only;
const ECDSA: AlgorithmPolicy = AlgorithmPolicy::Ps512OrEcdsa;

fn principal() -> Principal {
    Principal {
        organization_id: Some("org-7f3a".into()),
        project_id: Some("proj-19c2".into()),
        actor: Some("alice@example.com".into()),
    }
}

fn peer(fixture: &Fixture) -> PeerCertificate {
    PeerCertificate::from_der(fixture.cert_der.clone()).unwrap()
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A token with any header and payload, correctly signed with the fixture's key
/// through the provider (RSA-PSS SHA-512 for RSA keys, DER ECDSA converted to r||s
/// is not needed here: only RSA keys forge).
fn forge(fixture: &Fixture, header: &str, payload: &[u8]) -> String {
    let input = format!("{}.{}", b64(header.as_bytes()), b64(payload));
    let signer = fixture
        .signing_key
        .choose_scheme(&[SignatureScheme::RSA_PSS_SHA512])
        .unwrap();
    let signature = signer.sign(input.as_bytes()).unwrap();
    format!("{input}.{}", b64(&signature))
}

fn good_token(fixture: &Fixture) -> String {
    sign_with_key(fixture.signing_key.as_ref(), &principal(), DEFAULT)
        .unwrap()
        .into_string()
}

fn reject(token: &str, fixture: &Fixture, policy: AlgorithmPolicy) -> VerifyError {
    match verify::<Principal>(token, &peer(fixture), policy) {
        Ok(p) => panic!("token was accepted: {p:?}: {token}"),
        Err(e) => e,
    }
}

#[test]
fn ps512_round_trips_for_every_rsa_size_and_is_randomised() {
    for fixture in keys::rsa_all() {
        let first = sign_with_key(fixture.signing_key.as_ref(), &principal(), DEFAULT).unwrap();
        let second = sign_with_key(fixture.signing_key.as_ref(), &principal(), DEFAULT).unwrap();
        assert_eq!(first.algorithm(), Algorithm::Ps512);
        // PSS salts are random: the same input never gives the same token.
        assert_ne!(first.as_str(), second.as_str(), "{}", fixture.name);
        let certificate = peer(fixture);
        assert_eq!(certificate.key_type(), "RSA");
        for token in [&first, &second] {
            let back: Principal = certificate.verify(token.as_str(), DEFAULT).unwrap();
            assert_eq!(back, principal(), "{}", fixture.name);
        }
        // The PEM form of the certificate verifies the same token.
        let from_pem = PeerCertificate::from_pem(fixture.cert_pem.as_bytes()).unwrap();
        let back: Principal = verify(first.as_str(), &from_pem, DEFAULT).unwrap();
        assert_eq!(back, principal());
    }
}

#[test]
fn wire_format_is_compact_ps512_with_salt_64() {
    let fixture = keys::rsa2048();
    let token = good_token(fixture);
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3);
    assert_eq!(
        URL_SAFE_NO_PAD.decode(parts[0]).unwrap(),
        br#"{"alg":"PS512"}"#,
        "protected header must be exactly {{\"alg\":\"PS512\"}}"
    );
    let payload: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    assert_eq!(
        payload,
        serde_json::json!({
            "organizationId": "org-7f3a", "projectId": "proj-19c2", "actor": "alice@example.com"
        })
    );
    // An independent verifier pinned to salt length 64 (what Go's signer uses).
    let spki = x509_spki(&fixture.cert_der);
    let key = rsa::PublicKey::from_public_key_der(&spki).unwrap();
    let strict = rsa::pss::VerifyingKey::<sha2::Sha512>::new_with_salt_len(key.clone(), 64);
    let signature =
        rsa::pss::Signature::try_from(URL_SAFE_NO_PAD.decode(parts[2]).unwrap().as_slice())
            .unwrap();
    let input = format!("{}.{}", parts[0], parts[1]);
    strict.verify(input.as_bytes(), &signature).unwrap();
    let wrong_salt = rsa::pss::VerifyingKey::<sha2::Sha512>::new_with_salt_len(key, 32);
    assert!(wrong_salt.verify(input.as_bytes(), &signature).is_err());
}

/// The SubjectPublicKeyInfo of a certificate, via x509-parser.
fn x509_spki(der: &[u8]) -> Vec<u8> {
    use x509_parser::prelude::FromDer as _;
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(der).unwrap();
    cert.public_key().raw.to_vec()
}

#[test]
fn principal_json_omits_empty_fields() {
    let fixture = keys::rsa2048();
    let only_org = Principal {
        organization_id: Some("o".into()),
        project_id: Some(String::new()),
        actor: None,
    };
    let token = sign_with_key(fixture.signing_key.as_ref(), &only_org, DEFAULT).unwrap();
    let raw: serde_json::Value = verify(token.as_str(), &peer(fixture), DEFAULT).unwrap();
    assert_eq!(raw, serde_json::json!({"organizationId": "o"}));
    let back: Principal = verify(token.as_str(), &peer(fixture), DEFAULT).unwrap();
    assert_eq!(
        back,
        Principal {
            project_id: None,
            ..only_org
        }
    );
}

#[test]
fn any_serialize_and_deserialize_owned_type_round_trips() {
    #[derive(serde::Serialize, Deserialize, Debug, PartialEq)]
    struct Custom {
        n: u64,
        tags: Vec<String>,
    }
    let fixture = keys::rsa2048();
    let value = Custom {
        n: 42,
        tags: vec!["a".into(), "ü".into()],
    };
    let token = sign_with_key(fixture.signing_key.as_ref(), &value, DEFAULT).unwrap();
    let back: Custom = verify(token.as_str(), &peer(fixture), DEFAULT).unwrap();
    assert_eq!(back, value);
}

#[test]
fn token_debug_and_header_value_keep_the_token_secret() {
    let fixture = keys::rsa2048();
    let token = sign_with_key(fixture.signing_key.as_ref(), &principal(), DEFAULT).unwrap();
    let debug = format!("{token:?}");
    assert!(!debug.contains(token.as_str()), "{debug}");
    assert!(!debug.contains(&token.as_str()[..20]), "{debug}");
    let header = token.header_value();
    assert!(header.is_sensitive());
    assert_eq!(header.to_str().unwrap(), token.as_str());
}

// ---------------------------------------------------------------------------------
// Key types when signing.

#[test]
fn non_rsa_keys_are_unsupported_by_default() {
    for fixture in [keys::p256(), keys::p384()] {
        let err = sign_with_key(fixture.signing_key.as_ref(), &principal(), DEFAULT).unwrap_err();
        assert!(
            matches!(
                err,
                SignError::UnsupportedKeyType {
                    key: "ECDSA",
                    ecdsa_allowed: false
                }
            ),
            "{err:?}"
        );
        assert!(
            err.to_string().contains("private key type is unsupported"),
            "{err}"
        );
    }
    for policy in [DEFAULT, ECDSA] {
        let err =
            sign_with_key(keys::ed25519().signing_key.as_ref(), &principal(), policy).unwrap_err();
        assert!(
            matches!(err, SignError::UnsupportedKeyType { key: "Ed25519", .. }),
            "{err:?}"
        );
    }
}

#[test]
fn ecdsa_is_opt_in_with_raw_signatures_bound_to_the_curve() {
    for (fixture, alg, raw_len) in [
        (keys::p256(), Algorithm::Es256, 64),
        (keys::p384(), Algorithm::Es384, 96),
    ] {
        let token = sign_with_key(fixture.signing_key.as_ref(), &principal(), ECDSA).unwrap();
        assert_eq!(token.algorithm(), alg);
        let parts: Vec<&str> = token.as_str().split('.').collect();
        assert_eq!(
            URL_SAFE_NO_PAD.decode(parts[0]).unwrap(),
            format!(r#"{{"alg":"{alg}"}}"#).as_bytes()
        );
        assert_eq!(URL_SAFE_NO_PAD.decode(parts[2]).unwrap().len(), raw_len);
        let back: Principal = verify(token.as_str(), &peer(fixture), ECDSA).unwrap();
        assert_eq!(back, principal());

        // Off by default on the verifying side too.
        let err = reject(token.as_str(), fixture, DEFAULT);
        assert!(
            matches!(&err, VerifyError::AlgorithmNotAllowed { alg: a, .. } if a == alg.name()),
            "{err:?}"
        );
        // An RSA-keyed certificate never accepts an ECDSA token, even when opted in.
        let err = reject(token.as_str(), keys::rsa2048(), ECDSA);
        assert!(
            matches!(err, VerifyError::AlgorithmKeyMismatch { alg: a, key: "RSA" } if a == alg),
            "{err:?}"
        );
        // Wrong curve.
        let other = if alg == Algorithm::Es256 {
            keys::p384()
        } else {
            keys::p256()
        };
        let err = reject(token.as_str(), other, ECDSA);
        assert!(
            matches!(err, VerifyError::AlgorithmKeyMismatch { alg: a, .. } if a == alg),
            "{err:?}"
        );
    }
    // Same curve, other key.
    let other_p256 = {
        let token = sign_with_key(keys::p256().signing_key.as_ref(), &principal(), ECDSA).unwrap();
        let mut parts: Vec<String> = token.as_str().split('.').map(str::to_owned).collect();
        let mut sig = URL_SAFE_NO_PAD.decode(&parts[2]).unwrap();
        sig[10] ^= 1;
        parts[2] = b64(&sig);
        parts.join(".")
    };
    let err = reject(&other_p256, keys::p256(), ECDSA);
    assert!(matches!(err, VerifyError::BadSignature), "{err:?}");
}

#[test]
fn ps512_token_against_an_ec_certificate_is_a_key_mismatch() {
    let token = good_token(keys::rsa2048());
    let err = reject(&token, keys::p256(), ECDSA);
    assert!(
        matches!(
            err,
            VerifyError::AlgorithmKeyMismatch {
                alg: Algorithm::Ps512,
                key: "ECDSA P-256"
            }
        ),
        "{err:?}"
    );
}

#[test]
fn ed25519_certificate_is_an_unsupported_key_type() {
    let token = good_token(keys::rsa2048());
    let err = reject(&token, keys::ed25519(), DEFAULT);
    assert!(
        matches!(err, VerifyError::UnsupportedKeyType { key: "Ed25519" }),
        "{err:?}"
    );
}

// ---------------------------------------------------------------------------------
// Algorithm confusion.

#[test]
fn alg_none_is_rejected() {
    let fixture = keys::rsa2048();
    let payload = serde_json::to_vec(&principal()).unwrap();
    for alg in ["none", "None", "NONE"] {
        let header = b64(format!(r#"{{"alg":"{alg}"}}"#).as_bytes());
        for sig in ["", "AAAA"] {
            let token = format!("{header}.{}.{sig}", b64(&payload));
            let err = reject(&token, fixture, ECDSA);
            assert!(
                matches!(err, VerifyError::AlgorithmNone),
                "{alg} {sig:?}: {err:?}"
            );
        }
    }
}

#[test]
fn hmac_is_rejected_even_keyed_with_the_certificate() {
    // The classic confusion: HMAC "keyed" with the public key the verifier holds.
    let fixture = keys::rsa2048();
    let payload = serde_json::to_vec(&principal()).unwrap();
    for alg in ["HS256", "HS384", "HS512", "hs256"] {
        let input = format!(
            "{}.{}",
            b64(format!(r#"{{"alg":"{alg}"}}"#).as_bytes()),
            b64(&payload)
        );
        let mac = {
            use sha2::Digest as _;
            sha2::Sha512::digest([fixture.cert_pem.as_bytes(), input.as_bytes()].concat())
        };
        let token = format!("{input}.{}", b64(&mac));
        let err = reject(&token, fixture, ECDSA);
        assert!(
            matches!(&err, VerifyError::Hmac { alg: a } if a == alg),
            "{err:?}"
        );
    }
}

#[test]
fn other_algorithms_are_not_allowed_even_when_correctly_signed() {
    let fixture = keys::rsa2048();
    let payload = serde_json::to_vec(&principal()).unwrap();
    for alg in [
        "RS256", "RS512", "PS256", "PS384", "ps512", "EdDSA", "ES512", "ES256K", "",
    ] {
        // Correctly signed over its own header (with PS512's primitive), so only the
        // algorithm check can reject it.
        let token = forge(fixture, &format!(r#"{{"alg":"{alg}"}}"#), &payload);
        let err = reject(&token, fixture, ECDSA);
        assert!(
            matches!(&err, VerifyError::AlgorithmNotAllowed { alg: a, policy: ECDSA } if a == alg),
            "{alg}: {err:?}"
        );
    }
    for (header, shown) in [(r#"{"alg":512}"#, "512"), (r#"{"alg":null}"#, "null")] {
        let token = forge(fixture, header, &payload);
        let err = reject(&token, fixture, DEFAULT);
        assert!(
            matches!(&err, VerifyError::AlgorithmNotAllowed { alg, .. } if alg == shown),
            "{err:?}"
        );
    }
}

#[test]
fn missing_alg_is_rejected() {
    let fixture = keys::rsa2048();
    let token = forge(fixture, r#"{"typ":"JWT"}"#, b"{}");
    assert!(matches!(
        reject(&token, fixture, DEFAULT),
        VerifyError::MissingAlgorithm
    ));
}

#[test]
fn crit_is_rejected_even_when_signed() {
    let fixture = keys::rsa2048();
    let payload = serde_json::to_vec(&principal()).unwrap();
    for header in [
        r#"{"alg":"PS512","crit":["exp"],"exp":1}"#,
        r#"{"alg":"PS512","b64":false,"crit":["b64"]}"#,
        r#"{"alg":"PS512","crit":[]}"#,
    ] {
        let token = forge(fixture, header, &payload);
        let err = reject(&token, fixture, DEFAULT);
        assert!(
            matches!(err, VerifyError::UnsupportedCritical { .. }),
            "{header}: {err:?}"
        );
    }
    let token = forge(
        fixture,
        r#"{"alg":"PS512","crit":["exp"],"exp":1}"#,
        &payload,
    );
    match reject(&token, fixture, DEFAULT) {
        VerifyError::UnsupportedCritical { crit } => assert_eq!(crit, vec!["exp".to_owned()]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_non_critical_header_members_are_ignored() {
    // PyJWT adds "typ"; a kid or x5c in the header is never used to pick the key.
    let fixture = keys::rsa2048();
    let payload = serde_json::to_vec(&principal()).unwrap();
    let token = forge(
        fixture,
        r#"{"typ":"JWT","alg":"PS512","kid":"k1","x5c":["AAAA"]}"#,
        &payload,
    );
    let back: Principal = verify(&token, &peer(fixture), DEFAULT).unwrap();
    assert_eq!(back, principal());
}

#[test]
fn header_that_is_not_a_unique_member_object_is_malformed() {
    let fixture = keys::rsa2048();
    for header in [
        r#"{"alg":"PS512""#,
        r#"["PS512"]"#,
        r#""PS512""#,
        r#"{"alg":"none","alg":"PS512"}"#,
        r#"{"alg":"PS512","typ":"a","typ":"b"}"#,
        r#"{"alg":"PS512"} x"#,
        "\u{1}",
    ] {
        let token = forge(fixture, header, b"{}");
        let err = reject(&token, fixture, DEFAULT);
        assert!(
            matches!(err, VerifyError::MalformedHeader(_)),
            "{header}: {err:?}"
        );
    }
}

// ---------------------------------------------------------------------------------
// Compact form.

#[test]
fn wrong_number_of_segments_is_rejected() {
    let fixture = keys::rsa2048();
    let token = good_token(fixture);
    let parts: Vec<&str> = token.split('.').collect();
    let cases = [
        (parts[0].to_owned(), 1),
        (format!("{}.{}", parts[0], parts[1]), 2),
        (format!("{token}."), 4),
        (format!("{token}.{}", parts[2]), 4),
        (
            format!(
                "{}.{}.{}.{}.{}",
                parts[0], "AAAA", parts[1], "AAAA", parts[2]
            ),
            5,
        ),
        (format!("{}...{}", parts[0], parts[2]), 4),
    ];
    for (token, found) in cases {
        let err = reject(&token, fixture, DEFAULT);
        assert!(
            matches!(err, VerifyError::SegmentCount { found: f } if f == found),
            "{found}: {err:?}"
        );
    }
    assert!(matches!(reject("", fixture, DEFAULT), VerifyError::Empty));
    // JWS JSON serialization is not accepted.
    let json =
        serde_json::json!({"protected": parts[0], "payload": parts[1], "signature": parts[2]});
    let err = reject(&json.to_string(), fixture, DEFAULT);
    assert!(
        matches!(err, VerifyError::SegmentCount { found: 1 }),
        "{err:?}"
    );
}

#[test]
fn trailing_data_padding_and_whitespace_are_rejected() {
    let fixture = keys::rsa2048();
    let token = good_token(fixture);
    let parts: Vec<&str> = token.split('.').collect();
    let cases = [
        (format!("{token} "), Part::Signature),
        (format!("{token}\n"), Part::Signature),
        (format!("{token}=="), Part::Signature),
        (format!("{token}AAA"), Part::Signature),
        (format!(" {token}"), Part::Header),
        (
            format!("{}=.{}.{}", parts[0], parts[1], parts[2]),
            Part::Header,
        ),
        (
            format!("{}.{}=.{}", parts[0], parts[1], parts[2]),
            Part::Payload,
        ),
        (
            format!("{}.{}+.{}", parts[0], parts[1], parts[2]),
            Part::Payload,
        ),
        (
            format!("{}.{}.{}", parts[0], parts[1], parts[2].replace('-', "+")),
            Part::Signature,
        ),
    ];
    for (bad, part) in cases {
        if bad == token {
            continue; // the replace found nothing to change
        }
        let err = reject(&bad, fixture, DEFAULT);
        assert!(
            matches!(err, VerifyError::Base64 { part: p } if p == part),
            "{part}: {err:?}"
        );
    }
}

#[test]
fn non_canonical_base64_signature_is_rejected() {
    // A 256-byte signature leaves 4 unused bits in its last character; setting them
    // would decode to the same bytes (a malleable token) and must be refused.
    let fixture = keys::rsa2048();
    let token = good_token(fixture);
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let last = *token.as_bytes().last().unwrap();
    let value = ALPHABET.iter().position(|&c| c == last).unwrap();
    assert_eq!(value & 0x0f, 0, "canonical encoding has zero unused bits");
    let mut bad = token.clone();
    bad.pop();
    bad.push(ALPHABET[value | 1] as char);
    let err = reject(&bad, fixture, DEFAULT);
    assert!(
        matches!(
            err,
            VerifyError::Base64 {
                part: Part::Signature
            }
        ),
        "{err:?}"
    );
}

// ---------------------------------------------------------------------------------
// Tampering and keys.

#[test]
fn wrong_key_is_a_bad_signature() {
    let token = good_token(keys::rsa2048());
    for other in [keys::rsa2048_other(), keys::rsa3072(), keys::rsa4096()] {
        let err = reject(&token, other, DEFAULT);
        assert!(
            matches!(err, VerifyError::BadSignature),
            "{}: {err:?}",
            other.name
        );
    }
}

#[test]
fn tampered_header_payload_or_signature_is_a_bad_signature() {
    let fixture = keys::rsa2048();
    let token = good_token(fixture);
    let parts: Vec<&str> = token.split('.').collect();
    let evil_payload = b64(
        br#"{"organizationId":"org-evil","projectId":"proj-19c2","actor":"alice@example.com"}"#,
    );
    let mut flipped = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    flipped[100] ^= 0x01;
    let mut truncated = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    truncated.pop();
    let cases = [
        (
            "header",
            format!(
                "{}.{}.{}",
                b64(br#"{"alg":"PS512","typ":"JWT"}"#),
                parts[1],
                parts[2]
            ),
        ),
        (
            "header spacing",
            format!("{}.{}.{}", b64(br#"{"alg": "PS512"}"#), parts[1], parts[2]),
        ),
        (
            "payload",
            format!("{}.{evil_payload}.{}", parts[0], parts[2]),
        ),
        (
            "signature bit",
            format!("{}.{}.{}", parts[0], parts[1], b64(&flipped)),
        ),
        (
            "signature length",
            format!("{}.{}.{}", parts[0], parts[1], b64(&truncated)),
        ),
        ("empty signature", format!("{}.{}.", parts[0], parts[1])),
        // Appended data that still decodes: a 257-byte "signature".
        ("appended data", format!("{token}A")),
        ("signature of another payload", {
            let other = sign_with_key(fixture.signing_key.as_ref(), &Principal::default(), DEFAULT)
                .unwrap()
                .into_string();
            format!(
                "{}.{}.{}",
                parts[0],
                parts[1],
                other.split('.').nth(2).unwrap()
            )
        }),
    ];
    for (what, bad) in cases {
        let err = reject(&bad, fixture, DEFAULT);
        assert!(matches!(err, VerifyError::BadSignature), "{what}: {err:?}");
    }
}

#[test]
fn signed_payload_that_is_not_json_or_not_the_type_is_rejected() {
    let fixture = keys::rsa2048();
    for payload in [&b"not json"[..], b"{\"a\":1} trailing", b"\xff\xfe", b""] {
        let token = forge(fixture, r#"{"alg":"PS512"}"#, payload);
        let err = reject(&token, fixture, DEFAULT);
        assert!(
            matches!(err, VerifyError::PayloadNotJson(_)),
            "{payload:?}: {err:?}"
        );
    }
    for payload in [&br#"[1,2]"#[..], br#"{"organizationId":5}"#, b"null"] {
        let token = forge(fixture, r#"{"alg":"PS512"}"#, payload);
        let err = reject(&token, fixture, DEFAULT);
        assert!(
            matches!(err, VerifyError::PayloadType(_)),
            "{payload:?}: {err:?}"
        );
    }
}

#[test]
fn rsa_keys_below_2048_bits_are_refused() {
    let cert = weak_rsa_certificate();
    let certificate = PeerCertificate::from_der(cert).unwrap();
    let token = good_token(keys::rsa2048());
    let err = verify::<Principal>(&token, &certificate, DEFAULT).unwrap_err();
    assert!(
        matches!(err, VerifyError::WeakRsaKey { bits: 1024 }),
        "{err:?}"
    );
}

/// A certificate for a 1024-bit RSA public key (its private key is never needed:
/// the check comes before any signature is examined), issued by a P-256 key.
fn weak_rsa_certificate() -> rustls_pki_types::CertificateDer<'static> {
    struct WeakRsa(Vec<u8>);
    impl rcgen::PublicKeyData for WeakRsa {
        fn der_bytes(&self) -> &[u8] {
            &self.0
        }
        fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
            &rcgen::PKCS_RSA_SHA256
        }
    }
    // RSAPublicKey ::= SEQUENCE { n INTEGER (1024 bits, odd), e INTEGER 65537 }
    let mut n = vec![0xc3u8; 128];
    n[127] = 0x01;
    let mut der = vec![0x30, 0x81, 0x89, 0x02, 0x81, 0x81, 0x00];
    der.extend_from_slice(&n);
    der.extend_from_slice(&[0x02, 0x03, 0x01, 0x00, 0x01]);
    let issuer_key = rcgen::KeyPair::generate().unwrap();
    let issuer_params = rcgen::CertificateParams::new(vec!["issuer.test".to_owned()]).unwrap();
    let issuer = rcgen::Issuer::new(issuer_params, issuer_key);
    let params = rcgen::CertificateParams::new(vec!["weak.test".to_owned()]).unwrap();
    params
        .signed_by(&WeakRsa(der), &issuer)
        .unwrap()
        .der()
        .clone()
}

// ---------------------------------------------------------------------------------
// Certificates.

#[test]
fn bad_certificates_are_typed_errors() {
    assert!(matches!(
        PeerCertificate::from_pem(b"no pem here"),
        Err(CertificateError::NoCertificate)
    ));
    assert!(matches!(
        PeerCertificate::from_pem(keys::rsa2048().key_pem.as_bytes()),
        Err(CertificateError::NoCertificate)
    ));
    assert!(matches!(
        PeerCertificate::from_der(vec![0x30, 0x03, 0x02, 0x01, 0x01]),
        Err(CertificateError::X509(_))
    ));
    let mut trailing = keys::rsa2048().cert_der.to_vec();
    trailing.push(0);
    assert!(matches!(
        PeerCertificate::from_der(trailing),
        Err(CertificateError::X509(_))
    ));
    let broken = "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n";
    assert!(matches!(
        PeerCertificate::from_pem(broken.as_bytes()),
        Err(CertificateError::Pem(_))
    ));
}
