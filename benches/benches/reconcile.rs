//! One "reconcile construction", as the platform's controllers build a peer client per
//! reconcile: the peer's TLS from the options (`PeerTls::from_options_in`, the
//! CA Secret and the identity Secret already watched by the registry, as they are
//! after the first reconcile) and an HTTP client from it; measured in interleaved
//! rounds with the Go program's counterpart (a long-lived child, one batch on
//! command), so each ratio is paired round by round:
//!
//! - `reconcile/<case>`: one construction and `reqwest_client()`, dropped at the end,
//!   beside `go/reconcile/<case>` (`TLSClientConfig` per reconcile: the Get of both
//!   Secrets through controller-runtime's cache-backed client, whose informer watches
//!   the same kube-testbed API server as ours, `tls.X509KeyPair`, a root pool, a
//!   `tls.Config` and a new `http.Transport`);
//! - `reconcile-request/<case>`: a reconcile and one request (issue 30): the
//!   construction, the peer client (`PeerTls::client()`, the process's shared,
//!   pooled client for this peer setup), one GET and its body, run as a task on the
//!   runtime's workers as a controller's reconciles are (a batch per task), beside
//!   `go/reconcile-request/<case>` (`TLSClientConfig`, a new `http.Transport`, one
//!   GET). Both send to the same HTTPS server, the Go program in `-mode server` in a
//!   process of its own, which requires and verifies client certificates.
//!
//! Each sample is the mean time of one reconcile over a batch of about 20 ms (each
//! construction of `reconcile/` also pays one `Runtime::block_on`, about a
//! microsecond; each batch of `reconcile-request/` one spawn and one `block_on`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use std::cell::RefCell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use common::go::{Arm, GoChild, GoServer, interleave, process_cpu_ns, size, time};
use svc_tls::ClusterClient;
use svc_tls::client::PeerTls;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::spiffe::WorkloadApiStreams;
use svc_tls::watch::WatchedObjects;

const NS: &str = "bench";
/// The cases measured: the key types the platform issues most (cert-manager's
/// defaults), the same names as Go's rows.
pub const CASES: &[&str] = &["p256-pkcs8", "rsa2048-pkcs8"];

