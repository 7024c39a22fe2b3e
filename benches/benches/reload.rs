//! The per-handshake identity reload of svc-tls, per key type and format:
//! `svc_tls::material::load_identity` on a `kubernetes.io/tls` Secret whose
//! `tls.crt` holds leaf + CA (parse PEM, parse the leaf, check validity, load the
//! key with the crypto provider, check it matches the certificate).
//!
//! Groups:
//! - `reload/<key>-<format>` (e.g. `reload/rsa2048-pkcs8`, `reload/p256-sec1`): the
//!   full load with `svc_tls::material::crypto_provider()`, which loads each key once;
//! - `reload-rustls-key-loader/<key>-pkcs8`: the same with rustls's default aws-lc-rs
//!   key loader (tries key types in turn), for comparison;
//! - `reload-cached/<key>-<format>`: `IdentityCache::load` on an unchanged Secret, what
//!   a handshake costs between rotations.
//!
//! Targets per reload: RSA-2048 < 35 us, P-256 < 22 us, P-384 < 100 us, Ed25519 < 25 us.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, RsaKeySize};
use svc_tls::material::{IdentityCache, load_identity};

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

/// `(tag, value, rest)` of one DER TLV.
fn tlv(input: &[u8]) -> (u8, &[u8], &[u8]) {
    let (len, hdr) = if input[1] < 0x80 {
        (input[1] as usize, 2)
    } else {
        let n = (input[1] & 0x7f) as usize;
        let len = input[2..2 + n]
            .iter()
            .fold(0usize, |a, &b| (a << 8) | b as usize);
        (len, 2 + n)
    };
    (input[0], &input[hdr..hdr + len], &input[hdr + len..])
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

/// The PKCS#8 key's inner private key (PKCS#1 for RSA, SEC1 for EC) and the
/// algorithm parameters (the curve OID TLV for EC).
fn pkcs8_inner(pkcs8: &[u8]) -> (&[u8], &[u8]) {
    let (_, info, _) = tlv(pkcs8);
    let (_, _version, rest) = tlv(info);
    let (_, alg, rest) = tlv(rest);
    let (_, inner, _) = tlv(rest);
    let (_, _oid, params) = tlv(alg);
    (inner, params)
}

/// SEC1 with the named curve, as Go's `x509.MarshalECPrivateKey` writes it.
fn to_sec1(pkcs8: &[u8]) -> Vec<u8> {
    let (inner, curve) = pkcs8_inner(pkcs8);
    let (_, body, _) = tlv(inner);
    let (_, version, rest) = tlv(body);
    let (_, private, rest) = tlv(rest);
    let mut content = enc(0x02, version);
    content.extend(enc(0x04, private));
    content.extend(enc(0xa0, curve));
    content.extend_from_slice(rest);
    enc(0x30, &content)
}

fn secret(cert_pem: &str, key_pem: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            namespace: Some("bench".into()),
            name: Some("bench-client-certificate".into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(BTreeMap::from([
            (
                "tls.crt".to_owned(),
                ByteString(cert_pem.as_bytes().to_vec()),
            ),
            (
                "tls.key".to_owned(),
                ByteString(key_pem.as_bytes().to_vec()),
            ),
        ])),
        ..Default::default()
    }
}

fn cases() -> Vec<(String, Secret)> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(
        ca_params,
        KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap(),
    )
    .unwrap();

    let keys: [(&str, KeyPair, &[&str]); 6] = [
        (
            "rsa2048",
            KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap(),
            &["pkcs8", "pkcs1"],
        ),
        (
            "rsa3072",
            KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_3072).unwrap(),
            &["pkcs8"],
        ),
        (
            "rsa4096",
            KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_4096).unwrap(),
            &["pkcs8", "pkcs1"],
        ),
        (
            "p256",
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap(),
            &["pkcs8", "sec1"],
        ),
        (
            "p384",
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap(),
            &["pkcs8", "sec1"],
        ),
        (
            "ed25519",
            KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap(),
            &["pkcs8"],
        ),
    ];

    let mut out = Vec::new();
    for (name, key, formats) in keys {
        let mut params = CertificateParams::new(vec!["client.bench.test".to_owned()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2090, 1, 1);
        let leaf = params.signed_by(&key, &ca).unwrap();
        // tls.crt as cert-manager writes it: leaf, then the issuer.
        let chain = format!("{}{}", leaf.pem(), ca.pem());
        let pkcs8 = key.serialize_der();
        for &format in formats {
            let key_pem = match format {
                "pkcs8" => pem("PRIVATE KEY", &pkcs8),
                "pkcs1" => pem("RSA PRIVATE KEY", pkcs8_inner(&pkcs8).0),
                "sec1" => pem("EC PRIVATE KEY", &to_sec1(&pkcs8)),
                _ => unreachable!(),
            };
            out.push((format!("{name}-{format}"), secret(&chain, &key_pem)));
        }
    }
    out
}

fn reload(c: &mut Criterion) {
    let cases = cases();
    let provider = svc_tls::material::crypto_provider();

    // The full reload, as on a handshake right after the Secret changed.
    let mut group = c.benchmark_group("reload");
    group
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(50);
    for (id, secret) in &cases {
        // Fail loudly rather than measure an error path.
        load_identity(secret, &provider).unwrap();
        group.bench_function(id.as_str(), |b| {
            b.iter(|| load_identity(black_box(secret), &provider).unwrap())
        });
    }
    group.finish();

    // The same with rustls's own aws-lc-rs key loader, which tries key types in
    // turn (RSA, P-256, P-384, P-521, Ed25519) and fully parses the key each time.
    let rustls_provider = rustls::crypto::aws_lc_rs::default_provider();
    let mut group = c.benchmark_group("reload-rustls-key-loader");
    group
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(300))
        .sample_size(30);
    for (id, secret) in cases.iter().filter(|(id, _)| {
        ["rsa2048-pkcs8", "p256-pkcs8", "p384-pkcs8", "ed25519-pkcs8"].contains(&id.as_str())
    }) {
        group.bench_function(id.as_str(), |b| {
            b.iter(|| load_identity(black_box(secret), &rustls_provider).unwrap())
        });
    }
    group.finish();

    // Every other handshake: the Secret is unchanged, IdentityCache compares the
    // bytes, re-checks validity and hands out the identity loaded before.
    let cache = IdentityCache::new(Arc::new(svc_tls::material::crypto_provider()));
    let mut group = c.benchmark_group("reload-cached");
    group
        .measurement_time(Duration::from_secs(1))
        .warm_up_time(Duration::from_millis(300))
        .sample_size(50);
    for (id, secret) in &cases {
        group.bench_function(id.as_str(), |b| {
            cache.load(secret).unwrap();
            b.iter(|| cache.load(black_box(secret)).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, reload);
criterion_main!(benches);
