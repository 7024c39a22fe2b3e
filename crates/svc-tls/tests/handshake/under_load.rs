//! Under load: four clients send requests back to back, each on a new connection and
//! so a new handshake, through test-support's verifying TLS 1.3 server, presenting the
//! identity svc-tls's `IdentityResolver` reads from a `kubernetes.io/tls` Secret in
//! the API emulator, and verifying the server through a `TrustVerifier` on a watched
//! CA Secret. While they run, in sequence:
//!
//! 1. three client-leaf rotations;
//! 2. a client-CA rotation with an overlap window: the server trusts the old and the
//!    new CA, the Secret gets a leaf from the new CA, the old CA is dropped;
//! 3. an API outage of four seconds, with a rotation written into the emulator's store
//!    while the API is down (delivered by the watch when it comes back);
//! 4. the Secret broken (garbage `tls.key`), then fixed with a new leaf.
//!
//! Every request is counted, with why when it failed. The test requires zero failed
//! requests (each step only moves the Secret once the server trusts what it will
//! hold), that every update is presented in the end, and that the broken Secret was
//! really seen (and refused) by the resolver. It prints the figures: requests,
//! failures, and per update the time from the write to the first handshake that
//! presented the new leaf. Those are measurements for `docs/operations.md`, not
//! assertions.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube_testbed::Testbed;
use support::*;
use svc_tls::client::{TrustMode, client_config};
use svc_tls::identity::IdentityResolver;
use svc_tls::origin::SecretRef;
use svc_tls::trust::TrustVerifier;
use test_support::poll_until;
use test_support::tls_server::{Handler, Reply, Seen, VerifyingServer, request_serial};

const NAME: &str = "load-client-certificate";
const CA_NAME: &str = "load-server-ca";
const CLIENTS: usize = 4;

/// The phases, by index into this list (each failure is counted in the phase it fell in).
const PHASES: &[&str] = &[
    "warm-up",
    "leaf rotations",
    "CA overlap",
    "API outage",
    "broken Secret",
    "fixed",
];

/// One Secret update and when it was written.
struct Update {
    what: &'static str,
    serial: u64,
    written: Instant,
}

/// First time the server saw each client serial (the handshake's completion).
type FirstSeen = Arc<Mutex<HashMap<u64, Instant>>>;

fn first_seen_handler(first: FirstSeen) -> Handler {
    Arc::new(move |seen: &Seen, _: &hyper::http::request::Parts| {
        let serial = seen.serial.unwrap_or_default();
        first.lock().unwrap().entry(serial).or_insert(seen.at);
        Reply {
            status: 200,
            body: serial.to_string(),
        }
    })
}

fn presented(first: &FirstSeen, serial: u64) -> bool {
    first.lock().unwrap().contains_key(&serial)
}

/// Writes `leaf` into the Secret and remembers when.
fn rotate(tb: &Testbed, updates: &mut Vec<Update>, what: &'static str, leaf: &Leaf) {
    let written = Instant::now();
    tb.upsert(tls_secret(NAME, &leaf.cert_pem, &leaf.key_pem));
    updates.push(Update {
        what,
        serial: leaf.serial,
        written,
    });
}

async fn until_presented(first: &FirstSeen, leaf: &Leaf) {
    poll_until(
        &format!("a handshake presenting serial {}", leaf.serial),
        || presented(first, leaf.serial),
    )
    .await;
}

