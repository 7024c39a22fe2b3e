//! `svc_tls::material`: every supported key type and format loads into an identity
//! that completes a real TLS 1.3 client-auth handshake; every malformed Secret
//! gives its specific error, naming the Secret and data key, without key bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
    SerialNumber,
};
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
use svc_tls::material::{
    self, Identity, IdentityCache, KeyKind, MaterialError, MaterialErrorKind, TLS_CRT, TLS_KEY,
    load_identity, load_identity_at, load_identity_from_pem, load_trust, load_trust_detailed,
};
use svc_tls::options::SecretRef;

const NS: &str = "unikorn";
const NAME: &str = "unikorn-client-certificate";

fn provider() -> CryptoProvider {
    rustls::crypto::aws_lc_rs::default_provider()
}

// ---------------------------------------------------------------- key material

#[derive(Clone, Copy, Debug, PartialEq)]
enum Alg {
    Rsa2048,
    Rsa3072,
    Rsa4096,
    P256,
    P384,
    Ed25519,
}

impl Alg {
    fn generate(self) -> KeyPair {
        use rcgen::RsaKeySize;
        match self {
            Alg::Rsa2048 => KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap(),
            Alg::Rsa3072 => {
                KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_3072).unwrap()
            }
            Alg::Rsa4096 => {
                KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_4096).unwrap()
            }
            Alg::P256 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap(),
            Alg::P384 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap(),
            Alg::Ed25519 => KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap(),
        }
    }

    fn kind(self) -> KeyKind {
        match self {
            Alg::Rsa2048 => KeyKind::Rsa { bits: 2048 },
            Alg::Rsa3072 => KeyKind::Rsa { bits: 3072 },
            Alg::Rsa4096 => KeyKind::Rsa { bits: 4096 },
            Alg::P256 => KeyKind::EcdsaP256,
            Alg::P384 => KeyKind::EcdsaP384,
            Alg::Ed25519 => KeyKind::Ed25519,
        }
    }
}

// Minimal DER helpers for converting PKCS#8 to PKCS#1 / SEC1 by hand.
fn tlv(input: &[u8]) -> (u8, &[u8], &[u8]) {
    let tag = input[0];
    let (len, hdr) = if input[1] < 0x80 {
        (input[1] as usize, 2)
    } else {
        let n = (input[1] & 0x7f) as usize;
        let len = input[2..2 + n]
            .iter()
            .fold(0usize, |a, &b| (a << 8) | b as usize);
        (len, 2 + n)
    };
    (tag, &input[hdr..hdr + len], &input[hdr + len..])
}

fn enc(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = value.len();
    if len < 0x80 {
        out.push(len as u8);
    } else if len < 0x100 {
        out.extend([0x81, len as u8]);
    } else {
        out.extend([0x82, (len >> 8) as u8, len as u8]);
    }
    out.extend_from_slice(value);
    out
}

/// The private key inside a PKCS#8 PrivateKeyInfo (PKCS#1 for RSA, SEC1 for EC),
/// and the algorithm parameters (TLV).
fn pkcs8_inner(pkcs8: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (_, info, _) = tlv(pkcs8);
    let (_, _version, rest) = tlv(info);
    let (_, alg, rest) = tlv(rest);
    let (_, inner, _) = tlv(rest);
    let (_, _oid, params) = tlv(alg);
    // Cross-check with the pkcs8 crate.
    let parsed = pkcs8::PrivateKeyInfoRef::try_from(pkcs8).unwrap();
    assert_eq!(parsed.private_key.as_bytes(), inner);
    (inner.to_vec(), params.to_vec())
}

/// PKCS#8 RSA -> PKCS#1 RSAPrivateKey (what `openssl rsa -traditional` writes).
fn to_pkcs1(pkcs8: &[u8]) -> Vec<u8> {
    let (inner, _) = pkcs8_inner(pkcs8);
    // Cross-check with the rsa crate: it reads the same key from both forms.
    use rsa::pkcs1::DecodeRsaPrivateKey;
    use rsa::pkcs8::DecodePrivateKey;
    let a = rsa::PrivateKey::from_pkcs1_der(&inner).unwrap();
    let b = rsa::PrivateKey::from_pkcs8_der(pkcs8).unwrap();
    assert_eq!(a, b);
    inner
}

/// PKCS#8 EC -> SEC1 ECPrivateKey with the named curve (what Go's
/// `x509.MarshalECPrivateKey` and `openssl ec` write).
fn to_sec1(pkcs8: &[u8], with_curve: bool) -> Vec<u8> {
    let (inner, curve_oid) = pkcs8_inner(pkcs8);
    let (tag, body, _) = tlv(&inner);
    assert_eq!(tag, 0x30);
    let (_, version, rest) = tlv(body);
    let (_, private, rest) = tlv(rest);
    let mut content = enc(0x02, version);
    content.extend(enc(0x04, private));
    let rest = if rest.first() == Some(&0xa0) {
        tlv(rest).2
    } else {
        rest
    };
    if with_curve {
        content.extend(enc(0xa0, &curve_oid));
    }
    content.extend_from_slice(rest); // [1] public key
    enc(0x30, &content)
}

fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[derive(Clone, Copy, Debug)]
enum Format {
    Pkcs8,
    Pkcs1,
    Sec1,
    Sec1NoCurve,
}

fn key_pem(key: &KeyPair, format: Format) -> String {
    let pkcs8 = key.serialize_der();
    match format {
        Format::Pkcs8 => pem("PRIVATE KEY", &pkcs8),
        Format::Pkcs1 => pem("RSA PRIVATE KEY", &to_pkcs1(&pkcs8)),
        Format::Sec1 => pem("EC PRIVATE KEY", &to_sec1(&pkcs8, true)),
        Format::Sec1NoCurve => pem("EC PRIVATE KEY", &to_sec1(&pkcs8, false)),
    }
}

// ---------------------------------------------------------------- certificates

struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new(cn: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        Self {
            issuer: CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    fn leaf_params(serial: &[u8]) -> CertificateParams {
        let mut params = CertificateParams::new(vec!["client.unikorn.test".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "unikorn client");
        params.serial_number = Some(SerialNumber::from_slice(serial));
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2090, 1, 1);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        params
    }

    /// A leaf for `key`, PEM.
    fn issue(&self, key: &impl rcgen::PublicKeyData, params: &CertificateParams) -> String {
        params.signed_by(key, self.issuer()).unwrap().pem()
    }

    fn issuer(&self) -> &rcgen::Issuer<'static, KeyPair> {
        &self.issuer
    }
}

fn tls_secret(data: &[(&str, &[u8])]) -> Secret {
    secret_of_type(Some("kubernetes.io/tls"), data)
}

fn secret_of_type(type_: Option<&str>, data: &[(&str, &[u8])]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            namespace: Some(NS.to_owned()),
            name: Some(NAME.to_owned()),
            ..Default::default()
        },
        type_: type_.map(str::to_owned),
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

fn secret_ref() -> SecretRef {
    SecretRef::new(NS, NAME)
}

// ---------------------------------------------------------------- a real handshake

#[derive(Debug)]
struct Present(Arc<rustls::sign::CertifiedKey>);

impl rustls::client::ResolvesClientCert for Present {
    fn resolve(
        &self,
        _: &[&[u8]],
        _: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
    fn has_certs(&self) -> bool {
        true
    }
}

/// A TLS 1.3 handshake in memory against a server that requires a client
/// certificate issued by `ca`; returns the chain the server received.
fn handshake(ca: &Ca, identity: &Identity) -> Vec<CertificateDer<'static>> {
    let provider = Arc::new(provider());
    let server_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut server_params = CertificateParams::new(vec!["server.unikorn.test".to_owned()]).unwrap();
    server_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = server_params.signed_by(&server_key, ca.issuer()).unwrap();

    let mut roots = RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let roots = Arc::new(roots);
    let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .unwrap();
    let server_config = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![server_cert.der().clone()],
            PrivateKeyDer::try_from(server_key.serialize_der()).unwrap(),
        )
        .unwrap();
    let client_config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_client_cert_resolver(Arc::new(Present(identity.certified_key().clone())));

    let mut client = ClientConnection::new(
        Arc::new(client_config),
        ServerName::try_from("server.unikorn.test").unwrap(),
    )
    .unwrap();
    let mut server = ServerConnection::new(Arc::new(server_config)).unwrap();
    for _ in 0..20 {
        let mut buf = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut buf).unwrap();
        }
        if !buf.is_empty() {
            server.read_tls(&mut buf.as_slice()).unwrap();
            server
                .process_new_packets()
                .expect("server rejected the handshake");
        }
        let mut buf = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut buf).unwrap();
        }
        if !buf.is_empty() {
            client.read_tls(&mut buf.as_slice()).unwrap();
            client
                .process_new_packets()
                .expect("client rejected the handshake");
        }
        if !client.is_handshaking() && !server.is_handshaking() {
            return server.peer_certificates().unwrap().to_vec();
        }
    }
    panic!("handshake did not complete");
}

// ---------------------------------------------------------------- supported material

fn check_loads(ca: &Ca, alg: Alg, key: &KeyPair, format: Format) {
    let serial = [0x00, 0x9c, 0x01, 0x7f];
    let leaf = ca.issue(key, &Ca::leaf_params(&serial));
    let chain_pem = format!("{leaf}{}", ca.pem());
    let key_pem = key_pem(key, format);
    let secret = tls_secret(&[
        (TLS_CRT, chain_pem.as_bytes()),
        (TLS_KEY, key_pem.as_bytes()),
        ("ca.crt", ca.pem().as_bytes()),
    ]);

    // rustls's aws-lc-rs key loader and this crate's key-type dispatching one
    // load the same identity.
    let plain =
        load_identity(&secret, &provider()).unwrap_or_else(|e| panic!("{alg:?} {format:?}: {e}"));
    let identity = load_identity(&secret, &material::crypto_provider())
        .unwrap_or_else(|e| panic!("{alg:?} {format:?}: {e}"));
    assert_eq!(plain.key_kind(), identity.key_kind());
    assert_eq!(plain.chain(), identity.chain());
    assert_eq!(
        plain.certified_key().key.public_key(),
        identity.certified_key().key.public_key()
    );
    assert_eq!(identity.key_kind(), alg.kind(), "{alg:?} {format:?}");
    assert_eq!(identity.serial_hex(), "9c017f");
    assert_eq!(
        identity.not_after(),
        SystemTime::UNIX_EPOCH + Duration::from_secs(3_786_912_000) // 2090-01-01
    );
    assert_eq!(
        identity.not_before(),
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_577_836_800) // 2020-01-01
    );
    // The whole chain is presented, leaf first.
    assert_eq!(identity.chain().len(), 2);
    assert_eq!(identity.chain()[1], ca.der());
    assert_eq!(
        identity.leaf_der(),
        &CertificateDer::from_pem_slice(leaf.as_bytes()).unwrap()
    );
    identity.certified_key().keys_match().unwrap();

    // The loaded key really signs for the certificate: a server that requires
    // client certificates from this CA accepts it, and receives the chain.
    let received = handshake(ca, &identity);
    assert_eq!(received, identity.chain(), "{alg:?} {format:?}");
}

