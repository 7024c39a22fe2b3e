//! Soak: does memory stay flat over a million identity reloads and tens of thousands
//! of mTLS handshakes? Run by `cargo xtask soak` (release build); not part of the test
//! suite.
//!
//! One process holds the kube-testbed API emulator (history limited to 64 events, so
//! its own event log stays bounded), an `IdentityResolver` watching a
//! `kubernetes.io/tls` Secret in it, and test-support's verifying TLS server
//! configuration. The work runs in rounds; each round does its share of:
//!
//! - reloads: `IdentityResolver::reload` (what every handshake does) in a tight loop;
//!   every `--rotate-every` calls the Secret is rewritten with the next of eight
//!   pre-generated leaves (different bytes each time, so the identity cache misses and
//!   the resolver really loads and installs it); the calls in between, and those made
//!   while the watch delivers the write, are unchanged reloads;
//! - handshakes: full TLS 1.3 handshakes between an in-memory rustls client (the
//!   resolver presenting the identity) and server (verifying it), no sockets, the
//!   Secret also rotated every `--rotate-every` handshakes.
//!
//! After each round it samples the resident set size (`VmRSS` in
//! `/proc/self/status`) and prints a table. The verdict compares the sample at the end
//! of the first quarter of the rounds (everything warmed up: allocator arenas, rustls
//! buffers, the watch's caches) with the last one: "flat" when the growth is under
//! `--bound-mib` (5 MiB by default). Why that bound: a leak of 8 bytes per reload over
//! the last three quarters of a million reloads is 5.7 MiB, and a leaked identity
//! (certificate and key, about 1 KiB) per handshake over the last three quarters of
//! 50 000 handshakes is about 37 MiB, while allocator noise stays within a few MiB. The process exits non-zero
//! when memory grew.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_testbed::{Testbed, TestbedOptions};
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection};
use svc_tls::client::{TrustMode, client_config};
use svc_tls::identity::IdentityResolver;
use svc_tls::origin::SecretRef;
use test_support::pki::{Leaf, TestCa};
use test_support::tls_server::{VerifyingServer, serial_of};

const NS: &str = "soak";
const NAME: &str = "soak-client-certificate";

struct Options {
    reloads: u64,
    handshakes: u64,
    rotate_every: u64,
    rounds: u64,
    bound_mib: f64,
}

fn usage() -> ! {
    eprintln!(
        "usage: soak [--reloads N (1000000)] [--handshakes N (50000)] [--rotate-every N (500)] \
         [--rounds N (40)] [--bound-mib F (5)]"
    );
    std::process::exit(2)
}

fn options() -> Options {
    let mut o = Options {
        reloads: 1_000_000,
        handshakes: 50_000,
        rotate_every: 500,
        rounds: 40,
        bound_mib: 5.0,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let Some(value) = it.next() else { usage() };
        match flag.as_str() {
            "--reloads" => o.reloads = value.parse().unwrap_or_else(|_| usage()),
            "--handshakes" => o.handshakes = value.parse().unwrap_or_else(|_| usage()),
            "--rotate-every" => o.rotate_every = value.parse().unwrap_or_else(|_| usage()),
            "--rounds" => o.rounds = value.parse().unwrap_or_else(|_| usage()),
            "--bound-mib" => o.bound_mib = value.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    if o.rounds < 4 || o.rotate_every == 0 {
        usage()
    }
    o
}

/// Resident set size in KiB, from `/proc/self/status`.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

fn secret(leaf: &Leaf) -> serde_json::Value {
    test_support::secret::tls_secret(NS, NAME, &leaf.cert_pem, &leaf.key_pem)
}

/// Moves what `from` has to send into `to`, processing it as it goes.
fn transfer<A, B>(
    from: &mut rustls::ConnectionCommon<A>,
    to: &mut rustls::ConnectionCommon<B>,
) -> Result<(), rustls::Error> {
    let mut bytes = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut bytes).expect("write to a Vec");
    }
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        to.read_tls(&mut rest).expect("read from a slice");
        to.process_new_packets()?;
    }
    Ok(())
}

/// One full in-memory TLS 1.3 handshake: the client leaf's serial the server verified.
fn handshake(client: &Arc<ClientConfig>, server: &Arc<ServerConfig>) -> Result<u64, String> {
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let mut c = ClientConnection::new(client.clone(), name).map_err(|e| e.to_string())?;
    let mut s = ServerConnection::new(server.clone()).map_err(|e| e.to_string())?;
    while c.is_handshaking() || s.is_handshaking() {
        transfer(&mut *c, &mut *s).map_err(|e| format!("server: {e}"))?;
        transfer(&mut *s, &mut *c).map_err(|e| format!("client: {e}"))?;
    }
    let leaf = s
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or("no client certificate")?;
    serial_of(leaf).ok_or_else(|| "unreadable client serial".to_owned())
}

/// The Secret rotation: writes the next leaf, knows when it is being served.
struct Rotation<'a> {
    tb: &'a Testbed,
    leaves: &'a [Leaf],
    next: usize,
    pending: Option<u64>,
    writes: u64,
}

