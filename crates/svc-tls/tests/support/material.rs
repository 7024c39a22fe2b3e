//! Shared parts of the `material_*` tests: keys of every supported type in every
//! format (PKCS#8 converted to PKCS#1 / SEC1, by test-support's `keys`), leaves with
//! chosen serials and validity from test-support's `TestCa`, `kubernetes.io/tls`
//! Secrets, an in-memory TLS 1.3
//! client-auth handshake, and the malformed-material fixture. The `pub use`
//! block is the prelude those tests import with `use support::material::*`
//! (each test binary uses part of it).
#![allow(unused_imports)]

pub use std::collections::BTreeMap;
pub use std::sync::Arc;
pub use std::time::{Duration, SystemTime};

pub use base64::Engine as _;
pub use k8s_openapi::ByteString;
pub use k8s_openapi::api::core::v1::Secret;
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
pub use pkcs8::der::asn1::AnyRef;
pub use pkcs8::der::{Decode, Encode, Reader, SliceReader, Tag, TagNumber, Tagged};
pub use rcgen::{CertificateParams, DnType, KeyPair, SerialNumber};
pub use rustls::client::danger::ServerCertVerifier;
pub use rustls::crypto::CryptoProvider;
pub use rustls::pki_types::pem::PemObject;
pub use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
pub use rustls::server::WebPkiClientVerifier;
pub use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
pub use svc_tls::material::{
    self, Identity, IdentityCache, KeyKind, MaterialError, MaterialErrorKind, TLS_CRT, TLS_KEY,
    load_identity, load_identity_at, load_identity_from_pem, load_trust, load_trust_detailed,
};
pub use svc_tls::options::SecretRef;

pub const NS: &str = "unikorn";
pub const NAME: &str = "unikorn-client-certificate";

pub fn provider() -> CryptoProvider {
    rustls::crypto::aws_lc_rs::default_provider()
}

// ---------------------------------------------------------------- key material

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Alg {
    Rsa2048,
    Rsa3072,
    Rsa4096,
    P256,
    P384,
    P521,
    Ed25519,
}

impl Alg {
    pub fn generate(self) -> KeyPair {
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
            Alg::P521 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512).unwrap(),
            Alg::Ed25519 => KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap(),
        }
    }

    pub fn kind(self) -> KeyKind {
        match self {
            Alg::Rsa2048 => KeyKind::Rsa { bits: 2048 },
            Alg::Rsa3072 => KeyKind::Rsa { bits: 3072 },
            Alg::Rsa4096 => KeyKind::Rsa { bits: 4096 },
            Alg::P256 => KeyKind::EcdsaP256,
            Alg::P384 => KeyKind::EcdsaP384,
            Alg::P521 => KeyKind::EcdsaP521,
            Alg::Ed25519 => KeyKind::Ed25519,
        }
    }
}

pub use test_support::keys::{
    KeyFormat as Format, key_pem, pem, pkcs8_inner, sequence_elements, tlv_of, to_sec1,
};
pub use test_support::pki::TestCa;

/// PKCS#8 RSA -> PKCS#1 RSAPrivateKey (what `openssl rsa -traditional` writes).
#[allow(
    clippy::disallowed_types,
    reason = "test fixture: parses a test key to cross-check the conversion, no private-key operation"
)]
pub fn to_pkcs1(pkcs8: &[u8]) -> Vec<u8> {
    let (inner, _) = pkcs8_inner(pkcs8);
    // Cross-check with the rsa crate: it reads the same key from both forms.
    use rsa::pkcs1::DecodeRsaPrivateKey;
    use rsa::pkcs8::DecodePrivateKey;
    let a = rsa::PrivateKey::from_pkcs1_der(&inner).unwrap();
    let b = rsa::PrivateKey::from_pkcs8_der(pkcs8).unwrap();
    assert_eq!(a, b);
    inner
}

// ---------------------------------------------------------------- certificates

/// A client leaf's parameters: `client.unikorn.test`, serial `serial`, valid from
/// 2020 to 2090, client auth (sign with [`TestCa::issue`]).
pub fn leaf_params(serial: &[u8]) -> CertificateParams {
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

pub fn tls_secret(data: &[(&str, &[u8])]) -> Secret {
    secret_of_type(Some("kubernetes.io/tls"), data)
}

pub fn secret_of_type(type_: Option<&str>, data: &[(&str, &[u8])]) -> Secret {
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

pub fn secret_ref() -> SecretRef {
    SecretRef::new(NS, NAME)
}

// ---------------------------------------------------------------- a real handshake

#[derive(Debug)]
pub struct Present(pub Arc<rustls::sign::CertifiedKey>);

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
pub fn handshake(ca: &TestCa, identity: &Identity) -> Vec<CertificateDer<'static>> {
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

pub fn check_loads(ca: &TestCa, alg: Alg, key: &KeyPair, format: Format) {
    let serial = [0x00, 0x9c, 0x01, 0x7f];
    let leaf = ca.issue(key, &leaf_params(&serial));
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

/// No 12-character window of the key's PEM body, and no 8-byte window of its
/// DER (as hex or decimal bytes), appears in `text`.
pub fn assert_no_key_material(text: &str, key: &KeyPair) {
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

pub struct Fixture {
    pub ca: TestCa,
    pub key: KeyPair,
    pub leaf: String,
    pub key_pem: String,
}

impl Fixture {
    pub fn new() -> Self {
        let ca = TestCa::new("ca");
        let key = Alg::P256.generate();
        let leaf = ca.issue(&key, &leaf_params(&[7]));
        let key_pem = key.serialize_pem();
        Self {
            ca,
            key,
            leaf,
            key_pem,
        }
    }

    pub fn load(&self, cert: &[u8], key: &[u8]) -> MaterialError {
        let secret = tls_secret(&[(TLS_CRT, cert), (TLS_KEY, key)]);
        let err = load_identity(&secret, &provider()).expect_err("loaded malformed material");
        self.check_message(&err);
        err
    }

    /// Every error names the Secret and data key, and holds no key material.
    pub fn check_message(&self, err: &MaterialError) {
        let msg = err.to_string();
        assert!(msg.contains("unikorn/unikorn-client-certificate"), "{msg}");
        assert_eq!(err.secret(), Some(&secret_ref()));
        if let Some(key) = err.data_key() {
            assert!(msg.contains(key), "{msg}");
        }
        assert_no_key_material(&msg, &self.key);
        assert_no_key_material(&format!("{err:?}"), &self.key);
    }
}
