//! The principals' event counters and their recorder, a [`crate::principal::TokenRecorder`].
//!
//! | family | type | labels |
//! |---|---|---|
//! | `svc_tls_principal_signed_total` | counter | `algorithm` (`PS512`, `ES256`, `ES384`, `unknown`), `result` (`ok` or a reason of [`SIGN_RESULTS`]) |
//! | `svc_tls_principal_verified_total` | counter | `algorithm`, `result` (`ok` or a reason of [`VERIFY_RESULTS`]) |
//! | `svc_tls_principal_accepted_without_times_total` | counter | none |
//! | `svc_tls_principal_accepted_without_audience_total` | counter | none |
//! | `svc_tls_principal_accepted_unsigned_total` | counter | none |
//!
//! The last three count principals accepted (also counted `ok` above) that lacked
//! `iat`/`exp`, or `aud`, or were the unsigned form (counted in the two others too):
//! what the strict mode ([`ReceivingMode::Strict`](crate::receiving::ReceivingMode::Strict))
//! refuses. All flat for a while means every sender signs and binds its tokens, and
//! the receiver can switch. Created at construction, so they read 0 before the
//! first token.
//!
//! Both labels come from fixed sets chosen by this crate: a token's `alg` that is
//! not accepted counts as `unknown`, and no header or error text is ever a label.
//! A series appears with its first event.

use std::fmt;
use std::sync::OnceLock;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::principal::{
    Algorithm, SIGN_RESULTS, TokenRecorder, VERIFY_RESULTS, recorder::ALGORITHMS,
    recorder::algorithm_label,
};

type AlgorithmResult = Vec<(&'static str, &'static str)>;

/// The principals' counter families, registered once per Prometheus registry.
pub(crate) struct PrincipalFamilies {
    signed: Family<AlgorithmResult, Counter>,
    verified: Family<AlgorithmResult, Counter>,
    without_times: Counter,
    without_audience: Counter,
    unsigned: Counter,
}

impl PrincipalFamilies {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let families = Self {
            signed: Family::default(),
            verified: Family::default(),
            without_times: Counter::default(),
            without_audience: Counter::default(),
            unsigned: Counter::default(),
        };
        registry.register(
            "svc_tls_principal_signed",
            "X-Principal tokens signed, by algorithm and result (ok, or why signing failed)",
            families.signed.clone(),
        );
        registry.register(
            "svc_tls_principal_verified",
            "Requests whose X-Principal was verified behind the ingress, by algorithm and result (ok, or why it was refused)",
            families.verified.clone(),
        );
        registry.register(
            "svc_tls_principal_accepted_without_times",
            "X-Principal tokens accepted without iat or exp (Go senders, older versions): the strict mode would refuse them",
            families.without_times.clone(),
        );
        registry.register(
            "svc_tls_principal_accepted_without_audience",
            "X-Principal tokens accepted without aud (Go senders, older versions): the strict mode would refuse them",
            families.without_audience.clone(),
        );
        registry.register(
            "svc_tls_principal_accepted_unsigned",
            "Unsigned X-Principal values (a Go sender's base64url JSON) accepted in the go-compatible receiving mode: the strict mode would refuse them",
            families.unsigned.clone(),
        );
        families
    }
}

/// One counter per (algorithm, result) pair, looked up in its family on first use
/// and then only incremented.
struct Cells<const R: usize> {
    family: Family<AlgorithmResult, Counter>,
    results: &'static [&'static str; R],
    cells: Vec<OnceLock<Counter>>,
}

