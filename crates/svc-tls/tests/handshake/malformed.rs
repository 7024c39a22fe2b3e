//! Every malformed client-certificate Secret: its specific error at construction
//! (naming the Secret), and at handshake time the last good identity plus one
//! rate-limited warning. An expired certificate is the exception at construction: it
//! starts the service (issue 17; see tests/startup_validity.rs).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube_testbed::Testbed;
use support::*;
use svc_tls::identity::{IdentityError, IdentityReloadError, IdentityResolver};
use svc_tls::last_good::{self, StaleWarning};
use svc_tls::material::{CertificateValidity, Identity, MaterialError, MaterialErrorKind};
use svc_tls::origin::IdentityOrigin;
use svc_tls::origin::SecretRef;
use svc_tls::testing::ManualClock;

const NAME: &str = "malformed-client-certificate";

/// A malformed Secret and the check on its error.
struct Case {
    what: &'static str,
    secret: serde_json::Value,
    expect: fn(&MaterialError) -> bool,
}

fn cases(ca: &TestCa) -> Vec<Case> {
    let leaf = ca.client_leaf("svc", 900);
    let other = ca.client_leaf("svc", 901);
    let expired = ca.expired_client_leaf(902);
    let encrypted = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n";
    vec![
        Case {
            what: "wrong type",
            secret: secret_with(
                NAME,
                "Opaque",
                &[("tls.crt", &leaf.cert_pem), ("tls.key", &leaf.key_pem)],
            ),
            expect: |e| matches!(e.kind(), MaterialErrorKind::WrongType { found: Some(t), .. } if t == "Opaque"),
        },
        Case {
            what: "missing tls.key",
            secret: secret_with(NAME, "kubernetes.io/tls", &[("tls.crt", &leaf.cert_pem)]),
            expect: |e| {
                matches!(
                    (e.kind(), e.data_key()),
                    (MaterialErrorKind::MissingKey, Some("tls.key"))
                )
            },
        },
        Case {
            what: "missing tls.crt",
            secret: secret_with(NAME, "kubernetes.io/tls", &[("tls.key", &leaf.key_pem)]),
            expect: |e| {
                matches!(
                    (e.kind(), e.data_key()),
                    (MaterialErrorKind::MissingKey, Some("tls.crt"))
                )
            },
        },
        Case {
            what: "empty tls.crt",
            secret: tls_secret(NAME, "", &leaf.key_pem),
            expect: |e| {
                matches!(
                    (e.kind(), e.data_key()),
                    (MaterialErrorKind::EmptyKey, Some("tls.crt"))
                )
            },
        },
        Case {
            what: "tls.crt not PEM",
            secret: tls_secret(NAME, "this is not PEM at all", &leaf.key_pem),
            expect: |e| {
                matches!(
                    (e.kind(), e.data_key()),
                    (MaterialErrorKind::NotPem { .. }, Some("tls.crt"))
                        | (MaterialErrorKind::NoCertificate, Some("tls.crt"))
                )
            },
        },
        Case {
            what: "tls.crt holds a key, no certificate",
            secret: tls_secret(NAME, &leaf.key_pem, &leaf.key_pem),
            expect: |e| {
                matches!(
                    (e.kind(), e.data_key()),
                    (MaterialErrorKind::NoCertificate, Some("tls.crt"))
                )
            },
        },
        Case {
            what: "tls.key holds a certificate, no key",
            secret: tls_secret(NAME, &leaf.cert_pem, &leaf.cert_pem),
            expect: |e| {
                matches!(
                    (e.kind(), e.data_key()),
                    (MaterialErrorKind::NoPrivateKey, Some("tls.key"))
                )
            },
        },
        Case {
            what: "encrypted key",
            secret: tls_secret(NAME, &leaf.cert_pem, encrypted),
            expect: |e| {
                matches!(
                    (e.kind(), e.data_key()),
                    (MaterialErrorKind::EncryptedKey, Some("tls.key"))
                )
            },
        },
        Case {
            what: "key of another certificate",
            secret: tls_secret(NAME, &leaf.cert_pem, &other.key_pem),
            expect: |e| matches!(e.kind(), MaterialErrorKind::KeyMismatch { .. }),
        },
        Case {
            what: "expired certificate",
            secret: tls_secret(NAME, &expired.cert_pem, &expired.key_pem),
            expect: |e| matches!(e.kind(), MaterialErrorKind::CertificateExpired { .. }),
        },
    ]
}

