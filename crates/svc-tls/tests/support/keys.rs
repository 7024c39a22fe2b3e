//! Key material for the principal tests: real keys generated with rcgen, self-signed
//! certificates, and the rustls signing keys loaded through the aws-lc-rs provider.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use rcgen::{CertificateParams, KeyPair, RsaKeySize, SignatureAlgorithm};
use rustls::sign::SigningKey;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// One generated key and its self-signed certificate.
pub struct Fixture {
    pub name: &'static str,
    pub key_pem: String,
    pub cert_pem: String,
    pub cert_der: CertificateDer<'static>,
    pub signing_key: Arc<dyn SigningKey>,
}

fn generate(
    name: &'static str,
    alg: &'static SignatureAlgorithm,
    rsa: Option<RsaKeySize>,
) -> Fixture {
    let key_pair = match rsa {
        Some(size) => KeyPair::generate_rsa_for(alg, size).unwrap(),
        None => KeyPair::generate_for(alg).unwrap(),
    };
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
    ($fn:ident, $name:literal, $alg:expr, $rsa:expr) => {
        pub fn $fn() -> &'static Fixture {
            static CELL: OnceLock<Fixture> = OnceLock::new();
            CELL.get_or_init(|| generate($name, $alg, $rsa))
        }
    };
}

fixture!(
    rsa2048,
    "rsa2048",
    &rcgen::PKCS_RSA_SHA256,
    Some(RsaKeySize::_2048)
);
fixture!(
    rsa2048_other,
    "rsa2048-other",
    &rcgen::PKCS_RSA_SHA256,
    Some(RsaKeySize::_2048)
);
fixture!(
    rsa3072,
    "rsa3072",
    &rcgen::PKCS_RSA_SHA256,
    Some(RsaKeySize::_3072)
);
fixture!(
    rsa4096,
    "rsa4096",
    &rcgen::PKCS_RSA_SHA256,
    Some(RsaKeySize::_4096)
);
fixture!(p256, "p256", &rcgen::PKCS_ECDSA_P256_SHA256, None);
fixture!(p384, "p384", &rcgen::PKCS_ECDSA_P384_SHA384, None);
fixture!(p521, "p521", &rcgen::PKCS_ECDSA_P521_SHA512, None);
fixture!(ed25519, "ed25519", &rcgen::PKCS_ED25519, None);

/// The RSA fixtures, smallest first.
pub fn rsa_all() -> [&'static Fixture; 3] {
    [rsa2048(), rsa3072(), rsa4096()]
}
