//! The receiving modes and the audiences a receiver must name (issues 40 and 42):
//! the strict mode (the default) accepts signed principals bound to this receiver
//! only; the Go-compatible mode also the deployed Go senders' unsigned base64url
//! JSON and their unbound signed tokens, logged at most once a minute. A receiver
//! without audiences is refused at build time (`IngressBuilder`) or judges no
//! request (`IngressVerifier`), unless it opts out explicitly. The compatibility
//! mode is bounded (issue 50): an end date and the senders that may use the Go
//! forms, both required; past the end it acts as strict and says so.

use base64::Engine as _;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::header::HeaderMap;
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject as _;
use std::time::{Duration, SystemTime};
use svc_tls::origin::SecretRef;

use svc_tls::principal::{
    AlgorithmPolicy, PRINCIPAL_HEADER, Principal, TokenTimes, VerifyError, sign_with_key,
};
use svc_tls::receiving::{
    AllowedPeer, CompatibilityWindow, IngressVerifier, ReceiverConfigError, ReceivingMode,
    RequestPrincipalError,
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

/// A window open for an hour, for the caller `region` (its leaf's common name).
fn window() -> CompatibilityWindow {
    CompatibilityWindow::new(
        SystemTime::now() + Duration::from_secs(3600),
        [AllowedPeer::common_name("region")],
    )
    .unwrap()
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
    let compatible = verifier(&ca).with_compatibility(window());

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
    let compatible = verifier(&ca).with_compatibility(window());
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
        let unnamed = match mode {
            ReceivingMode::GoCompatible => unnamed.clone().with_compatibility(window()),
            _ => unnamed.clone().with_mode(mode),
        };
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
        .with_compatibility(window())
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
            IngressBuilder::new(ca_secret.clone(), ReceivingMode::GoCompatible)
                .compatible_until(SystemTime::now())
                .compatible_senders([AllowedPeer::common_name("region")]),
            Some(ReceiverConfigError::NoAudiences),
        ),
        (
            IngressBuilder::new(ca_secret.clone(), ReceivingMode::Strict).without_audience_check(),
            Some(ReceiverConfigError::StrictWithoutAudiences),
        ),
        (
            IngressBuilder::new(ca_secret.clone(), ReceivingMode::GoCompatible)
                .compatible_until(SystemTime::now())
                .compatible_senders([AllowedPeer::common_name("region")])
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

#[test]
fn the_go_compatible_mode_refuses_to_build_without_its_end_its_senders_or_verified_headers() {
    let ca_secret = SecretRef::new("unikorn", "client-ca");
    let compatible =
        || IngressBuilder::new(ca_secret.clone(), ReceivingMode::GoCompatible).audiences([here()]);
    let until = SystemTime::now() + Duration::from_secs(3600);
    let senders = [AllowedPeer::common_name("region")];
    for (builder, want) in [
        (
            compatible(),
            Some(ReceiverConfigError::CompatibilityWithoutEnd),
        ),
        (
            compatible().compatible_senders(senders.clone()),
            Some(ReceiverConfigError::CompatibilityWithoutEnd),
        ),
        (
            compatible().compatible_until(until),
            Some(ReceiverConfigError::CompatibilityWithoutSenders),
        ),
        (
            compatible()
                .compatible_until(until)
                .compatible_senders(senders.clone()),
            None,
        ),
    ] {
        match (builder.check(), want) {
            (Ok(()), None) => {}
            (Err(ReceivingError::Configuration(got)), Some(want)) => assert_eq!(got, want),
            (got, want) => panic!("{builder:?}: {got:?}, want {want:?}"),
        }
    }
    let text = ReceivingError::Configuration(ReceiverConfigError::CompatibilityWithoutSenders)
        .source_text();
    assert!(text.contains("names no sender"), "{text}");
    assert_eq!(
        CompatibilityWindow::new(until, []),
        Err(ReceiverConfigError::CompatibilityWithoutSenders)
    );

    // By hand: the mode without its window, or over unverified headers, judges no
    // request.
    let ca = TestCa::new("clients");
    let caller = ca.client_leaf("region", 1);
    let unbounded = verifier(&ca).with_mode(ReceivingMode::GoCompatible);
    assert_eq!(
        unbounded.check_configuration(),
        Err(ReceiverConfigError::CompatibilityWithoutEnd)
    );
    let err = unbounded
        .verify_request::<Principal>(&request(&caller, &go_unsigned(&who())))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestPrincipalError::Configuration(ReceiverConfigError::CompatibilityWithoutEnd)
        ),
        "{err:?}"
    );
    let headers_only = IngressVerifier::unverified_headers_only()
        .with_audiences([here()])
        .with_compatibility(window());
    let err = headers_only
        .verify_request::<Principal>(&request(&caller, &go_unsigned(&who())))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestPrincipalError::Configuration(
                ReceiverConfigError::CompatibilityWithUnverifiedHeaders
            )
        ),
        "{err:?}"
    );

    // The end date as configuration text.
    let parsed = CompatibilityWindow::parse_until("2027-03-01T00:00:00Z").unwrap();
    assert_eq!(
        CompatibilityWindow::parse_until("2027-03-01").unwrap(),
        parsed
    );
    assert_eq!(
        CompatibilityWindow::parse_until("2027-03-01T01:00:00+01:00").unwrap(),
        parsed
    );
    let err = CompatibilityWindow::parse_until("next\nspring").unwrap_err();
    assert!(
        matches!(err, ReceiverConfigError::InvalidUntil { .. }),
        "{err:?}"
    );
}

