//! The full identity load of svc-tls, per key type and format, in a tight loop:
//! `svc_tls::material::load_identity` on a `kubernetes.io/tls` Secret whose `tls.crt`
//! holds leaf + CA (parse PEM, parse the leaf, check validity, load the key with the
//! crypto provider, check it matches the certificate). The same PEM bytes as the Go
//! program's `tls.X509KeyPair` loop (`go/x509keypair/<case>`).
//!
//! Group `reload/<key>-<format>` (e.g. `reload/rsa2048-pkcs8`, `reload/p256-sec1`).
//! What a handshake right after a rotation costs, through the resolver, is measured
//! by the `identity` benchmark.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use svc_tls::material::load_identity;

fn reload(c: &mut Criterion) {
    let material = common::material();
    let provider = svc_tls::material::crypto_provider();
    let quick = common::quick();

    let mut group = c.benchmark_group("reload");
    group
        .measurement_time(Duration::from_millis(if quick { 100 } else { 1500 }))
        .warm_up_time(Duration::from_millis(if quick { 50 } else { 300 }))
        .sample_size(if quick { 10 } else { 40 });
    for case in &material.cases {
        let secret = common::secret("bench", "reload", &case.cert_pem, &case.key_pem);
        // Fail loudly rather than measure an error path.
        load_identity(&secret, &provider).unwrap();
        group.bench_function(case.name.as_str(), |b| {
            b.iter(|| load_identity(black_box(&secret), &provider).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, reload);
criterion_main!(benches);
