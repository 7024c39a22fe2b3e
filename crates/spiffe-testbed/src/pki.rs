//! The emulated trust domain's PKI: a self-signed P-256 CA per generation and the
//! X509-SVIDs it issues, shaped as SPIRE shapes them (CA with the trust domain's URI
//! SAN; leaves with the SPIFFE ID as their only URI SAN, `CA:FALSE`, digital
//! signature, server and client auth), so that the `spiffe` crate's SVID validation
//! and a rustls/webpki verifier see what they would see from a real agent.
//!
//! The CAs and their signing are test-support's [`TestCa`] (the workspace's one test
//! PKI); what is SPIFFE's is here: the trust domain's URI SAN on the CAs, the SVID
//! shape, validity as SPIRE sets it, and chains and bundles as the Workload API
//! carries them.
//!
//! Generation failures panic: this is test support, and a failure here is a broken
//! environment (or a SPIFFE ID that is not IA5), not an outcome under test.
#![allow(clippy::expect_used)]

use std::fmt;
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType, SerialNumber, string::Ia5String,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use test_support::keys::pem;
use test_support::pki::{TestCa, valid_around_now};

/// How long an SVID is valid unless [`crate::WorkloadApi::set_svid_ttl`] says otherwise
/// (SPIRE's default X509-SVID TTL is one hour).
pub const SVID_TTL: Duration = Duration::from_secs(3600);
/// How far validity is backdated, as SPIRE does for clock skew.
const BACKDATE: Duration = Duration::from_secs(10);
/// How long a CA is valid.
const CA_TTL: Duration = Duration::from_secs(24 * 3600);

/// An issued certificate and its key: an X509-SVID (or, from
/// [`crate::WorkloadApi::issue`], another identity's certificate).
///
/// `Debug` leaves the key out.
#[derive(Clone)]
pub struct SvidInfo {
    /// The SPIFFE ID in the certificate's URI SAN.
    pub spiffe_id: String,
    /// The certificate's serial number; increasing across everything the emulator issues.
    pub serial: u64,
    /// The certificate chain, leaf first: the leaf alone, or the leaf and the
    /// intermediate CA with [`crate::WorkloadApi::set_intermediate`]. Never the root.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key, PKCS#8 DER (P-256).
    pub key_pkcs8_der: Vec<u8>,
    /// The end of validity, to the second as written in the certificate.
    pub not_after: SystemTime,
}

impl SvidInfo {
    /// The leaf certificate, DER.
    pub fn leaf(&self) -> &CertificateDer<'static> {
        &self.chain[0]
    }

    /// The chain as the Workload API carries it: DER certificates concatenated.
    pub fn chain_der_concat(&self) -> Vec<u8> {
        concat(&self.chain)
    }

    /// The private key, as rustls takes it.
    pub fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_pkcs8_der.clone()))
    }

    /// The chain, PEM (leaf first).
    pub fn chain_pem(&self) -> String {
        self.chain.iter().map(|c| pem("CERTIFICATE", c)).collect()
    }

    /// The private key, PKCS#8 PEM.
    pub fn key_pem(&self) -> String {
        pem("PRIVATE KEY", &self.key_pkcs8_der)
    }
}

impl fmt::Debug for SvidInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SvidInfo")
            .field("spiffe_id", &self.spiffe_id)
            .field("serial", &self.serial)
            .field("chain_len", &self.chain.len())
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// A CA of the trust domain: a root (one per generation) or an intermediate under it.
pub(crate) struct Ca {
    ca: TestCa,
    /// What an issued chain carries after the leaf: nothing for a root (roots travel
    /// in the bundle), the intermediate's own certificate for an intermediate.
    above_leaf: Vec<CertificateDer<'static>>,
}

impl Ca {
    /// A self-signed P-256 root CA for `trust_domain` (a name such as `example.org`).
    pub(crate) fn new(trust_domain: &str, serial: u64) -> Self {
        let params = ca_params(trust_domain, serial, "CA", BasicConstraints::Unconstrained);
        Self {
            ca: TestCa::from_params(params),
            above_leaf: Vec::new(),
        }
    }

    /// A P-256 intermediate CA under this one (as SPIRE's server signs with an
    /// intermediate when it has an upstream authority); it may only sign leaves.
    pub(crate) fn intermediate(&self, trust_domain: &str, serial: u64) -> Self {
        let mut params = ca_params(
            trust_domain,
            serial,
            "intermediate",
            BasicConstraints::Constrained(0),
        );
        params.use_authority_key_identifier_extension = true;
        let ca = self.ca.intermediate(params);
        let above_leaf = vec![ca.der()];
        Self { ca, above_leaf }
    }

    /// The CA certificate, DER.
    pub(crate) fn der(&self) -> CertificateDer<'static> {
        self.ca.der()
    }

    /// An SVID for `spiffe_id`; with `localhost`, also a DNS SAN `localhost` (for a TLS
    /// server under test that clients may also reach by name).
    pub(crate) fn issue(
        &self,
        spiffe_id: &str,
        serial: u64,
        localhost: bool,
        ttl: Duration,
    ) -> SvidInfo {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CountryName, "US");
        dn.push(DnType::OrganizationName, "SPIRE");
        params.distinguished_name = dn;
        params.subject_alt_names = vec![uri_san(spiffe_id)];
        if localhost {
            params.subject_alt_names.push(SanType::DnsName(
                Ia5String::try_from("localhost").expect("IA5 name"),
            ));
        }
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::KeyAgreement,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.serial_number = Some(SerialNumber::from(serial));
        params.use_authority_key_identifier_extension = true;
        let not_after = valid_around_now(&mut params, BACKDATE, ttl);
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("SVID key");
        let cert = params
            .signed_by(&key, self.ca.issuer())
            .expect("CA signs the SVID");
        SvidInfo {
            spiffe_id: spiffe_id.to_owned(),
            serial,
            chain: std::iter::once(cert.der().clone())
                .chain(self.above_leaf.iter().cloned())
                .collect(),
            key_pkcs8_der: key.serialize_der(),
            not_after,
        }
    }
}

fn ca_params(
    trust_domain: &str,
    serial: u64,
    what: &str,
    constraints: BasicConstraints,
) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CountryName, "US");
    dn.push(DnType::OrganizationName, "SPIFFE");
    dn.push(
        DnType::CommonName,
        format!("spiffe-testbed {what} {serial}"),
    );
    params.distinguished_name = dn;
    params.subject_alt_names = vec![uri_san(&format!("spiffe://{trust_domain}"))];
    params.is_ca = IsCa::Ca(constraints);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.serial_number = Some(SerialNumber::from(serial));
    valid_around_now(&mut params, BACKDATE, CA_TTL);
    params
}

fn uri_san(uri: &str) -> SanType {
    SanType::URI(Ia5String::try_from(uri).expect("a SPIFFE ID is IA5 text"))
}

/// DER certificates concatenated, as the Workload API carries chains and bundles.
pub(crate) fn concat(certs: &[CertificateDer<'_>]) -> Vec<u8> {
    certs
        .iter()
        .flat_map(|c| c.as_ref().iter().copied())
        .collect()
}

/// A certificate, PEM.
pub(crate) fn pem_certificate(der: &[u8]) -> String {
    pem("CERTIFICATE", der)
}
