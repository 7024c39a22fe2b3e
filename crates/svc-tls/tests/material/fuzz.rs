//! Property-based fuzzing on stable Rust (proptest): hostile mutations of real
//! Secrets and real principal tokens must never panic, and every failure must be
//! the crate's typed error, naming the Secret and never showing key material.
//!
//! The seeds are committed in `tests/fuzz_seeds/` (an RSA-2048 and a P-256 client
//! identity issued by one CA, and a PS512 and an ES256 token signed with them).
//! They were made once by `generate_fuzz_seeds` below, with the same rcgen key
//! generators as the other tests:
//!
//! ```text
//! cargo test -p svc-tls --test fuzz -- --ignored generate_fuzz_seeds
//! ```
//!
//! Cases per target: 10 000 to 20 000 (each target takes 1 to 5 s in a debug
//! build on two shared cores, well under the 20 s budget); `FUZZ_CASES=n` changes it, e.g. for
//! a longer run in CI. Failures are not persisted to files: proptest prints the
//! minimal failing input instead.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestRunner};
use svc_tls::material::{self, MaterialError};
use svc_tls::origin::SecretRef;
use svc_tls::principal::{AlgorithmPolicy, PeerCertificate, VerifyError};

const NS: &str = "fuzz-ns";
const NAME: &str = "fuzz-secret";

fn seeds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_seeds")
}

fn seed(name: &str) -> Vec<u8> {
    std::fs::read(seeds_dir().join(name)).unwrap_or_else(|e| panic!("fuzz seed {name}: {e}"))
}

/// Validity is checked at a fixed instant inside the seeds' validity period, so
/// the run does not depend on the clock.
fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000)
}

fn cases(default: u32) -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn runner(default_cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases: cases(default_cases),
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..Config::default()
    })
}

// ---------------------------------------------------------------------------------
// Mutations.

/// Bytes worth writing into PEM, base64 and JWS text, besides arbitrary ones.
const INTERESTING: &[u8] = b"AZaz09+/=-_.\n\r \t-{}\":,[]\\\x00\xff";

fn byte() -> impl Strategy<Value = u8> {
    prop_oneof![any::<u8>(), proptest::sample::select(INTERESTING)]
}

/// A mutation of a byte string.
#[derive(Clone, Debug)]
enum Bytes {
    Set(Index, u8),
    Delete(Index, usize),
    Insert(Index, Vec<u8>),
    Truncate(Index),
    Duplicate(Index, usize),
}

fn bytes_mutation() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        4 => (any::<Index>(), byte()).prop_map(|(i, b)| Bytes::Set(i, b)),
        2 => (any::<Index>(), 1usize..64).prop_map(|(i, n)| Bytes::Delete(i, n)),
        2 => (any::<Index>(), proptest::collection::vec(byte(), 1..16))
            .prop_map(|(i, v)| Bytes::Insert(i, v)),
        1 => any::<Index>().prop_map(Bytes::Truncate),
        1 => (any::<Index>(), 1usize..128).prop_map(|(i, n)| Bytes::Duplicate(i, n)),
    ]
}

impl Bytes {
    fn apply(&self, data: &mut Vec<u8>) {
        if data.is_empty() {
            if let Self::Insert(_, v) = self {
                data.extend_from_slice(v);
            }
            return;
        }
        match self {
            Self::Set(i, b) => {
                let i = i.index(data.len());
                data[i] = *b;
            }
            Self::Delete(i, n) => {
                let i = i.index(data.len());
                let end = (i + n).min(data.len());
                data.drain(i..end);
            }
            Self::Insert(i, v) => {
                let i = i.index(data.len() + 1);
                data.splice(i..i, v.iter().copied());
            }
            Self::Truncate(i) => data.truncate(i.index(data.len())),
            Self::Duplicate(i, n) => {
                let i = i.index(data.len());
                let end = (i + n).min(data.len());
                let copy = data[i..end].to_vec();
                data.splice(end..end, copy);
            }
        }
    }
}

/// One PEM section: its label and DER.
struct Section {
    label: String,
    der: Vec<u8>,
}

fn pem_sections(text: &[u8]) -> Vec<Section> {
    let text = String::from_utf8_lossy(text);
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(label) = line
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        {
            current = Some((label.to_owned(), String::new()));
        } else if line.starts_with("-----END ") {
            if let Some((label, body)) = current.take()
                && let Ok(der) = STANDARD.decode(body)
            {
                out.push(Section { label, der });
            }
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line.trim());
        }
    }
    out
}

