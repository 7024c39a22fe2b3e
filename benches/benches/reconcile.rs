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
//! The same rows again with both sides reading from one real kube-apiserver (and
//! etcd, `crates/real-apiserver`, started after the kube-testbed rows):
//! `reconcile-real/<case>`, `reconcile-request-real/<case>` and
//! `reconcile-request-cpu-real/<case>` beside `go/reconcile-real/<case>` and so on (a
//! second Go child, whose cache-backed client reads that server, measuring its
//! `go/reconcile/<case>` operations). Both read with one token that may only `get`,
//! `list` and `watch` the Secrets of the bench namespace. Without the server's
//! binaries (`cargo xtask real-peers`) these rows are skipped with the reason printed.
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
use k8s_openapi::api::core::v1::Secret;
use real_apiserver::ApiServerUnderTest as _;
use svc_tls::ClusterClient;
use svc_tls::client::PeerTls;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::spiffe::WorkloadApiStreams;
use svc_tls::watch::WatchedObjects;

const NS: &str = "bench";
/// The cases measured: the key types the platform issues most (cert-manager's
/// defaults), the same names as Go's rows.
pub const CASES: &[&str] = &["p256-pkcs8", "rsa2048-pkcs8"];

/// What one set of rows reads from and measures with: the API server (through our
/// client and a registry of its own), the Go child whose controller-runtime cache
/// reads the same server, the shared HTTPS server, and the rows' label (`""` on
/// kube-testbed, `"-real"` on the real kube-apiserver).
struct Rows<'a> {
    rt: &'a tokio::runtime::Runtime,
    client: ClusterClient,
    watches: WatchedObjects,
    streams: WorkloadApiStreams,
    go: Option<&'a RefCell<GoChild>>,
    server: Option<&'a GoServer>,
    label: &'a str,
    rounds: usize,
    target: Duration,
}

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
    testbed.upsert(object(common::secret(
        NS,
        "peer-ca",
        &material.server_ca_pem,
        &material.server_ca_pem,
    )));

    let (rounds, target) = if quick {
        (4, Duration::from_millis(2))
    } else {
        (30, Duration::from_millis(20))
    };
    let server = GoServer::spawn(&material.dir);
    {
        let go = GoChild::spawn(&material.dir);
        if let (Some(go), Some(server)) = (&go, &server) {
            go.borrow_mut().peer("https", server.https);
        }
        // Go reads the same Secrets from the same API server as ours, through
        // controller-runtime's cache-backed client (its informer started and synced
        // here, before any round, as ours watch before the measured reconciles).
        if let Some(go) = &go {
            let ca_file = material.dir.join("kube-testbed-ca.crt");
            std::fs::write(&ca_file, testbed.ca_pem()).unwrap();
            go.borrow_mut()
                .cluster(&testbed.base_url(), &testbed.token(), &ca_file);
        }
        let rows = Rows {
            rt: &rt,
            client: testbed.cluster_client(),
            watches: WatchedObjects::new(),
            streams: WorkloadApiStreams::new(),
            go: go.as_ref(),
            server: server.as_ref(),
            label: "",
            rounds,
            target,
        };
        for name in CASES {
            let case = material.case(name);
            testbed.upsert(object(common::secret(
                NS,
                &format!("identity-{name}"),
                &case.cert_pem,
                &case.key_pem,
            )));
            // Neither side may reach the API server per reconcile: ours reads the
            // registry's watch caches, Go's controller-runtime's informer (a
            // client.Get not served from the cache would show here as a GET). The
            // first reconcile, which watches, runs before these counts.
            let counted = std::cell::Cell::new(None);
            rows.case(name, || {
                counted.set(Some((testbed.requests("list"), testbed.requests("get"))));
            });
            let (lists, gets) = counted.get().unwrap();
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
        }
        // The testbed's Go child (and its informer) ends here, before the real server.
    }
    real_rows(&rt, &material, server.as_ref(), rounds, target);
}

/// The same rows with both sides reading from one real kube-apiserver (and etcd),
/// started here, after the kube-testbed rows, so that its processes do not share the
/// machine with those. Both sides read with one token allowed only `get`, `list` and
/// `watch` on the Secrets of the bench namespace (our `ClusterClient` from the
/// server's config for it; the Go child's cache-backed client with the same bearer
/// token and serving CA). Skipped, with the reason printed, when the server cannot
/// start (its binaries not built: `cargo xtask real-peers`).
fn real_rows(
    rt: &tokio::runtime::Runtime,
    material: &common::Material,
    server: Option<&GoServer>,
    rounds: usize,
    target: Duration,
) {
    let started = Instant::now();
    let real = match real_apiserver::start_blocking(real_apiserver::Options::default()) {
        Ok(real) => real,
        Err(error) => {
            eprintln!(
                "bench: the reconcile-real rows are skipped: the real kube-apiserver \
                 cannot start here: {error}"
            );
            return;
        }
    };
    eprintln!(
        "bench: real kube-apiserver {} started in {:.1} s",
        real_apiserver::kube_version(),
        started.elapsed().as_secs_f64()
    );
    let apply = |secret: Secret| rt.block_on(real.apply(object(secret)));
    apply(common::secret(
        NS,
        "peer-ca",
        &material.server_ca_pem,
        &material.server_ca_pem,
    ));
    for name in CASES {
        let case = material.case(name);
        apply(common::secret(
            NS,
            &format!("identity-{name}"),
            &case.cert_pem,
            &case.key_pem,
        ));
    }
    let token = rt.block_on(real.reader_of(NS, "secrets"));
    let go = GoChild::spawn(&material.dir);
    if let (Some(go), Some(server)) = (&go, server) {
        go.borrow_mut().peer("https", server.https);
    }
    if let Some(go) = &go {
        let ca_file = material.dir.join("real-apiserver-ca.crt");
        std::fs::write(&ca_file, real.ca_pem()).unwrap();
        go.borrow_mut().cluster(&real.base_url(), &token, &ca_file);
    }
    let rows = Rows {
        rt,
        client: real.cluster_client_for(&token),
        watches: WatchedObjects::new(),
        streams: WorkloadApiStreams::new(),
        go: go.as_ref(),
        server,
        label: "-real",
        rounds,
        target,
    };
    // As on kube-testbed, neither side may read a Secret from the server per
    // reconcile: the server's own count of the Secret GETs and LISTs it served is
    // the same after the measured reconciles as after the first one.
    let admin = real.client();
    for name in CASES {
        let counted = std::cell::Cell::new(None);
        rows.case(name, || counted.set(Some(secret_reads(rt, &admin))));
        assert_eq!(
            secret_reads(rt, &admin),
            counted.get().unwrap(),
            "a measured reconcile read a Secret from the real kube-apiserver \
             ([GET, LIST] served before and after)"
        );
    }
    let [gets, lists] = secret_reads(rt, &admin);
    eprintln!(
        "bench: the reconcile-real rows took {:.1} s with the server's start (it served \
         {gets} Secret GETs and {lists} LISTs, none during the measured reconciles)",
        started.elapsed().as_secs_f64()
    );
}

