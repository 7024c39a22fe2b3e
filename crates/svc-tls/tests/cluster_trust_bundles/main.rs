//! Trust from ClusterTrustBundles (issue 51): the `spec.trustBundle`s of a signer's
//! bundles (and a label selector), watched as one set through the registry, verify
//! server chains in real TLS 1.3 handshakes and callers of the serving half. The
//! bodies that read bundles through an API server are in `both.rs` and run against
//! kube-testbed and the real kube-apiserver (v1.37: `certificates.k8s.io/v1`, served
//! by default) alike; the ones here need only the flags, or the emulator's counters
//! and faults.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../support/mod.rs"]
mod support;

mod both;

use std::sync::Arc;
use std::time::Duration;

use kube_testbed::{Fault, Rule, Testbed};
use rustls::ClientConfig;
use support::*;
use svc_tls::client::{TrustMode, client_config};
use svc_tls::options::{ClientIdentityOptions, OptionsError, PeerCa, PeerOptions};
use svc_tls::origin::{BundleSelectionError, ClusterTrustBundlesRef};
use svc_tls::trust::TrustVerifier;
use svc_tls::watch::WatchedObjects;

const TIMEOUT: Duration = Duration::from_secs(10);

/// A signer name of its own (the real server is shared by the binary's tests, and
/// bundles are cluster-scoped).
fn signer() -> String {
    format!("t{:08x}.example.com/platform", fastrand::u32(..))
}

/// A ClusterTrustBundle of `signer` named `<signer as a prefix>:<suffix>` (the API
/// server requires a signer's bundles to be so named), with `labels`.
fn bundle(signer: &str, suffix: &str, pem: &str, labels: &[(&str, &str)]) -> serde_json::Value {
    let labels: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
        .collect();
    let mut object = serde_json::json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "ClusterTrustBundle",
        "metadata": {"name": bundle_name(signer, suffix)},
        "spec": {"signerName": signer, "trustBundle": pem},
    });
    if !labels.is_empty() {
        object["metadata"]["labels"] = serde_json::Value::Object(labels);
    }
    object
}

fn bundle_name(signer: &str, suffix: &str) -> String {
    format!("{}:{suffix}", signer.replace('/', ":"))
}

/// A TLS 1.3 server (no client certificate asked) whose certificate is issued by `ca`.
async fn server(ca: &TestCa) -> VerifyingServer {
    VerifyingServer::builder(ca, ca)
        .no_client_auth()
        .start()
        .await
}

fn watched(verifier: &TrustVerifier) -> Arc<ClientConfig> {
    Arc::new(client_config(provider(), TrustMode::Watched(verifier.clone()), None).unwrap())
}

/// One new TLS connection and one request: `Ok` when the server was trusted.
async fn call(config: Arc<ClientConfig>, server: &VerifyingServer) -> Result<(), String> {
    let reply = test_support::tls_server::request(config, server.addr).await?;
    if reply.status == 200 {
        Ok(())
    } else {
        Err(format!("unexpected response {reply:?}"))
    }
}

/// Whether the verifier's set, read as one, holds exactly these CAs' PEM.
fn cached_bundle_holds(verifier: &TrustVerifier, cas: &[&TestCa]) -> bool {
    let Some(combined) = verifier.cluster_trust_bundles_source().unwrap().get() else {
        return cas.is_empty();
    };
    let pem = &combined.spec.trust_bundle;
    let count = pem.matches("BEGIN CERTIFICATE").count();
    count == cas.len() && cas.iter().all(|ca| pem.contains(ca.pem().trim_end()))
}

fn command() -> clap::Command {
    let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
    ClientIdentityOptions::augment(cmd, None)
}

fn parse(args: &[&str]) -> Result<PeerOptions, OptionsError> {
    let m = command()
        .try_get_matches_from(std::iter::once("svc").chain(args.iter().copied()))
        .unwrap();
    PeerOptions::from_matches(&m, "identity")
}