fn pem_encode(sections: &[Section]) -> Vec<u8> {
    let mut out = String::new();
    for s in sections {
        out.push_str(&format!("-----BEGIN {}-----\n", s.label));
        let body = STANDARD.encode(&s.der);
        for chunk in body.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(chunk).unwrap());
            out.push('\n');
        }
        out.push_str(&format!("-----END {}-----\n", s.label));
    }
    out.into_bytes()
}

/// A mutation of one PEM data value (`tls.crt` or `tls.key`).
#[derive(Clone, Debug)]
enum Pem {
    /// On the PEM text: framing, base64 alphabet, line breaks.
    Text(Bytes),
    /// On the DER inside a section, re-encoded as clean PEM (reaches the DER
    /// parsers past the base64 decoder).
    Der {
        section: Index,
        mutation: Bytes,
    },
    /// A DER length octet near the start (where the outer TLV lengths are)
    /// set to a hostile value.
    DerLength {
        section: Index,
        at: Index,
        value: u8,
    },
    /// A section relabelled.
    Label {
        section: Index,
        label: &'static str,
    },
    /// Sections reordered or dropped.
    DropSection(Index),
    Reverse,
}

const LABELS: &[&str] = &[
    "CERTIFICATE",
    "PRIVATE KEY",
    "RSA PRIVATE KEY",
    "EC PRIVATE KEY",
    "ENCRYPTED PRIVATE KEY",
    "PUBLIC KEY",
    "X509 CRL",
    "",
];

fn pem_mutation() -> impl Strategy<Value = Pem> {
    prop_oneof![
        4 => bytes_mutation().prop_map(Pem::Text),
        4 => (any::<Index>(), bytes_mutation())
            .prop_map(|(section, mutation)| Pem::Der { section, mutation }),
        3 => (
            any::<Index>(),
            any::<Index>(),
            prop_oneof![
                Just(0x00u8),
                Just(0x7f),
                Just(0x80),
                Just(0x81),
                Just(0x84),
                Just(0x88),
                Just(0xff),
                any::<u8>()
            ]
        )
            .prop_map(|(section, at, value)| Pem::DerLength { section, at, value }),
        1 => (any::<Index>(), proptest::sample::select(LABELS))
            .prop_map(|(section, label)| Pem::Label { section, label }),
        1 => any::<Index>().prop_map(Pem::DropSection),
        1 => Just(Pem::Reverse),
    ]
}

impl Pem {
    fn apply(&self, pem: &mut Vec<u8>) {
        if let Self::Text(m) = self {
            m.apply(pem);
            return;
        }
        let mut sections = pem_sections(pem);
        if sections.is_empty() {
            return;
        }
        let n = sections.len();
        match self {
            Self::Text(_) => unreachable!(),
            Self::Der { section, mutation } => mutation.apply(&mut sections[section.index(n)].der),
            Self::DerLength { section, at, value } => {
                let der = &mut sections[section.index(n)].der;
                if !der.is_empty() {
                    let i = at.index(der.len().min(12));
                    der[i] = *value;
                }
            }
            Self::Label { section, label } => {
                (*label).clone_into(&mut sections[section.index(n)].label)
            }
            Self::DropSection(i) => {
                sections.remove(i.index(n));
            }
            Self::Reverse => sections.reverse(),
        }
        *pem = pem_encode(&sections);
    }
}

// ---------------------------------------------------------------------------------
// Secrets.

struct IdentitySeed {
    cert: Vec<u8>,
    key: Vec<u8>,
}

fn identity_seeds() -> Vec<IdentitySeed> {
    ["rsa2048", "p256"]
        .iter()
        .map(|name| IdentitySeed {
            cert: seed(&format!("{name}.crt")),
            key: seed(&format!("{name}.key")),
        })
        .collect()
}

/// How the two data values are put together before mutating.
#[derive(Clone, Copy, Debug)]
enum Assembly {
    AsIs,
    /// `tls.crt` and `tls.key` swapped.
    Swapped,
    /// The key of the other seed (an RSA certificate with an EC key, ...).
    OtherKey,
    /// The CA certificate in front of the leaf.
    CaFirst,
    /// Certificate and key in both values.
    Concatenated,
}

