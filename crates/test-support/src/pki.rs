//! Test PKI: certificate authorities and leaves generated with rcgen, for the
//! workspace's TLS tests (svc-tls's handshakes, material and principals, the
//! example's services, the soak) and spiffe-testbed's trust domains. One
//! implementation, so every test builds certificates the same way: [`TestCa::new`]
//! and its leaf methods for the common shapes, [`TestCa::from_params`],
//! [`TestCa::intermediate`] and [`TestCa::issue`] / [`TestCa::issuer`] for a test
//! that shapes its certificates itself.
//!
//! Generation failures panic: this is test support, and a failure here is a
//! broken environment, not an outcome under test.
#![allow(clippy::expect_used)]

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pkcs8::der::{Encode, Tag};
use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;

use crate::keys;

/// A certificate authority with a fresh ECDSA P-256 key.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, as PEM and DER.
#[derive(Clone)]
pub struct Leaf {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PKCS#8 PEM.
    pub key_pem: String,
    /// The certificate, DER.
    pub der: CertificateDer<'static>,
    /// The serial number it was issued with.
    pub serial: u64,
}

impl TestCa {
    /// A self-signed CA whose subject common name is `name`.
    pub fn new(name: &str) -> Self {
        Self::from_params(ca_params(name))
    }

    /// A self-signed CA named `name` that expires `lifetime` from now (whole seconds).
    pub fn expiring_in(name: &str, lifetime: Duration) -> Self {
        let mut params = ca_params(name);
        valid_around_now(&mut params, Duration::from_secs(3600), lifetime);
        Self::from_params(params)
    }

    /// A self-signed CA with these parameters (which should say `is_ca`) and a fresh
    /// ECDSA P-256 key.
    pub fn from_params(params: CertificateParams) -> Self {
        let key = KeyPair::generate().expect("CA key");
        Self {
            issuer: CertifiedIssuer::self_signed(params, key).expect("self-signed CA"),
        }
    }

    /// A CA with these parameters and a fresh ECDSA P-256 key, signed by this one (an
    /// intermediate).
    pub fn intermediate(&self, params: CertificateParams) -> Self {
        let key = KeyPair::generate().expect("intermediate key");
        Self {
            issuer: CertifiedIssuer::signed_by(params, key, &self.issuer)
                .expect("CA signs the intermediate"),
        }
    }

    /// The issuer, to sign certificate parameters a test shaped itself
    /// (`params.signed_by(&key, ca.issuer())`).
    pub fn issuer(&self) -> &rcgen::Issuer<'static, KeyPair> {
        &self.issuer
    }

    /// A certificate for `key` with these parameters, signed by this CA, PEM.
    pub fn issue(&self, key: &impl rcgen::PublicKeyData, params: &CertificateParams) -> String {
        params
            .signed_by(key, self.issuer())
            .expect("CA signs the leaf")
            .pem()
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// The CA certificate, DER.
    pub fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// A root store holding this CA only.
    pub fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots
            .add(self.der())
            .expect("CA certificate is a usable root");
        roots
    }

    /// A client-auth leaf with an ECDSA P-256 key.
    pub fn client_leaf(&self, cn: &str, serial: u64) -> Leaf {
        self.client_leaf_with(cn, serial, KeyPair::generate().expect("leaf key"))
    }

    /// A client-auth leaf with the given key.
    pub fn client_leaf_with(&self, cn: &str, serial: u64, key: KeyPair) -> Leaf {
        self.sign(client_params(cn, serial), key, serial)
    }

    /// A client-auth leaf for an RSA private key given as PKCS#8 DER, of a size rcgen
    /// cannot load (aws-lc-rs refuses RSA below 2048 bits): the certificate carries
    /// the key's modulus and exponent, and `key_pem` is `pkcs8` as PEM.
    pub fn client_leaf_with_rsa_pkcs8(&self, cn: &str, serial: u64, pkcs8: &[u8]) -> Leaf {
        let public = RsaPublicKey::of_pkcs8(pkcs8);
        let cert = client_params(cn, serial)
            .signed_by(&public, &self.issuer)
            .expect("CA signs the leaf");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: keys::pem("PRIVATE KEY", pkcs8),
            der: cert.der().clone(),
            serial,
        }
    }

    /// A client-auth leaf whose validity ended in 2021.
    pub fn expired_client_leaf(&self, serial: u64) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf params");
        params.serial_number = Some(SerialNumber::from(serial));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        self.sign(params, KeyPair::generate().expect("leaf key"), serial)
    }

    /// A client-auth leaf whose validity starts in 2099 (a clock behind, or an issuer
    /// clock ahead).
    pub fn not_yet_valid_client_leaf(&self, serial: u64) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf params");
        params.serial_number = Some(SerialNumber::from(serial));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.not_before = rcgen::date_time_ymd(2099, 1, 1);
        params.not_after = rcgen::date_time_ymd(2100, 1, 1);
        self.sign(params, KeyPair::generate().expect("leaf key"), serial)
    }

    /// A client-auth leaf valid from an hour ago until `lifetime` from now (rounded
    /// down to the second): for tests of an identity that expires while served.
    pub fn short_lived_client_leaf(&self, serial: u64, lifetime: Duration) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf params");
        params.serial_number = Some(SerialNumber::from(serial));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        valid_around_now(&mut params, Duration::from_secs(3600), lifetime);
        self.sign(params, KeyPair::generate().expect("leaf key"), serial)
    }

    /// A server leaf for 127.0.0.1 and localhost.
    pub fn server_leaf(&self) -> Leaf {
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
                .expect("server params");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.serial_number = Some(SerialNumber::from(1u64));
        self.sign(params, KeyPair::generate().expect("server key"), 1)
    }

    /// A server leaf with the given DNS names or IP addresses and URI SANs (for
    /// example a SPIFFE ID `spiffe://trust.domain/ns/x/sa/y`).
    pub fn server_leaf_with(&self, names: &[&str], uris: &[&str]) -> Leaf {
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
                .expect("server params");
        for uri in uris {
            params.subject_alt_names.push(SanType::URI(
                rcgen::string::Ia5String::try_from(*uri).expect("URI SAN is IA5"),
            ));
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.serial_number = Some(SerialNumber::from(1u64));
        self.sign(params, KeyPair::generate().expect("server key"), 1)
    }

    fn sign(&self, params: CertificateParams, key: KeyPair, serial: u64) -> Leaf {
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("CA signs the leaf");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
            serial,
        }
    }
}