impl<const R: usize> Cells<R> {
    fn new(family: &Family<AlgorithmResult, Counter>, results: &'static [&'static str; R]) -> Self {
        Self {
            family: family.clone(),
            results,
            cells: (0..ALGORITHMS.len() * R).map(|_| OnceLock::new()).collect(),
        }
    }

    fn inc(&self, algorithm: Option<Algorithm>, result: &'static str) {
        let algorithm = algorithm_label(algorithm);
        let a = ALGORITHMS
            .iter()
            .position(|known| *known == algorithm)
            .unwrap_or(ALGORITHMS.len() - 1);
        // A result outside the fixed set is counted as the last one, `other`, rather
        // than becoming a new label value.
        let r = self
            .results
            .iter()
            .position(|known| *known == result)
            .unwrap_or(R - 1);
        let Some(cell) = self.cells.get(a * R + r) else {
            return;
        };
        cell.get_or_init(|| {
            self.family
                .get_or_create(&vec![
                    ("algorithm", ALGORITHMS[a]),
                    ("result", self.results[r]),
                ])
                .clone()
        })
        .inc();
    }
}

/// The recorder of the principals signed and verified in a process (or by the
/// signers and verifiers given it): counts by algorithm and result.
pub(crate) struct PrincipalRecorder {
    signed: Cells<{ SIGN_RESULTS.len() }>,
    verified: Cells<{ VERIFY_RESULTS.len() }>,
    without_times: Counter,
    without_audience: Counter,
    unsigned: Counter,
}

impl fmt::Debug for PrincipalRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrincipalRecorder").finish_non_exhaustive()
    }
}

impl PrincipalRecorder {
    pub(crate) fn new(families: &PrincipalFamilies) -> Self {
        Self {
            signed: Cells::new(&families.signed, &SIGN_RESULTS),
            verified: Cells::new(&families.verified, &VERIFY_RESULTS),
            without_times: families.without_times.clone(),
            without_audience: families.without_audience.clone(),
            unsigned: families.unsigned.clone(),
        }
    }
}

impl TokenRecorder for PrincipalRecorder {
    fn signed(&self, algorithm: Option<Algorithm>, result: &'static str) {
        self.signed.inc(algorithm, result);
    }

    fn verified(&self, algorithm: Option<Algorithm>, result: &'static str) {
        self.verified.inc(algorithm, result);
    }

    fn accepted_without_times(&self) {
        self.without_times.inc();
    }

    fn accepted_without_audience(&self) {
        self.without_audience.inc();
    }

    fn accepted_unsigned(&self) {
        self.unsigned.inc();
    }
}

#[cfg(test)]
mod tests {
    //! The exposition of the principal families, through a real signer and a real
    //! ingress verifier; a token's `alg` never becomes a label.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    use prometheus_client::encoding::text::encode;
    use reqwest::header::{HeaderMap, HeaderValue};
    use test_support::keys::KeyAlg;
    use test_support::pki::{Leaf, TestCa};

    use super::*;
    use crate::SecretRef;
    use crate::material::{Identity, crypto_provider, load_identity_from_pem};
    use crate::metrics::Metrics;
    use crate::principal::ingress::{IngressVerifier, RequestPrincipalError};
    use crate::principal::{Principal, PrincipalSigner};

    fn identity(leaf: &Leaf) -> Identity {
        let secret = SecretRef::new("platform", "client");
        load_identity_from_pem(
            &secret,
            leaf.cert_pem.as_bytes(),
            leaf.key_pem.as_bytes(),
            &crypto_provider(),
        )
        .unwrap()
    }

    fn headers(leaf: &Leaf, token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("ssl-client-verify", HeaderValue::from_static("SUCCESS"));
        let cert = utf8_percent_encode(&leaf.cert_pem, NON_ALPHANUMERIC).to_string();
        headers.insert("ssl-client-cert", HeaderValue::from_str(&cert).unwrap());
        headers.insert("x-principal", HeaderValue::from_str(token).unwrap());
        headers
    }

    fn peer_url() -> url::Url {
        url::Url::parse("https://identity.example/api").unwrap()
    }

