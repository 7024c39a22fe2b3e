//! Key material for the principal tests: real keys generated with rcgen, self-signed
//! certificates, and the rustls signing keys loaded through the aws-lc-rs provider.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use rcgen::CertificateParams;
use rustls::sign::SigningKey;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use test_support::keys::KeyAlg;

/// One generated key and its self-signed certificate.
pub(crate) struct Fixture {
    pub name: &'static str,
    pub key_pem: String,
    pub cert_pem: String,
    pub cert_der: CertificateDer<'static>,
    pub signing_key: Arc<dyn SigningKey>,
}

fn generate(name: &'static str, alg: KeyAlg) -> Fixture {
    let key_pair = alg.generate();
    let params = CertificateParams::new(vec![format!("{name}.svc.test")]).unwrap();
    let cert = params.self_signed(&key_pair).unwrap();
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_pair.serialize_der()));
    let signing_key = rustls::crypto::aws_lc_rs::default_provider()
        .key_provider
        .load_private_key(key_der)
        .unwrap();
    Fixture {
        name,
        key_pem: key_pair.serialize_pem(),
        cert_pem: cert.pem(),
        cert_der: cert.der().clone(),
        signing_key,
    }
}

macro_rules! fixture {
    ($fn:ident, $name:literal, $alg:expr) => {
        pub(crate) fn $fn() -> &'static Fixture {
            static CELL: OnceLock<Fixture> = OnceLock::new();
            CELL.get_or_init(|| generate($name, $alg))
        }
    };
}

fixture!(rsa2048, "rsa2048", KeyAlg::Rsa2048);
fixture!(rsa2048_other, "rsa2048-other", KeyAlg::Rsa2048);
fixture!(rsa3072, "rsa3072", KeyAlg::Rsa3072);
fixture!(rsa4096, "rsa4096", KeyAlg::Rsa4096);
fixture!(p256, "p256", KeyAlg::P256);
fixture!(p384, "p384", KeyAlg::P384);
fixture!(p521, "p521", KeyAlg::P521);
fixture!(ed25519, "ed25519", KeyAlg::Ed25519);

/// The RSA fixtures, smallest first.
pub(crate) fn rsa_all() -> [&'static Fixture; 3] {
    [rsa2048(), rsa3072(), rsa4096()]
}