/// Client-auth leaf parameters: common name `cn`, `serial`, digital signature.
fn client_params(cn: &str, serial: u64) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf params");
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    params.distinguished_name = dn;
    params.serial_number = Some(SerialNumber::from(serial));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params
}

/// An RSA public key as PKCS#1 `RSAPublicKey` DER, the subject of a certificate.
struct RsaPublicKey(Vec<u8>);

impl RsaPublicKey {
    /// The public half of a PKCS#8 RSA private key: `RSAPrivateKey` is version,
    /// modulus, public exponent, ...; `RSAPublicKey` is modulus, public exponent.
    fn of_pkcs8(pkcs8: &[u8]) -> Self {
        let (pkcs1, _) = keys::pkcs8_inner(pkcs8);
        let elements = keys::sequence_elements(&pkcs1);
        let mut public = elements[1].to_der().expect("modulus");
        public.extend(elements[2].to_der().expect("public exponent"));
        Self(keys::tlv_of(Tag::Sequence, &public))
    }
}

impl rcgen::PublicKeyData for RsaPublicKey {
    fn der_bytes(&self) -> &[u8] {
        &self.0
    }
    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_RSA_SHA256
    }
}

/// The parameters of a self-signed CA whose subject common name is `name`.
fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
}

/// Sets the validity of `params` to [now - `backdate`, now + `lifetime`], the end
/// rounded down to the second (as the certificate encodes it), and returns that end.
pub fn valid_around_now(
    params: &mut CertificateParams,
    backdate: Duration,
    lifetime: Duration,
) -> SystemTime {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let end = Duration::from_secs((now + lifetime).as_secs());
    params.not_before = epoch + (now - backdate);
    params.not_after = epoch + end;
    UNIX_EPOCH + end
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rcgen::PublicKeyData as _;
    use x509_parser::prelude::{FromDer, X509Certificate};

    #[test]
    fn an_rsa_pkcs8_leaf_certifies_that_key() {
        let key =
            KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048).unwrap();
        let leaf = TestCa::new("ca").client_leaf_with_rsa_pkcs8("svc", 7, &key.serialize_der());
        let (_, cert) = X509Certificate::from_der(&leaf.der).unwrap();
        assert_eq!(
            cert.public_key().raw,
            key.subject_public_key_info().as_slice()
        );
        assert_eq!(leaf.key_pem, key.serialize_pem());
    }
}