fn main() {
    let material = common::material();
    let quick = common::quick();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let testbed = rt.block_on(kube_testbed::Testbed::start());
    let client = testbed.cluster_client();
    let watches = WatchedObjects::new();
    let streams = WorkloadApiStreams::new();
    testbed.upsert(
        serde_json::to_value(common::secret(
            NS,
            "peer-ca",
            &material.server_ca_pem,
            &material.server_ca_pem,
        ))
        .map(|mut v| {
            v["apiVersion"] = "v1".into();
            v["kind"] = "Secret".into();
            v
        })
        .unwrap(),
    );

    let (rounds, target) = if quick {
        (4, Duration::from_millis(2))
    } else {
        (30, Duration::from_millis(20))
    };
    let go = GoChild::spawn(&material.dir);
    let server = GoServer::spawn(&material.dir);
    if let (Some(go), Some(server)) = (&go, &server) {
        go.borrow_mut().peer("https", server.https);
    }
    // Go reads the same Secrets from the same API server as ours, through
    // controller-runtime's cache-backed client (its informer started and synced here,
    // before any round, as ours watch before the measured reconciles).
    if let Some(go) = &go {
        let ca_file = material.dir.join("kube-testbed-ca.crt");
        std::fs::write(&ca_file, testbed.ca_pem()).unwrap();
        go.borrow_mut()
            .cluster(&testbed.base_url(), &testbed.token(), &ca_file);
    }
    for name in CASES {
        let case = material.case(name);
        let secret = format!("identity-{name}");
        let mut value =
            serde_json::to_value(common::secret(NS, &secret, &case.cert_pem, &case.key_pem))
                .unwrap();
        value["apiVersion"] = "v1".into();
        value["kind"] = "Secret".into();
        testbed.upsert(value);
        let options = |host: &str| {
            let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
            let cmd = ClientIdentityOptions::augment(cmd, None);
            let m = cmd
                .try_get_matches_from([
                    "svc".to_owned(),
                    format!("--identity-host={host}"),
                    format!("--identity-ca-secret-namespace={NS}"),
                    "--identity-ca-secret-name=peer-ca".to_owned(),
                    format!("--client-certificate-namespace={NS}"),
                    format!("--client-certificate-name={secret}"),
                ])
                .unwrap();
            (
                PeerOptions::from_matches(&m, "identity").unwrap(),
                ClientIdentityOptions::from_matches(&m, None).unwrap(),
            )
        };
        let (peer, me) = options("https://identity.bench.test");
        let construct = || rt.block_on(peer_tls(&watches, &streams, &client, &peer, &me));
        // The first reconcile watches the Secrets; the measured ones do not.
        let first = construct();
        // Neither side may reach the API server per reconcile: ours reads the
        // registry's watch caches, Go's controller-runtime's informer (a client.Get
        // not served from the cache would show here as a GET).
        let (lists, gets) = (testbed.requests("list"), testbed.requests("get"));
        let reconcile = || {
            let tls = construct();
            black_box(tls.reqwest_client().unwrap());
        };
        let n = size(reconcile, target);
        let mut arms: Vec<Arm<'_>> = vec![Box::new(move || time(n, reconcile))];
        let theirs = format!("go/reconcile/{name}");
        if let Some(go) = &go {
            let id = theirs.clone();
            arms.push(Box::new(move || go.borrow_mut().measure(&id, 0, target).ns));
        }
        let mut samples = interleave(rounds, arms).into_iter();
        let mut series = vec![(format!("reconcile/{name}"), samples.next().unwrap())];
        if let Some(go_samples) = samples.next() {
            series.push((theirs, go_samples));
        }
        common::emit_paired("reconcile", name, &series);

        // A reconcile and one request, both languages to the same HTTPS server. Ours
        // runs as a task on the runtime's workers, as a controller's reconcile does;
        // one `block_on` per reconcile from this thread would add a hand-off between
        // threads per request that no controller pays. Go's is its child's loop.
        if let (Some(go), Some(server)) = (&go, &server) {
            let url = format!("https://{}/", server.https);
            let (peer, me) = options(&format!("https://{}", server.https));
            let reconciles = |n: usize| {
                let (watches, streams, client) = (watches.clone(), streams.clone(), client.clone());
                let (peer, me, url) = (peer.clone(), me.clone(), url.clone());
                rt.block_on(rt.spawn(async move {
                    for _ in 0..n {
                        let tls = peer_tls(&watches, &streams, &client, &peer, &me).await;
                        let peer_client = tls.client().unwrap();
                        let response = peer_client.get(&url).unwrap().send().await.unwrap();
                        assert!(response.status().is_success());
                        black_box(response.bytes().await.unwrap());
                    }
                }))
                .unwrap();
            };
            let reconciles = &reconciles;
            reconciles(1);
            let n = size(|| reconciles(1), target);
            // CPU per reconcile beside the time: the server is shared, so what each
            // client costs shows in its own process's CPU (ours all threads, Go's
            // `getrusage`), one sample each per round.
            let (ours_cpu, go_cpu) = (RefCell::new(Vec::new()), RefCell::new(Vec::new()));
            let timed = || {
                let (cpu, start) = (process_cpu_ns(), Instant::now());
                reconciles(n);
                let ns = start.elapsed().as_nanos() as f64 / n as f64;
                ours_cpu
                    .borrow_mut()
                    .push((process_cpu_ns() - cpu) / n as f64);
                ns
            };
            let theirs = format!("go/reconcile-request/{name}");
            let id = theirs.clone();
            let arms: Vec<Arm<'_>> = vec![
                Box::new(timed),
                Box::new(|| {
                    let batch = go.borrow_mut().measure(&id, 0, target);
                    go_cpu.borrow_mut().push(batch.cpu_ns);
                    batch.ns
                }),
            ];
            let mut samples = interleave(rounds, arms).into_iter();
            common::emit_paired(
                "reconcile",
                &format!("request/{name}"),
                &[
                    (format!("reconcile-request/{name}"), samples.next().unwrap()),
                    (theirs, samples.next().unwrap()),
                ],
            );
            // The warm-up call of each arm is not a round.
            let (mut ours_cpu, mut go_cpu) = (ours_cpu.take(), go_cpu.take());
            ours_cpu.remove(0);
            go_cpu.remove(0);
            common::emit_paired(
                "reconcile",
                &format!("request-cpu/{name}"),
                &[
                    (format!("reconcile-request-cpu/{name}"), ours_cpu),
                    (format!("go/reconcile-request-cpu/{name}"), go_cpu),
                ],
            );
        }
        assert_eq!(
            testbed.requests("list"),
            lists,
            "a measured reconcile listed"
        );
        assert_eq!(
            testbed.requests("get"),
            gets,
            "a measured reconcile sent a GET (a read not served from a cache)"
        );
        drop(first);
    }
}

/// One reconcile's construction: the peer's TLS from the options, over Secrets the
/// registry already watches (as they are after the first reconcile).
async fn peer_tls(
    watches: &WatchedObjects,
    streams: &WorkloadApiStreams,
    client: &ClusterClient,
    peer: &PeerOptions,
    me: &ClientIdentityOptions,
) -> PeerTls {
    PeerTls::from_options_in(watches, streams, client, peer, me, Duration::from_secs(30))
        .await
        .unwrap()
}