/// The Secret GETs and LISTs the real server has served (`[GET, LIST]`), from its
/// `apiserver_request_total` metric, read with the admin's client.
fn secret_reads(rt: &tokio::runtime::Runtime, admin: &kube::Client) -> [u64; 2] {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = rt.block_on(admin.request_text(request)).unwrap();
    let mut reads = [0; 2];
    for line in text.lines().filter(|line| {
        line.starts_with("apiserver_request_total{") && line.contains("resource=\"secrets\"")
    }) {
        let slot = if line.contains("verb=\"GET\"") {
            0
        } else if line.contains("verb=\"LIST\"") {
            1
        } else {
            continue;
        };
        let value = line.rsplit(' ').next().unwrap();
        reads[slot] += value.parse::<f64>().unwrap() as u64;
    }
    reads
}

/// `secret` as the JSON object an API server takes.
fn object(secret: Secret) -> serde_json::Value {
    let mut value = serde_json::to_value(secret).unwrap();
    value["apiVersion"] = "v1".into();
    value["kind"] = "Secret".into();
    value
}

impl Rows<'_> {
    /// The rows of case `name` (its identity Secret `identity-<name>` already
    /// written): `reconcile<label>/<name>` beside `go/reconcile<label>/<name>`, and with
    /// the HTTPS server `reconcile-request<label>/<name>` and its CPU row.
    /// `warmed` runs after the first reconcile (which watches the Secrets), before
    /// any measured one.
    fn case(&self, name: &str, warmed: impl FnOnce()) {
        let Self {
            rt,
            client,
            watches,
            streams,
            go,
            server,
            label,
            rounds,
            target,
        } = self;
        let (rt, go, server, label, rounds, target) = (*rt, *go, *server, *label, *rounds, *target);
        let secret = format!("identity-{name}");
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
        let construct = || rt.block_on(peer_tls(watches, streams, client, &peer, &me));
        // The first reconcile watches the Secrets; the measured ones do not.
        let first = construct();
        warmed();
        let reconcile = || {
            let tls = construct();
            black_box(tls.reqwest_client().unwrap());
        };
        let n = size(reconcile, target);
        let mut arms: Vec<Arm<'_>> = vec![Box::new(move || time(n, reconcile))];
        // The Go child's operations are named as on kube-testbed (the child reads the
        // server its `cluster` command named); the rows carry the label.
        let theirs = format!("go/reconcile{label}/{name}");
        if let Some(go) = go {
            let id = format!("go/reconcile/{name}");
            arms.push(Box::new(move || go.borrow_mut().measure(&id, 0, target).ns));
        }
        let mut samples = interleave(rounds, arms).into_iter();
        let mut series = vec![(format!("reconcile{label}/{name}"), samples.next().unwrap())];
        if let Some(go_samples) = samples.next() {
            series.push((theirs, go_samples));
        }
        common::emit_paired("reconcile", &format!("{name}{label}"), &series);

        // A reconcile and one request, both languages to the same HTTPS server. Ours
        // runs as a task on the runtime's workers, as a controller's reconcile does;
        // one `block_on` per reconcile from this thread would add a hand-off between
        // threads per request that no controller pays. Go's is its child's loop.
        if let (Some(go), Some(server)) = (go, server) {
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
            let id = format!("go/reconcile-request/{name}");
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
                &format!("request{label}/{name}"),
                &[
                    (
                        format!("reconcile-request{label}/{name}"),
                        samples.next().unwrap(),
                    ),
                    (
                        format!("go/reconcile-request{label}/{name}"),
                        samples.next().unwrap(),
                    ),
                ],
            );
            // The warm-up call of each arm is not a round.
            let (mut ours_cpu, mut go_cpu) = (ours_cpu.take(), go_cpu.take());
            ours_cpu.remove(0);
            go_cpu.remove(0);
            common::emit_paired(
                "reconcile",
                &format!("request-cpu{label}/{name}"),
                &[
                    (format!("reconcile-request-cpu{label}/{name}"), ours_cpu),
                    (format!("go/reconcile-request-cpu{label}/{name}"), go_cpu),
                ],
            );
        }
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
