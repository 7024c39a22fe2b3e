//! Each broken client-certificate Secret of svc-tls's corpus (its tests
//! `malformed.rs` and `material_errors.rs`), inspected over the wire: exit 3, the
//! loader's error kind in the JSON, what can still be described described, and no
//! key material printed.

use crate::common::*;
use kube_testbed::Testbed;
use rsa::pkcs8::EncodePrivateKey as _;
use serde_json::Value;
use test_support::keys::KeyAlg;
use test_support::pki::{Leaf, TestCa};
use test_support::secret::{secret_with, tls_secret};

const NAME: &str = "broken-client-certificate";
const TLS: &str = "kubernetes.io/tls";

/// A broken Secret, the error kind the loader names and the data key it names.
struct Case {
    what: &'static str,
    secret: Value,
    kind: &'static str,
    /// Whether the key is known to match (`None`: the loader did not get that far).
    key_matches: Option<bool>,
}

fn cases(ca: &TestCa) -> (Vec<Case>, Vec<String>) {
    let leaf = ca.client_leaf("svc", 900);
    let other = ca.client_leaf("svc", 901);
    let expired = ca.expired_client_leaf(902);
    let future = ca.not_yet_valid_client_leaf(903);
    let rsa_1024 = rsa_1024_leaf(ca, 904);
    let encrypted = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n";
    let huge = "A".repeat(600 * 1024);
    let keys = [&leaf, &other, &expired, &future, &rsa_1024]
        .iter()
        .map(|l| l.key_pem.clone())
        .collect();
    let case = |what, secret, kind, key_matches| Case {
        what,
        secret,
        kind,
        key_matches,
    };
    let both = |crt: &str, key: &str| tls_secret(NS, NAME, crt, key);
    (
        vec![
            case(
                "wrong type",
                secret_with(
                    NS,
                    NAME,
                    "Opaque",
                    &[("tls.crt", &leaf.cert_pem), ("tls.key", &leaf.key_pem)],
                ),
                "WrongType",
                None,
            ),
            case(
                "missing tls.key",
                secret_with(NS, NAME, TLS, &[("tls.crt", &leaf.cert_pem)]),
                "MissingKey",
                None,
            ),
            case(
                "missing tls.crt",
                secret_with(NS, NAME, TLS, &[("tls.key", &leaf.key_pem)]),
                "MissingKey",
                None,
            ),
            case("empty tls.crt", both("", &leaf.key_pem), "EmptyKey", None),
            case(
                "tls.crt not PEM",
                both("this is not PEM at all", &leaf.key_pem),
                "NotPem",
                None,
            ),
            case(
                "tls.crt holds a key",
                both(&leaf.key_pem, &leaf.key_pem),
                "NoCertificate",
                None,
            ),
            case(
                "tls.key holds a certificate",
                both(&leaf.cert_pem, &leaf.cert_pem),
                "NoPrivateKey",
                None,
            ),
            case(
                "encrypted key",
                both(&leaf.cert_pem, encrypted),
                "EncryptedKey",
                None,
            ),
            case(
                "key of another certificate",
                both(&leaf.cert_pem, &other.key_pem),
                "KeyMismatch",
                Some(false),
            ),
            case(
                "expired certificate",
                both(&expired.cert_pem, &expired.key_pem),
                "CertificateExpired",
                Some(true),
            ),
            case(
                "not yet valid",
                both(&future.cert_pem, &future.key_pem),
                "CertificateNotYetValid",
                Some(true),
            ),
            case(
                "RSA-1024 key",
                both(&rsa_1024.cert_pem, &rsa_1024.key_pem),
                "UnsupportedAlgorithm",
                None,
            ),
            case(
                "tls.crt too large",
                both(&huge, &leaf.key_pem),
                "TooLarge",
                None,
            ),
        ],
        keys,
    )
}

/// A client leaf issued by `ca` for a fresh RSA-1024 key pair (svc-tls refuses RSA
/// below 2048 bits; rcgen and aws-lc-rs generate none, the `rsa` crate does).
#[allow(
    clippy::disallowed_types,
    reason = "test fixture: generates a test key, no private-key operation (signing, decryption)"
)]
fn rsa_1024_leaf(ca: &TestCa, serial: u64) -> Leaf {
    let key = rsa::PrivateKey::new(&mut SystemRng, 1024).unwrap();
    ca.client_leaf_with_rsa_pkcs8("svc", serial, key.to_pkcs8_der().unwrap().as_bytes())
}

/// The system's randomness (rustls's aws-lc-rs provider) as the RNG `rsa` asks for.
struct SystemRng;

