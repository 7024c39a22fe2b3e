//! Principal (X-Principal JWS) cost, on the RSA keys of the shared material (the
//! same keys as the Go program's go-jose loop):
//! - `principal/sign/rsaN`: `svc_tls::principal::sign_with` (JSON, base64url, RSA-PSS
//!   SHA-512 with salt 64 through the aws-lc-rs provider);
//! - `principal/verify/rsaN`: `PeerCertificate::verify` through the public API (header
//!   checks, signature, JSON decoding);
//! - `principal/sign/{p256,p384}` and `principal/verify/{p256,p384}`: ES256 / ES384
//!   with `AlgorithmPolicy::Ps512OrEcdsa`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
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
    let material = common::material();
    let provider = svc_tls::material::crypto_provider();
    let quick = common::quick();
    let mut group = c.benchmark_group("principal");
    group
        .sample_size(if quick { 10 } else { 30 })
        .warm_up_time(Duration::from_millis(if quick { 50 } else { 300 }))
        .measurement_time(Duration::from_millis(if quick { 100 } else { 1500 }))
        .sampling_mode(SamplingMode::Flat);

    for (key, policy) in [
        ("rsa2048", AlgorithmPolicy::Ps512Only),
        ("rsa3072", AlgorithmPolicy::Ps512Only),
        ("rsa4096", AlgorithmPolicy::Ps512Only),
        ("p256", AlgorithmPolicy::Ps512OrEcdsa),
        ("p384", AlgorithmPolicy::Ps512OrEcdsa),
    ] {
        let case = material.case(&format!("{key}-pkcs8"));
        let identity = load_identity_from_pem(
            &SecretRef::new("bench", key),
            case.cert_pem.as_bytes(),
            case.key_pem.as_bytes(),
            &provider,
        )
        .unwrap();
        let leaf = CertificateDer::pem_slice_iter(case.cert_pem.as_bytes())
            .next()
            .unwrap()
            .unwrap();
        let peer = PeerCertificate::from_der(leaf).unwrap();
        let value = principal();
        // The receiver the tokens are for (their audience is its origin).
        let peer_url: svc_tls::principal::Url = "https://identity.example/api".parse().unwrap();
        let token = sign_with(&identity, &peer_url, &value, policy).unwrap();
        let back: Principal = peer.verify(token.as_str(), policy).unwrap();
        assert_eq!(back, value);

        group.bench_function(BenchmarkId::new("sign", key), |b| {
            b.iter(|| sign_with(&identity, &peer_url, &value, policy).unwrap());
        });
        group.bench_function(BenchmarkId::new("verify", key), |b| {
            b.iter(|| peer.verify::<Principal>(token.as_str(), policy).unwrap());
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