#[test]
fn bundle_flags_parse_conflict_and_name_what_is_malformed() {
    command().debug_assert();
    let peer = parse(&[
        "--identity-ca-cluster-trust-bundle-signer=example.com/platform",
        "--identity-ca-cluster-trust-bundle-selector=tier in (prod,staging),!legacy",
    ])
    .unwrap();
    let expected = ClusterTrustBundlesRef::new("example.com/platform")
        .unwrap()
        .with_label_selector("tier in (prod,staging),!legacy")
        .unwrap();
    assert_eq!(peer.ca().unwrap(), PeerCa::ClusterTrustBundles(expected));

    // Empty values are unset, as for every flag rendered from a chart.
    let peer = parse(&[
        "--identity-ca-cluster-trust-bundle-signer=",
        "--identity-ca-cluster-trust-bundle-selector=",
    ])
    .unwrap();
    assert_eq!(peer.ca().unwrap(), PeerCa::Platform);

    // One CA source: any other CA flag set too is refused naming both.
    for other in [
        "--identity-ca-secret-name=ca",
        "--identity-ca-configmap-namespace=ns",
        "--identity-ca-file=/etc/ca/ca.crt",
    ] {
        let peer = parse(&[
            "--identity-ca-cluster-trust-bundle-signer=example.com/platform",
            other,
        ])
        .unwrap();
        let error = peer.ca().unwrap_err();
        let other_flag = other.trim_start_matches("--").split('=').next().unwrap();
        assert_eq!(
            error,
            OptionsError::CaFileConflict {
                file_flag: "identity-ca-cluster-trust-bundle-signer".to_owned(),
                other_flag: other_flag.to_owned(),
            }
        );
    }

    // A malformed signer or selector names its flag and what is wrong.
    let error = parse(&["--identity-ca-cluster-trust-bundle-signer=platform"])
        .unwrap()
        .ca()
        .unwrap_err();
    assert!(matches!(
        &error,
        OptionsError::InvalidClusterTrustBundles {
            flag,
            source: BundleSelectionError::SignerName { .. },
        } if flag == "identity-ca-cluster-trust-bundle-signer"
    ));
    // The flag in Display, what is wrong in source() (docs/decisions/errors-cause-in-source.md).
    assert_eq!(
        error.to_string(),
        "--identity-ca-cluster-trust-bundle-signer is malformed"
    );
    let cause = std::error::Error::source(&error).unwrap().to_string();
    assert!(cause.contains("<domain>/<path>"), "{cause}");
    let error = parse(&[
        "--identity-ca-cluster-trust-bundle-signer=example.com/platform",
        "--identity-ca-cluster-trust-bundle-selector=tier=prod,in valid",
    ])
    .unwrap()
    .ca()
    .unwrap_err();
    let cause = std::error::Error::source(&error).unwrap().to_string();
    assert!(
        error.to_string() == "--identity-ca-cluster-trust-bundle-selector is malformed"
            && cause.starts_with("label selector"),
        "{error}: {cause}"
    );
    assert!(cause.contains("\"in valid\""), "{cause}");
}

/// One watch per cluster, credential, signer and selector: every construction of the
/// same set shares it (no second LIST), another selector is another watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_watch_per_cluster_credential_signer_and_selector() {
    let tb = Testbed::start().await;
    let signer = signer();
    let ca = TestCa::new("bundle CA");
    tb.upsert(bundle(&signer, "a", &ca.pem(), &[("tier", "prod")]));
    let watches = WatchedObjects::new();
    let streams = svc_tls::spiffe::WorkloadApiStreams::new();
    let lists = || tb.requests_on("list", "clustertrustbundles.certificates.k8s.io");
    let build = |selector: &'static str| {
        let peer = PeerOptions::new("identity").with_ca_cluster_trust_bundles(&signer, selector);
        let (watches, streams, client) = (&watches, &streams, tb.cluster_client());
        async move {
            svc_tls::client::PeerTls::from_options_in(
                watches,
                streams,
                &client,
                &peer,
                &ClientIdentityOptions::new(None),
                TIMEOUT,
            )
            .await
            .unwrap()
        }
    };
    let first = build("").await;
    let trust = first.trust_verifier().unwrap().clone();
    assert_eq!(lists(), 1);
    for _ in 0..5 {
        let again = build("").await;
        assert!(
            again.trust_verifier().unwrap().ptr_eq(&trust),
            "one verifier kept in the set's entry"
        );
    }
    assert_eq!(lists(), 1, "no second LIST for the same set");
    let prod = build("tier=prod").await;
    assert!(!prod.trust_verifier().unwrap().ptr_eq(&trust));
    assert_eq!(lists(), 2, "another selector is another set");
    assert_eq!(watches.counts().cluster_trust_bundles, 2);
}

/// A server that ignores the field selector sends every signer's bundles: only the
/// signer's (and the selector's) are read, so another signer's CA is never trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_ignoring_the_selectors_never_adds_another_signers_roots() {
    let tb = Testbed::start().await;
    tb.inject(Fault::IgnoreFieldSelectors(true));
    let (signer, other_signer) = (signer(), signer());
    let (ca, other) = (TestCa::new("bundle CA"), TestCa::new("another signer's CA"));
    tb.upsert(bundle(&signer, "a", &ca.pem(), &[]));
    tb.upsert(bundle(&other_signer, "a", &other.pem(), &[]));
    let trust = TrustVerifier::cluster_trust_bundles_builder(
        tb.client(),
        ClusterTrustBundlesRef::new(&signer).unwrap(),
    )
    .build()
    .await
    .unwrap();
    assert_eq!(trust.state().roots, 1);
    let untrusted = server(&other).await;
    assert!(call(watched(&trust), &untrusted).await.is_err());
    call(watched(&trust), &server(&ca).await).await.unwrap();
}