#[test]
fn rsa_keys_load_in_pkcs8_and_pkcs1() {
    let ca = Ca::new("rsa ca");
    for alg in [Alg::Rsa2048, Alg::Rsa3072, Alg::Rsa4096] {
        let key = alg.generate();
        check_loads(&ca, alg, &key, Format::Pkcs8);
        check_loads(&ca, alg, &key, Format::Pkcs1);
    }
}

#[test]
fn ecdsa_keys_load_in_pkcs8_and_sec1() {
    let ca = Ca::new("ec ca");
    for alg in [Alg::P256, Alg::P384] {
        let key = alg.generate();
        check_loads(&ca, alg, &key, Format::Pkcs8);
        check_loads(&ca, alg, &key, Format::Sec1);
        check_loads(&ca, alg, &key, Format::Sec1NoCurve);
    }
}

#[test]
fn ed25519_key_loads_in_pkcs8() {
    let ca = Ca::new("ed ca");
    check_loads(&ca, Alg::Ed25519, &Alg::Ed25519.generate(), Format::Pkcs8);
}

#[test]
fn a_chain_without_intermediates_and_extra_sections_is_fine() {
    // A lone leaf; a key file that also carries the certificate (some tools
    // concatenate them); CRLF line endings.
    let ca = Ca::new("ca");
    let key = Alg::P256.generate();
    let leaf = ca.issue(&key, &Ca::leaf_params(&[1]));
    let key_file = format!("{leaf}{}", key.serialize_pem()).replace('\n', "\r\n");
    let identity = load_identity_from_pem(
        &secret_ref(),
        leaf.as_bytes(),
        key_file.as_bytes(),
        &provider(),
    )
    .unwrap();
    assert_eq!(identity.chain().len(), 1);
    assert_eq!(identity.serial_hex(), "01");
}

#[test]
fn identity_debug_shows_serial_expiry_and_kind_but_no_key_material() {
    let ca = Ca::new("ca");
    for alg in [Alg::Rsa2048, Alg::P256, Alg::Ed25519] {
        let key = alg.generate();
        let leaf = ca.issue(&key, &Ca::leaf_params(&[0x42, 0x17]));
        let key_pem = key.serialize_pem();
        let identity = load_identity_from_pem(
            &secret_ref(),
            leaf.as_bytes(),
            key_pem.as_bytes(),
            &provider(),
        )
        .unwrap();
        let debug = format!("{identity:?}");
        let pretty = format!("{identity:#?}");
        assert!(debug.contains("4217"), "{debug}");
        assert!(debug.contains("not_after"), "{debug}");
        assert!(debug.contains(&format!("{:?}", alg.kind())), "{debug}");
        for text in [&debug, &pretty] {
            assert_no_key_material(text, &key);
        }
        // Also no certificate dump: Debug is for logs.
        assert!(debug.len() < 200, "{debug}");
    }
}

/// No 12-character window of the key's PEM body, and no 8-byte window of its
/// DER (as hex or decimal bytes), appears in `text`.
fn assert_no_key_material(text: &str, key: &KeyPair) {
    let der = key.serialize_der();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&der);
    for window in b64.as_bytes().windows(12).step_by(4) {
        let w = std::str::from_utf8(window).unwrap();
        assert!(!text.contains(w), "key base64 {w:?} in {text}");
    }
    let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
    for window in hex.as_bytes().windows(16).step_by(8) {
        let w = std::str::from_utf8(window).unwrap();
        assert!(!text.contains(w), "key hex {w:?} in {text}");
    }
    let decimal = format!("{:?}", &der[40..48]);
    assert!(!text.contains(decimal.trim_matches(['[', ']'])), "{text}");
}

// ---------------------------------------------------------------- malformed material

struct Fixture {
    ca: Ca,
    key: KeyPair,
    leaf: String,
    key_pem: String,
}

impl Fixture {
    fn new() -> Self {
        let ca = Ca::new("ca");
        let key = Alg::P256.generate();
        let leaf = ca.issue(&key, &Ca::leaf_params(&[7]));
        let key_pem = key.serialize_pem();
        Self {
            ca,
            key,
            leaf,
            key_pem,
        }
    }

