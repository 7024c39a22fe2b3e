//! Principal verification: the tamper and algorithm-confusion matrix (each
//! rejection asserts its error variant), malformed tokens and bad certificates.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::jws::*;
use support::keys;

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
            let err = reject(&token, fixture, BY_KEY);
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
        let err = reject(&token, fixture, BY_KEY);
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
        let err = reject(&token, fixture, BY_KEY);
        assert!(
            matches!(&err, VerifyError::AlgorithmNotAllowed { alg: a, policy: BY_KEY } if a == alg),
            "{alg}: {err:?}"
        );
    }
    for (header, shown) in [(r#"{"alg":512}"#, "512"), (r#"{"alg":null}"#, "null")] {
        let token = forge(fixture, header, &payload);
        let err = reject(&token, fixture, PS512_ONLY);
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
        reject(&token, fixture, PS512_ONLY),
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
        let err = reject(&token, fixture, PS512_ONLY);
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
    match reject(&token, fixture, PS512_ONLY) {
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
    let back: Principal = verify(&token, &peer(fixture), PS512_ONLY).unwrap();
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
        let err = reject(&token, fixture, PS512_ONLY);
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
        let err = reject(&token, fixture, PS512_ONLY);
        assert!(
            matches!(err, VerifyError::SegmentCount { found: f } if f == found),
            "{found}: {err:?}"
        );
    }
    assert!(matches!(
        reject("", fixture, PS512_ONLY),
        VerifyError::Empty
    ));
    // JWS JSON serialization is not accepted.
    let json =
        serde_json::json!({"protected": parts[0], "payload": parts[1], "signature": parts[2]});
    let err = reject(&json.to_string(), fixture, PS512_ONLY);
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
        let err = reject(&bad, fixture, PS512_ONLY);
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
    let err = reject(&bad, fixture, PS512_ONLY);
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
        let err = reject(&token, other, PS512_ONLY);
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
            let other = sign_with_key(
                fixture.signing_key.as_ref(),
                &peer_url(),
                &Principal::default(),
                PS512_ONLY,
            )
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
        let err = reject(&bad, fixture, PS512_ONLY);
        assert!(matches!(err, VerifyError::BadSignature), "{what}: {err:?}");
    }
}

