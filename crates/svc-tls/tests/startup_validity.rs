//! Issue 17: a client certificate that is expired or not yet valid at start-up does
//! not stop the service. Construction succeeds, one ERROR names the Secret, the serial
//! and the validity period, the state and the recorder say so, peers refuse the
//! handshake, and a renewed Secret is presented on the next handshake with the state
//! back to valid. Missing and malformed Secrets still fail (tests/handshake/malformed.rs).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube_testbed::Testbed;
use support::*;
use svc_tls::identity::IdentityResolver;
use svc_tls::last_good::{OutsideValidity, ReloadRecorder};
use svc_tls::material::{CertificateValidity, Identity};
use svc_tls::origin::IdentityOrigin;
use svc_tls::origin::SecretRef;
use svc_tls::testing::ManualClock;
use test_support::logs::CapturedLogs;
use test_support::pki::Leaf;

/// The process-wide log capture (one subscriber per test binary).
fn logs() -> &'static CapturedLogs {
    CapturedLogs::global()
}

fn error_lines(name: &str) -> Vec<String> {
    logs()
        .text()
        .lines()
        .filter(|l| l.contains("ERROR") && l.contains(name))
        .map(str::to_owned)
        .collect()
}

#[derive(Debug, Default)]
struct Invalid(Mutex<Vec<(String, CertificateValidity, bool)>>);

impl ReloadRecorder<IdentityOrigin, Identity> for Invalid {
    fn outside_validity(&self, event: &OutsideValidity<'_, IdentityOrigin, Identity>) {
        self.0.lock().unwrap().push((
            event.serving.serial_hex().to_owned(),
            event.validity,
            event.reload_error.is_some(),
        ));
    }
}

async fn starts_and_recovers(
    name: &str,
    invalid: impl Fn(&TestCa) -> Leaf,
    is_expected: fn(&CertificateValidity) -> bool,
) {
    let logs = logs();
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let bad = invalid(&client_ca);
    let renewed = client_ca.client_leaf("svc", 1002);
    tb.upsert(tls_secret(name, &bad.cert_pem, &bad.key_pem));
    let server = VerifyingServer::start(&server_ca, &client_ca).await;

    let recorder = Arc::new(Invalid::default());
    let clock = ManualClock::new();
    let resolver = IdentityResolver::builder(tb.client(), SecretRef::new(NS, name))
        .settings(
            svc_tls::identity::IdentitySettings::default().sync_timeout(Duration::from_secs(10)),
        )
        .recorder(recorder.clone())
        .clock(Arc::new(clock.clone()))
        .build()
        .await
        .expect("an expired or not-yet-valid certificate does not stop start-up");
    let state = resolver.state();
    assert!(is_expected(&state.validity), "{state:?}");
    assert_eq!(state.serial_hex, format!("{:x}", bad.serial));

    // One ERROR naming the Secret, the serial and the validity period; no key material.
    let errors = error_lines(name);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    let line = &errors[0];
    for needle in [
        format!("{NS}/{name}"),
        format!("serial={:x}", bad.serial),
        "not_before=".to_owned(),
        "not_after=".to_owned(),
    ] {
        assert!(line.contains(&needle), "{needle} in {line}");
    }
    assert!(!logs.text().contains("PRIVATE KEY"));
    assert_eq!(
        recorder.0.lock().unwrap().clone(),
        vec![(format!("{:x}", bad.serial), state.validity, false)]
    );

    // Peers refuse it; the ERROR is not repeated within the period.
    let config = Arc::new(trusting(&server_ca, Some(&resolver)));
    for _ in 0..3 {
        let refused = handshake_serial(config.clone(), server.addr).await;
        assert!(refused.is_err(), "{refused:?}");
    }
    assert_eq!(error_lines(name).len(), 1, "{:#?}", error_lines(name));

    // After the period the failing reload reports it again, as an invalid identity
    // (not the generic stale warning).
    clock.advance(Duration::from_secs(60));
    assert!(handshake_serial(config.clone(), server.addr).await.is_err());
    assert_eq!(error_lines(name).len(), 2, "{:#?}", error_lines(name));
    assert_eq!(recorder.0.lock().unwrap().last().map(|e| e.2), Some(true));

    // The Secret is renewed: the next handshake presents the new leaf.
    tb.upsert(tls_secret(name, &renewed.cert_pem, &renewed.key_pem));
    poll_until("the cache sees the renewed Secret", || {
        cached_cert_is(resolver.secret_source().unwrap(), &renewed.cert_pem)
    })
    .await;
    assert_eq!(handshake_serial(config, server.addr).await, Ok(1002));
    let state = resolver.state();
    assert_eq!(state.validity, CertificateValidity::Valid);
    assert!(!state.stale);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_certificate_starts_the_service_and_recovers_on_renewal() {
    starts_and_recovers(
        "expired-client-certificate",
        |ca| ca.expired_client_leaf(0x1001),
        |v| matches!(v, CertificateValidity::Expired { .. }),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_yet_valid_certificate_starts_the_service_and_recovers_on_renewal() {
    starts_and_recovers(
        "future-client-certificate",
        |ca| ca.not_yet_valid_client_leaf(0x1003),
        |v| matches!(v, CertificateValidity::NotYetValid { .. }),
    )
    .await;
}