    fn load(&self, cert: &[u8], key: &[u8]) -> MaterialError {
        let secret = tls_secret(&[(TLS_CRT, cert), (TLS_KEY, key)]);
        let err = load_identity(&secret, &provider()).expect_err("loaded malformed material");
        self.check_message(&err);
        err
    }

    /// Every error names the Secret and data key, and holds no key material.
    fn check_message(&self, err: &MaterialError) {
        let msg = err.to_string();
        assert!(msg.contains("unikorn/unikorn-client-certificate"), "{msg}");
        assert_eq!(err.secret(), &secret_ref());
        if let Some(key) = err.data_key() {
            assert!(msg.contains(key), "{msg}");
        }
        assert_no_key_material(&msg, &self.key);
        assert_no_key_material(&format!("{err:?}"), &self.key);
    }
}

#[test]
fn wrong_secret_type_is_rejected() {
    let f = Fixture::new();
    for type_ in [Some("Opaque"), None] {
        let secret = secret_of_type(
            type_,
            &[
                (TLS_CRT, f.leaf.as_bytes()),
                (TLS_KEY, f.key_pem.as_bytes()),
            ],
        );
        let err = load_identity(&secret, &provider()).unwrap_err();
        f.check_message(&err);
        assert!(
            matches!(err.kind(), MaterialErrorKind::WrongType { found, .. } if found.as_deref() == type_),
            "{err:?}"
        );
        assert!(err.to_string().contains("kubernetes.io/tls"));
        let err = load_trust(&secret).unwrap_err();
        assert!(
            matches!(err.kind(), MaterialErrorKind::WrongType { .. }),
            "{err:?}"
        );
    }
}

#[test]
fn missing_and_empty_data_keys_are_named() {
    let f = Fixture::new();
    for (data, want_key, empty) in [
        (vec![(TLS_KEY, f.key_pem.as_bytes())], TLS_CRT, false),
        (vec![(TLS_CRT, f.leaf.as_bytes())], TLS_KEY, false),
        (
            vec![(TLS_CRT, &b""[..]), (TLS_KEY, f.key_pem.as_bytes())],
            TLS_CRT,
            true,
        ),
        (
            vec![(TLS_CRT, f.leaf.as_bytes()), (TLS_KEY, &b""[..])],
            TLS_KEY,
            true,
        ),
    ] {
        let err = load_identity(&tls_secret(&data), &provider()).unwrap_err();
        f.check_message(&err);
        match (err.kind(), err.data_key(), empty) {
            (MaterialErrorKind::MissingKey, Some(key), false)
            | (MaterialErrorKind::EmptyKey, Some(key), true) => assert_eq!(key, want_key),
            _ => panic!("{err:?}"),
        }
    }
    // No data at all.
    let mut secret = tls_secret(&[]);
    secret.data = None;
    let err = load_identity(&secret, &provider()).unwrap_err();
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::MissingKey, Some(TLS_CRT))
        ),
        "{err:?}"
    );
    // The pure core reports empty input the same way.
    let err =
        load_identity_from_pem(&secret_ref(), b"", f.key_pem.as_bytes(), &provider()).unwrap_err();
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::EmptyKey, Some(TLS_CRT))
        ),
        "{err:?}"
    );
}

#[test]
fn certificate_that_is_not_pem_or_has_no_certificate() {
    let f = Fixture::new();
    let leaf_der = CertificateDer::from_pem_slice(f.leaf.as_bytes())
        .unwrap()
        .to_vec();
    let key = f.key_pem.as_bytes();

    // DER instead of PEM.
    let err = f.load(&leaf_der, key);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some(TLS_CRT))
        ),
        "{err:?}"
    );
    // Broken base64 inside a CERTIFICATE section.
    let broken = f.leaf.replacen('M', "*", 3);
    let err = f.load(broken.as_bytes(), key);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some(TLS_CRT))
        ),
        "{err:?}"
    );
    // A section without its END line.
    let truncated = &f.leaf[..f.leaf.len() - 30];
    let err = f.load(truncated.as_bytes(), key);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some(TLS_CRT))
        ),
        "{err:?}"
    );
    // PEM, but only a public key.
    let public = f.key.public_key_pem();
    let err = f.load(public.as_bytes(), key);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NoCertificate, Some(TLS_CRT))
        ),
        "{err:?}"
    );
    // A CERTIFICATE section that is not X.509.
    let garbage = pem(
        "CERTIFICATE",
        b"\x30\x03\x02\x01\x01 definitely not a certificate",
    );
    let err = f.load(garbage.as_bytes(), key);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::InvalidCertificate { .. }, Some(TLS_CRT))
        ),
        "{err:?}"
    );
}

