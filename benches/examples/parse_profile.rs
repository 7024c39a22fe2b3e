//! `svc_tls::material::load_identity` in a loop on one case of the bench material, for
//! a profiler (`perf record`): where the parse's time goes
//! (docs/decisions/rsa-parse-keeps-aws-lc-key-check.md).
//!
//! `cargo run --release -p platform-benches --example parse_profile -- <case> [seconds]`
//! with `BENCH_MATERIAL_DIR` pointing at the material `cargo xtask bench` wrote.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_else(|| "rsa2048-pkcs8".to_owned());
    let seconds: u64 = args.next().map_or(5, |s| s.parse().unwrap());
    let dir = std::path::PathBuf::from(std::env::var_os("BENCH_MATERIAL_DIR").unwrap());
    let cert = std::fs::read(dir.join(format!("{case}.crt"))).unwrap();
    let key = std::fs::read(dir.join(format!("{case}.key"))).unwrap();
    let name = svc_tls::origin::SecretRef::new("bench", "profile");
    let provider = svc_tls::material::crypto_provider();
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut n = 0u64;
    let start = Instant::now();
    while Instant::now() < until {
        for _ in 0..100 {
            black_box(
                svc_tls::material::load_identity_from_pem(&name, &cert, &key, &provider).unwrap(),
            );
        }
        n += 100;
    }
    eprintln!(
        "{case}: {n} loads, {:.1} us each",
        start.elapsed().as_secs_f64() * 1e6 / n as f64
    );
}