/// `Display` of an error and its sources, for matching texts.
trait SourceText {
    fn source_text(&self) -> String;
}

impl<E: std::error::Error> SourceText for E {
    fn source_text(&self) -> String {
        let mut text = self.to_string();
        let mut source = self.source();
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    }
}

#[test]
fn the_go_forms_are_accepted_from_the_listed_senders_only() {
    let ca = TestCa::new("clients");
    let (listed, other) = (ca.client_leaf("region", 1), ca.client_leaf("compute", 2));
    let compatible = verifier(&ca)
        .with_compatibility(window())
        .with_replay_cache(std::sync::Arc::new(svc_tls::principal::ReplayCache::new(
            10,
        )));
    // Go's signed form has no jti: from a listed sender, within the window, the
    // replay cache lets it through (it cannot tell its uses apart).
    for principal in [go_unsigned(&who()), go_signed(&listed), go_signed(&listed)] {
        let _: Principal = compatible
            .verify_request(&request(&listed, &principal))
            .unwrap();
    }
    // Ours still has one, and is accepted once.
    let token = ours(&listed, &here());
    let _: Principal = compatible
        .verify_request(&request(&listed, &token))
        .unwrap();
    let err = compatible
        .verify_request::<Principal>(&request(&listed, &token))
        .unwrap_err();
    assert!(
        matches!(err, RequestPrincipalError::Verify(VerifyError::Replayed)),
        "{err:?}"
    );
    // A verified caller not on the list: judged as in the strict mode.
    let err = compatible
        .verify_request::<Principal>(&request(&other, &go_unsigned(&who())))
        .unwrap_err();
    assert!(matches!(err, RequestPrincipalError::Unsigned), "{err:?}");
    let err = compatible
        .verify_request::<Principal>(&request(&other, &go_signed(&other)))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestPrincipalError::Verify(VerifyError::MissingTimes { .. })
        ),
        "{err:?}"
    );
    let _: Principal = compatible
        .verify_request(&request(&other, &ours(&other, &here())))
        .unwrap();
}

#[test]
fn past_its_end_the_go_compatible_mode_acts_as_strict_and_says_so_once_a_minute() {
    let ca = TestCa::new("clients");
    let caller = ca.client_leaf("region", 1);
    let ended = verifier(&ca).with_compatibility(
        CompatibilityWindow::new(
            SystemTime::now() - Duration::from_secs(1),
            [AllowedPeer::common_name("region")],
        )
        .unwrap(),
    );
    assert_eq!(ended.mode(), ReceivingMode::GoCompatible);
    assert_eq!(ended.mode_in_force(), ReceivingMode::Strict);
    let open = verifier(&ca).with_compatibility(window());
    assert_eq!(open.mode_in_force(), ReceivingMode::GoCompatible);

    let captured = CapturedLogs::new();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        for _ in 0..3 {
            let err = ended
                .verify_request::<Principal>(&request(&caller, &go_unsigned(&who())))
                .unwrap_err();
            assert!(matches!(err, RequestPrincipalError::Unsigned), "{err:?}");
            let err = ended
                .verify_request::<Principal>(&request(&caller, &go_signed(&caller)))
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    RequestPrincipalError::Verify(VerifyError::MissingTimes { .. })
                ),
                "{err:?}"
            );
        }
        let _: Principal = ended
            .verify_request(&request(&caller, &ours(&caller, &here())))
            .unwrap();
    });
    let text = captured.text();
    assert_eq!(
        text.matches("the go-compatible receiving mode ended")
            .count(),
        1,
        "{text}"
    );
    assert!(text.contains("WARN"), "{text}");
}

