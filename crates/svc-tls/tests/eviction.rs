//! Bounded life and size: a registry's entries (and their watches), its API clients
//! and its shared peer clients live while something outside the registry uses them
//! and for the eviction grace after; then they go, and the API emulators' open
//! watches return to their baseline. A short grace (300 ms) stands in for the default
//! ten minutes.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use kube_testbed::{Rule, Testbed};
use support::*;
use svc_tls::client::PeerTls;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::watch::{RegistryCounts, WatchedObjects};
use svc_tls::{ClusterClient, ClusterId, SecretRef};

const CA: &str = "identity-ca";
const IDENTITY: &str = "region-client-certificate";
const TIMEOUT: Duration = Duration::from_secs(10);
const GRACE: Duration = Duration::from_millis(300);
const READERS: [&str; 2] = ["token-reader-one-6b1f", "token-reader-two-0c9e"];

/// An API emulator with the CA and identity Secrets and two more tokens allowed to
/// read Secrets.
async fn cluster(name: &str) -> Testbed {
    let tb = Testbed::start().await;
    let ca = TestCa::new(&format!("{name} CA"));
    let leaf = ca.client_leaf(name, 7);
    tb.upsert(secret_with(
        CA,
        "kubernetes.io/tls",
        &[("tls.crt", &ca.pem()), ("ca.crt", &ca.pem())],
    ));
    tb.upsert(tls_secret(IDENTITY, &leaf.cert_pem, &leaf.key_pem));
    for token in READERS {
        tb.add_token(
            token,
            vec![Rule::new(&["get", "list", "watch"], "", "secrets").namespace(NS)],
        );
    }
    tb
}

/// The three credentials of `tb`: the admin's and the two readers'.
fn callers(tb: &Testbed) -> Vec<ClusterClient> {
    std::iter::once(tb.token())
        .chain(READERS.iter().map(|t| (*t).to_owned()))
        .map(|token| ClusterClient::try_from_config(tb.config_for_token(&token)).unwrap())
        .collect()
}

fn options() -> (PeerOptions, ClientIdentityOptions) {
    let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    let m = cmd
        .try_get_matches_from([
            "svc".to_owned(),
            "--identity-host=https://peer.invalid".to_owned(),
            format!("--identity-ca-secret-namespace={NS}"),
            format!("--identity-ca-secret-name={CA}"),
            format!("--client-certificate-namespace={NS}"),
            format!("--client-certificate-name={IDENTITY}"),
        ])
        .unwrap();
    (
        PeerOptions::from_matches(&m, "identity").unwrap(),
        ClientIdentityOptions::from_matches(&m, None).unwrap(),
    )
}

fn counts(secrets: usize, kube_clients: usize, shared_values: usize) -> RegistryCounts {
    let mut counts = RegistryCounts::default();
    counts.secrets = secrets;
    counts.kube_clients = kube_clients;
    counts.shared_values = shared_values;
    counts
}

/// Three clusters, three credentials each, a peer client per (cluster, credential):
/// everything is kept while held (past the grace), and goes once dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_watches_api_clients_and_peer_clients_go_after_the_grace() {
    let tbs = [cluster("a").await, cluster("b").await, cluster("c").await];
    let watches = WatchedObjects::with_eviction_grace(GRACE);
    let streams = svc_tls::spiffe::WorkloadApiStreams::new();
    let (peer, me) = options();
    let mut held = Vec::new();
    for tb in &tbs {
        for caller in callers(tb) {
            let tls = PeerTls::from_options_in(&watches, &streams, &caller, &peer, &me, TIMEOUT)
                .await
                .unwrap();
            let client = tls.client().unwrap();
            held.push((tls, client));
        }
    }
    // 3 clusters x 3 credentials x 2 Secrets; an API client and a peer pool each.
    assert_eq!(watches.counts(), counts(18, 9, 9));
    for tb in &tbs {
        poll_until("six watches per cluster", || tb.open_watches() == 6).await;
    }

    // A negative check, so a fixed wait: held entries are never evicted, and a reaper
    // pass that keeps them leaves no event to wait for. Four graces is sixteen of the
    // reaper's passes (one every quarter of the grace).
    tokio::time::sleep(GRACE * 4).await;
    assert_eq!(watches.counts(), counts(18, 9, 9), "held: nothing evicted");

    // A construction after the grace, while held: served from the entries.
    let lists = tbs[0].requests("list");
    let again = PeerTls::from_options_in(
        &watches,
        &streams,
        &callers(&tbs[0])[0],
        &peer,
        &me,
        TIMEOUT,
    )
    .await
    .unwrap();
    assert_eq!(
        tbs[0].requests("list"),
        lists,
        "no API request for a held entry"
    );
    drop(again);

    drop(held);
    poll_until("everything evicted", || {
        watches.counts() == RegistryCounts::default()
    })
    .await;
    for tb in &tbs {
        poll_until("the emulator's watches closed", || tb.open_watches() == 0).await;
    }

    // Needed again: started again.
    let lists = tbs[1].requests("list");
    PeerTls::from_options_in(
        &watches,
        &streams,
        &callers(&tbs[1])[2],
        &peer,
        &me,
        TIMEOUT,
    )
    .await
    .unwrap();
    assert_eq!(tbs[1].requests("list"), lists + 2, "a new LIST per Secret");
}