#[test]
fn signed_payload_that_is_not_json_or_not_the_type_is_rejected() {
    let fixture = keys::rsa2048();
    for payload in [&b"not json"[..], b"{\"a\":1} trailing", b"\xff\xfe", b""] {
        let token = forge(fixture, r#"{"alg":"PS512"}"#, payload);
        let err = reject(&token, fixture, PS512_ONLY);
        assert!(
            matches!(err, VerifyError::PayloadNotJson(_)),
            "{payload:?}: {err:?}"
        );
    }
    for payload in [&br#"[1,2]"#[..], br#"{"organizationId":5}"#, b"null"] {
        let token = forge(fixture, r#"{"alg":"PS512"}"#, payload);
        let err = reject(&token, fixture, PS512_ONLY);
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
    let err = verify::<Principal>(&token, &certificate, PS512_ONLY).unwrap_err();
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

// ---------------------------------------------------------------------------------
// Hostile sizes and sender text in errors.

#[test]
fn oversized_token_is_refused_before_parsing_even_when_correctly_signed() {
    let fixture = keys::rsa2048();
    let payload = serde_json::to_vec(&principal()).unwrap();
    // A 200 kB protected header, correctly signed.
    let header = format!(r#"{{"alg":"PS512","pad":"{}"}}"#, "x".repeat(200_000));
    let token = forge(fixture, &header, &payload);
    let err = reject(&token, fixture, PS512_ONLY);
    assert!(
        matches!(err, VerifyError::TooLarge { len, max } if len == token.len() && max == DEFAULT_MAX_TOKEN_BYTES),
        "{err:?}"
    );
    // The cap, not the token, refused it: a larger configured cap accepts it.
    let back: Principal = peer(fixture)
        .verify_with_max_len(&token, PS512_ONLY, 1 << 20)
        .unwrap();
    assert_eq!(back, principal());

    // A good token over a configured smaller cap is refused.
    let good = good_token(fixture);
    let err = peer(fixture)
        .verify_with_max_len::<Principal>(&good, PS512_ONLY, good.len() - 1)
        .unwrap_err();
    assert!(matches!(err, VerifyError::TooLarge { .. }), "{err:?}");
    // A token made of dots within a large cap: counted, not split into parts.
    let dots = ".".repeat(100_000);
    let err = peer(fixture)
        .verify_with_max_len::<Principal>(&dots, PS512_ONLY, 1 << 20)
        .unwrap_err();
    assert!(
        matches!(err, VerifyError::SegmentCount { found: 100_001 }),
        "{err:?}"
    );
}

#[test]
fn sender_values_in_errors_are_escaped_and_truncated() {
    let fixture = keys::rsa2048();
    let payload = serde_json::to_vec(&principal()).unwrap();
    let forged = format!("X\nERROR forged log line {}", "A".repeat(500));
    let forged_json = serde_json::to_string(&forged).unwrap();
    let hmac = serde_json::to_string(&format!("HS{forged}")).unwrap();
    for (header, expect) in [
        (format!(r#"{{"alg":{forged_json}}}"#), "AlgorithmNotAllowed"),
        (format!(r#"{{"alg":{hmac}}}"#), "Hmac"),
        (
            format!(
                r#"{{"alg":"PS512","crit":[{}]}}"#,
                [forged_json.as_str(); 12].join(",")
            ),
            "UnsupportedCritical",
        ),
        (
            format!(r#"{{"alg":{{"x":{forged_json}}}}}"#),
            "AlgorithmNotAllowed",
        ),
    ] {
        let token = forge(fixture, &header, &payload);
        let err = reject(&token, fixture, PS512_ONLY);
        let shown = err.to_string();
        assert!(format!("{err:?}").starts_with(expect), "{err:?}");
        assert!(!shown.contains('\n'), "{shown}");
        assert!(shown.contains("nERROR forged"), "{shown}");
        assert!(shown.len() < 1200, "{} bytes: {shown}", shown.len());
        match err {
            VerifyError::UnsupportedCritical { crit } => {
                assert_eq!(crit.len(), 8);
                assert!(crit.iter().all(|c| c.chars().count() <= 65));
            }
            VerifyError::AlgorithmNotAllowed { alg, .. } | VerifyError::Hmac { alg } => {
                assert!(alg.chars().count() <= 65, "{alg}");
            }
            other => panic!("{other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------
// Issue and expiry times in the protected header (replay window).

fn epoch(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

#[test]
fn signed_tokens_expire_and_are_not_valid_before_they_are_issued() {
    use std::time::{Duration, SystemTime};
    use svc_tls::principal::{DEFAULT_CLOCK_SKEW, DEFAULT_PRINCIPAL_LIFETIME, VerifyOptions};
    let fixture = keys::rsa2048();
    let token = good_token(fixture);
    let cert = peer(fixture);
    let now = SystemTime::now();
    let at = |t: SystemTime| VerifyOptions::new(BY_KEY).at(t);

    let back: Principal = cert.verify_with_options(&token, &at(now)).unwrap();
    assert_eq!(back, principal());
    // Within the allowance on both sides.
    let late = now + DEFAULT_PRINCIPAL_LIFETIME + DEFAULT_CLOCK_SKEW - Duration::from_secs(5);
    cert.verify_with_options::<Principal>(&token, &at(late))
        .unwrap();
    let early = now - DEFAULT_CLOCK_SKEW + Duration::from_secs(5);
    cert.verify_with_options::<Principal>(&token, &at(early))
        .unwrap();

    // Replayed after its lifetime and the allowance: refused.
    let replay = now + DEFAULT_PRINCIPAL_LIFETIME + DEFAULT_CLOCK_SKEW + Duration::from_secs(5);
    let err = cert
        .verify_with_options::<Principal>(&token, &at(replay))
        .unwrap_err();
    assert!(matches!(err, VerifyError::Expired { .. }), "{err:?}");
    let err = cert
        .verify_with_options::<Principal>(
            &token,
            &at(now + DEFAULT_PRINCIPAL_LIFETIME + Duration::from_secs(5))
                .with_clock_skew(Duration::ZERO),
        )
        .unwrap_err();
    assert!(matches!(err, VerifyError::Expired { .. }), "{err:?}");
    // Presented before it was issued (minus the allowance): refused.
    let err = cert
        .verify_with_options::<Principal>(&token, &at(now - Duration::from_secs(600)))
        .unwrap_err();
    assert!(matches!(err, VerifyError::IssuedInFuture { .. }), "{err:?}");

    // The plain entry points check times too (system clock).
    let now_s = epoch(now);
    let stale = forge(
        fixture,
        &format!(
            r#"{{"alg":"PS512","iat":{},"exp":{}}}"#,
            now_s - 3600,
            now_s - 3000
        ),
        br#"{"actor":"alice"}"#,
    );
    assert!(matches!(
        reject(&stale, fixture, BY_KEY),
        VerifyError::Expired { .. }
    ));
}

#[test]
fn tokens_without_times_verify_by_default_and_are_refused_in_strict_mode() {
    use svc_tls::principal::{TokenTimes, VerifyOptions};
    let fixture = keys::rsa2048();
    let cert = peer(fixture);
    // What a Go sender signs: {"alg":"PS512"} and nothing else.
    let go_style = forge(fixture, r#"{"alg":"PS512"}"#, br#"{"actor":"alice"}"#);
    let value: serde_json::Value = verify(&go_style, &cert, BY_KEY).unwrap();
    assert_eq!(value["actor"], "alice");
    let strict = VerifyOptions::new(BY_KEY)
        .with_times(TokenTimes::Required)
        .with_audiences([peer_url()]);
    let err = cert
        .verify_with_options::<serde_json::Value>(&go_style, &strict)
        .unwrap_err();
    assert!(
        matches!(err, VerifyError::MissingTimes { member: "iat" }),
        "{err:?}"
    );
    let now_s = epoch(std::time::SystemTime::now());
    let only_iat = forge(
        fixture,
        &format!(r#"{{"alg":"PS512","iat":{now_s}}}"#),
        br#"{"actor":"alice"}"#,
    );
    let err = cert
        .verify_with_options::<serde_json::Value>(&only_iat, &strict)
        .unwrap_err();
    assert!(
        matches!(err, VerifyError::MissingTimes { member: "exp" }),
        "{err:?}"
    );
    // Our own tokens pass strict mode.
    cert.verify_with_options::<Principal>(&good_token(fixture), &strict)
        .unwrap();

    // Times that are not integers, or an exp before iat: refused.
    for header in [
        r#"{"alg":"PS512","exp":"soon"}"#.to_owned(),
        r#"{"alg":"PS512","iat":-5}"#.to_owned(),
        r#"{"alg":"PS512","exp":1.5}"#.to_owned(),
        format!(r#"{{"alg":"PS512","iat":{now_s},"exp":{}}}"#, now_s - 10),
    ] {
        let token = forge(fixture, &header, br#"{"actor":"alice"}"#);
        let err = reject(&token, fixture, BY_KEY);
        assert!(
            matches!(err, VerifyError::MalformedTime { .. }),
            "{header}: {err:?}"
        );
    }
}

// ---------------------------------------------------------------------------------
// Audience (the receiver a token is for) and the lifetime cap.

#[test]
fn a_token_for_another_receiver_is_refused_where_the_receiver_names_itself() {
    use svc_tls::principal::{TokenTimes, VerifyOptions};
    let fixture = keys::rsa2048();
    let cert = peer(fixture);
    let token = good_token(fixture); // signed for https://peer.svc.test
    let here = |url: &str| VerifyOptions::new(BY_KEY).with_audiences([url.parse().unwrap()]);

    // The receiver it was signed for (any path of the same origin names it).
    let back: Principal = cert
        .verify_with_options(&token, &here("https://peer.svc.test/other/path"))
        .unwrap();
    assert_eq!(back, principal());

    // Replayed against another service, another port or plain http: refused.
    for other in [
        "https://billing.svc.test",
        "https://peer.svc.test:8443",
        "http://peer.svc.test",
    ] {
        let err = cert
            .verify_with_options::<Principal>(&token, &here(other))
            .unwrap_err();
        match &err {
            VerifyError::AudienceMismatch { aud, expected } => {
                assert_eq!(aud, &vec![PEER_AUDIENCE.to_owned()]);
                assert_eq!(expected.len(), 1, "{expected:?}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(err.reason(), "audience");
    }

    // A receiver that names no audience does not check it (the default).
    cert.verify_with_options::<Principal>(&token, &VerifyOptions::new(BY_KEY))
        .unwrap();

    // `aud` as a JWT array: one match is enough; a malformed one is refused.
    let now = epoch(std::time::SystemTime::now());
    let with_aud = |aud: &str| {
        forge(
            fixture,
            &format!(
                r#"{{"alg":"PS512","iat":{now},"exp":{},"aud":{aud}}}"#,
                now + 60
            ),
            br#"{"actor":"alice"}"#,
        )
    };
    let many = with_aud(r#"["https://x.test","https://peer.svc.test"]"#);
    cert.verify_with_options::<serde_json::Value>(&many, &here("https://peer.svc.test"))
        .unwrap();
    for bad in [
        r#"5"#,
        r#"[]"#,
        r#"["https://peer.svc.test",5]"#,
        r#"{"a":1}"#,
    ] {
        let err = cert
            .verify_with_options::<serde_json::Value>(
                &with_aud(bad),
                &here("https://peer.svc.test"),
            )
            .unwrap_err();
        assert!(
            matches!(err, VerifyError::MalformedAudience),
            "{bad}: {err:?}"
        );
    }
    // A hostile audience is shown cut and escaped.
    let hostile = with_aud(&serde_json::to_string(&format!("x\n{}", "y".repeat(500))).unwrap());
    let err = cert
        .verify_with_options::<serde_json::Value>(&hostile, &here("https://peer.svc.test"))
        .unwrap_err();
    let shown = err.to_string();
    assert!(!shown.contains('\n') && shown.len() < 300, "{shown}");

    // The strict mode: an audience is required, and so is the receiver's own.
    let strict = here("https://peer.svc.test").with_times(TokenTimes::Required);
    let no_aud = forge(
        fixture,
        &format!(r#"{{"alg":"PS512","iat":{now},"exp":{}}}"#, now + 60),
        br#"{"actor":"alice"}"#,
    );
    cert.verify_with_options::<serde_json::Value>(&no_aud, &here("https://peer.svc.test"))
        .unwrap();
    let err = cert
        .verify_with_options::<serde_json::Value>(&no_aud, &strict)
        .unwrap_err();
    assert!(matches!(err, VerifyError::MissingAudience), "{err:?}");
    let unnamed = VerifyOptions::new(BY_KEY).with_times(TokenTimes::Required);
    let err = cert
        .verify_with_options::<Principal>(&token, &unnamed)
        .unwrap_err();
    assert!(matches!(err, VerifyError::AudienceNotConfigured), "{err:?}");
    cert.verify_with_options::<Principal>(&token, &strict)
        .unwrap();
}

#[test]
fn a_token_living_longer_than_the_cap_is_refused() {
    use std::time::Duration;
    use svc_tls::principal::{DEFAULT_MAX_PRINCIPAL_LIFETIME, VerifyOptions};
    let fixture = keys::rsa2048();
    let cert = peer(fixture);
    let now = epoch(std::time::SystemTime::now());
    let cap = DEFAULT_MAX_PRINCIPAL_LIFETIME.as_secs();
    let token = |header: String| forge(fixture, &header, br#"{"actor":"alice"}"#);

    // Valid now, but signed to live an hour: refused by default.
    let hour = token(format!(
        r#"{{"alg":"PS512","iat":{now},"exp":{}}}"#,
        now + 3600
    ));
    let err = reject(&hour, fixture, BY_KEY);
    assert!(
        matches!(err, VerifyError::LifetimeTooLong { lifetime: 3600, max } if max == cap),
        "{err:?}"
    );
    assert_eq!(err.reason(), "lifetime");
    // Exactly the cap: accepted; a configured longer cap accepts the hour.
    let at_cap = token(format!(
        r#"{{"alg":"PS512","iat":{now},"exp":{}}}"#,
        now + cap
    ));
    verify::<Principal>(&at_cap, &cert, BY_KEY).unwrap();
    let longer = VerifyOptions::new(BY_KEY).with_max_lifetime(Duration::from_secs(7200));
    cert.verify_with_options::<Principal>(&hour, &longer)
        .unwrap();

    // Without iat, exp may not lie further ahead than the cap (and the skew).
    let far = token(format!(r#"{{"alg":"PS512","exp":{}}}"#, now + 3600));
    assert!(matches!(
        reject(&far, fixture, BY_KEY),
        VerifyError::LifetimeTooLong { .. }
    ));
    let near = token(format!(r#"{{"alg":"PS512","exp":{}}}"#, now + 30));
    verify::<Principal>(&near, &cert, BY_KEY).unwrap();
    // Without exp, an iat older than the cap (and the skew) is refused.
    let old = token(format!(r#"{{"alg":"PS512","iat":{}}}"#, now - 3600));
    assert!(matches!(
        reject(&old, fixture, BY_KEY),
        VerifyError::LifetimeTooLong { .. }
    ));
    let fresh = token(format!(r#"{{"alg":"PS512","iat":{}}}"#, now - 10));
    verify::<Principal>(&fresh, &cert, BY_KEY).unwrap();

    // Our signer's lifetime is within the default cap.
    verify::<Principal>(&good_token(fixture), &cert, BY_KEY).unwrap();
}