#[test]
fn key_that_is_not_pem_has_no_key_or_is_unparseable() {
    let f = Fixture::new();
    let cert = f.leaf.as_bytes();

    let err = f.load(cert, &f.key.serialize_der());
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    let err = f.load(cert, f.key_pem.replacen('M', "*", 2).as_bytes());
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    // Only a certificate in tls.key (a common copy-paste mistake).
    let err = f.load(cert, cert);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NoPrivateKey, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    // A PRIVATE KEY section that is not a key.
    let err = f.load(
        cert,
        pem("PRIVATE KEY", b"\x01\x02\x03 nonsense").as_bytes(),
    );
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::UnparseableKey { .. }, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    // A real key, truncated.
    let der = f.key.serialize_der();
    let err = f.load(cert, pem("PRIVATE KEY", &der[..der.len() - 10]).as_bytes());
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::UnparseableKey { .. }, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    // An RSA key whose private exponent is corrupted: the provider's consistency
    // check rejects it.
    let rsa = Alg::Rsa2048.generate();
    let rsa_leaf = f.ca.issue(&rsa, &Ca::leaf_params(&[8]));
    let mut pkcs1 = to_pkcs1(&rsa.serialize_der());
    let n = pkcs1.len();
    pkcs1[n / 2] ^= 0x55;
    let err = f.load(
        rsa_leaf.as_bytes(),
        pem("RSA PRIVATE KEY", &pkcs1).as_bytes(),
    );
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::UnparseableKey { .. }, Some(TLS_KEY))
        ),
        "{err:?}"
    );
}

#[test]
fn encrypted_keys_are_recognised() {
    let f = Fixture::new();
    let cert = f.leaf.as_bytes();
    // PKCS#8 EncryptedPrivateKeyInfo: SEQUENCE { AlgorithmIdentifier (PBES2), OCTET STRING }.
    let pbes2_oid = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x05, 0x0d];
    let mut alg = enc(0x06, &pbes2_oid);
    alg.extend(enc(0x30, &[]));
    let mut body = enc(0x30, &alg);
    body.extend(enc(0x04, &[0xa5; 200]));
    let encrypted = enc(0x30, &body);

    // As `openssl pkcs8 -topk8 -v2 aes256` writes it.
    let err = f.load(cert, pem("ENCRYPTED PRIVATE KEY", &encrypted).as_bytes());
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::EncryptedKey, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    // Mislabelled as an ordinary PRIVATE KEY.
    let err = f.load(cert, pem("PRIVATE KEY", &encrypted).as_bytes());
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::EncryptedKey, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    // Legacy OpenSSL encryption headers.
    let legacy = pem("EC PRIVATE KEY", &[0x11; 120]).replacen(
        "-----\n",
        "-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,00112233445566778899AABBCCDDEEFF\n\n",
        1,
    );
    let err = f.load(cert, legacy.as_bytes());
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::EncryptedKey, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("encrypted"));
}

/// An RSA public key with a `bits`-bit modulus, as a certificate subject. Only
/// the certificate is needed: the loader rejects it before reading any key.
struct RsaPublicKeyOfSize(Vec<u8>);

impl RsaPublicKeyOfSize {
    fn new(bits: usize) -> Self {
        let mut modulus = vec![0x00, 0xc3];
        modulus.resize(bits / 8 + 1, 0x5b);
        let last = modulus.len() - 1;
        modulus[last] |= 1;
        let mut rsa_key = enc(0x02, &modulus);
        rsa_key.extend(enc(0x02, &[0x01, 0x00, 0x01]));
        Self(enc(0x30, &rsa_key))
    }
}

impl rcgen::PublicKeyData for RsaPublicKeyOfSize {
    fn der_bytes(&self) -> &[u8] {
        &self.0
    }
    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_RSA_SHA256
    }
}

#[test]
fn unsupported_algorithms_are_named() {
    let f = Fixture::new();
    let key = f.key_pem.as_bytes();

    // RSA outside 2048..=4096 bits, in the certificate.
    for bits in [1024, 8192] {
        let leaf =
            f.ca.issue(&RsaPublicKeyOfSize::new(bits), &Ca::leaf_params(&[9]));
        let err = f.load(leaf.as_bytes(), key);
        match (err.kind(), err.data_key()) {
            (MaterialErrorKind::UnsupportedAlgorithm { algorithm, .. }, Some(TLS_CRT)) => {
                assert_eq!(algorithm, &format!("RSA-{bits}"));
            }
            _ => panic!("{err:?}"),
        }
        assert!(err.to_string().contains(&format!("RSA-{bits}")));
    }

    // P-521: certificate and key.
    let p521 = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512).unwrap();
    let leaf = f.ca.issue(&p521, &Ca::leaf_params(&[10]));
    let err = f.load(leaf.as_bytes(), p521.serialize_pem().as_bytes());
    match (err.kind(), err.data_key()) {
        (MaterialErrorKind::UnsupportedAlgorithm { algorithm, .. }, Some(TLS_CRT)) => {
            assert!(algorithm.contains("P-521"), "{algorithm}");
        }
        _ => panic!("{err:?}"),
    }
    // A P-521 key next to a supported certificate: the key is named.
    let err = f.load(f.leaf.as_bytes(), p521.serialize_pem().as_bytes());
    assert!(
        matches!((err.kind(), err.data_key()), (MaterialErrorKind::UnsupportedAlgorithm { algorithm, .. }, Some(TLS_KEY)) if algorithm.contains("P-521")),
        "{err:?}"
    );
}