impl Rotation<'_> {
    /// Writes the next leaf unless the previous write is still on its way.
    fn rotate(&mut self) {
        if self.pending.is_some() {
            return;
        }
        let leaf = &self.leaves[self.next % self.leaves.len()];
        self.next += 1;
        self.tb.upsert(secret(leaf));
        self.pending = Some(leaf.serial);
        self.writes += 1;
    }

    /// Notes the serial now served; true when it is the pending write's.
    fn served(&mut self, serial: u64) -> bool {
        if self.pending == Some(serial) {
            self.pending = None;
            return true;
        }
        false
    }
}

fn main() {
    let o = options();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server_ca = TestCa::new("soak server CA");
    let client_ca = TestCa::new("soak client CA");
    // Eight leaves cycled: every rotation changes the Secret's bytes.
    let leaves: Vec<Leaf> = (1..=8).map(|s| client_ca.client_leaf("soak", s)).collect();

    let (tb, resolver, server) = rt.block_on(async {
        let tb = Testbed::start_with(TestbedOptions {
            history_limit: 64,
            ..TestbedOptions::default()
        })
        .await;
        tb.upsert(secret(&leaves[0]));
        let resolver = IdentityResolver::builder(tb.client(), SecretRef::new(NS, NAME))
            .settings(
                svc_tls::identity::IdentitySettings::default()
                    .sync_timeout(Duration::from_secs(30)),
            )
            .build()
            .await
            .unwrap();
        let server = VerifyingServer::builder(&server_ca, &client_ca)
            .keep_seen(false)
            .start()
            .await;
        (tb, resolver, server)
    });
    let client = Arc::new(
        client_config(
            Arc::new(svc_tls::material::crypto_provider()),
            TrustMode::Roots(server_ca.roots()),
            Some(&resolver),
        )
        .unwrap(),
    );
    let server_config = server.server_config();
    let serial = |identity: &svc_tls::material::Identity| serial_of(identity.leaf_der());

    let mut rotation = Rotation {
        tb: &tb,
        leaves: &leaves,
        next: 1,
        pending: None,
        writes: 0,
    };
    let (mut reloads, mut changed, mut handshakes, mut presented_new) = (0u64, 0u64, 0u64, 0u64);
    let mut samples: Vec<(u64, u64, u64, Duration, u64)> = Vec::new();
    let start = Instant::now();
    samples.push((0, 0, 0, Duration::ZERO, rss_kib()));
    println!(
        "soak: {} reloads, {} handshakes, Secret rotated every {} calls, {} rounds",
        o.reloads, o.handshakes, o.rotate_every, o.rounds
    );
    println!(
        "{:>5} {:>10} {:>10} {:>9} {:>9}",
        "round", "reloads", "handshakes", "elapsed", "RSS MiB"
    );
    for round in 1..=o.rounds {
        let reload_goal = o.reloads * round / o.rounds;
        while reloads < reload_goal {
            if reloads % o.rotate_every == 0 {
                rotation.rotate();
            }
            let identity = resolver.reload();
            reloads += 1;
            if serial(&identity).is_some_and(|s| rotation.served(s)) {
                changed += 1;
            }
        }
        let handshake_goal = o.handshakes * round / o.rounds;
        while handshakes < handshake_goal {
            if handshakes % o.rotate_every == 0 {
                rotation.rotate();
            }
            let s = handshake(&client, &server_config).unwrap_or_else(|e| {
                eprintln!("soak: handshake {handshakes} failed: {e}");
                std::process::exit(1)
            });
            handshakes += 1;
            if rotation.served(s) {
                presented_new += 1;
            }
        }
        let rss = rss_kib();
        let elapsed = start.elapsed();
        samples.push((round, reloads, handshakes, elapsed, rss));
        println!(
            "{round:>5} {reloads:>10} {handshakes:>10} {:>8.1}s {:>9.1}",
            elapsed.as_secs_f64(),
            rss as f64 / 1024.0
        );
    }

    let quarter = samples[(o.rounds / 4) as usize].4;
    let last = samples[samples.len() - 1].4;
    let growth_mib = (last as f64 - quarter as f64) / 1024.0;
    let flat = growth_mib < o.bound_mib;
    println!(
        "Secret writes: {}; reloads that installed a new identity: {changed}; handshakes that \
         presented a new identity first: {presented_new}; resolver failures: {}",
        rotation.writes,
        resolver.state().failures
    );
    println!(
        "RSS: start {:.1} MiB, end of first quarter {:.1} MiB, end {:.1} MiB: growth {growth_mib:+.2} MiB \
         ({:+.1}%) over the last three quarters",
        samples[0].4 as f64 / 1024.0,
        quarter as f64 / 1024.0,
        last as f64 / 1024.0,
        growth_mib * 1024.0 * 100.0 / quarter as f64,
    );
    println!(
        "verdict: {} (bound {} MiB)",
        if flat { "flat" } else { "GROWING" },
        o.bound_mib
    );
    drop(server);
    drop(resolver);
    drop(tb);
    if !flat {
        std::process::exit(1);
    }
}
