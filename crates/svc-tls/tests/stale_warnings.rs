//! The stale warning of both halves, the identity resolver and the trust verifier, as
//! logged through `tracing` with a controlled clock: a broken Secret gives one warning
//! for N failing handshakes within a minute, naming the Secret and the data key; after
//! the window the next failure is logged with the count of suppressed ones and the
//! stale age. Both halves run on one last-good core, so one scenario checks both.
//!
//! One test per binary: it reads the process-wide subscriber that captures the log
//! (each half filters its own warning text).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use kube_testbed::Testbed;
use rustls::ClientConfig;
use support::*;
use svc_tls::client::{TrustMode, client_config};
use svc_tls::identity::IdentityResolver;
use svc_tls::origin::SecretRef;
use svc_tls::testing::ManualClock;
use svc_tls::trust::TrustVerifier;
use test_support::logs::CapturedLogs;
use test_support::poll_until;

fn warning_lines(captured: &CapturedLogs, warning: &str) -> Vec<String> {
    captured
        .text()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(warning))
        .map(str::to_owned)
        .collect()
}

/// One half set up against its Secret, with the clock its warnings read.
struct Half {
    /// The Secret that breaks.
    name: &'static str,
    /// The data key the broken Secret lacks (named in the warning).
    key: &'static str,
    /// The warning's text.
    warning: &'static str,
    config: Arc<ClientConfig>,
    clock: ManualClock,
    /// The serial the server sees while the last good value is served.
    serial: u64,
    /// The Secret's broken version.
    broken: serde_json::Value,
    /// The cache of the Secret, read until it holds the broken version.
    cached: Box<dyn Fn() -> bool>,
    /// (failures, stale) of the half's state.
    state: Box<dyn Fn() -> (u64, bool)>,
    /// Key material that must never be logged (a line of the key's PEM body).
    secret_line: Option<String>,
    /// The half's `Debug` output, which must carry no key material.
    debug: String,
}

async fn identity_half(tb: &Testbed, server_ca: &TestCa, client_ca: &TestCa) -> Half {
    const NAME: &str = "warned-client-certificate";
    let good = client_ca.client_leaf("svc", 7);
    tb.upsert(tls_secret(NAME, &good.cert_pem, &good.key_pem));
    let clock = ManualClock::new();
    let resolver = IdentityResolver::builder(tb.client(), SecretRef::new(NS, NAME))
        .clock(Arc::new(clock.clone()))
        .build()
        .await
        .unwrap();
    let config = Arc::new(trusting(server_ca, Some(&resolver)));
    let (seen, state) = (resolver.clone(), resolver.clone());
    Half {
        name: NAME,
        key: "tls.key",
        warning: "client certificate reload failed",
        config,
        clock,
        serial: 7,
        // The Secret loses its key.
        broken: secret_with(NAME, "kubernetes.io/tls", &[("tls.crt", &good.cert_pem)]),
        cached: Box::new(move || {
            seen.secret_source()
                .unwrap()
                .get()
                .is_some_and(|s| s.data.as_ref().is_some_and(|d| !d.contains_key("tls.key")))
        }),
        state: Box::new(move || {
            let s = state.state();
            (s.failures, s.stale)
        }),
        secret_line: good.key_pem.lines().nth(1).map(str::to_owned),
        debug: format!("{resolver:?}"),
    }
}

async fn trust_half(tb: &Testbed, server_ca: &TestCa, client_ca: &TestCa) -> Half {
    const NAME: &str = "warned-ca";
    let leaf = client_ca.client_leaf("svc", 9);
    tb.upsert(secret_with(
        NAME,
        "kubernetes.io/tls",
        &[("tls.crt", &server_ca.pem()), ("ca.crt", &server_ca.pem())],
    ));
    tb.upsert(tls_secret("me", &leaf.cert_pem, &leaf.key_pem));
    let clock = ManualClock::new();
    let trust = TrustVerifier::builder(tb.client(), SecretRef::new(NS, NAME))
        .clock(Arc::new(clock.clone()))
        .build()
        .await
        .unwrap();
    let resolver = IdentityResolver::builder(tb.client(), SecretRef::new(NS, "me"))
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
    let debug = format!("{trust:?}");
    let (seen, state) = (trust.clone(), trust);
    Half {
        name: NAME,
        key: "ca.crt",
        warning: "CA trust reload failed",
        config,
        clock,
        serial: 9,
        // The CA Secret's ca.crt, the one key read when present, is broken.
        broken: secret_with(
            NAME,
            "kubernetes.io/tls",
            &[
                ("tls.crt", &server_ca.pem()),
                ("ca.crt", "not a certificate"),
            ],
        ),
        cached: Box::new(move || {
            seen.secret_source().unwrap().get().is_some_and(|s| {
                s.data
                    .as_ref()
                    .and_then(|d| d.get("ca.crt"))
                    .is_some_and(|v| v.0 == b"not a certificate")
            })
        }),
        state: Box::new(move || {
            let s = state.state();
            (s.failures, s.stale)
        }),
        secret_line: None,
        debug,
    }
}

/// N failing handshakes within a minute: one warning; a minute later: the next, with
/// the N - 1 suppressed and the stale age.
async fn warns_once_per_minute(tb: &Testbed, server: &VerifyingServer, half: Half) {
    let captured = CapturedLogs::global().clone();
    let serial = Ok(half.serial);
    assert_eq!(
        handshake_serial(half.config.clone(), server.addr).await,
        serial
    );
    tb.upsert(half.broken.clone());
    poll_until("the cache sees the broken Secret", &half.cached).await;

    const N: usize = 10;
    for _ in 0..N {
        half.clock.advance(Duration::from_secs(3));
        assert_eq!(
            handshake_serial(half.config.clone(), server.addr).await,
            serial
        );
    }
    let warnings = warning_lines(&captured, half.warning);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(warnings[0].contains("suppressed=0"), "{}", warnings[0]);
    assert!(
        warnings[0].contains(&format!("{NS}/{}", half.name)),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[0].contains(half.key),
        "names the key: {}",
        warnings[0]
    );

    // The minute passes: the next failure is logged, with the 9 suppressed.
    half.clock.advance(Duration::from_secs(60));
    assert_eq!(
        handshake_serial(half.config.clone(), server.addr).await,
        serial
    );
    let warnings = warning_lines(&captured, half.warning);
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(
        warnings[1].contains(&format!("suppressed={}", N - 1)),
        "{}",
        warnings[1]
    );
    assert!(warnings[1].contains("stale_for_secs=90"), "{}", warnings[1]);
    assert_eq!((half.state)(), (N as u64 + 1, true));

    // Nothing logged carries key material.
    let log = captured.text();
    assert!(!log.contains("PRIVATE KEY"), "{log}");
    if let Some(line) = &half.secret_line {
        assert!(!log.contains(line.as_str()), "{log}");
    }
    assert!(!half.debug.contains("PRIVATE"), "{}", half.debug);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_secret_warns_once_per_minute_with_the_suppressed_count_for_both_halves() {
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let server = VerifyingServer::start(&server_ca, &client_ca).await;

    let identity = identity_half(&tb, &server_ca, &client_ca).await;
    warns_once_per_minute(&tb, &server, identity).await;

    let trust = trust_half(&tb, &server_ca, &client_ca).await;
    warns_once_per_minute(&tb, &server, trust).await;
}