#[test]
fn key_not_matching_the_certificate_is_rejected() {
    let f = Fixture::new();
    // Same type, different key.
    let other = Alg::P256.generate();
    let err = f.load(f.leaf.as_bytes(), other.serialize_pem().as_bytes());
    match (err.kind(), err.data_key()) {
        (MaterialErrorKind::KeyMismatch { cert_key, .. }, key) => {
            assert_eq!((key, *cert_key), (Some(TLS_KEY), TLS_CRT));
        }
        _ => panic!("{err:?}"),
    }
    assert!(err.to_string().contains("does not match"));
    // Same type in another format.
    let err = f.load(f.leaf.as_bytes(), key_pem(&other, Format::Sec1).as_bytes());
    assert!(
        matches!(err.kind(), MaterialErrorKind::KeyMismatch { .. }),
        "{err:?}"
    );
    // Different types: the message says which.
    for alg in [Alg::Rsa2048, Alg::P384, Alg::Ed25519] {
        let other = alg.generate();
        let err = f.load(f.leaf.as_bytes(), other.serialize_pem().as_bytes());
        match err.kind() {
            MaterialErrorKind::KeyMismatch { detail, .. } => {
                assert!(detail.contains("ECDSA P-256"), "{detail}");
            }
            _ => panic!("{alg:?}: {err:?}"),
        }
    }
    // RSA of the same size, different key, PKCS#1.
    let rsa = Alg::Rsa2048.generate();
    let rsa_leaf = f.ca.issue(&rsa, &Ca::leaf_params(&[11]));
    let other = Alg::Rsa2048.generate();
    let err = f.load(
        rsa_leaf.as_bytes(),
        key_pem(&other, Format::Pkcs1).as_bytes(),
    );
    assert!(
        matches!(err.kind(), MaterialErrorKind::KeyMismatch { .. }),
        "{err:?}"
    );
    // Ed25519, different key.
    let ed = Alg::Ed25519.generate();
    let ed_leaf = f.ca.issue(&ed, &Ca::leaf_params(&[12]));
    let err = f.load(
        ed_leaf.as_bytes(),
        Alg::Ed25519.generate().serialize_pem().as_bytes(),
    );
    assert!(
        matches!(err.kind(), MaterialErrorKind::KeyMismatch { .. }),
        "{err:?}"
    );
}

#[test]
fn certificate_outside_its_validity_is_an_error() {
    let f = Fixture::new();
    let key = f.key_pem.as_bytes();

    let mut expired = Ca::leaf_params(&[13]);
    expired.not_before = rcgen::date_time_ymd(2001, 1, 1);
    expired.not_after = rcgen::date_time_ymd(2002, 1, 1);
    let leaf = f.ca.issue(&f.key, &expired);
    let err = f.load(leaf.as_bytes(), key);
    match (err.kind(), err.data_key()) {
        (
            MaterialErrorKind::CertificateExpired {
                not_after,
                not_after_text,
                ..
            },
            Some(TLS_CRT),
        ) => {
            assert_eq!(
                *not_after,
                SystemTime::UNIX_EPOCH + Duration::from_secs(1_009_843_200)
            );
            assert!(not_after_text.contains("2002"), "{not_after_text}");
        }
        _ => panic!("{err:?}"),
    }
    assert!(!err.is_not_yet_valid());

    let mut future = Ca::leaf_params(&[14]);
    future.not_before = rcgen::date_time_ymd(2080, 1, 1);
    let leaf = f.ca.issue(&f.key, &future);
    let err = f.load(leaf.as_bytes(), key);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (
                MaterialErrorKind::CertificateNotYetValid { .. },
                Some(TLS_CRT)
            )
        ),
        "{err:?}"
    );
    assert!(err.is_not_yet_valid());

    // The same certificate loads once its time has come (explicit clock).
    let secret = tls_secret(&[(TLS_CRT, leaf.as_bytes()), (TLS_KEY, key)]);
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(3_471_292_800 + 60); // 2080-01-01
    let identity = load_identity_at(&secret, &provider(), at).unwrap();
    assert_eq!(identity.serial_hex(), "0e");
    // ...and is expired after notAfter.
    let after = identity.not_after() + Duration::from_secs(1);
    let err = load_identity_at(&secret, &provider(), after).unwrap_err();
    assert!(
        matches!(err.kind(), MaterialErrorKind::CertificateExpired { .. }),
        "{err:?}"
    );
}

// ---------------------------------------------------------------- trust

fn verify_with(roots: RootCertStore, ca: &Ca) -> Result<(), rustls::Error> {
    let key = Alg::P256.generate();
    let mut params = CertificateParams::new(vec!["server.unikorn.test".to_owned()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, ca.issuer()).unwrap();
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(provider()),
    )
    .build()
    .unwrap();
    verifier
        .verify_server_cert(
            cert.der(),
            &[],
            &ServerName::try_from("server.unikorn.test").unwrap(),
            &[],
            rustls::pki_types::UnixTime::now(),
        )
        .map(|_| ())
}

