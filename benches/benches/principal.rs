//! Principal (X-Principal JWS) cost per RSA key size (2048, 3072, 4096):
//! - `principal/sign-provider/rsaN`: `svc_tls::principal::sign_with` on a loaded
//!   identity: JSON, base64url, RSA-PSS SHA-512 (salt 64) through the rustls aws-lc-rs
//!   provider (what the library does);
//! - `principal/sign-provider-raw/rsaN`: the provider's RSA-PSS signature alone over
//!   the same signing input;
//! - `principal/sign-rsa-crate/rsaN`: the same signature with the `rsa` crate's
//!   `pss::SigningKey<Sha512>` (blinded; formerly `BlindedSigningKey`), for comparison
//!   only: the library never uses `rsa` private-key operations (RUSTSEC-2023-0071);
//! - `principal/verify/rsaN`: `PeerCertificate::verify` (the `rsa` crate,
//!   salt auto-detected as Go does) including header checks and JSON decoding;
//! - `principal/verify-provider-raw/rsaN`: aws-lc-rs RSA-PSS SHA-512 verification
//!   (salt fixed at 64) of the same signature, via rustls-webpki, for comparison.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use rcgen::{CertificateParams, KeyPair, RsaKeySize};
use rsa::pkcs8::DecodePrivateKey as _;
use rsa::signature::{SignatureEncoding as _, Signer as _};
use rustls::SignatureScheme;
use svc_tls::material::load_identity_from_pem;
use svc_tls::options::SecretRef;
use svc_tls::principal::{AlgorithmPolicy, PeerCertificate, Principal, sign_with};

fn principal() -> Principal {
    Principal {
        organization_id: Some("9a6b1c0e-org".into()),
        project_id: Some("4f2d7e11-project".into()),
        actor: Some("alice@example.com".into()),
    }
}

fn bench(c: &mut Criterion) {
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    let mut group = c.benchmark_group("principal");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sampling_mode(SamplingMode::Flat);

    for (name, size) in [
        ("rsa2048", RsaKeySize::_2048),
        ("rsa3072", RsaKeySize::_3072),
        ("rsa4096", RsaKeySize::_4096),
    ] {
        let key = KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, size).unwrap();
        let cert = CertificateParams::new(vec![format!("{name}.bench.test")])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let identity = load_identity_from_pem(
            &SecretRef::new("bench", name),
            cert.pem().as_bytes(),
            key.serialize_pem().as_bytes(),
            &provider,
        )
        .unwrap();
        let peer = PeerCertificate::from_der(cert.der().clone()).unwrap();
        let value = principal();

        let token = sign_with(&identity, &value, AlgorithmPolicy::Ps512Only).unwrap();
        let (input, signature_b64) = token.as_str().rsplit_once('.').unwrap();
        let input = input.to_owned();
        let signature = URL_SAFE_NO_PAD.decode(signature_b64).unwrap();

        group.bench_function(BenchmarkId::new("sign-provider", name), |b| {
            b.iter(|| sign_with(&identity, &value, AlgorithmPolicy::Ps512Only).unwrap());
        });

        let raw_signer = identity
            .certified_key()
            .key
            .choose_scheme(&[SignatureScheme::RSA_PSS_SHA512])
            .unwrap();
        group.bench_function(BenchmarkId::new("sign-provider-raw", name), |b| {
            b.iter(|| raw_signer.sign(input.as_bytes()).unwrap());
        });

        let rsa_key = rsa::pss::SigningKey::<sha2::Sha512>::new(
            rsa::PrivateKey::from_pkcs8_der(key.serialized_der()).unwrap(),
        );
        // Same primitive, same parameters: the provider verifies what the rsa crate made.
        let check = rsa_key.try_sign(input.as_bytes()).unwrap().to_vec();
        webpki::aws_lc_rs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY
            .verify_signature(key.public_key_raw(), input.as_bytes(), &check)
            .unwrap();
        group.bench_function(BenchmarkId::new("sign-rsa-crate", name), |b| {
            b.iter(|| rsa_key.try_sign(input.as_bytes()).unwrap());
        });

        group.bench_function(BenchmarkId::new("verify", name), |b| {
            b.iter(|| {
                peer.verify::<Principal>(token.as_str(), AlgorithmPolicy::Ps512Only)
                    .unwrap()
            });
        });

        let public_key = key.public_key_raw().to_vec();
        group.bench_function(BenchmarkId::new("verify-provider-raw", name), |b| {
            b.iter(|| {
                webpki::aws_lc_rs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY
                    .verify_signature(&public_key, input.as_bytes(), &signature)
                    .unwrap();
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
