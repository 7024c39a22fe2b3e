//! One process, several clusters: the process's registry of watched Secrets is keyed
//! by the cluster a Secret is read from. Two API emulators hold same-named CA and
//! identity Secrets (different CAs, different leaves); each cluster has a TLS server
//! that verifies client certificates against that cluster's client CA and records
//! the serial presented. Constructions go through the process's registry
//! (`PeerTls::from_options`), in both orders. (One emulated and one real cluster in
//! one process: `real_server.rs`.)
//!
//! The single-cluster bodies that read trust from a Secret (an Opaque `ca.crt`-only
//! Secret; a trust-only cache keeping no key however the Secret carries it) are in
//! `both.rs` and run against kube-testbed and the real kube-apiserver alike
//! (`real_apiserver::both!`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../support/mod.rs"]
mod support;

mod both;

use std::time::Duration;

use kube_testbed::Testbed;
use support::*;
use svc_tls::client::PeerTls;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::watch::WatchedObjects;
use svc_tls::{ClusterClient, ClusterId, SecretRef};

const CA: &str = "identity-ca";
const IDENTITY: &str = "region-client-certificate";
const TIMEOUT: Duration = Duration::from_secs(10);

/// One cluster: its API emulator with the two Secrets, and the peer that trusts its
/// client CA.
struct Cluster {
    tb: Testbed,
    server: VerifyingServer,
    serial: u64,
}

async fn cluster(name: &str, serial: u64) -> Cluster {
    let tb = Testbed::start().await;
    let server_ca = TestCa::new(&format!("{name} server CA"));
    let client_ca = TestCa::new(&format!("{name} client CA"));
    let leaf = client_ca.client_leaf("region", serial);
    tb.upsert(secret_with(
        CA,
        "kubernetes.io/tls",
        &[("tls.crt", &server_ca.pem()), ("ca.crt", &server_ca.pem())],
    ));
    tb.upsert(tls_secret(IDENTITY, &leaf.cert_pem, &leaf.key_pem));
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    Cluster { tb, server, serial }
}

fn options(url: &str) -> (PeerOptions, ClientIdentityOptions) {
    let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    let m = cmd
        .try_get_matches_from([
            "svc".to_owned(),
            format!("--identity-host={url}"),
            format!("--identity-ca-secret-namespace={NS}"),
            format!("--identity-ca-secret-name={CA}"),
            format!("--client-certificate-namespace={NS}"),
            format!("--client-certificate-name={IDENTITY}"),
            "--identity-pool-idle-timeout=0s".to_owned(),
        ])
        .unwrap();
    (
        PeerOptions::from_matches(&m, "identity").unwrap(),
        ClientIdentityOptions::from_matches(&m, None).unwrap(),
    )
}

/// The peer client of `cluster`, from the options, through the process's registry.
async fn peer_client(cluster: &Cluster) -> PeerTls {
    let (peer, me) = options(&cluster.server.url());
    PeerTls::from_options(&cluster.tb.cluster_client(), &peer, &me, TIMEOUT)
        .await
        .unwrap()
}

/// What `url`'s server answered to `tls`'s client: the serial it saw, or the error.
async fn call(tls: &PeerTls, url: &str) -> Result<String, String> {
    let http = tls.reqwest_client().map_err(|e| e.to_string())?;
    let response = http.get(url).send().await.map_err(|e| format!("{e:?}"))?;
    Ok(response
        .text()
        .await
        .map_err(|e| e.to_string())?
        .trim()
        .to_owned())
}