#[test]
fn trust_takes_every_certificate_of_tls_crt_and_ca_crt() {
    let a = Ca::new("issuer a");
    let b = Ca::new("issuer b");
    let c = Ca::new("issuer c");
    let tls_crt = format!("{}{}", a.pem(), b.pem());
    let secret = tls_secret(&[
        (TLS_CRT, tls_crt.as_bytes()),
        (TLS_KEY, b"ignored for trust"),
        ("ca.crt", c.pem().as_bytes()),
    ]);
    let roots = load_trust(&secret).unwrap();
    assert_eq!(roots.len(), 3);
    for ca in [&a, &b, &c] {
        verify_with(roots.clone(), ca).unwrap();
    }
    let stranger = Ca::new("stranger");
    assert!(verify_with(roots, &stranger).is_err());

    // cert-manager's CA issuer Secret: tls.crt and ca.crt are the same CA.
    let secret = tls_secret(&[
        (TLS_CRT, a.pem().as_bytes()),
        ("ca.crt", a.pem().as_bytes()),
    ]);
    verify_with(load_trust(&secret).unwrap(), &a).unwrap();

    // An empty tls.crt is fine when ca.crt has the roots.
    let secret = tls_secret(&[(TLS_CRT, b""), ("ca.crt", b.pem().as_bytes())]);
    verify_with(load_trust(&secret).unwrap(), &b).unwrap();
}

#[test]
fn trust_errors_name_the_secret_and_key() {
    let a = Ca::new("issuer a");
    let check = |err: &MaterialError| {
        let msg = err.to_string();
        assert!(msg.contains("unikorn/unikorn-client-certificate"), "{msg}");
    };

    let err = load_trust(&tls_secret(&[("ca.crt", a.pem().as_bytes())])).unwrap_err();
    check(&err);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::MissingKey, Some(TLS_CRT))
        ),
        "{err:?}"
    );

    let err = load_trust(&tls_secret(&[(TLS_CRT, b"")])).unwrap_err();
    check(&err);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::EmptyKey, Some(TLS_CRT))
        ),
        "{err:?}"
    );

    let err = load_trust(&tls_secret(&[(TLS_CRT, b"not pem at all")])).unwrap_err();
    check(&err);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some(TLS_CRT))
        ),
        "{err:?}"
    );

    let err = load_trust(&tls_secret(&[
        (TLS_CRT, a.pem().as_bytes()),
        ("ca.crt", b"garbage"),
    ]))
    .unwrap_err();
    check(&err);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some("ca.crt"))
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("ca.crt"));

    let err = load_trust(&tls_secret(&[(
        TLS_CRT,
        a.issuer
            .pem()
            .replace("CERTIFICATE", "PUBLIC KEY")
            .as_bytes(),
    )]))
    .unwrap_err();
    check(&err);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NoCertificate, Some(TLS_CRT))
        ),
        "{err:?}"
    );

    // Certificates that are not usable as trust anchors.
    let junk = format!(
        "{}{}",
        pem("CERTIFICATE", b"\x30\x03\x02\x01\x01"),
        pem("CERTIFICATE", b"\x30\x00")
    );
    let err = load_trust(&tls_secret(&[(TLS_CRT, junk.as_bytes())])).unwrap_err();
    check(&err);
    assert!(
        matches!(
            err.kind(),
            MaterialErrorKind::NoUsableRoot { ignored: 2, .. }
        ),
        "{err:?}"
    );

    // One usable among unusable ones: used, and the others counted.
    let mixed = format!("{junk}{}", a.pem());
    let trust = load_trust_detailed(&tls_secret(&[(TLS_CRT, mixed.as_bytes())])).unwrap();
    assert_eq!((trust.roots.len(), trust.ignored), (1, 2));
    verify_with(trust.roots, &a).unwrap();
}

// ---------------------------------------------------------------- the identity cache

