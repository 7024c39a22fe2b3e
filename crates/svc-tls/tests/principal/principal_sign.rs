//! Principal signing: round trips, the wire format, the payload type, secrecy of
//! the token, and which key types sign under which policy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::jws::*;
use support::keys;

#[test]
fn ps512_round_trips_for_every_rsa_size_and_is_randomised() {
    for fixture in keys::rsa_all() {
        let first = sign_with_key(
            fixture.signing_key.as_ref(),
            &peer_url(),
            &principal(),
            PS512_ONLY,
        )
        .unwrap();
        let second = sign_with_key(
            fixture.signing_key.as_ref(),
            &peer_url(),
            &principal(),
            PS512_ONLY,
        )
        .unwrap();
        assert_eq!(first.algorithm(), Algorithm::Ps512);
        // PSS salts are random: the same input never gives the same token.
        assert_ne!(first.as_str(), second.as_str(), "{}", fixture.name);
        let certificate = peer(fixture);
        assert_eq!(certificate.key_type(), "RSA");
        for token in [&first, &second] {
            let back: Principal = certificate.verify(token.as_str(), PS512_ONLY).unwrap();
            assert_eq!(back, principal(), "{}", fixture.name);
        }
        // The PEM form of the certificate verifies the same token.
        let from_pem = PeerCertificate::from_pem(fixture.cert_pem.as_bytes()).unwrap();
        let back: Principal = verify(first.as_str(), &from_pem, PS512_ONLY).unwrap();
        assert_eq!(back, principal());
    }
}

#[test]
fn wire_format_is_compact_ps512_with_salt_64() {
    let fixture = keys::rsa2048();
    let token = good_token(fixture);
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3);
    assert_header_with_times(parts[0], "PS512");
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
    let token = sign_with_key(
        fixture.signing_key.as_ref(),
        &peer_url(),
        &only_org,
        PS512_ONLY,
    )
    .unwrap();
    let raw: serde_json::Value = verify(token.as_str(), &peer(fixture), PS512_ONLY).unwrap();
    assert_eq!(raw, serde_json::json!({"organizationId": "o"}));
    let back: Principal = verify(token.as_str(), &peer(fixture), PS512_ONLY).unwrap();
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
    let token = sign_with_key(
        fixture.signing_key.as_ref(),
        &peer_url(),
        &value,
        PS512_ONLY,
    )
    .unwrap();
    let back: Custom = verify(token.as_str(), &peer(fixture), PS512_ONLY).unwrap();
    assert_eq!(back, value);
}