#[test]
fn with_times_cannot_make_the_strict_mode_accept_unbound_tokens() {
    let ca = TestCa::new("clients");
    let caller = ca.client_leaf("region", 1);
    let loosened = verifier(&ca)
        .with_mode(ReceivingMode::Strict)
        .with_times(TokenTimes::CheckedWhenPresent);
    let err = loosened
        .verify_request::<Principal>(&request(&caller, &go_signed(&caller)))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestPrincipalError::Verify(VerifyError::MissingTimes { .. })
        ),
        "{err:?}"
    );
    // Nor drop the audience requirement.
    let unnamed = IngressVerifier::from_trust_anchors([ca.der()])
        .unwrap()
        .with_times(TokenTimes::CheckedWhenPresent)
        .without_audience_check();
    assert_eq!(
        unnamed.check_configuration(),
        Err(ReceiverConfigError::StrictWithoutAudiences)
    );
    let err = unnamed
        .verify_request::<Principal>(&request(&caller, &go_signed(&caller)))
        .unwrap_err();
    assert!(
        matches!(err, RequestPrincipalError::Configuration(_)),
        "{err:?}"
    );
    // Nor accept the unsigned form.
    let err = loosened
        .verify_request::<Principal>(&request(&caller, &go_unsigned(&who())))
        .unwrap_err();
    assert!(matches!(err, RequestPrincipalError::Unsigned), "{err:?}");
}

/// What the builder builds refuses a second use of a principal, without being asked
/// (issue 50); a flood of distinct tokens leaves its cache at its bound, refusing
/// new ones (fail closed) and still every replay of a recent one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_built_receiver_refuses_replays_by_default_and_stays_bounded_under_a_flood() {
    use std::sync::Arc;
    use svc_tls::principal::ReplayCache;

    let tb = kube_testbed::Testbed::start().await;
    let ca = TestCa::new("clients");
    tb.upsert(test_support::secret::secret_with(
        "unikorn",
        "clients-ca",
        "Opaque",
        &[("ca.crt", &ca.pem())],
    ));
    let watches = svc_tls::watch::WatchedObjects::new();
    let builder = IngressBuilder::new(
        SecretRef::new("unikorn", "clients-ca"),
        ReceivingMode::Strict,
    )
    .audiences([here()])
    .sync_timeout(Duration::from_secs(10));
    let caller = ca.client_leaf("region", 1);
    let key = PrivateKeyDer::from_pem_slice(caller.key_pem.as_bytes()).unwrap();
    let key = rustls::crypto::aws_lc_rs::sign::any_supported_type(&key).unwrap();
    let sign = || {
        sign_with_key(key.as_ref(), &here(), &who(), AlgorithmPolicy::default())
            .unwrap()
            .as_str()
            .to_owned()
    };

    // The default: a replay cache, with the default bound.
    let ingress = builder
        .clone()
        .build_in(&watches, &tb.cluster_client())
        .await
        .unwrap();
    let cache = ingress.replay_cache().expect("a replay cache by default");
    assert_eq!(
        cache.capacity(),
        svc_tls::principal::DEFAULT_REPLAY_CAPACITY
    );
    let token = sign();
    let _: Principal = ingress.verify_request(&request(&caller, &token)).unwrap();
    let err = ingress
        .verify_request::<Principal>(&request(&caller, &token))
        .unwrap_err();
    assert!(
        matches!(err, RequestPrincipalError::Verify(VerifyError::Replayed)),
        "{err:?}"
    );
    assert_eq!(err.reason(), "replayed");

    // The explicit opt-out.
    let off = builder
        .clone()
        .without_replay_cache()
        .build_in(&watches, &tb.cluster_client())
        .await
        .unwrap();
    assert!(off.replay_cache().is_none());
    for _ in 0..2 {
        let _: Principal = off.verify_request(&request(&caller, &token)).unwrap();
    }

    // A flood of distinct tokens against a cache of 200.
    let cache = Arc::new(ReplayCache::new(200));
    let bounded = builder
        .replay_cache(cache.clone())
        .build_in(&watches, &tb.cluster_client())
        .await
        .unwrap();
    let mut recent = String::new();
    for _ in 0..200 {
        recent = sign();
        let _: Principal = bounded.verify_request(&request(&caller, &recent)).unwrap();
    }
    for _ in 0..2_000 {
        let err = bounded
            .verify_request::<Principal>(&request(&caller, &sign()))
            .unwrap_err();
        assert!(
            matches!(
                err,
                RequestPrincipalError::Verify(VerifyError::ReplayCacheFull { capacity: 200 })
            ),
            "{err:?}"
        );
    }
    assert_eq!(cache.len(), 200, "the bound holds under the flood");
    assert_eq!(cache.refused_full(), 2_000);
    let err = bounded
        .verify_request::<Principal>(&request(&caller, &recent))
        .unwrap_err();
    assert!(
        matches!(err, RequestPrincipalError::Verify(VerifyError::Replayed)),
        "a recent token is still refused: {err:?}"
    );
}