    fn exposition(registry: &Registry) -> String {
        let mut text = String::new();
        encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn signed_and_verified_principals_are_counted_by_algorithm_and_result() {
        let mut registry = Registry::default();
        let metrics = Metrics::new(&mut registry);
        let ca = TestCa::new("clients");
        let rsa = ca.client_leaf_with("rsa peer", 1, KeyAlg::Rsa2048.generate());
        let p256 = ca.client_leaf("p256 peer", 2);
        let ed25519 = ca.client_leaf_with("ed peer", 3, KeyAlg::Ed25519.generate());
        let who = Principal {
            actor: Some("alice".into()),
            ..Principal::default()
        };
        let sign = |leaf: &Leaf| {
            PrincipalSigner::new(identity(leaf))
                .with_recorder(metrics.principal_recorder())
                .sign(&peer_url(), &who)
        };
        let rsa_token = sign(&rsa).unwrap();
        sign(&rsa).unwrap();
        let p256_token = sign(&p256).unwrap();
        sign(&ed25519).unwrap_err();

        let ingress = IngressVerifier::from_trust_anchors([ca.der()])
            .unwrap()
            .with_audiences([peer_url()])
            .with_recorder(metrics.principal_recorder());
        let ok: Principal = ingress
            .verify_request(&headers(&rsa, rsa_token.as_str()))
            .unwrap();
        assert_eq!(ok.actor.as_deref(), Some("alice"));
        // The P-256 token against the RSA peer's certificate: the algorithm was
        // accepted, then refused for the key.
        let mismatch = ingress
            .verify_request::<Principal>(&headers(&rsa, p256_token.as_str()))
            .unwrap_err();
        assert_eq!(mismatch.reason(), "key_refused");
        // A certificate from another CA: refused before any token is read.
        let stranger = TestCa::new("strangers").client_leaf("x", 4);
        let untrusted = ingress
            .verify_request::<Principal>(&headers(&stranger, p256_token.as_str()))
            .unwrap_err();
        assert!(matches!(untrusted, RequestPrincipalError::Ingress(_)));

        let text = exposition(&registry);
        for expected in [
            "# TYPE svc_tls_principal_signed counter\n",
            "# TYPE svc_tls_principal_verified counter\n",
            "svc_tls_principal_signed_total{algorithm=\"PS512\",result=\"ok\"} 2\n",
            "svc_tls_principal_signed_total{algorithm=\"ES256\",result=\"ok\"} 1\n",
            "svc_tls_principal_signed_total{algorithm=\"unknown\",result=\"unsupported_key\"} 1\n",
            "svc_tls_principal_verified_total{algorithm=\"PS512\",result=\"ok\"} 1\n",
            "svc_tls_principal_verified_total{algorithm=\"ES256\",result=\"key_refused\"} 1\n",
            "svc_tls_principal_verified_total{algorithm=\"unknown\",result=\"certificate_untrusted\"} 1\n",
        ] {
            assert!(text.contains(expected), "{expected}in:\n{text}");
        }
    }

    /// A token signed the Go way (`{"alg":"PS512"}`, no times, no audience) with
    /// `leaf`'s RSA key.
    fn go_style_token(leaf: &Leaf) -> String {
        use base64::Engine as _;
        let b64 = |s: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let input = format!(
            "{}.{}",
            b64(br#"{"alg":"PS512"}"#),
            b64(br#"{"actor":"go"}"#)
        );
        let signer = identity(leaf)
            .certified_key()
            .key
            .choose_scheme(&[rustls::SignatureScheme::RSA_PSS_SHA512])
            .unwrap();
        let signature = signer.sign(input.as_bytes()).unwrap();
        format!("{input}.{}", b64(&signature))
    }

    #[test]
    fn tokens_accepted_without_times_or_audience_are_counted() {
        let mut registry = Registry::default();
        let metrics = Metrics::new(&mut registry);
        let ca = TestCa::new("clients");
        let rsa = ca.client_leaf_with("rsa peer", 1, KeyAlg::Rsa2048.generate());
        let ingress = IngressVerifier::from_trust_anchors([ca.der()])
            .unwrap()
            .with_audiences([peer_url()])
            .with_compatibility(
                crate::principal::ingress::CompatibilityWindow::new(
                    std::time::SystemTime::now() + std::time::Duration::from_secs(3600),
                    [crate::principal::ingress::AllowedPeer::common_name(
                        "rsa peer",
                    )],
                )
                .unwrap(),
            )
            .with_recorder(metrics.principal_recorder());
        let zero = [
            "svc_tls_principal_accepted_without_times_total 0\n",
            "svc_tls_principal_accepted_without_audience_total 0\n",
            "svc_tls_principal_accepted_unsigned_total 0\n",
        ];
        let text = exposition(&registry);
        for expected in zero {
            assert!(text.contains(expected), "{expected}in:\n{text}");
        }

        // Ours carry times and audience: not counted.
        let ours = PrincipalSigner::new(identity(&rsa))
            .sign(&peer_url(), &Principal::default())
            .unwrap();
        ingress
            .verify_request::<Principal>(&headers(&rsa, ours.as_str()))
            .unwrap();
        let text = exposition(&registry);
        for expected in zero {
            assert!(text.contains(expected), "{expected}in:\n{text}");
        }

        // A Go sender's signed token: accepted in the compatibility mode, counted
        // twice over.
        let go = go_style_token(&rsa);
        for _ in 0..2 {
            let who: Principal = ingress.verify_request(&headers(&rsa, &go)).unwrap();
            assert_eq!(who.actor.as_deref(), Some("go"));
        }
        let text = exposition(&registry);
        for expected in [
            "svc_tls_principal_accepted_without_times_total 2\n",
            "svc_tls_principal_accepted_without_audience_total 2\n",
            "svc_tls_principal_verified_total{algorithm=\"PS512\",result=\"ok\"} 3\n",
            "svc_tls_principal_accepted_unsigned_total 0\n",
        ] {
            assert!(text.contains(expected), "{expected}in:\n{text}");
        }

        // A Go sender's unsigned form: accepted, counted as unsigned and as
        // without times and audience.
        use base64::Engine as _;
        let unsigned =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"actor":"go"}"#);
        let who: Principal = ingress.verify_request(&headers(&rsa, &unsigned)).unwrap();
        assert_eq!(who.actor.as_deref(), Some("go"));
        let text = exposition(&registry);
        for expected in [
            "svc_tls_principal_accepted_without_times_total 3\n",
            "svc_tls_principal_accepted_without_audience_total 3\n",
            "svc_tls_principal_accepted_unsigned_total 1\n",
            "svc_tls_principal_verified_total{algorithm=\"unknown\",result=\"ok\"} 1\n",
        ] {
            assert!(text.contains(expected), "{expected}in:\n{text}");
        }

        // The strict mode refuses both, and counts them as refused, not accepted.
        let strict = ingress
            .clone()
            .with_mode(crate::principal::ingress::ReceivingMode::Strict);
        let refused = strict
            .verify_request::<Principal>(&headers(&rsa, &go))
            .unwrap_err();
        assert_eq!(refused.reason(), "times");
        let refused = strict
            .verify_request::<Principal>(&headers(&rsa, &unsigned))
            .unwrap_err();
        assert_eq!(refused.reason(), "unsigned");
        let text = exposition(&registry);
        for expected in [
            "svc_tls_principal_accepted_without_times_total 3\n",
            "svc_tls_principal_accepted_unsigned_total 1\n",
            "svc_tls_principal_verified_total{algorithm=\"unknown\",result=\"unsigned\"} 1\n",
        ] {
            assert!(text.contains(expected), "{expected}in:\n{text}");
        }
    }

    #[test]
    fn the_receiving_mode_in_force_is_a_gauge_read_at_scrape_time() {
        use crate::principal::ingress::{AllowedPeer, CompatibilityWindow};
        use std::time::{Duration, SystemTime};
        let mut registry = Registry::default();
        let metrics = Metrics::new(&mut registry);
        let ca = TestCa::new("clients");
        let base = IngressVerifier::from_trust_anchors([ca.der()])
            .unwrap()
            .with_audiences([peer_url()]);
        let window = |until| {
            CompatibilityWindow::new(until, [AllowedPeer::common_name("go sender")]).unwrap()
        };
        let strict = base.clone();
        let open = base
            .clone()
            .with_compatibility(window(SystemTime::now() + Duration::from_secs(3600)));
        let ended = base.with_compatibility(window(SystemTime::now() - Duration::from_secs(1)));
        for receiver in [&strict, &open, &ended] {
            metrics.track_receiver(receiver);
        }
        let text = exposition(&registry);
        for expected in [
            "# TYPE svc_tls_principal_receiving_mode gauge\n",
            "svc_tls_principal_receiving_mode{mode=\"strict\"} 2\n",
            "svc_tls_principal_receiving_mode{mode=\"go-compatible\"} 1\n",
        ] {
            assert!(text.contains(expected), "{expected}in:\n{text}");
        }
        // A receiver that is gone is no longer counted.
        drop((strict, open, ended));
        let text = exposition(&registry);
        for expected in [
            "svc_tls_principal_receiving_mode{mode=\"strict\"} 0\n",
            "svc_tls_principal_receiving_mode{mode=\"go-compatible\"} 0\n",
        ] {
            assert!(text.contains(expected), "{expected}in:\n{text}");
        }
    }

    #[test]
    fn a_principal_result_or_algorithm_label_never_carries_token_text() {
        let mut registry = Registry::default();
        let metrics = Metrics::new(&mut registry);
        let ca = TestCa::new("clients");
        let leaf = ca.client_leaf("peer", 1);
        let ingress = IngressVerifier::from_trust_anchors([ca.der()])
            .unwrap()
            .with_audiences([peer_url()])
            .with_recorder(metrics.principal_recorder());
        use base64::Engine as _;
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        for alg in [
            "evil\\\"} 1\\nsvc_tls_pwned 1",
            "PS512 attacker",
            "none",
            "HS256",
        ] {
            let token = format!(
                "{}.{}.{}",
                b64(&format!("{{\"alg\":\"{alg}\"}}")),
                b64("{}"),
                b64("sig")
            );
            let refused = ingress
                .verify_request::<Principal>(&headers(&leaf, &token))
                .unwrap_err();
            assert_eq!(refused.reason(), "algorithm_refused", "{alg}");
        }
        let text = exposition(&registry);
        for needle in ["evil", "pwned", "attacker", "HS256", "none\""] {
            assert!(!text.contains(needle), "{needle} in:\n{text}");
        }
        assert!(
            text.contains(
                "svc_tls_principal_verified_total{algorithm=\"unknown\",result=\"algorithm_refused\"} 4\n"
            ),
            "{text}"
        );
        // Every label value comes from the fixed sets (the two readiness counters
        // have no label at all).
        for line in text.lines().filter(|l| l.starts_with("svc_tls_principal_")) {
            if line.starts_with("svc_tls_principal_accepted_") {
                assert!(!line.contains('{'), "{line}");
                continue;
            }
            if line.starts_with("svc_tls_principal_receiving_mode") {
                assert!(
                    line.starts_with("svc_tls_principal_receiving_mode{mode=\"strict\"}")
                        || line.starts_with(
                            "svc_tls_principal_receiving_mode{mode=\"go-compatible\"}"
                        ),
                    "{line}"
                );
                continue;
            }
            let value = |key: &str| {
                line.split(&format!("{key}=\""))
                    .nth(1)
                    .and_then(|rest| rest.split('"').next())
                    .unwrap()
                    .to_owned()
            };
            assert!(ALGORITHMS.contains(&value("algorithm").as_str()), "{line}");
            let result = value("result");
            assert!(
                VERIFY_RESULTS.contains(&result.as_str())
                    || SIGN_RESULTS.contains(&result.as_str()),
                "{line}"
            );
        }
    }
}
