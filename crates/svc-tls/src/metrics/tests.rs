//! The text exposition of each family: names, types, units, labels; a reason label
//! never carries input text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use test_support::pki::TestCa;

use super::*;
use crate::identity::IdentityResolver;
use crate::identity::{IdentityReloadError, IdentitySource};
use crate::last_good::ReloadRecorder as _;
use crate::material::{CertificateValidity, Identity, crypto_provider, load_identity_from_pem};
use crate::origin::SecretRef;
use crate::origin::{IdentityOrigin, TrustOrigin};
use crate::watch::WatchedObjects;

fn text(registry: &Registry) -> String {
    let mut text = String::new();
    encode(&mut text, registry).unwrap();
    text
}

/// The lines of `text` that are samples of `name` (with labels).
fn samples<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .collect()
}

fn secret() -> SecretRef {
    SecretRef::new("platform", "billing-client-certificate")
}

/// An identity source whose answer the test sets.
#[derive(Debug)]
struct Settable {
    origin: IdentityOrigin,
    answer: Mutex<Result<Identity, ()>>,
}

impl IdentitySource for Settable {
    fn origin(&self) -> &IdentityOrigin {
        &self.origin
    }
    fn current(&self) -> Result<Identity, IdentityReloadError> {
        match &*self.answer.lock().unwrap() {
            Ok(identity) => Ok(identity.clone()),
            Err(()) => Err(IdentityReloadError::NotFound { secret: secret() }),
        }
    }
}

fn identity(ca: &TestCa, serial: u64) -> Identity {
    let leaf = ca.client_leaf("platform client", serial);
    load_identity_from_pem(
        &secret(),
        leaf.cert_pem.as_bytes(),
        leaf.key_pem.as_bytes(),
        &crypto_provider(),
    )
    .unwrap()
}

#[test]
fn identity_families_have_their_names_types_units_and_labels() {
    let mut registry = Registry::default();
    let metrics = Metrics::new(&mut registry);
    let ca = TestCa::new("clients");
    let first = identity(&ca, 7);
    let source = Arc::new(Settable {
        origin: IdentityOrigin::Secret(secret()),
        answer: Mutex::new(Ok(first.clone())),
    });
    let recorder = metrics.identity_recorder(source.origin(), None, None);
    let resolver = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(
            IdentityResolver::source_builder(source.clone())
                .recorder(recorder)
                .build(),
        )
        .unwrap();
    metrics.track_identity(&resolver, None);
    let labels = r#"source="secret",name="platform/billing-client-certificate",cluster="""#;

    let fresh = text(&registry);
    for (name, kind, unit) in [
        (
            "svc_tls_identity_cert_expiration_timestamp_seconds",
            "gauge",
            Some("seconds"),
        ),
        (
            "svc_tls_identity_cert_not_before_timestamp_seconds",
            "gauge",
            Some("seconds"),
        ),
        (
            "svc_tls_identity_cert_refresh_timestamp_seconds",
            "gauge",
            Some("seconds"),
        ),
        ("svc_tls_identity_stale_seconds", "gauge", Some("seconds")),
        ("svc_tls_identity_state", "gauge", None),
        ("svc_tls_identity_cert_refreshes", "counter", None),
        ("svc_tls_identity_warnings_suppressed", "counter", None),
        ("svc_tls_identity_probe_read_failures", "counter", None),
    ] {
        assert!(
            fresh.contains(&format!("# TYPE {name} {kind}\n")),
            "{name}:\n{fresh}"
        );
        if let Some(unit) = unit {
            assert!(
                fresh.contains(&format!("# UNIT {name} {unit}\n")),
                "{name}:\n{fresh}"
            );
        }
    }
    let not_after = first
        .not_after()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert_eq!(
        samples(&fresh, "svc_tls_identity_cert_expiration_timestamp_seconds"),
        [format!(
            "svc_tls_identity_cert_expiration_timestamp_seconds{{{labels}}} {not_after}"
        )]
    );
    assert!(
        fresh.contains(&format!(
            "svc_tls_identity_cert_refreshes_total{{{labels},result=\"ok\"}} 1\n"
        )),
        "{fresh}"
    );
    assert!(fresh.contains(&format!(
        "svc_tls_identity_state{{{labels},state=\"fresh\"}} 1\n"
    )));
    assert!(fresh.contains(&format!(
        "svc_tls_identity_state{{{labels},state=\"stale\"}} 0\n"
    )));
    assert!(fresh.contains(&format!("svc_tls_identity_stale_seconds{{{labels}}} 0\n")));

    // The Secret is gone: each handshake's failure is counted, the state is stale.
    *source.answer.lock().unwrap() = Err(());
    resolver.reload();
    resolver.reload();
    let stale = text(&registry);
    assert!(
        stale.contains(&format!(
            "svc_tls_identity_cert_refreshes_total{{{labels},result=\"not_found\"}} 2\n"
        )),
        "{stale}"
    );
    assert!(stale.contains(&format!(
        "svc_tls_identity_state{{{labels},state=\"stale\"}} 1\n"
    )));
    assert!(stale.contains(&format!(
        "svc_tls_identity_state{{{labels},state=\"fresh\"}} 0\n"
    )));

    // The readiness probe's reads: counted apart, by the same reason, with no `ok`
    // series; the reload counter does not move.
    for _ in 0..3 {
        let _ = resolver.reload_reporting(crate::last_good::slot::ReadBy::Probe);
    }
    let probed = text(&registry);
    assert_eq!(
        samples(&probed, "svc_tls_identity_probe_read_failures_total")
            .iter()
            .filter(|line| !line.ends_with(" 0"))
            .map(|line| line.to_string())
            .collect::<Vec<_>>(),
        [format!(
            "svc_tls_identity_probe_read_failures_total{{{labels},result=\"not_found\"}} 3"
        )],
        "{probed}"
    );
    assert!(
        !probed.contains("svc_tls_identity_probe_read_failures_total{source=\"secret\",name=\"platform/billing-client-certificate\",cluster=\"\",result=\"ok\"}"),
        "{probed}"
    );
    assert!(
        probed.contains(&format!(
            "svc_tls_identity_cert_refreshes_total{{{labels},result=\"not_found\"}} 2\n"
        )),
        "{probed}"
    );
    assert_eq!(
        resolver.state().failures,
        2,
        "probes are not reload failures"
    );

    // A rotation: a new expiry, one more ok.
    let second = identity(&ca, 8);
    *source.answer.lock().unwrap() = Ok(second);
    resolver.reload();
    let rotated = text(&registry);
    assert!(rotated.contains(&format!(
        "svc_tls_identity_cert_refreshes_total{{{labels},result=\"ok\"}} 2\n"
    )));
    assert!(rotated.contains(&format!(
        "svc_tls_identity_state{{{labels},state=\"fresh\"}} 1\n"
    )));
}