/// A hundred clusters, three credentials each, built and dropped with churn: the
/// entries and the emulator's open watches follow what is held, and return to the
/// baseline once nothing is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_clusters_with_three_credentials_return_to_the_baseline() {
    let tb = cluster("many").await;
    let watches = WatchedObjects::with_eviction_grace(GRACE);
    let kube = tb.client();
    let secret = SecretRef::new(NS, CA);
    let caller = |cluster: usize, credential: usize| {
        ClusterClient::new(
            kube.clone(),
            ClusterId::named(&format!("cluster-{cluster}")),
        )
        .with_credential(cluster_id::CredentialId::named(&format!("sa-{credential}")))
    };
    let baseline = tb.open_watches();
    for round in 0..2 {
        let lists = tb.requests("list");
        let mut kept = Vec::new();
        for cluster in 0..100 {
            for credential in 0..3 {
                let shared = watches
                    .watch_trust(&caller(cluster, credential), &secret, TIMEOUT)
                    .await
                    .unwrap();
                // Churn: one in ten is kept, the others dropped at once.
                if (cluster + credential + round) % 10 == 0 {
                    kept.push(shared);
                }
            }
        }
        // Each (cluster, credential) watched once: everything of the round before
        // was evicted, so each is started again.
        assert_eq!(
            tb.requests("list"),
            lists + 300,
            "round {round}: all started"
        );
        let held = kept.len();
        poll_until("the unused ones evicted", || {
            watches.counts().secrets == held
        })
        .await;
        poll_until("their watches closed", || {
            tb.open_watches() == baseline + held
        })
        .await;
        drop(kept);
        poll_until("all evicted", || watches.counts().secrets == 0).await;
        poll_until("back to the baseline", || tb.open_watches() == baseline).await;
    }
}

/// With metrics installed, the exported resolvers and verifiers do not keep their
/// entries: `svc_tls_registry_entries` counts them while held and drops to zero once
/// they are evicted.
#[cfg(feature = "metrics")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_the_entries_and_keep_none_alive() {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    let tb = cluster("metrics").await;
    let watches = WatchedObjects::with_eviction_grace(GRACE);
    let mut registry = Registry::default();
    svc_tls::metrics::Metrics::new(&mut registry)
        .install(&watches)
        .unwrap();
    let gauge = |registry: &Registry, kind: &str| -> String {
        let mut text = String::new();
        encode(&mut text, registry).unwrap();
        text.lines()
            .find(|l| l.starts_with(&format!("svc_tls_registry_entries{{kind=\"{kind}\"}}")))
            .and_then(|l| l.rsplit(' ').next())
            .unwrap_or("missing")
            .to_owned()
    };
    let streams = svc_tls::spiffe::WorkloadApiStreams::new();
    let (peer, me) = options();
    let mut held = Vec::new();
    for caller in callers(&tb) {
        let tls = PeerTls::from_options_in(&watches, &streams, &caller, &peer, &me, TIMEOUT)
            .await
            .unwrap();
        held.push((tls.client().unwrap(), tls));
    }
    assert_eq!(gauge(&registry, "secret"), "6");
    assert_eq!(gauge(&registry, "api_client"), "3");
    assert_eq!(gauge(&registry, "peer_pool"), "3");
    drop(held);
    poll_until("evicted with metrics installed", || {
        watches.counts() == RegistryCounts::default()
    })
    .await;
    assert_eq!(gauge(&registry, "secret"), "0");
    poll_until("the emulator's watches closed", || tb.open_watches() == 0).await;
}

/// Once the last user of a cluster is dropped and its entries evicted, nothing in the
/// encoded registry names that cluster (neither the gauges read at scrape time nor
/// the counters created with each recorder), and the cluster's metric label is free
/// again: the label table holds only the clusters a live `ClusterId` names.
#[cfg(feature = "metrics")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_clusters_series_and_label_go_with_it() {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    const LABEL: &str = "evicted-cluster-series-7d3a";
    let tb = cluster("series").await;
    let mut registry = Registry::default();
    let watches = WatchedObjects::with_eviction_grace(GRACE);
    svc_tls::metrics::Metrics::new(&mut registry)
        .install(&watches)
        .unwrap();
    let naming = |registry: &Registry| -> Vec<String> {
        let mut text = String::new();
        encode(&mut text, registry).unwrap();
        text.lines()
            .filter(|l| l.contains(&format!("cluster=\"{LABEL}")))
            .map(str::to_owned)
            .collect()
    };
    let streams = svc_tls::spiffe::WorkloadApiStreams::new();
    let (peer, me) = options();
    let caller = ClusterClient::try_from_config(tb.kube_config())
        .unwrap()
        .with_label(LABEL);
    assert_eq!(caller.cluster().metric_label(), LABEL);
    let tls = PeerTls::from_options_in(&watches, &streams, &caller, &peer, &me, TIMEOUT)
        .await
        .unwrap();
    let held = (tls.client().unwrap(), tls);
    let shown = naming(&registry);
    assert!(
        shown.iter().any(|l| l.contains("_total{")),
        "counters name the cluster while it is used: {shown:#?}"
    );
    assert!(
        shown
            .iter()
            .any(|l| l.starts_with("svc_tls_secret_watch_healthy")),
        "{shown:#?}"
    );

    drop(held);
    drop(caller);
    poll_until("evicted", || watches.counts() == RegistryCounts::default()).await;
    let left = naming(&registry);
    assert!(left.is_empty(), "series of an evicted cluster: {left:#?}");
    // No live ClusterId names the cluster: another cluster shown with the same
    // label gets the plain value, not a suffixed one.
    let other = ClusterId::named("another-cluster-7d3a").with_label(LABEL);
    assert_eq!(other.metric_label(), LABEL);
}
