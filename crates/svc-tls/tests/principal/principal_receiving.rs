//! The receiving modes and the audiences a receiver must name (issues 40 and 42):
//! the strict mode (the default) accepts signed principals bound to this receiver
//! only; the Go-compatible mode also the deployed Go senders' unsigned base64url
//! JSON and their unbound signed tokens, logged at most once a minute. A receiver
//! without audiences is refused at build time (`IngressBuilder`) or judges no
//! request (`IngressVerifier`), unless it opts out explicitly.

use base64::Engine as _;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::header::HeaderMap;
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject as _;
use svc_tls::options::SecretRef;
use svc_tls::principal::{
    AlgorithmPolicy, IngressVerifier, PRINCIPAL_HEADER, Principal, ReceiverConfigError,
    ReceivingMode, RequestPrincipalError, VerifyError, sign_with_key,
};
use svc_tls::receiving::{IngressBuilder, ReceivingError};
use test_support::logs::CapturedLogs;

use crate::support::{Leaf, TestCa};

fn here() -> reqwest::Url {
    "https://region.svc.test/api/v1".parse().unwrap()
}

fn elsewhere() -> reqwest::Url {
    "https://identity.svc.test/api/v1".parse().unwrap()
}

fn who() -> Principal {
    Principal {
        organization_id: Some("org-1".into()),
        project_id: Some("project-1".into()),
        actor: Some("alice@example.com".into()),
    }
}

/// The headers nginx forwards for `leaf`, with `principal` as `X-Principal`.
fn request(leaf: &Leaf, principal: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("ssl-client-verify", "SUCCESS".parse().unwrap());
    let cert = utf8_percent_encode(&leaf.cert_pem, NON_ALPHANUMERIC).to_string();
    headers.insert("ssl-client-cert", cert.parse().unwrap());
    headers.insert(PRINCIPAL_HEADER, principal.parse().unwrap());
    headers
}

/// What most deployed Go senders put in `X-Principal`: the JSON, base64url.
fn go_unsigned(principal: &Principal) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(principal).unwrap())
}

/// Ours: signed, with `iat`, `exp` and `aud` (the origin of `to`).
fn ours(leaf: &Leaf, to: &reqwest::Url) -> String {
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let key = rustls::crypto::aws_lc_rs::sign::any_supported_type(&key).unwrap();
    sign_with_key(key.as_ref(), to, &who(), AlgorithmPolicy::default())
        .unwrap()
        .as_str()
        .to_owned()
}

/// The Go senders' signed form: `{"alg":"ES256"}`, no times, no audience.
fn go_signed(leaf: &Leaf) -> String {
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let key = rustls::crypto::aws_lc_rs::sign::any_supported_type(&key).unwrap();
    let signer = key
        .choose_scheme(&[rustls::SignatureScheme::ECDSA_NISTP256_SHA256])
        .unwrap();
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"ES256"}"#),
        go_unsigned(&who())
    );
    // rustls signs ECDSA as DER; JWS wants r||s, 32 bytes each.
    let der = signer.sign(input.as_bytes()).unwrap();
    let (r, s) = ecdsa_der_to_raw(&der);
    format!("{input}.{}", URL_SAFE_NO_PAD.encode([r, s].concat()))
}

fn ecdsa_der_to_raw(der: &[u8]) -> (Vec<u8>, Vec<u8>) {
    // SEQUENCE { INTEGER r, INTEGER s }, each at most 33 bytes for P-256.
    let mut at = 2;
    let mut int = || {
        assert_eq!(der[at], 0x02);
        let len = der[at + 1] as usize;
        let value = &der[at + 2..at + 2 + len];
        at += 2 + len;
        let value = value.strip_prefix(&[0]).unwrap_or(value);
        let mut out = vec![0; 32 - value.len()];
        out.extend_from_slice(value);
        out
    };
    let r = int();
    (r, int())
}

fn verifier(ca: &TestCa) -> IngressVerifier {
    IngressVerifier::from_trust_anchors([ca.der()])
        .unwrap()
        .with_audiences([here()])
}

#[test]
fn the_strict_mode_accepts_bound_signed_principals_only() {
    let ca = TestCa::new("clients");
    let caller = ca.client_leaf("region", 1);
    let strict = verifier(&ca);
    assert_eq!(strict.mode(), ReceivingMode::Strict, "the default");

    let got: Principal = strict
        .verify_request(&request(&caller, &ours(&caller, &here())))
        .unwrap();
    assert_eq!(got, who());

    let err = strict
        .verify_request::<Principal>(&request(&caller, &go_unsigned(&who())))
        .unwrap_err();
    assert!(matches!(err, RequestPrincipalError::Unsigned), "{err:?}");
    assert_eq!(err.reason(), "unsigned");
    let err = strict
        .verify_request::<Principal>(&request(&caller, &go_signed(&caller)))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestPrincipalError::Verify(VerifyError::MissingTimes { .. })
        ),
        "{err:?}"
    );
    let err = strict
        .verify_request::<Principal>(&request(&caller, &ours(&caller, &elsewhere())))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestPrincipalError::Verify(VerifyError::AudienceMismatch { .. })
        ),
        "{err:?}"
    );
}

