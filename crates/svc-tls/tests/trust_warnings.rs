//! The stale-trust warning as logged through `tracing`, with a controlled clock: a
//! broken CA Secret gives one warning for N failing handshakes within a minute, names
//! the Secret and the data key, and the next one after the window counts the
//! suppressed failures. One test per binary: it installs the process-wide subscriber.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use kube_testbed::Testbed;
use support::*;
use svc_tls::client::{TrustMode, client_config};
use svc_tls::options::SecretRef;
use svc_tls::report::ManualClock;
use svc_tls::verifier::TrustVerifier;
use test_support::logs::CapturedLogs;
use test_support::poll_until;

const NAME: &str = "warned-ca";
const WARNING: &str = "CA trust reload failed";

fn warning_lines(captured: &CapturedLogs) -> Vec<String> {
    captured
        .text()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(WARNING))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_ca_secret_warns_once_per_minute_and_keeps_the_last_good_roots() {
    let captured = CapturedLogs::global().clone();

    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let leaf = client_ca.client_leaf("svc", 9);
    tb.upsert(secret_with(
        NAME,
        "kubernetes.io/tls",
        &[("tls.crt", &server_ca.pem()), ("ca.crt", &server_ca.pem())],
    ));
    tb.upsert(tls_secret("me", &leaf.cert_pem, &leaf.key_pem));
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    let clock = ManualClock::new();
    let trust = TrustVerifier::builder(tb.client(), SecretRef::new(NS, NAME))
        .clock(Arc::new(clock.clone()))
        .build()
        .await
        .unwrap();
    let resolver =
        svc_tls::resolver::IdentityResolver::builder(tb.client(), SecretRef::new(NS, "me"))
            .build()
            .await
            .unwrap();
    let config = Arc::new(
        client_config(
            provider(),
            TrustMode::Watched(trust.clone()),
            Some(&resolver),
        )
        .unwrap(),
    );
    assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(9));

    // The CA Secret loses tls.crt.
    tb.upsert(secret_with(
        NAME,
        "kubernetes.io/tls",
        &[("ca.crt", &server_ca.pem())],
    ));
    poll_until("the cache sees the broken CA Secret", || {
        trust
            .secret_source()
            .unwrap()
            .get()
            .is_some_and(|s| s.data.as_ref().is_some_and(|d| !d.contains_key("tls.crt")))
    })
    .await;

    const N: usize = 10;
    for _ in 0..N {
        clock.advance(Duration::from_secs(3));
        assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(9));
    }
    let warnings = warning_lines(&captured);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(warnings[0].contains("suppressed=0"), "{}", warnings[0]);
    assert!(
        warnings[0].contains(&format!("{NS}/{NAME}")),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[0].contains("tls.crt"),
        "names the key: {}",
        warnings[0]
    );

    // The minute passes: the next failure is logged, with the 9 suppressed.
    clock.advance(Duration::from_secs(60));
    assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(9));
    let warnings = warning_lines(&captured);
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(
        warnings[1].contains(&format!("suppressed={}", N - 1)),
        "{}",
        warnings[1]
    );
    assert!(warnings[1].contains("stale_for_secs=90"), "{}", warnings[1]);
    let state = trust.state();
    assert_eq!((state.failures, state.stale), (N as u64 + 1, true));
}