async fn each_cluster_keeps_its_own_material(first: &Cluster, second: &Cluster) {
    let first_tls = peer_client(first).await;
    let second_tls = peer_client(second).await;
    for (cluster, tls, other) in [(first, &first_tls, second), (second, &second_tls, first)] {
        assert_eq!(
            call(tls, &cluster.server.url()).await.unwrap(),
            cluster.serial.to_string(),
            "each client presents its own cluster's leaf"
        );
        assert!(
            call(tls, &other.server.url()).await.is_err(),
            "a client trusts only its own cluster's CA: the other cluster's server is refused"
        );
        assert!(
            cluster
                .server
                .seen()
                .iter()
                .all(|seen| seen.serial == Some(cluster.serial)),
            "the server saw only its own cluster's leaf"
        );
    }
    let watched = WatchedObjects::process().watched();
    for cluster in [first, second] {
        let id = cluster.tb.cluster_client().cluster().clone();
        for name in [CA, IDENTITY] {
            assert!(
                watched.contains(&(id.clone(), SecretRef::new(NS, name))),
                "{name} is watched per cluster: {watched:?}"
            );
        }
        assert_eq!(
            cluster.tb.open_watches(),
            2,
            "one watch per Secret per cluster"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_named_secrets_of_two_clusters_never_mix_local_first() {
    let (local, remote) = (cluster("local", 11).await, cluster("remote", 22).await);
    each_cluster_keeps_its_own_material(&local, &remote).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_named_secrets_of_two_clusters_never_mix_remote_first() {
    let (local, remote) = (cluster("local", 33).await, cluster("remote", 44).await);
    each_cluster_keeps_its_own_material(&remote, &local).await;
}

/// The registry's watches run on its own runtime: a caller's runtime that ends (a
/// `block_on` at start-up, a test's runtime) takes no shared watch with it.
#[test]
fn a_shared_watch_outlives_the_runtime_that_started_it() {
    let serving = tokio::runtime::Runtime::new().unwrap();
    let tb = serving.block_on(Testbed::start());
    let ca = TestCa::new("outlives");
    let first = ca.client_leaf("first", 1);
    tb.upsert(tls_secret(IDENTITY, &first.cert_pem, &first.key_pem));
    let watches = WatchedObjects::new();
    let secret = SecretRef::new(NS, IDENTITY);

    let starting = tokio::runtime::Runtime::new().unwrap();
    let client = starting.block_on(async { tb.cluster_client() });
    let shared = starting
        .block_on(watches.watch(&client, &secret, TIMEOUT))
        .unwrap();
    drop(starting);

    let second = ca.client_leaf("second", 2);
    tb.upsert(tls_secret(IDENTITY, &second.cert_pem, &second.key_pem));
    serving.block_on(async {
        poll_until("the rotation reaches the shared cache", || {
            cached_cert_is(shared.source(), &second.cert_pem)
        })
        .await;
        let again = watches.watch(&client, &secret, TIMEOUT).await.unwrap();
        assert_eq!(again.loaded_changes(), shared.loaded_changes());
        assert_eq!(tb.open_watches(), 1, "the same watch, not a second one");
    });
}

/// A client the caller names (no configuration): watched through that client, and
/// when its runtime ends the entry is replaced, not served dead.
#[test]
fn a_named_clients_entry_ends_with_its_runtime_and_is_started_again() {
    let serving = tokio::runtime::Runtime::new().unwrap();
    let tb = serving.block_on(Testbed::start());
    let ca = TestCa::new("named");
    let leaf = ca.client_leaf("named", 1);
    tb.upsert(tls_secret(IDENTITY, &leaf.cert_pem, &leaf.key_pem));
    let watches = WatchedObjects::new();
    let secret = SecretRef::new(NS, IDENTITY);
    let id = ClusterId::named("named-cluster");

    let starting = tokio::runtime::Runtime::new().unwrap();
    let client = starting.block_on(async { ClusterClient::new(tb.client(), id.clone()) });
    let dead = starting
        .block_on(watches.watch(&client, &secret, TIMEOUT))
        .unwrap();
    drop(starting);

    drop(dead);
    serving.block_on(async {
        let lists = tb.requests("list");
        let client = ClusterClient::new(tb.client(), id.clone());
        let fresh = watches.watch(&client, &secret, TIMEOUT).await.unwrap();
        assert_eq!(
            tb.requests("list"),
            lists + 1,
            "a new watch, not the dead entry"
        );
        assert!(
            fresh.source().watch_health().connected,
            "a new watch through the living client"
        );
        assert_eq!(fresh.cluster(), &id);
        let second = ca.client_leaf("named-2", 2);
        tb.upsert(tls_secret(IDENTITY, &second.cert_pem, &second.key_pem));
        poll_until("the new watch sees the rotation", || {
            cached_cert_is(fresh.source(), &second.cert_pem)
        })
        .await;
        let again = watches.watch(&client, &secret, TIMEOUT).await.unwrap();
        assert_eq!(tb.requests("list"), lists + 1, "the new entry is shared");
        assert_eq!(again.cluster(), &id);
    });
}

/// The cluster is named in a failed start's error, and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_names_the_cluster_and_leaves_nothing() {
    let tb = Testbed::start().await;
    let watches = WatchedObjects::new();
    let client = tb.cluster_client();
    let err = watches
        .watch(
            &client,
            &SecretRef::new(NS, "absent"),
            Duration::from_millis(300),
        )
        .await;
    // An absent Secret syncs as empty; a stopped API server does not sync at all.
    assert!(err.is_ok());
    tb.stop().await;
    let err = watches
        .watch(
            &client,
            &SecretRef::new(NS, "other"),
            Duration::from_millis(300),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&format!("{NS}/other")), "{err}");
    assert!(err.contains(client.cluster().label()), "{err}");
    assert_eq!(
        watches.watched().len(),
        1,
        "only the started one: {:?}",
        watches.watched()
    );
}

/// The options of a peer trusting the CA Secret `ns/ca` and presenting no identity.
fn trusting_in(url: &str, ns: &str, ca: &str) -> (PeerOptions, ClientIdentityOptions) {
    let peer = PeerOptions::new("identity")
        .with_host_value(url)
        .with_ca_secret(ns, ca)
        .with_pool_idle_timeout(Duration::ZERO);
    (peer, ClientIdentityOptions::new(None))
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Metrics past any cluster bound: forty clusters hold the same-named identity and CA
/// Secrets, each with its own leaf (its own `notAfter`); every two clusters share a
/// display label (two kubeconfigs naming one `host:port`, say), and the even ones'
/// CA Secrets carry a private key. Each per-Secret family has one series per cluster
/// with that cluster's value, in the registry's text and through a real Prometheus
/// scrape: no two clusters' values merge.
#[cfg(feature = "metrics")]
mod forty_clusters {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;
    use std::time::{Duration, UNIX_EPOCH};

    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;
    use svc_tls::material::{crypto_provider, load_identity_from_pem};
    use svc_tls::metrics::Metrics;
    use test_support::prometheus::{Prometheus, Sample, serve_metrics};

    use super::*;

    const CLUSTERS: u64 = 40;
    const IDENTITY_NAME: &str = "unikorn/region-client-certificate";
    const CA_NAME: &str = "unikorn/identity-ca";

    /// What each cluster's series must read.
    struct Expected {
        not_after: i64,
        key_dropped: bool,
    }

    /// The samples of `family` in `text` whose labels include `with`: cluster label
    /// -> value (a second sample for one cluster fails the test).
    fn by_cluster(text: &str, family: &str, with: (&str, &str)) -> BTreeMap<String, f64> {
        let mut samples = BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix(family).and_then(|r| r.strip_prefix('{')) else {
                continue;
            };
            let (labels, value) = rest.split_once("} ").unwrap();
            let labels: BTreeMap<&str, &str> = labels
                .split("\",")
                .map(|pair| {
                    let (k, v) = pair.split_once("=\"").unwrap();
                    (k, v.trim_end_matches('"'))
                })
                .collect();
            if labels.get(with.0) != Some(&with.1) {
                continue;
            }
            let cluster = labels["cluster"].to_owned();
            let previous = samples.insert(cluster.clone(), value.parse().unwrap());
            assert!(
                previous.is_none(),
                "two {family} series of {cluster}:\n{text}"
            );
        }
        samples
    }

    /// Checks one family's samples (cluster -> value) against every cluster's expected
    /// value; `value` is `None` where the cluster must have no series.
    fn check(
        what: &str,
        samples: &BTreeMap<String, f64>,
        expected: &BTreeMap<String, Expected>,
        value: impl Fn(&Expected) -> Option<f64>,
    ) {
        let wanted: BTreeMap<String, f64> = expected
            .iter()
            .filter_map(|(cluster, e)| Some((cluster.clone(), value(e)?)))
            .collect();
        assert_eq!(samples, &wanted, "{what}");
    }

    fn prometheus_by_cluster(samples: &[Sample]) -> BTreeMap<String, f64> {
        samples
            .iter()
            .map(|s| (s.labels["cluster"].clone(), s.value))
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn forty_clusters_same_named_secrets_forty_distinct_series() {
        let mut registry = Registry::default();
        let watches = Metrics::new_watches(&mut registry);
        let streams = svc_tls::spiffe::WorkloadApiStreams::new();
        let client_ca = TestCa::new("forty clients");
        let server_ca = TestCa::new("forty servers");
        let mut expected = BTreeMap::new();
        let mut alive = Vec::new();
        for i in 0..CLUSTERS {
            let tb = Testbed::start().await;
            let leaf = client_ca
                .short_lived_client_leaf(100 + i, Duration::from_secs((10 + i) * 24 * 3600));
            tb.upsert(tls_secret(IDENTITY, &leaf.cert_pem, &leaf.key_pem));
            let key_dropped = i % 2 == 0;
            let mut ca = vec![("tls.crt", server_ca.pem()), ("ca.crt", server_ca.pem())];
            if key_dropped {
                ca.push(("tls.key", leaf.key_pem.clone()));
            }
            let ca: Vec<(&str, &str)> = ca.iter().map(|(k, v)| (*k, v.as_str())).collect();
            tb.upsert(secret_with(CA, "kubernetes.io/tls", &ca));
            // Clusters 2k and 2k+1 share the display label `forty-k`.
            let client = tb.cluster_client().with_label(&format!("forty-{}", i / 2));
            let id = client.cluster().clone();
            // The first of a label keeps it; the second gets its fingerprint appended.
            let label = if i % 2 == 0 {
                format!("forty-{}", i / 2)
            } else {
                format!("forty-{}@{}", i / 2, id.short_fingerprint())
            };
            let (peer, me) = options("https://peer.example:8443");
            let tls = PeerTls::from_options_in(&watches, &streams, &client, &peer, &me, TIMEOUT)
                .await
                .unwrap();
            let identity = load_identity_from_pem(
                &SecretRef::new(NS, IDENTITY),
                leaf.cert_pem.as_bytes(),
                leaf.key_pem.as_bytes(),
                &crypto_provider(),
            )
            .unwrap();
            let not_after = identity.not_after().duration_since(UNIX_EPOCH).unwrap();
            expected.insert(
                label,
                Expected {
                    not_after: i64::try_from(not_after.as_secs()).unwrap(),
                    key_dropped,
                },
            );
            alive.push((tb, tls));
        }
        assert_eq!(expected.len(), 40, "forty distinct cluster labels");

        // The registry's text: one series per cluster and family, each its own value.
        let registry = Arc::new(registry);
        let text = {
            let mut text = String::new();
            encode(&mut text, &registry).unwrap();
            text
        };
        let identity = ("name", IDENTITY_NAME);
        check(
            "identity expiry",
            &by_cluster(
                &text,
                "svc_tls_identity_cert_expiration_timestamp_seconds",
                identity,
            ),
            &expected,
            |e| Some(e.not_after as f64),
        );
        check(
            "refreshes",
            &by_cluster(
                &text,
                "svc_tls_identity_cert_refreshes_total",
                ("result", "ok"),
            ),
            &expected,
            |_| Some(1.0),
        );
        check(
            "trust roots",
            &by_cluster(&text, "svc_tls_trust_roots", ("name", CA_NAME)),
            &expected,
            |_| Some(1.0),
        );
        for secret in [IDENTITY_NAME, CA_NAME] {
            check(
                "watch health",
                &by_cluster(&text, "svc_tls_secret_watch_healthy", ("secret", secret)),
                &expected,
                |_| Some(1.0),
            );
        }
        check(
            "private key dropped",
            &by_cluster(
                &text,
                "svc_tls_trust_secret_private_key_dropped",
                ("secret", CA_NAME),
            ),
            &expected,
            |e| e.key_dropped.then_some(1.0),
        );

        // The same through a real Prometheus scrape.
        let port = {
            let registry = registry.clone();
            serve_metrics(move || {
                let mut text = String::new();
                encode(&mut text, &registry).unwrap();
                text
            })
            .await
        };
        let dir = tempfile::tempdir().unwrap();
        let Some(prometheus) = Prometheus::scraping(dir.path(), port) else {
            return;
        };
        let answer = prometheus
            .wait_for(
                &format!(
                    "svc_tls_identity_cert_expiration_timestamp_seconds{{name=\"{IDENTITY_NAME}\"}}"
                ),
                "forty expiry series",
                |samples| samples.len() == 40,
            )
            .await;
        check(
            "identity expiry (scraped)",
            &prometheus_by_cluster(&answer),
            &expected,
            |e| Some(e.not_after as f64),
        );
        let answer = prometheus
            .query(&format!(
                "svc_tls_trust_secret_private_key_dropped{{secret=\"{CA_NAME}\"}}"
            ))
            .await;
        check(
            "private key dropped (scraped)",
            &prometheus_by_cluster(&answer),
            &expected,
            |e| e.key_dropped.then_some(1.0),
        );
        let answer = prometheus
            .query("count by (cluster) (svc_tls_secret_watch_healthy == 1)")
            .await;
        check(
            "both Secrets' watches healthy (scraped)",
            &prometheus_by_cluster(&answer),
            &expected,
            |_| Some(2.0),
        );
        let clusters: BTreeSet<&String> = expected.keys().collect();
        assert_eq!(clusters.len(), 40);
        drop(alive);
    }
}
