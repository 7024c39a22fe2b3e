//! Principal (X-Principal JWS) cost, on the RSA keys of the shared material (the
//! same keys as the Go program's go-jose loop), in interleaved rounds with Go:
//! - `principal/sign/rsaN`: `svc_tls::principal::sign_with` (JSON, base64url, RSA-PSS
//!   SHA-512 with salt 64 through the aws-lc-rs provider), beside
//!   `go/ps512-sign/rsaN` (go-jose);
//! - `principal/verify/rsaN`: `PeerCertificate::verify` through the public API (header
//!   checks, signature, JSON decoding), beside `go/ps512-verify/rsaN` (go-jose parse
//!   and verify);
//! - `principal/sign/{p256,p384}` and `principal/verify/{p256,p384}`: ES256 / ES384
//!   with `AlgorithmPolicy::Ps512OrEcdsa` (no Go counterpart).
//!
//! Each sample is the mean time per operation over one batch of about 20 ms; our
//! batches and the Go child's alternate round by round (order reversed every round),
//! so the ratios are paired.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::Duration;

use common::go::{Arm, GoChild, interleave, size, time};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use svc_tls::material::load_identity_from_pem;
use svc_tls::origin::SecretRef;
use svc_tls::principal::{AlgorithmPolicy, PeerCertificate, Principal, sign_with};

fn principal() -> Principal {
    Principal {
        organization_id: Some("9a6b1c0e-org".into()),
        project_id: Some("4f2d7e11-project".into()),
        actor: Some("alice@example.com".into()),
    }
}

fn main() {
    let material = common::material();
    let provider = svc_tls::material::crypto_provider();
    let (rounds, target) = if common::quick() {
        (4, Duration::from_millis(2))
    } else {
        (30, Duration::from_millis(20))
    };
    let go = GoChild::spawn(&material.dir);

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

        for op in ["sign", "verify"] {
            let ours: Box<dyn Fn()> = if op == "sign" {
                Box::new(|| {
                    black_box(sign_with(&identity, &peer_url, &value, policy).unwrap());
                })
            } else {
                Box::new(|| {
                    black_box(peer.verify::<Principal>(token.as_str(), policy).unwrap());
                })
            };
            let n = size(&ours, target);
            let mut arms: Vec<Arm<'_>> = vec![Box::new(|| time(n, &ours))];
            let theirs = format!("go/ps512-{op}/{key}");
            if let (Some(go), true) = (&go, key.starts_with("rsa")) {
                let id = theirs.clone();
                arms.push(Box::new(move || go.borrow_mut().measure(&id, 0, target).ns));
            }
            let mut samples = interleave(rounds, arms).into_iter();
            let mut series = vec![(format!("principal/{op}/{key}"), samples.next().unwrap())];
            if let Some(go_samples) = samples.next() {
                series.push((theirs, go_samples));
            }
            common::emit_paired("principal", &format!("{op}/{key}"), &series);
        }
    }
}