#[test]
fn the_go_compatible_mode_accepts_what_go_senders_send_and_still_checks_what_is_there() {
    let ca = TestCa::new("clients");
    let caller = ca.client_leaf("region", 1);
    let compatible = verifier(&ca).with_mode(ReceivingMode::GoCompatible);

    for principal in [
        go_unsigned(&who()),
        // Padded base64url decodes too.
        URL_SAFE.encode(serde_json::to_vec(&who()).unwrap()),
        go_signed(&caller),
        ours(&caller, &here()),
    ] {
        let got: Principal = compatible
            .verify_request(&request(&caller, &principal))
            .unwrap_or_else(|e| panic!("{principal}: {e}"));
        assert_eq!(got, who());
    }
    // A present audience is checked: a principal captured on its way elsewhere.
    let err = compatible
        .verify_request::<Principal>(&request(&caller, &ours(&caller, &elsewhere())))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestPrincipalError::Verify(VerifyError::AudienceMismatch { .. })
        ),
        "{err:?}"
    );
    // The unsigned form needs the verified certificate as much as a signed one.
    let stranger = TestCa::new("strangers").client_leaf("region", 2);
    let err = compatible
        .verify_request::<Principal>(&request(&stranger, &go_unsigned(&who())))
        .unwrap_err();
    assert!(matches!(err, RequestPrincipalError::Ingress(_)), "{err:?}");
    // Unsigned JSON of the wrong shape is a payload error, not a principal.
    let err = compatible
        .verify_request::<Principal>(&request(
            &caller,
            &URL_SAFE_NO_PAD.encode(br#"{"actor":7}"#),
        ))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestPrincipalError::Verify(VerifyError::PayloadType(_))
        ),
        "{err:?}"
    );
}

#[test]
fn accepted_unsigned_principals_are_logged_at_most_once_a_minute() {
    let ca = TestCa::new("clients");
    let caller = ca.client_leaf("region", 1);
    let compatible = verifier(&ca).with_mode(ReceivingMode::GoCompatible);
    let captured = CapturedLogs::new();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        for _ in 0..5 {
            let _: Principal = compatible
                .verify_request(&request(&caller, &go_unsigned(&who())))
                .unwrap();
        }
        // Signed ones are counted, never logged.
        let _: Principal = compatible
            .verify_request(&request(&caller, &go_signed(&caller)))
            .unwrap();
    });
    let text = captured.text();
    assert_eq!(
        text.matches("accepted an unsigned X-Principal").count(),
        1,
        "{text}"
    );
    assert!(text.contains("WARN"), "{text}");
    assert!(
        !text.contains("alice"),
        "no principal content in the log: {text}"
    );
}

#[test]
fn a_receiver_without_audiences_is_refused_unless_it_opts_out() {
    let ca = TestCa::new("clients");
    let caller = ca.client_leaf("region", 1);
    let unnamed = IngressVerifier::from_trust_anchors([ca.der()]).unwrap();
    for mode in [ReceivingMode::Strict, ReceivingMode::GoCompatible] {
        let unnamed = unnamed.clone().with_mode(mode);
        assert_eq!(
            unnamed.check_configuration(),
            Err(ReceiverConfigError::NoAudiences)
        );
        for principal in [ours(&caller, &here()), go_unsigned(&who())] {
            let err = unnamed
                .verify_request::<Principal>(&request(&caller, &principal))
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    RequestPrincipalError::Configuration(ReceiverConfigError::NoAudiences)
                ),
                "{mode}: {err:?}"
            );
            assert_eq!(err.reason(), "not_configured");
        }
    }
    // The explicit opt-out, in the compatibility mode: any audience, none.
    let opted_out = unnamed
        .clone()
        .with_mode(ReceivingMode::GoCompatible)
        .without_audience_check();
    for principal in [ours(&caller, &elsewhere()), go_unsigned(&who())] {
        let _: Principal = opted_out
            .verify_request(&request(&caller, &principal))
            .unwrap();
    }
    // The strict mode cannot opt out: it requires every token's audience.
    let strict = unnamed
        .with_mode(ReceivingMode::Strict)
        .without_audience_check();
    assert_eq!(
        strict.check_configuration(),
        Err(ReceiverConfigError::StrictWithoutAudiences)
    );

    // The builder refuses to build, before it watches anything (no client needed
    // to see it: `check` is what `build` runs first).
    let ca_secret = SecretRef::new("unikorn", "client-ca");
    for (builder, want) in [
        (
            IngressBuilder::new(ca_secret.clone(), ReceivingMode::GoCompatible),
            Some(ReceiverConfigError::NoAudiences),
        ),
        (
            IngressBuilder::new(ca_secret.clone(), ReceivingMode::Strict).without_audience_check(),
            Some(ReceiverConfigError::StrictWithoutAudiences),
        ),
        (
            IngressBuilder::new(ca_secret.clone(), ReceivingMode::GoCompatible)
                .without_audience_check(),
            None,
        ),
        (
            IngressBuilder::new(ca_secret.clone(), ReceivingMode::Strict).audiences([here()]),
            None,
        ),
    ] {
        match (builder.check(), want) {
            (Ok(()), None) => {}
            (Err(ReceivingError::Configuration(got)), Some(want)) => assert_eq!(got, want),
            (got, want) => panic!("{builder:?}: {got:?}, want {want:?}"),
        }
    }
    assert_eq!("go-compatible".parse(), Ok(ReceivingMode::GoCompatible));
    assert_eq!("strict".parse(), Ok(ReceivingMode::Strict));
    assert!("lenient".parse::<ReceivingMode>().is_err());
}