/// Min, median and max of a non-empty list.
fn spread(mut values: Vec<Duration>) -> (Duration, Duration, Duration) {
    values.sort();
    (
        values[0],
        values[values.len() / 2],
        values[values.len() - 1],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotations_ca_overlap_outage_and_a_broken_secret_fail_no_request() {
    let tb = Testbed::start().await;
    let server_ca = TestCa::new("load server CA");
    let (ca_old, ca_new) = (TestCa::new("clients 2026"), TestCa::new("clients 2027"));
    tb.upsert(secret_with(
        CA_NAME,
        "kubernetes.io/tls",
        &[("tls.crt", &server_ca.pem())],
    ));
    let first_leaf = ca_old.client_leaf("svc", 1);
    tb.upsert(tls_secret(NAME, &first_leaf.cert_pem, &first_leaf.key_pem));

    let resolver = IdentityResolver::builder(tb.client(), SecretRef::new(NS, NAME))
        .settings(
            svc_tls::identity::IdentitySettings::default().sync_timeout(Duration::from_secs(10)),
        )
        .build()
        .await
        .unwrap();
    let trust = TrustVerifier::builder(tb.client(), SecretRef::new(NS, CA_NAME))
        .settings(svc_tls::trust::TrustSettings::default().sync_timeout(Duration::from_secs(10)))
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

    let first: FirstSeen = Arc::default();
    let server = VerifyingServer::builder(&server_ca, &ca_old)
        .handler(first_seen_handler(first.clone()))
        .keep_seen(false)
        .start()
        .await;

    // The clients: new connection per request, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let phase = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (config, stop, phase, addr) =
                (config.clone(), stop.clone(), phase.clone(), server.addr);
            tokio::spawn(async move {
                let (mut ok, mut failed) = (0u64, Vec::new());
                while !stop.load(Ordering::SeqCst) {
                    match request_serial(config.clone(), addr).await {
                        Ok(_) => ok += 1,
                        Err(why) => failed.push((PHASES[phase.load(Ordering::SeqCst)], why)),
                    }
                    // A breath between requests keeps the run to roughly a thousand
                    // connections a second in all: each closed connection holds a
                    // loopback port in TIME_WAIT for a minute, and a machine without
                    // `tcp_tw_reuse` has about 28 000 of them.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                (ok, failed)
            })
        })
        .collect();
    // A second of load in each state, after each step's own event has been waited
    // for: a window for failures to show in (counted and asserted at the end), not a
    // wait for anything to happen.
    let pause = || tokio::time::sleep(Duration::from_secs(1));

    let mut updates = Vec::new();
    until_presented(&first, &first_leaf).await;
    pause().await;

    // 1. Three leaf rotations.
    phase.store(1, Ordering::SeqCst);
    for serial in 2..=4 {
        let leaf = ca_old.client_leaf("svc", serial);
        rotate(&tb, &mut updates, "leaf rotation", &leaf);
        until_presented(&first, &leaf).await;
        pause().await;
    }

    // 2. CA rotation: trust both, move the Secret to the new CA, drop the old one.
    phase.store(2, Ordering::SeqCst);
    server.set_client_cas(&[&ca_old, &ca_new]);
    pause().await;
    let leaf = ca_new.client_leaf("svc", 5);
    rotate(&tb, &mut updates, "new client CA", &leaf);
    until_presented(&first, &leaf).await;
    pause().await;
    server.set_client_ca(&ca_new);
    pause().await;

    // 3. The API goes away for four seconds; a rotation is written into the store
    //    while it is down, and arrives when the watch comes back. (The two sleeps are
    //    the outage itself, under load, not waits for an event.)
    phase.store(3, Ordering::SeqCst);
    tb.stop().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let leaf = ca_new.client_leaf("svc", 6);
    rotate(&tb, &mut updates, "written during an API outage", &leaf);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let api_back = Instant::now();
    tb.restart(true).await;
    // The watch comes back after kube-runtime's backoff (0.8 s doubling, with
    // jitter, over the outage), which can outlast `poll_until`'s ten seconds: a longer
    // bound here, still only there to end a broken run.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !presented(&first, leaf.serial) {
        assert!(
            Instant::now() < deadline,
            "serial {} written during the outage was never presented",
            leaf.serial
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let after_restart = first.lock().unwrap()[&6] - api_back;
    pause().await;

    // 4. Garbage in tls.key: the last good identity goes on being presented.
    phase.store(4, Ordering::SeqCst);
    let failures_before = resolver.state().failures;
    tb.upsert(secret_with(
        NAME,
        "kubernetes.io/tls",
        &[
            ("tls.crt", &leaf.cert_pem),
            (
                "tls.key",
                "-----BEGIN PRIVATE KEY-----\nZ2FyYmFnZQ==\n-----END PRIVATE KEY-----\n",
            ),
        ],
    ));
    poll_until("the resolver refuses the broken Secret", || {
        resolver.state().failures > failures_before
    })
    .await;
    pause().await;
    phase.store(5, Ordering::SeqCst);
    let leaf = ca_new.client_leaf("svc", 7);
    rotate(&tb, &mut updates, "fix after a broken Secret", &leaf);
    until_presented(&first, &leaf).await;
    pause().await;

    stop.store(true, Ordering::SeqCst);
    let (mut requests, mut failed) = (0u64, Vec::new());
    for client in clients {
        let (ok, f) = client.await.unwrap();
        requests += ok + f.len() as u64;
        failed.extend(f);
    }

    // The figures.
    let first = first.lock().unwrap().clone();
    let latencies: Vec<(&str, u64, Duration)> = updates
        .iter()
        .map(|u| (u.what, u.serial, first[&u.serial] - u.written))
        .collect();
    println!(
        "under load: {CLIENTS} clients, {requests} requests (each a new handshake), {} failed, \
         {} handshakes completed and {} rejected by the server",
        failed.len(),
        server.handshakes(),
        server.rejected()
    );
    for (what, serial, latency) in &latencies {
        println!("  serial {serial} ({what}): first presented {latency:?} after the write");
    }
    println!("  serial 6 first presented {after_restart:?} after the API came back");
    let (min, median, max) = spread(latencies.iter().map(|l| l.2).collect());
    println!(
        "  update -> first handshake with the new leaf: min {min:?}, median {median:?}, max {max:?}"
    );
    let mut why: HashMap<String, usize> = HashMap::new();
    for (phase, reason) in &failed {
        *why.entry(format!("{phase}: {reason}")).or_default() += 1;
    }
    for (reason, n) in &why {
        println!("  failed {n}x: {reason}");
    }

    assert_eq!(updates.len(), 6, "every update was made and presented");
    assert!(requests > 0);
    assert!(failed.is_empty(), "failed requests: {why:#?}");
    assert_eq!(server.rejected(), 0, "{:?}", server.rejection_reasons());
}