#[test]
fn identity_cache_reuses_identical_bytes_and_reloads_changed_ones() {
    let ca = Ca::new("ca");
    let key_a = Alg::Rsa2048.generate();
    let leaf_a = ca.issue(&key_a, &Ca::leaf_params(&[0xa1]));
    let secret_a = tls_secret(&[
        (TLS_CRT, leaf_a.as_bytes()),
        (TLS_KEY, key_a.serialize_pem().as_bytes()),
    ]);
    let key_b = Alg::P256.generate();
    let leaf_b = ca.issue(&key_b, &Ca::leaf_params(&[0xb2]));
    let secret_b = tls_secret(&[
        (TLS_CRT, leaf_b.as_bytes()),
        (TLS_KEY, key_b.serialize_pem().as_bytes()),
    ]);
    let cache = IdentityCache::new(Arc::new(material::crypto_provider()));

    // Unchanged bytes: the very same loaded key is served again.
    let first = cache.load(&secret_a).unwrap();
    let again = cache.load(&secret_a.clone()).unwrap();
    assert!(Arc::ptr_eq(first.certified_key(), again.certified_key()));
    assert_eq!(again.serial_hex(), "a1");

    // A rotation is picked up at once.
    let rotated = cache.load(&secret_b).unwrap();
    assert_eq!(rotated.serial_hex(), "b2");
    assert_eq!(rotated.key_kind(), KeyKind::EcdsaP256);

    // Only the key changes (to one that does not match): the full check runs.
    let mut mismatched = secret_b.clone();
    mismatched.data.as_mut().unwrap().insert(
        TLS_KEY.to_owned(),
        ByteString(key_a.serialize_pem().into_bytes()),
    );
    let err = cache.load(&mismatched).unwrap_err();
    assert!(
        matches!(err.kind(), MaterialErrorKind::KeyMismatch { .. }),
        "{err:?}"
    );

    // A failed load is not remembered and does not evict the good entry.
    let again = cache.load(&secret_b).unwrap();
    assert!(Arc::ptr_eq(rotated.certified_key(), again.certified_key()));

    // Checks that do not depend on the two values still run on a hit.
    let mut opaque = secret_b.clone();
    opaque.type_ = Some("Opaque".into());
    let err = cache.load(&opaque).unwrap_err();
    assert!(
        matches!(err.kind(), MaterialErrorKind::WrongType { .. }),
        "{err:?}"
    );

    // Validity is checked against the given time even on a hit.
    let after = rotated.not_after() + Duration::from_secs(1);
    let err = cache.load_at(&secret_b, after).unwrap_err();
    assert!(
        matches!(err.kind(), MaterialErrorKind::CertificateExpired { .. }),
        "{err:?}"
    );
    let err = cache
        .load_at(&secret_b, SystemTime::UNIX_EPOCH)
        .unwrap_err();
    assert!(err.is_not_yet_valid(), "{err:?}");
    // ...and the entry is still there for the present.
    let again = cache.load(&secret_b).unwrap();
    assert!(Arc::ptr_eq(rotated.certified_key(), again.certified_key()));

    // Cleared: a full load, a new key object with the same content.
    cache.clear();
    let fresh = cache.load(&secret_b).unwrap();
    assert!(!Arc::ptr_eq(rotated.certified_key(), fresh.certified_key()));
    assert_eq!(fresh.chain(), rotated.chain());

    let debug = format!("{cache:?}");
    assert!(debug.contains("b2"), "{debug}");
    assert_no_key_material(&debug, &key_b);
}

// ---------------------------------------------------------------- robustness

/// A small deterministic PRNG (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Corrupts `der`: flips bytes, truncates, or changes a length byte.
fn mutate(rng: &mut Rng, der: &[u8]) -> Vec<u8> {
    let mut out = der.to_vec();
    match rng.below(4) {
        0 => {
            for _ in 0..=rng.below(4) {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
        }
        1 => out.truncate(rng.below(out.len())),
        2 => {
            // Early bytes hold the tags and lengths of the outer structures.
            let i = rng.below(out.len().min(40));
            out[i] = rng.next() as u8;
        }
        _ => {
            let i = rng.below(out.len());
            out.insert(i, rng.next() as u8);
        }
    }
    out
}

#[test]
fn corrupted_material_gives_errors_never_panics() {
    let ca = Ca::new("ca");
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let providers = [provider(), material::crypto_provider()];
    for (alg, format, label) in [
        (Alg::P256, Format::Pkcs8, "PRIVATE KEY"),
        (Alg::P384, Format::Sec1, "EC PRIVATE KEY"),
        (Alg::Ed25519, Format::Pkcs8, "PRIVATE KEY"),
        (Alg::Rsa2048, Format::Pkcs1, "RSA PRIVATE KEY"),
    ] {
        let key = alg.generate();
        let leaf = ca.issue(&key, &Ca::leaf_params(&[0x33]));
        let leaf_der = CertificateDer::from_pem_slice(leaf.as_bytes()).unwrap();
        let good_key_pem = key_pem(&key, format);
        let key_der = PrivateKeyDer::from_pem_slice(good_key_pem.as_bytes())
            .unwrap()
            .secret_der()
            .to_vec();
        for i in 0..150 {
            let provider = &providers[i % 2];
            let bad_key = pem(label, &mutate(&mut rng, &key_der));
            let bad_cert = pem("CERTIFICATE", &mutate(&mut rng, &leaf_der));
            // Corrupt key with a good certificate, and the reverse. Either may
            // still load (a flipped bit in an unused field); none may panic,
            // and an identity that loads must never pair a foreign key.
            for (cert, key_text) in [
                (leaf.as_str(), bad_key.as_str()),
                (bad_cert.as_str(), good_key_pem.as_str()),
            ] {
                match load_identity_from_pem(
                    &secret_ref(),
                    cert.as_bytes(),
                    key_text.as_bytes(),
                    provider,
                ) {
                    // (rustls's check re-parses the leaf with webpki, which is
                    // stricter than a peer needs to be; only a key mismatch counts.)
                    Ok(identity) => assert!(
                        !matches!(
                            identity.certified_key().keys_match(),
                            Err(rustls::Error::InconsistentKeys(
                                rustls::InconsistentKeys::KeyMismatch
                            ))
                        ),
                        "a mismatched key was accepted"
                    ),
                    Err(err) => {
                        let msg = err.to_string();
                        assert!(msg.contains("unikorn/unikorn-client-certificate"), "{msg}");
                        assert_no_key_material(&msg, &key);
                    }
                }
            }
        }
    }
}