fn secret_ref() -> SecretRef {
    SecretRef::new(NS, NAME)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_malformed_secret_fails_construction_with_its_error() {
    let tb = Testbed::start().await;
    let ca = TestCa::new("clients");
    for case in cases(&ca) {
        // The type of a Secret is immutable: replace it whole.
        tb.delete("v1", "Secret", NS, NAME);
        tb.upsert(case.secret.clone());
        let built = IdentityResolver::builder(tb.client(), secret_ref())
            .settings(
                svc_tls::identity::IdentitySettings::default()
                    .sync_timeout(Duration::from_secs(10)),
            )
            .build()
            .await;
        if case.what == "expired certificate" {
            // Starts, and says so in its state (issue 17).
            let resolver = built.expect(case.what);
            assert!(
                matches!(
                    resolver.state().validity,
                    CertificateValidity::Expired { .. }
                ),
                "{:?}",
                resolver.state()
            );
            continue;
        }
        let err = built.expect_err(case.what);
        let IdentityError::Unusable(IdentityReloadError::Material(material)) = &err else {
            panic!("{}: expected a material error, got {err:?}", case.what);
        };
        assert!((case.expect)(material), "{}: got {material:?}", case.what);
        assert_eq!(material.secret(), Some(&secret_ref()), "{}", case.what);
        assert_eq!(err.to_string(), "client certificate", "{}", case.what);
        let text = svc_tls::excerpt::chain(&err);
        assert!(
            text.starts_with("client certificate: ") && text.contains(&format!("{NS}/{NAME}")),
            "{}: {text}",
            case.what
        );
        assert!(!text.contains("PRIVATE KEY-----"), "{}: {text}", case.what);
    }
}

#[derive(Debug, Default)]
struct Warnings {
    seen: Mutex<Vec<String>>,
    failures: AtomicU64,
}

impl last_good::ReloadRecorder<IdentityOrigin, Identity> for Warnings {
    fn reload_failed(&self, _: &IdentityOrigin, _: &IdentityReloadError, n: u64) {
        self.failures.store(n, Ordering::SeqCst);
    }
    fn stale_warning(&self, w: &StaleWarning<'_, IdentityOrigin, Identity>) {
        self.seen
            .lock()
            .unwrap()
            .push(svc_tls::excerpt::chain(w.error));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_malformed_secret_at_handshake_time_serves_last_good_and_warns_once() {
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let good = client_ca.client_leaf("svc", 800);
    tb.upsert(tls_secret(NAME, &good.cert_pem, &good.key_pem));
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    let clock = ManualClock::new();
    let warnings = Arc::new(Warnings::default());
    let resolver = IdentityResolver::builder(tb.client(), secret_ref())
        .clock(Arc::new(clock.clone()))
        .recorder(warnings.clone())
        .build()
        .await
        .unwrap();
    let config = Arc::new(trusting(&server_ca, Some(&resolver)));

    let cases = cases(&client_ca);
    for (i, case) in cases.iter().enumerate() {
        let rv_before = tb.resource_version();
        // The type of a Secret is immutable: replace it whole.
        tb.delete("v1", "Secret", NS, NAME);
        tb.upsert(case.secret.clone());
        poll_until(case.what, || {
            resolver.secret_source().unwrap().get().is_some_and(|s| {
                s.metadata
                    .resource_version
                    .as_deref()
                    .and_then(|rv| rv.parse::<u64>().ok())
                    .is_some_and(|rv| rv > rv_before)
            })
        })
        .await;
        // A new window for each case: three failing handshakes, one warning.
        clock.advance(Duration::from_secs(61));
        for _ in 0..3 {
            assert_eq!(
                handshake_serial(config.clone(), server.addr).await,
                Ok(800),
                "{}: the last good identity is presented",
                case.what
            );
        }
        let seen = warnings.seen.lock().unwrap().clone();
        assert_eq!(
            seen.len(),
            i + 1,
            "{}: one warning per window: {seen:#?}",
            case.what
        );
        assert!(
            seen[i].contains(&format!("{NS}/{NAME}")),
            "{}: {}",
            case.what,
            seen[i]
        );
    }
    assert_eq!(
        warnings.failures.load(Ordering::SeqCst),
        3 * cases.len() as u64
    );
}