#[test]
fn token_debug_and_header_value_keep_the_token_secret() {
    let fixture = keys::rsa2048();
    let token = sign_with_key(
        fixture.signing_key.as_ref(),
        &peer_url(),
        &principal(),
        PS512_ONLY,
    )
    .unwrap();
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
fn the_key_decides_the_algorithm_by_default() {
    // The newest Go client's rule: RSA signs PS512, P-256 ES256, P-384 ES384.
    assert_eq!(AlgorithmPolicy::default(), BY_KEY);
    for (fixture, alg) in [
        (keys::rsa2048(), Algorithm::Ps512),
        (keys::p256(), Algorithm::Es256),
        (keys::p384(), Algorithm::Es384),
    ] {
        let token = sign_with_key(
            fixture.signing_key.as_ref(),
            &peer_url(),
            &principal(),
            AlgorithmPolicy::default(),
        )
        .unwrap();
        assert_eq!(token.algorithm(), alg, "{}", fixture.name);
        let back: Principal =
            verify(token.as_str(), &peer(fixture), AlgorithmPolicy::default()).unwrap();
        assert_eq!(back, principal());
    }
}

#[test]
fn non_rsa_keys_are_unsupported_under_the_strict_policy() {
    for fixture in [keys::p256(), keys::p384()] {
        let err = sign_with_key(
            fixture.signing_key.as_ref(),
            &peer_url(),
            &principal(),
            PS512_ONLY,
        )
        .unwrap_err();
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
    for policy in [PS512_ONLY, BY_KEY] {
        let err = sign_with_key(
            keys::ed25519().signing_key.as_ref(),
            &peer_url(),
            &principal(),
            policy,
        )
        .unwrap_err();
        assert!(
            matches!(err, SignError::UnsupportedKeyType { key: "Ed25519", .. }),
            "{err:?}"
        );
    }
}

#[test]
fn p521_keys_fail_with_gos_unsupported_elliptic_curve() {
    // P-521 identities work for TLS; the principal JWS stays ES256/ES384, and Go's
    // signer refuses P-521 with "unsupported elliptic curve".
    let err = sign_with_key(
        keys::p521().signing_key.as_ref(),
        &peer_url(),
        &principal(),
        BY_KEY,
    )
    .unwrap_err();
    assert!(
        matches!(err, SignError::UnsupportedCurve { curve: "P-521" }),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with("unsupported elliptic curve"),
        "{err}"
    );
    // Under the strict PS512-only policy it is refused as any ECDSA key is.
    let err = sign_with_key(
        keys::p521().signing_key.as_ref(),
        &peer_url(),
        &principal(),
        PS512_ONLY,
    )
    .unwrap_err();
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
}

#[test]
fn ecdsa_is_opt_in_with_raw_signatures_bound_to_the_curve() {
    for (fixture, alg, raw_len) in [
        (keys::p256(), Algorithm::Es256, 64),
        (keys::p384(), Algorithm::Es384, 96),
    ] {
        let token = sign_with_key(
            fixture.signing_key.as_ref(),
            &peer_url(),
            &principal(),
            BY_KEY,
        )
        .unwrap();
        assert_eq!(token.algorithm(), alg);
        let parts: Vec<&str> = token.as_str().split('.').collect();
        assert_header_with_times(parts[0], alg.name());
        assert_eq!(URL_SAFE_NO_PAD.decode(parts[2]).unwrap().len(), raw_len);
        let back: Principal = verify(token.as_str(), &peer(fixture), BY_KEY).unwrap();
        assert_eq!(back, principal());

        // Off by default on the verifying side too.
        let err = reject(token.as_str(), fixture, PS512_ONLY);
        assert!(
            matches!(&err, VerifyError::AlgorithmNotAllowed { alg: a, .. } if a == alg.name()),
            "{err:?}"
        );
        // An RSA-keyed certificate never accepts an ECDSA token, even under the
        // default policy that accepts ES256/ES384.
        let err = reject(token.as_str(), keys::rsa2048(), BY_KEY);
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
        let err = reject(token.as_str(), other, BY_KEY);
        assert!(
            matches!(err, VerifyError::AlgorithmKeyMismatch { alg: a, .. } if a == alg),
            "{err:?}"
        );
    }
    // Same curve, other key.
    let other_p256 = {
        let token = sign_with_key(
            keys::p256().signing_key.as_ref(),
            &peer_url(),
            &principal(),
            BY_KEY,
        )
        .unwrap();
        let mut parts: Vec<String> = token.as_str().split('.').map(str::to_owned).collect();
        let mut sig = URL_SAFE_NO_PAD.decode(&parts[2]).unwrap();
        sig[10] ^= 1;
        parts[2] = b64(&sig);
        parts.join(".")
    };
    let err = reject(&other_p256, keys::p256(), BY_KEY);
    assert!(matches!(err, VerifyError::BadSignature), "{err:?}");
}

#[test]
fn ps512_token_against_an_ec_certificate_is_a_key_mismatch() {
    let token = good_token(keys::rsa2048());
    let err = reject(&token, keys::p256(), BY_KEY);
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
    let err = reject(&token, keys::ed25519(), PS512_ONLY);
    assert!(
        matches!(err, VerifyError::UnsupportedKeyType { key: "Ed25519" }),
        "{err:?}"
    );
}

/// The signer refuses to put a principal on a plain `http://` request to a host
/// other than a loopback address (it would travel in clear text).
#[test]
fn signer_refuses_plain_http_to_non_loopback_hosts() {
    use svc_tls::principal::{PrincipalSigner, SignError};
    let leaf = support::TestCa::new("clients").client_leaf("svc", 1);
    let identity = svc_tls::material::load_identity_from_pem(
        &svc_tls::SecretRef::new("ns", "identity"),
        leaf.cert_pem.as_bytes(),
        leaf.key_pem.as_bytes(),
        &support::provider(),
    )
    .unwrap();
    let signer = PrincipalSigner::new(identity);
    let http = reqwest::Client::new();
    let who = svc_tls::Principal::default();
    let err = signer
        .attach(http.get("http://identity.example/api"), &who)
        .unwrap_err();
    assert!(
        matches!(&err, SignError::PlaintextUrl { host } if host == "identity.example"),
        "{err:?}"
    );
    for ok in [
        "http://127.0.0.1:1/api",
        "http://localhost/api",
        "https://identity.example/api",
    ] {
        let request = signer.attach(http.get(ok), &who).unwrap().build().unwrap();
        assert!(request.headers().contains_key("x-principal"), "{ok}");
    }
}

/// The protected header is exactly `{"alg":...,"iat":...,"exp":...,"aud":...,"jti":...}`:
/// `iat` now, `exp` the default lifetime later, `aud` the origin the token was
/// signed for, `jti` 128 random bits in base64url (the payload is untouched by them).
fn assert_header_with_times(encoded: &str, alg: &str) {
    let raw = URL_SAFE_NO_PAD.decode(encoded).unwrap();
    let header: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    let object = header.as_object().unwrap();
    assert_eq!(
        object.keys().map(String::as_str).collect::<Vec<_>>(),
        ["alg", "aud", "exp", "iat", "jti"],
        "{header}"
    );
    let jti = header["jti"].as_str().unwrap();
    assert_eq!(URL_SAFE_NO_PAD.decode(jti).unwrap().len(), 16, "{header}");
    assert_eq!(header["alg"], alg);
    // The receiver it was signed for: the origin of the URL, not the path.
    assert_eq!(header["aud"], PEER_AUDIENCE);
    let (iat, exp) = (
        header["iat"].as_u64().unwrap(),
        header["exp"].as_u64().unwrap(),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(iat.abs_diff(now) <= 5, "iat {iat}, now {now}");
    assert_eq!(
        exp - iat,
        svc_tls::principal::DEFAULT_PRINCIPAL_LIFETIME.as_secs()
    );
    assert!(
        String::from_utf8(raw)
            .unwrap()
            .starts_with(&format!(r#"{{"alg":"{alg}","iat":"#))
    );
}
