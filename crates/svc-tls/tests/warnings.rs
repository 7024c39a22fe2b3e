//! The stale-identity warning as logged through `tracing`, with a controlled clock: N
//! failing handshakes within a minute give exactly one warning; after the window the
//! next failure is logged with the count of suppressed ones. One test per binary: it
//! installs the process-wide subscriber that captures the log.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use kube_testbed::Testbed;
use support::*;
use svc_tls::options::SecretRef;
use svc_tls::report::ManualClock;
use svc_tls::resolver::IdentityResolver;
use test_support::logs::CapturedLogs;

const NAME: &str = "warned-client-certificate";
const WARNING: &str = "client certificate reload failed";

fn warning_lines(captured: &CapturedLogs) -> Vec<String> {
    captured
        .text()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(WARNING))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_handshakes_warn_once_per_minute_with_suppressed_count() {
    let captured = CapturedLogs::global().clone();

    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let good = client_ca.client_leaf("svc", 7);
    tb.upsert(tls_secret(NAME, &good.cert_pem, &good.key_pem));
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    let clock = ManualClock::new();
    let resolver = IdentityResolver::builder(tb.client(), SecretRef::new(NS, NAME))
        .clock(Arc::new(clock.clone()))
        .build()
        .await
        .unwrap();
    let config = Arc::new(trusting(&server_ca, Some(&resolver)));

    // The Secret loses its key.
    tb.upsert(secret_with(
        NAME,
        "kubernetes.io/tls",
        &[("tls.crt", &good.cert_pem)],
    ));
    poll_until("the cache sees the broken Secret", || {
        resolver
            .secret_source()
            .unwrap()
            .get()
            .is_some_and(|s| s.data.as_ref().is_some_and(|d| !d.contains_key("tls.key")))
    })
    .await;

    const N: usize = 10;
    for _ in 0..N {
        clock.advance(Duration::from_secs(3));
        assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(7));
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
        warnings[0].contains("tls.key"),
        "names the missing key: {}",
        warnings[0]
    );

    // The minute passes: the next failure is logged, with the 9 suppressed.
    clock.advance(Duration::from_secs(60));
    assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(7));
    let warnings = warning_lines(&captured);
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(
        warnings[1].contains(&format!("suppressed={}", N - 1)),
        "{}",
        warnings[1]
    );
    assert!(warnings[1].contains("stale_for_secs=90"), "{}", warnings[1]);

    // Nothing logged carries key material.
    let log = captured.text();
    assert!(!log.contains("PRIVATE KEY"), "{log}");
    let key_body: String = good.key_pem.lines().nth(1).unwrap().to_string();
    assert!(!log.contains(&key_body), "{log}");
    assert!(!format!("{resolver:?}").contains("PRIVATE"));
}
