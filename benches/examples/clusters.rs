//! How the shared watches grow with the clusters and credentials a process reads, and
//! how they shrink when unused (issues 29 and 39): one process watching the same two
//! Secrets (a CA and an identity, same names everywhere) in 1, 10 and 100 clusters,
//! each an API emulator of its own, as three credentials each (three tokens: one watch
//! per Secret and credential), through one registry (`PeerTls::from_options_in`,
//! with a 2 s eviction grace standing in for the default ten minutes). Prints, per
//! size: the first construction per (cluster, credential) (LIST, WATCH, sync, key
//! load), a later construction (the shared entry), the open watches the emulators
//! count, the resident memory each watched Secret adds, and, once every construction
//! is dropped, how long until the registry's entries and the emulators' open watches
//! are back to zero.
//!
//! Memory is measured as the process's RSS after the constructions minus after the
//! emulators started, divided by the entries: the emulators run in this process, so
//! their per-watch state (one open WATCH each) is in the figure too. It is an upper
//! bound for the client side. Run with `cargo xtask soak --clusters`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use kube_testbed::Testbed;
use svc_tls::PeerTls;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use test_support::pki::TestCa;
use test_support::secret::{secret_with, tls_secret};

const NS: &str = "unikorn";
const CA: &str = "identity-ca";
const IDENTITY: &str = "region-client-certificate";
const TIMEOUT: Duration = Duration::from_secs(60);
const GRACE: Duration = Duration::from_secs(2);
/// The two tokens besides the admin's, allowed to read the Secrets.
const READERS: [&str; 2] = ["clusters-reader-one", "clusters-reader-two"];

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

fn options() -> (PeerOptions, ClientIdentityOptions) {
    let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    let m = cmd
        .try_get_matches_from([
            "svc".to_owned(),
            "--identity-host=https://identity.example".to_owned(),
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

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn run(clusters: usize) -> String {
    let ca = TestCa::new("clusters server CA");
    let clients = TestCa::new("clusters client CA");
    let mut beds = Vec::with_capacity(clusters);
    for i in 0..clusters {
        let tb = Testbed::start().await;
        let leaf = clients.client_leaf("region", i as u64 + 1);
        tb.upsert(secret_with(
            NS,
            CA,
            "kubernetes.io/tls",
            &[("tls.crt", &ca.pem()), ("ca.crt", &ca.pem())],
        ));
        tb.upsert(tls_secret(NS, IDENTITY, &leaf.cert_pem, &leaf.key_pem));
        let mut callers = vec![tb.cluster_client()];
        for token in READERS {
            tb.add_token(
                token,
                vec![
                    kube_testbed::Rule::new(&["get", "list", "watch"], "", "secrets").namespace(NS),
                ],
            );
            callers
                .push(svc_tls::ClusterClient::try_from_config(tb.config_for_token(token)).unwrap());
        }
        beds.push((callers, tb));
    }
    let (peer, me) = options();
    let watches = svc_tls::watch::WatchedObjects::with_eviction_grace(GRACE);
    let streams = svc_tls::spiffe::WorkloadApiStreams::new();
    let before = rss_kib();
    let (mut first, mut later) = (Vec::new(), Vec::new());
    let mut keep = Vec::new();
    for client in beds.iter().flat_map(|(callers, _)| callers) {
        let started = Instant::now();
        keep.push(
            PeerTls::from_options_in(&watches, &streams, client, &peer, &me, TIMEOUT)
                .await
                .unwrap(),
        );
        first.push(started.elapsed());
    }
    for client in beds.iter().flat_map(|(callers, _)| callers) {
        let started = Instant::now();
        let again = PeerTls::from_options_in(&watches, &streams, client, &peer, &me, TIMEOUT)
            .await
            .unwrap();
        later.push(started.elapsed());
        drop(again);
    }
    // Let the watches settle (each emulator counts its open WATCH).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib();
    let open = |beds: &[(Vec<svc_tls::ClusterClient>, Testbed)]| -> usize {
        beds.iter().map(|(_, tb)| tb.open_watches()).sum()
    };
    let open_watches = open(&beds);
    let entries = watches.counts().secrets;
    let per_entry = after.saturating_sub(before) as f64 / entries as f64;

    // Every construction dropped: entries, API clients and watches go after the grace.
    drop(keep);
    let dropped = Instant::now();
    let deadline = dropped + GRACE * 10;
    while (watches.counts() != svc_tls::watch::RegistryCounts::default() || open(&beds) != 0)
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let back = dropped.elapsed();
    let left = watches.counts();
    let row = format!(
        "| {clusters} | 3 | {entries} | {open_watches} | {:.1} ms | {:.1} us | {per_entry:.0} KiB | {} entries, {} API clients, {} open watches after {:.1} s (grace {} s) |",
        median(first).as_secs_f64() * 1e3,
        median(later).as_secs_f64() * 1e6,
        left.secrets,
        left.kube_clients,
        open(&beds),
        back.as_secs_f64(),
        GRACE.as_secs(),
    );
    for (_, tb) in &beds {
        tb.stop().await;
    }
    row
}

fn main() {
    let clusters: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("usage: clusters N"))
        .unwrap_or(10);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("{}", rt.block_on(run(clusters)));
}
