//! The readiness probe's reads counted apart from handshakes' (issue #40): with a
//! broken Secret behind each half (the identity resolver, the trust verifier), each
//! recording into svc-tls's Prometheus metrics, probes of `/readyz` read the Secret
//! (the value is marked stale and the check is not ready) but move only
//! `svc_tls_{identity,trust}_probe_read_failures_total`: not the reload counters, not
//! the half's failure count, and no stale WARN. A real handshake afterwards still
//! counts and warns as before. The counters are read in the registry's text and
//! through a real Prometheus scrape.
//!
//! One test per binary: it reads the process-wide subscriber that captures the log.
#![cfg(feature = "metrics")]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::sync::Arc;

use kube_testbed::Testbed;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use rustls::ClientConfig;
use support::*;
use svc_tls::client::{TrustMode, client_config};
use svc_tls::identity::IdentityResolver;
use svc_tls::metrics::Metrics;
use svc_tls::origin::SecretRef;
use svc_tls::readiness::Readiness;
use svc_tls::trust::TrustVerifier;
use svc_tls::{IdentityOrigin, TrustOrigin};
use test_support::logs::CapturedLogs;
use test_support::poll_until;
use test_support::prometheus::{Prometheus, serve_metrics};

/// How many probes each half takes while its Secret is broken.
const PROBES: u64 = 5;

/// One half set up against its Secret, recording into the test's metrics.
struct Half {
    /// The Secret that breaks (`namespace/name`: the `name` label).
    name: String,
    /// The reload counter's family and the probe counter's family.
    reloads: &'static str,
    probes: &'static str,
    /// The half's stale warning text.
    warning: &'static str,
    readiness: Readiness,
    config: Arc<ClientConfig>,
    serial: u64,
    broken: serde_json::Value,
    /// The cache holds the broken version.
    cached: Box<dyn Fn() -> bool>,
    /// (failures, stale) of the half's state.
    state: Box<dyn Fn() -> (u64, bool)>,
}

async fn identity_half(tb: &Testbed, metrics: &Metrics, server_ca: &TestCa, ca: &TestCa) -> Half {
    const NAME: &str = "probed-client-certificate";
    let good = ca.client_leaf("svc", 17);
    tb.upsert(tls_secret(NAME, &good.cert_pem, &good.key_pem));
    let secret = SecretRef::new(NS, NAME);
    let origin = IdentityOrigin::Secret(secret.clone());
    let resolver = IdentityResolver::builder(tb.client(), secret)
        .recorder(metrics.identity_recorder(&origin, None, None))
        .build()
        .await
        .unwrap();
    let readiness = Readiness::new();
    readiness.identity("identity", &resolver);
    let config = Arc::new(trusting(server_ca, Some(&resolver)));
    let (seen, state) = (resolver.clone(), resolver);
    Half {
        name: format!("{NS}/{NAME}"),
        reloads: "svc_tls_identity_cert_refreshes_total",
        probes: "svc_tls_identity_probe_read_failures_total",
        warning: "client certificate reload failed",
        readiness,
        config,
        serial: 17,
        // The Secret loses its key: `malformed`.
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
    }
}

async fn trust_half(tb: &Testbed, metrics: &Metrics, server_ca: &TestCa, ca: &TestCa) -> Half {
    const NAME: &str = "probed-ca";
    let leaf = ca.client_leaf("svc", 19);
    tb.upsert(secret_with(
        NAME,
        "kubernetes.io/tls",
        &[("tls.crt", &server_ca.pem()), ("ca.crt", &server_ca.pem())],
    ));
    tb.upsert(tls_secret("probed-me", &leaf.cert_pem, &leaf.key_pem));
    let secret = SecretRef::new(NS, NAME);
    let origin = TrustOrigin::Secret(secret.clone());
    let trust = TrustVerifier::builder(tb.client(), secret)
        .recorder(metrics.trust_recorder(&origin, None))
        .build()
        .await
        .unwrap();
    let resolver = IdentityResolver::builder(tb.client(), SecretRef::new(NS, "probed-me"))
        .build()
        .await
        .unwrap();
    let readiness = Readiness::new();
    readiness.trust("trust", &trust);
    let config = Arc::new(
        client_config(
            provider(),
            TrustMode::Watched(trust.clone()),
            Some(&resolver),
        )
        .unwrap(),
    );
    let (seen, state) = (trust.clone(), trust);
    Half {
        name: format!("{NS}/{NAME}"),
        reloads: "svc_tls_trust_reloads_total",
        probes: "svc_tls_trust_probe_read_failures_total",
        warning: "CA trust reload failed",
        readiness,
        config,
        serial: 19,
        // The CA Secret's ca.crt, the one key read when present, is broken: `malformed`.
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
    }
}

