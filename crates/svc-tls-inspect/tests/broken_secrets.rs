//! Each broken client-certificate Secret of svc-tls's corpus (its tests
//! `malformed.rs` and `material_errors.rs`), inspected over the wire: exit 3, the
//! loader's error kind in the JSON, what can still be described described, and no
//! key material printed.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::*;
use kube_testbed::Testbed;
use serde_json::Value;
use test_support::keys::KeyAlg;
use test_support::pki::TestCa;
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
    let encrypted = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n";
    let huge = "A".repeat(600 * 1024);
    let keys = [&leaf, &other, &expired, &future]
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
                "tls.crt too large",
                both(&huge, &leaf.key_pem),
                "TooLarge",
                None,
            ),
        ],
        keys,
    )
}

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