impl rsa::rand_core::TryRng for SystemRng {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        rsa::rand_core::utils::next_word_via_fill(self)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        rsa::rand_core::utils::next_word_via_fill(self)
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        rustls::crypto::aws_lc_rs::default_provider()
            .secure_random
            .fill(dst)
            .unwrap();
        Ok(())
    }
}

impl rsa::rand_core::TryCryptoRng for SystemRng {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_broken_secret_exits_3_with_its_error_kind() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let ca = TestCa::new("clients");
    let (cases, keys) = cases(&ca);
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let args = identity_args(&kubeconfig, NAME);
    for case in cases {
        // The type of a Secret is immutable: replace it whole.
        tb.delete("v1", "Secret", NS, NAME);
        tb.upsert(case.secret);
        let run = run(&args, &[], &keys);
        assert_eq!(run.code, 3, "{}: {}\n{}", case.what, run.stdout, run.stderr);
        let json = run.json();
        assert_eq!(
            json["failed"],
            serde_json::json!(["secret"]),
            "{}",
            case.what
        );
        let secret = &json["secrets"][0];
        assert_eq!(secret["found"], true, "{}", case.what);
        assert_eq!(
            secret["loader_error"]["kind"], case.kind,
            "{}: {json:#}",
            case.what
        );
        let message = secret["loader_error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("{NS}/{NAME}")),
            "{}: {message}",
            case.what
        );
        assert_eq!(
            secret["key_matches_certificate"],
            case.key_matches.map_or(Value::Null, Value::from),
            "{}",
            case.what
        );
        // Nothing was signed with a refused identity.
        assert_eq!(json["principal"], Value::Null, "{}", case.what);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_secret_is_named_and_exits_3() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let run = run(&identity_args(&kubeconfig, "nowhere"), &[], &[]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    let json = run.json();
    assert_eq!(json["secrets"][0]["found"], false);
    assert_eq!(json["secrets"][0]["loader_error"]["kind"], "NotFound");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_p521_identity_loads_and_its_principal_fails_with_exit_6() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let leaf = TestCa::new("clients").client_leaf_with("svc", 5, KeyAlg::P521.generate());
    tb.upsert(tls_secret(NS, NAME, &leaf.cert_pem, &leaf.key_pem));
    let run = run(&identity_args(&kubeconfig, NAME), &[], &[&leaf.key_pem]);
    assert_eq!(run.code, 6, "{}", run.stdout);
    let json = run.json();
    assert_eq!(json["secrets"][0]["loaded_key_type"], "ECDSA P-521");
    assert_eq!(json["secrets"][0]["certificates"][0]["key_bits"], 521);
    assert_eq!(json["principal"]["signed"], false);
    assert_eq!(json["principal"]["error"]["kind"], "UnsupportedCurve");
}

/// An operator who rotated to an old 1024-bit key sees it named, in the JSON and in
/// the human report: the loader's refusal with the size and what is supported, and
/// the certificate's key described.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rsa_1024_identity_is_refused_naming_its_size() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let leaf = rsa_1024_leaf(&TestCa::new("clients"), 5);
    tb.upsert(tls_secret(NS, NAME, &leaf.cert_pem, &leaf.key_pem));
    let args = identity_args(&kubeconfig, NAME);

    let json_run = run(&args, &[], &[&leaf.key_pem]);
    assert_eq!(json_run.code, 3, "{}\n{}", json_run.stdout, json_run.stderr);
    let json = json_run.json();
    let secret = &json["secrets"][0];
    assert_eq!(
        secret["loader_error"]["kind"], "UnsupportedAlgorithm",
        "{json:#}"
    );
    let message = secret["loader_error"]["message"].as_str().unwrap();
    for expected in [
        "tls.crt",
        "unsupported key algorithm RSA-1024",
        "RSA 2048-8192 bits",
    ] {
        assert!(
            message.contains(expected),
            "{expected:?} missing from {message}"
        );
    }
    assert_eq!(secret["certificates"][0]["key_type"], "RSA", "{json:#}");
    assert_eq!(secret["certificates"][0]["key_bits"], 1024, "{json:#}");
    assert_eq!(secret["loaded_key_type"], Value::Null);

    let human: Vec<String> = args.into_iter().filter(|a| a != "--output=json").collect();
    let human_run = run(&human, &[], &[&leaf.key_pem]);
    assert_eq!(
        human_run.code, 3,
        "{}\n{}",
        human_run.stdout, human_run.stderr
    );
    for expected in [
        "key: RSA (1024 bits)",
        "FAILED: [UnsupportedAlgorithm]",
        "unsupported key algorithm RSA-1024 (supported: RSA 2048-8192 bits",
    ] {
        assert!(
            human_run.stdout.contains(expected),
            "{expected:?} missing from:\n{}",
            human_run.stdout
        );
    }
}