fn render(registry: &Registry) -> String {
    let mut text = String::new();
    encode(&mut text, registry).unwrap();
    text
}

/// The value of `family{name="<name>",result="<result>"}` in `text` (0 when absent).
fn count(text: &str, family: &str, name: &str, result: &str) -> u64 {
    text.lines()
        .filter(|line| line.starts_with(&format!("{family}{{")))
        .filter(|line| line.contains(&format!("name=\"{name}\"")))
        .find(|line| line.contains(&format!("result=\"{result}\"")))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

fn warnings(captured: &CapturedLogs, half: &Half) -> usize {
    captured
        .text()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(half.warning) && l.contains(&half.name))
        .count()
}

/// Probes of the broken Secret, then one handshake: what each moves.
async fn probes_then_a_handshake(
    tb: &Testbed,
    registry: &Registry,
    server: &VerifyingServer,
    half: &Half,
) {
    let captured = CapturedLogs::global();
    assert_eq!(
        handshake_serial(half.config.clone(), server.addr).await,
        Ok(half.serial)
    );
    assert!(half.readiness.report().is_ready());
    tb.upsert(half.broken.clone());
    poll_until("the cache sees the broken Secret", &half.cached).await;

    for _ in 0..PROBES {
        let report = half.readiness.report();
        assert!(!report.is_ready(), "a broken Secret is seen by the probe");
        assert!(report.to_string().contains(&half.name), "{report}");
    }
    let text = render(registry);
    assert_eq!(
        count(&text, half.probes, &half.name, "malformed"),
        PROBES,
        "each probe's failed read counted, by its reason:\n{text}"
    );
    assert_eq!(
        count(&text, half.reloads, &half.name, "malformed"),
        0,
        "no probe counted as a reload failure:\n{text}"
    );
    assert_eq!(
        (half.state)(),
        (0, true),
        "stale, but no reload failure counted"
    );
    assert_eq!(warnings(captured, half), 0, "no probe warned");

    // A handshake's read still counts and warns as before.
    assert_eq!(
        handshake_serial(half.config.clone(), server.addr).await,
        Ok(half.serial),
        "the last good value is served"
    );
    let text = render(registry);
    assert_eq!(count(&text, half.reloads, &half.name, "malformed"), 1);
    assert_eq!(count(&text, half.probes, &half.name, "malformed"), PROBES);
    assert_eq!((half.state)(), (1, true));
    assert_eq!(warnings(captured, half), 1, "the handshake warned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probes_failed_read_is_counted_apart_from_handshakes_for_both_halves() {
    let tb = Testbed::start().await;
    let mut registry = Registry::default();
    let metrics = Metrics::new(&mut registry);
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let server = VerifyingServer::start(&server_ca, &client_ca).await;

    let identity = identity_half(&tb, &metrics, &server_ca, &client_ca).await;
    probes_then_a_handshake(&tb, &registry, &server, &identity).await;
    let trust = trust_half(&tb, &metrics, &server_ca, &client_ca).await;
    probes_then_a_handshake(&tb, &registry, &server, &trust).await;

    // The same through a real Prometheus scrape.
    let registry = Arc::new(registry);
    let port = {
        let registry = registry.clone();
        serve_metrics(move || render(&registry)).await
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(prometheus) = Prometheus::scraping(dir.path(), port) else {
        return;
    };
    for half in [&identity, &trust] {
        let probes = prometheus
            .wait_for(
                &format!(
                    "{}{{name=\"{}\",result=\"malformed\"}}",
                    half.probes, half.name
                ),
                "the probe counter scraped",
                |samples| samples.len() == 1,
            )
            .await;
        assert_eq!(probes[0].value, PROBES as f64, "{}", half.probes);
        let reloads = prometheus
            .query(&format!(
                "{}{{name=\"{}\",result=\"malformed\"}}",
                half.reloads, half.name
            ))
            .await;
        assert_eq!(reloads.len(), 1, "{}", half.reloads);
        assert_eq!(reloads[0].value, 1.0, "{}", half.reloads);
    }
}