#[test]
fn trust_and_watch_families_have_their_names_types_and_labels() {
    let mut registry = Registry::default();
    let metrics = Metrics::new(&mut registry);
    let origin = TrustOrigin::SpiffeBundle {
        trust_domain: "example.org".to_owned(),
    };
    let recorder = metrics.trust_recorder(&origin, None);
    recorder.reload_failed(
        &origin,
        &crate::trust::TrustReloadError::Withdrawn("de-federated".into()),
        1,
    );
    let text = text(&registry);
    assert!(
        text.contains(r#"svc_tls_trust_reloads_total{source="spiffe",name="spiffe://example.org",cluster="",result="withdrawn"} 1"#),
        "{text}"
    );
    assert!(text.contains("# TYPE svc_tls_trust_reloads counter\n"));
    for (name, kind) in [
        ("svc_tls_trust_roots_expiration_timestamp_seconds", "gauge"),
        ("svc_tls_trust_roots", "gauge"),
        ("svc_tls_trust_last_change_timestamp_seconds", "gauge"),
        ("svc_tls_trust_stale", "gauge"),
        ("svc_tls_trust_source_healthy", "gauge"),
        ("svc_tls_secret_watch_healthy", "gauge"),
        ("svc_tls_secret_watch_errors", "counter"),
        ("svc_tls_secret_watch_relists", "counter"),
    ] {
        assert!(
            text.contains(&format!("# TYPE {name} {kind}\n")),
            "{name}:\n{text}"
        );
    }
}

#[test]
fn a_result_label_never_carries_input_text() {
    let mut registry = Registry::default();
    let metrics = Metrics::new(&mut registry);
    let origin = IdentityOrigin::Secret(secret());
    let recorder = metrics.identity_recorder(&origin, None, None);
    let attacker = "evil\"} 1\nsvc_tls_pwned 1 attacker-text";
    // Errors whose causes are the attacker's text, as the half carries them.
    let unavailable = IdentityReloadError::Unavailable(attacker.into());
    recorder.reload_failed(&origin, &unavailable, 1);
    let expired = IdentityReloadError::OutsideValidity {
        validity: CertificateValidity::Expired {
            not_after: UNIX_EPOCH,
        },
        source: attacker.into(),
    };
    recorder.reload_failed(&origin, &expired, 2);
    let text = text(&registry);
    assert!(!text.contains("evil"), "{text}");
    assert!(!text.contains("attacker"), "{text}");
    assert!(!text.contains("pwned"), "{text}");
    assert!(text.contains(r#"result="expired"} 1"#), "{text}");
    assert!(text.contains(r#"result="unavailable"} 1"#), "{text}");
    for line in samples(&text, "svc_tls_identity_cert_refreshes_total") {
        let result = line
            .split("result=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert!(identity::REFRESH_RESULTS.contains(&result), "{line}");
    }
}

#[test]
fn timestamps_are_unix_seconds() {
    // The unix conversion the gauges use.
    assert_eq!(
        install::unix_seconds(UNIX_EPOCH + Duration::from_secs(42)),
        42
    );
    assert_eq!(
        install::unix_seconds(UNIX_EPOCH - Duration::from_secs(3)),
        -3
    );
    assert!(install::unix_seconds(SystemTime::now()) > 1_700_000_000);
}

#[test]
fn metrics_are_installed_once_per_registry_of_watched_secrets() {
    let mut registry = Registry::default();
    let watches = Metrics::new_watches(&mut registry);
    let other = Metrics::new(&mut Registry::default());
    assert_eq!(other.install(&watches), Err(InstallError::AlreadyInstalled));
    assert!(Metrics::installed_in(&watches).is_some());
    assert!(Metrics::installed_in(&WatchedObjects::new()).is_none());
}

#[test]
fn an_svid_outside_its_validity_counts_as_expired_or_not_yet_valid() {
    use crate::spiffe::{SpiffeError, svid::check_validity};
    let ca = TestCa::new("spiffe");
    // Loaded at a time inside their validity (2099-06, 2020-07), checked now.
    let refused = |leaf: test_support::pki::Leaf, loaded_at: u64| {
        let identity = crate::material::load_identity_from_pem_at(
            &secret(),
            leaf.cert_pem.as_bytes(),
            leaf.key_pem.as_bytes(),
            &crypto_provider(),
            UNIX_EPOCH + Duration::from_secs(loaded_at),
        )
        .unwrap();
        let now = SystemTime::now();
        let svid = check_validity(&identity, now).unwrap_err();
        IdentityReloadError::OutsideValidity {
            validity: CertificateValidity::of(&identity, now),
            source: Box::new(SpiffeError::Svid(svid)),
        }
    };
    assert_eq!(
        <IdentityOrigin as CountedSource>::failure_result(&refused(
            ca.not_yet_valid_client_leaf(1),
            4_084_000_000
        )),
        "not_yet_valid"
    );
    assert_eq!(
        <IdentityOrigin as CountedSource>::failure_result(&refused(
            ca.expired_client_leaf(2),
            1_595_000_000
        )),
        "expired"
    );
}

/// A CA Secret broken, then deleted, behind a verifier recording into the metrics:
/// the verifier hands its recorder the source's own error, and the counter classifies
/// it (`malformed`, then `not_found`), not `other`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifiers_failures_are_counted_by_their_reason() {
    use rustls::client::danger::ServerCertVerifier as _;
    use rustls_pki_types::pem::PemObject as _;

    let tb = kube_testbed::Testbed::start().await;
    let ca = test_support::pki::TestCa::new("metrics CA");
    let ca_secret = |crt: &str| {
        test_support::secret::secret_with(
            "unikorn",
            "ca",
            "kubernetes.io/tls",
            &[("tls.crt", crt), ("ca.crt", crt)],
        )
    };
    tb.upsert(ca_secret(&ca.pem()));
    let mut registry = Registry::default();
    let metrics = Metrics::new(&mut registry);
    let secret = SecretRef::new("unikorn", "ca");
    let origin = TrustOrigin::Secret(secret.clone());
    let verifier = crate::trust::TrustVerifier::builder(tb.client(), secret)
        .recorder(metrics.trust_recorder(&origin, None))
        .build()
        .await
        .unwrap();
    let leaf = ca.server_leaf();
    let der = rustls_pki_types::CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let handshake =
        || verifier.verify_server_cert(&der, &[], &name, &[], rustls_pki_types::UnixTime::now());
    handshake().unwrap();
    let count = |result: &str| {
        samples(&text(&registry), "svc_tls_trust_reloads_total")
            .into_iter()
            .find(|line| line.contains(&format!("result=\"{result}\"")))
            .and_then(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };

    tb.upsert(ca_secret("not a certificate"));
    test_support::poll_until("the broken Secret is read", || {
        let _ = handshake();
        count("malformed") > 0
    })
    .await;
    assert_eq!(count("other"), 0, "a malformed CA Secret counted as other");

    tb.delete("v1", "Secret", Some("unikorn"), "ca");
    test_support::poll_until("the deletion is read", || {
        let _ = handshake();
        count("not_found") > 0
    })
    .await;
    assert_eq!(count("other"), 0);
}

/// Through a real source: a mounted directory whose certificate is not yet valid, then
/// expired. The file source's error says which (it was counted `expired` for both while
/// the recorder downcast to the SPIFFE error only).
#[test]
fn a_mounted_certificate_outside_its_validity_counts_by_its_own_reason() {
    use crate::files::{FileLayout, MountedFiles};
    use crate::identity::FileIdentitySource;
    let ca = TestCa::new("files");
    for (leaf, result) in [
        (ca.not_yet_valid_client_leaf(1), "not_yet_valid"),
        (ca.expired_client_leaf(2), "expired"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tls.crt"), &leaf.cert_pem).unwrap();
        std::fs::write(dir.path().join("tls.key"), &leaf.key_pem).unwrap();
        let files = MountedFiles::open(dir.path(), FileLayout::KubernetesTls).unwrap();
        let error = FileIdentitySource::new(files).current().unwrap_err();
        assert!(
            matches!(error, IdentityReloadError::OutsideValidity { .. }),
            "{error:?}"
        );
        assert_eq!(
            <IdentityOrigin as CountedSource>::failure_result(&error),
            result
        );
    }
}
