//! The full identity load of svc-tls, per key type and format, against Go's
//! `tls.X509KeyPair` on the same bytes, in interleaved rounds:
//! `svc_tls::material::load_identity` on a `kubernetes.io/tls` Secret whose `tls.crt`
//! holds leaf + CA (parse PEM, parse the leaf, check validity, load the key with the
//! crypto provider, check it matches the certificate), and Go's `tls.X509KeyPair` on
//! the same `tls.crt` and `tls.key` (the Go program as a long-lived child, one batch
//! on command).
//!
//! Ids `reload/<key>-<format>` (ours) and `go/x509keypair/<key>-<format>` (Go), each
//! sample the mean time per load over one batch of about 20 ms, round `i` of both
//! taken side by side (the order reversed every round): the parse ratio is paired
//! round by round. What a handshake right after a rotation costs, through the
//! resolver, is measured by the `identity` benchmark.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::Duration;

use common::go::{Arm, GoChild, interleave, size, time};
use svc_tls::material::load_identity;

fn main() {
    let material = common::material();
    let provider = svc_tls::material::crypto_provider();
    let (rounds, target) = if common::quick() {
        (4, Duration::from_millis(2))
    } else {
        (30, Duration::from_millis(20))
    };
    let go = GoChild::spawn(&material.dir);
    for case in &material.cases {
        let secret = common::secret("bench", "reload", &case.cert_pem, &case.key_pem);
        // Fail loudly rather than measure an error path.
        load_identity(&secret, &provider).unwrap();
        let load = || {
            black_box(load_identity(black_box(&secret), &provider).unwrap());
        };
        let n = size(load, target);
        let ours = format!("reload/{}", case.name);
        let theirs = format!("go/x509keypair/{}", case.name);
        let mut arms: Vec<Arm<'_>> = vec![Box::new(move || time(n, load))];
        if let Some(go) = &go {
            let id = theirs.clone();
            arms.push(Box::new(move || go.borrow_mut().measure(&id, 0, target).ns));
        }
        let mut samples = interleave(rounds, arms).into_iter();
        let mut series = vec![(ours, samples.next().unwrap())];
        if let Some(go_samples) = samples.next() {
            series.push((theirs, go_samples));
        }
        common::emit_paired("reload", &case.name, &series);
    }
}