fn assembly() -> impl Strategy<Value = Assembly> {
    prop_oneof![
        6 => Just(Assembly::AsIs),
        1 => Just(Assembly::Swapped),
        1 => Just(Assembly::OtherKey),
        1 => Just(Assembly::CaFirst),
        1 => Just(Assembly::Concatenated),
    ]
}

fn secret(data: &[(&str, &[u8])]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            namespace: Some(NS.to_owned()),
            name: Some(NAME.to_owned()),
            ..Default::default()
        },
        type_: Some(material::SECRET_TYPE_TLS.to_owned()),
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

/// A typed material error: it names the Secret, and neither its text nor its
/// Debug shows any of the seeds' private-key base64.
fn check_material_error(err: &MaterialError, keys: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let shown = format!("{err} {err:?}");
    prop_assert!(
        shown.contains(NAME),
        "error does not name the Secret: {shown}"
    );
    for key in keys {
        for section in pem_sections(key) {
            let body = STANDARD.encode(&section.der);
            // Any 24-character run of the key's base64 (18 key bytes).
            for start in (0..body.len().saturating_sub(24)).step_by(24) {
                prop_assert!(
                    !shown.contains(&body[start..start + 24]),
                    "error shows key material: {shown}"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn mutated_identity_secrets_load_or_fail_typed() {
    let seeds = identity_seeds();
    let ca = seed("ca.crt");
    let keys: Vec<Vec<u8>> = seeds.iter().map(|s| s.key.clone()).collect();
    let provider = material::crypto_provider();
    let secret_ref = SecretRef::new(NS, NAME);
    // Both seeds load as they are.
    for s in &seeds {
        material::load_identity_from_pem_at(&secret_ref, &s.cert, &s.key, &provider, now())
            .unwrap();
    }
    let strategy = (
        0..seeds.len(),
        assembly(),
        proptest::collection::vec((any::<bool>(), pem_mutation()), 1..4),
    );
    runner(10_000)
        .run(&strategy, |(which, assembly, mutations)| {
            let s = &seeds[which];
            let other = &seeds[(which + 1) % seeds.len()];
            let (mut cert, mut key) = match assembly {
                Assembly::AsIs => (s.cert.clone(), s.key.clone()),
                Assembly::Swapped => (s.key.clone(), s.cert.clone()),
                Assembly::OtherKey => (s.cert.clone(), other.key.clone()),
                Assembly::CaFirst => ([ca.as_slice(), &s.cert].concat(), s.key.clone()),
                Assembly::Concatenated => {
                    let both = [s.cert.as_slice(), &s.key].concat();
                    (both.clone(), both)
                }
            };
            for (on_cert, m) in &mutations {
                m.apply(if *on_cert { &mut cert } else { &mut key });
            }
            // Through the Secret path (type, data keys) and the PEM core.
            let secret = secret(&[("tls.crt", &cert), ("tls.key", &key)]);
            match material::load_identity_at(&secret, &provider, now()) {
                Ok(identity) => {
                    // Whatever loaded is a parseable leaf with nothing after it
                    // (see `leaf_with_trailing_data_is_refused`).
                    prop_assert!(matches!(x509_parser::parse_x509_certificate(identity.leaf_der()), Ok((rest, _)) if rest.is_empty()));
                }
                Err(err) => check_material_error(&err, &keys)?,
            }
            if let Err(err) =
                material::load_identity_from_pem_at(&secret_ref, &cert, &key, &provider, now())
            {
                check_material_error(&err, &keys)?;
            }
            Ok(())
        })
        .unwrap();
}

/// Found by `mutated_identity_secrets_load_or_fail_typed`: bytes after the leaf's
/// DER `SEQUENCE` inside its PEM section were ignored by the loader, so the
/// identity loaded and was presented, and every peer's webpki then refused it
/// (`PeerCertificate::from_der` refuses it too). The loader now refuses it.
#[test]
fn leaf_with_trailing_data_is_refused() {
    let seeds = identity_seeds();
    let s = &seeds[1];
    let mut sections = pem_sections(&s.cert);
    sections[0].der.extend_from_slice(&[0x05, 0x00]);
    let cert = pem_encode(&sections);
    assert!(matches!(
        PeerCertificate::from_pem(&cert),
        Err(svc_tls::principal::CertificateError::X509(_))
    ));
    let err = material::load_identity_from_pem_at(
        &SecretRef::new(NS, NAME),
        &cert,
        &s.key,
        &material::crypto_provider(),
        now(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            material::MaterialErrorKind::InvalidCertificate { .. }
        ),
        "{err:?}"
    );
}

#[test]
fn mutated_ca_secrets_load_or_fail_typed() {
    let ca = seed("ca.crt");
    let leaf = seed("p256.crt");
    let bundle = [ca.as_slice(), &leaf].concat();
    material::load_trust_detailed(&secret(&[("tls.crt", &ca)])).unwrap();
    let strategy = (
        any::<bool>(),
        any::<bool>(),
        proptest::collection::vec(pem_mutation(), 1..4),
    );
    runner(10_000)
        .run(&strategy, |(in_ca_crt, with_leaf, mutations)| {
            let mut pem = if with_leaf {
                bundle.clone()
            } else {
                ca.clone()
            };
            for m in &mutations {
                m.apply(&mut pem);
            }
            let secret = if in_ca_crt {
                secret(&[("tls.crt", b""), ("ca.crt", &pem)])
            } else {
                secret(&[("tls.crt", &pem)])
            };
            match material::load_trust_detailed(&secret) {
                Ok(trust) => prop_assert!(!trust.is_empty()),
                Err(err) => check_material_error(&err, &[])?,
            }
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------------------------
// Tokens.

/// A mutation of a compact JWS.
#[derive(Clone, Debug)]
enum Token {
    /// On the token text.
    Text(Bytes),
    /// On the decoded bytes of one segment, re-encoded canonically (reaches the
    /// JSON parser and the signature check past the base64 decoder).
    Segment(Index, Bytes),
    /// A segment replaced by arbitrary bytes, encoded.
    Replace(Index, Vec<u8>),
    /// The protected header replaced by a generated JSON header.
    Header(serde_json::Value),
    /// A segment dropped, or duplicated.
    Drop(Index),
    Repeat(Index),
    Swap(Index, Index),
}

fn json_leaf() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    prop_oneof![
        proptest::sample::select(
            &[
                "PS512",
                "ES256",
                "ES384",
                "none",
                "None",
                "HS256",
                "HS512",
                "RS256",
                "PS256",
                "EdDSA",
                "",
                "ps512",
                "PS512\n",
                "PS512\u{0}",
            ][..]
        )
        .prop_map(|s| Value::String(s.to_owned())),
        ".{0,80}".prop_map(Value::String),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ]
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    json_leaf().prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            proptest::collection::btree_map("[a-z]{0,6}", inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_header() -> impl Strategy<Value = serde_json::Value> {
    let member = prop_oneof![
        3 => Just("alg".to_owned()),
        2 => Just("crit".to_owned()),
        1 => proptest::sample::select(&["typ", "kid", "b64", "x5c", "jku", "jwk"][..])
            .prop_map(str::to_owned),
        1 => ".{0,12}",
    ];
    proptest::collection::vec((member, json_value()), 0..5)
        .prop_map(|members| serde_json::Value::Object(members.into_iter().collect()))
}

fn token_mutation() -> impl Strategy<Value = Token> {
    prop_oneof![
        4 => bytes_mutation().prop_map(Token::Text),
        4 => (any::<Index>(), bytes_mutation()).prop_map(|(i, m)| Token::Segment(i, m)),
        1 => (any::<Index>(), proptest::collection::vec(any::<u8>(), 0..96))
            .prop_map(|(i, v)| Token::Replace(i, v)),
        3 => json_header().prop_map(Token::Header),
        1 => any::<Index>().prop_map(Token::Drop),
        1 => any::<Index>().prop_map(Token::Repeat),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Token::Swap(a, b)),
    ]
}

impl Token {
    fn apply(&self, token: &mut String) {
        if let Self::Text(m) = self {
            let mut bytes = std::mem::take(token).into_bytes();
            m.apply(&mut bytes);
            *token = String::from_utf8_lossy(&bytes).into_owned();
            return;
        }
        let mut segments: Vec<String> = token.split('.').map(str::to_owned).collect();
        let n = segments.len();
        match self {
            Self::Text(_) => unreachable!(),
            Self::Segment(i, m) => {
                let seg = &mut segments[i.index(n)];
                // A segment that is not base64 is mutated as text.
                let mut bytes = URL_SAFE_NO_PAD
                    .decode(seg.as_bytes())
                    .unwrap_or_else(|_| seg.as_bytes().to_vec());
                m.apply(&mut bytes);
                *seg = URL_SAFE_NO_PAD.encode(bytes);
            }
            Self::Replace(i, v) => segments[i.index(n)] = URL_SAFE_NO_PAD.encode(v),
            Self::Header(h) => segments[0] = URL_SAFE_NO_PAD.encode(h.to_string()),
            Self::Drop(i) => {
                segments.remove(i.index(n));
            }
            Self::Repeat(i) => {
                let i = i.index(n);
                let copy = segments[i].clone();
                segments.insert(i, copy);
            }
            Self::Swap(a, b) => segments.swap(a.index(n), b.index(n)),
        }
        *token = segments.join(".");
    }
}

#[test]
fn mutated_tokens_are_rejected_with_typed_errors() {
    let policy = AlgorithmPolicy::Ps512OrEcdsa;
    let seeds: Vec<(String, PeerCertificate)> =
        [("ps512.jws", "rsa2048.crt"), ("es256.jws", "p256.crt")]
            .iter()
            .map(|(token, cert)| {
                let token = String::from_utf8(seed(token)).unwrap().trim().to_owned();
                let peer = PeerCertificate::from_pem(&seed(cert)).unwrap();
                // Each seed verifies as it is.
                peer.verify::<serde_json::Value>(&token, policy).unwrap();
                (token, peer)
            })
            .collect();
    let strategy = (
        0..seeds.len(),
        proptest::collection::vec(token_mutation(), 1..4),
    );
    runner(20_000)
        .run(&strategy, |(which, mutations)| {
            let (seed, peer) = &seeds[which];
            let mut token = seed.clone();
            for m in &mutations {
                m.apply(&mut token);
            }
            match peer.verify::<serde_json::Value>(&token, policy) {
                // Only the untouched token verifies (a mutation can be a no-op).
                Ok(_) => prop_assert_eq!(&token, seed, "a mutated token verified"),
                Err(err) => {
                    let shown = err.to_string();
                    prop_assert!(
                        !shown.contains(['\n', '\r']),
                        "error text spans lines: {shown:?}"
                    );
                    prop_assert!(shown.len() < 1200, "error text is {} bytes", shown.len());
                    if token.len() > svc_tls::principal::DEFAULT_MAX_TOKEN_BYTES {
                        prop_assert!(matches!(err, VerifyError::TooLarge { .. }), "{err:?}");
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------------------------
// Seed generation (run once; the output is committed).

#[test]
#[ignore = "writes tests/fuzz_seeds; run by hand to regenerate the committed seeds"]
fn generate_fuzz_seeds() {
    use rcgen::{
        CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair, KeyUsagePurpose, RsaKeySize,
    };
    use svc_tls::principal::{Principal, sign_with};
    use test_support::pki::TestCa;

    let dir = seeds_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, data: &[u8]| std::fs::write(dir.join(name), data).unwrap();

    let ca = TestCa::new("fuzz seed CA");
    write("ca.crt", ca.pem().as_bytes());

    let who = Principal {
        organization_id: Some("org-fuzz".into()),
        project_id: Some("proj-fuzz".into()),
        actor: Some("fuzz@example.com".into()),
    };
    let rsa = KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_2048).unwrap();
    let p256 = KeyPair::generate().unwrap();
    for (name, key, token) in [("rsa2048", rsa, "ps512.jws"), ("p256", p256, "es256.jws")] {
        let mut params = CertificateParams::new(vec![format!("{name}.fuzz.svc")]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("fuzz {name}"));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = rcgen::date_time_ymd(2024, 1, 1);
        params.not_after = rcgen::date_time_ymd(2099, 1, 1);
        let cert = params.signed_by(&key, ca.issuer()).unwrap();
        write(&format!("{name}.crt"), cert.pem().as_bytes());
        write(&format!("{name}.key"), key.serialize_pem().as_bytes());
        let identity = material::load_identity_from_pem(
            &SecretRef::new(NS, NAME),
            cert.pem().as_bytes(),
            key.serialize_pem().as_bytes(),
            &material::crypto_provider(),
        )
        .unwrap();
        let signed = sign_with(
            &identity,
            &"https://peer.svc.test".parse().unwrap(),
            &who,
            AlgorithmPolicy::Ps512OrEcdsa,
        )
        .unwrap();
        write(token, format!("{}\n", signed.as_str()).as_bytes());
    }
}