/// A credential without list and watch on ClusterTrustBundles is refused at once,
/// the error naming the kind and the ClusterRole it needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_without_the_grant_is_refused_naming_it() {
    let tb = Testbed::start().await;
    let signer = signer();
    tb.upsert(bundle(&signer, "a", &TestCa::new("CA").pem(), &[]));
    tb.add_token(
        "configmaps-only",
        vec![Rule::new(&["get", "list", "watch"], "", "configmaps")],
    );
    let client = kube::Client::try_from(tb.config_for_token("configmaps-only")).unwrap();
    let started = std::time::Instant::now();
    let error = TrustVerifier::cluster_trust_bundles_builder(
        client,
        ClusterTrustBundlesRef::new(&signer).unwrap(),
    )
    .settings(svc_tls::trust::TrustSettings::default().sync_timeout(TIMEOUT))
    .build()
    .await
    .unwrap_err()
    .to_string();
    assert!(
        started.elapsed() < TIMEOUT,
        "refused at once, not timed out"
    );
    assert!(error.contains("403"), "{error}");
    assert!(
        error.contains(&format!("ClusterTrustBundle signer={signer}")),
        "{error}"
    );
    assert!(error.contains("clustertrustbundles"), "{error}");
    assert!(error.contains("ClusterRole"), "{error}");
}

/// Through the flags on a registry with metrics, as a service runs: the verifier's
/// reloads and state are exported under `source="clustertrustbundles"` and the set's
/// name; the empty set counts as `not_found`; a replaced bundle retires the pooled
/// client's connections verified under the old roots.
#[cfg(feature = "metrics")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_name_the_set_and_a_replaced_bundle_retires_the_pool() {
    let tb = Testbed::start().await;
    let mut registry = prometheus_client::registry::Registry::default();
    let watches = svc_tls::metrics::Metrics::new_watches(&mut registry);
    let signer = signer();
    let (old, new) = (TestCa::new("old CA"), TestCa::new("new CA"));
    tb.upsert(bundle(&signer, "a", &old.pem(), &[]));
    let server = VerifyingServer::builder(&old, &old)
        .no_client_auth()
        .keep_alive(true)
        .start()
        .await;
    let peer = PeerOptions::new("identity").with_ca_cluster_trust_bundles(&signer, "");
    let tls = svc_tls::client::PeerTls::from_options_in(
        &watches,
        &svc_tls::spiffe::WorkloadApiStreams::new(),
        &tb.cluster_client(),
        &peer,
        &ClientIdentityOptions::new(None),
        TIMEOUT,
    )
    .await
    .unwrap();
    let client = tls.client().unwrap();
    let get = |client: &svc_tls::client::PeerClient| {
        let request = client.get(server.url()).unwrap();
        let client = client.clone();
        async move { client.send(request).await.map(|r| r.status().as_u16()) }
    };
    assert_eq!(get(&client).await.unwrap(), 200);
    let trust = tls.trust_verifier().unwrap().clone();

    // Replaced: the next request is made on a new pool under the new roots.
    let retired = client.retired_pools();
    tb.upsert(bundle(&signer, "a", &new.pem(), &[]));
    poll_until("the replaced bundle in the cache", || {
        cached_bundle_holds(&trust, &[&new])
    })
    .await;
    server.set_server_ca(&new);
    assert_eq!(get(&client).await.unwrap(), 200);
    assert!(
        client.retired_pools() > retired,
        "the old roots' pool retired"
    );

    // The set emptied: a handshake keeps the last good roots, counted not_found.
    tb.delete(
        "certificates.k8s.io/v1",
        "ClusterTrustBundle",
        "",
        &bundle_name(&signer, "a"),
    );
    poll_until("the cache sees the set empty", || {
        trust
            .cluster_trust_bundles_source()
            .unwrap()
            .get()
            .is_none()
    })
    .await;
    let fresh = VerifyingServer::builder(&new, &new)
        .no_client_auth()
        .start()
        .await;
    let request = client.get(fresh.url()).unwrap();
    assert_eq!(client.send(request).await.unwrap().status().as_u16(), 200);

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    // The registry's size counts the watched set.
    assert!(
        text.lines()
            .any(|l| l == "svc_tls_registry_entries{kind=\"cluster_trust_bundle_set\"} 1"),
        "{text}"
    );
    let labels = format!("source=\"clustertrustbundles\",name=\"signer={signer}\"");
    assert!(
        text.lines()
            .any(|l| l.starts_with("svc_tls_trust_reloads_total{")
                && l.contains(&labels)
                && l.contains("result=\"not_found\"")
                && !l.ends_with(" 0")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains(&labels) && l.contains("result=\"ok\"") && !l.ends_with(" 0")),
        "{text}"
    );
}
