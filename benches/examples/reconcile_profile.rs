//! Where a "reconcile plus one request" goes (the bench's `reconcile-request/<case>`
//! row without Go's arm), for a profiler (`perf record -g`) and as a decomposition:
//! the same loop cut into parts, each part's wall time and the process's CPU per
//! operation, in alternating batches against the same Go HTTPS server.
//!
//! `BENCH_GO_BINARY=target/bench-run/legacy cargo run --release -p platform-benches --example reconcile_profile -- [case] [seconds] [mode[,mode...]]`
//!
//! Modes (several alternate batch by batch):
//! - `full`: the bench's loop: construction (`PeerTls::from_options_in` over watched
//!   Secrets), `PeerTls::client()`, one GET and its body, in a task on a 2-worker
//!   runtime (one spawn per batch);
//! - `construct`: construction and `PeerTls::client()` only;
//! - `held`: one GET and its body on a `PeerClient` held across the batch, sent by
//!   reqwest's own send (`get(url)?.into_builder().send()`, around
//!   `PeerClient::send`);
//! - `held-send`: the same through `PeerClient::send` (`get(url)?.send()`, as the
//!   bench: the per-peer metrics and the OpenTelemetry hooks compiled in, no layer
//!   installed);
//! - `floor`: one GET on a kept-alive connection with a blocking rustls client over a
//!   `std::net::TcpStream` on this thread, the same client certificate and server: the
//!   server's and the kernel's part, with no HTTP client and no async runtime.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use std::hint::black_box;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::go::{GoServer, process_cpu_ns};
use k8s_openapi::api::core::v1::Secret;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use svc_tls::ClusterClient;
use svc_tls::client::PeerTls;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::spiffe::WorkloadApiStreams;
use svc_tls::watch::WatchedObjects;

const NS: &str = "bench";

fn object(secret: Secret) -> serde_json::Value {
    let mut value = serde_json::to_value(secret).unwrap();
    value["apiVersion"] = "v1".into();
    value["kind"] = "Secret".into();
    value
}

#[derive(Clone)]
struct Setup {
    watches: WatchedObjects,
    streams: WorkloadApiStreams,
    client: ClusterClient,
    peer: PeerOptions,
    me: ClientIdentityOptions,
    url: String,
}

impl Setup {
    async fn tls(&self) -> PeerTls {
        PeerTls::from_options_in(
            &self.watches,
            &self.streams,
            &self.client,
            &self.peer,
            &self.me,
            Duration::from_secs(30),
        )
        .await
        .unwrap()
    }
}

async fn full(setup: &Setup, n: usize) {
    for _ in 0..n {
        let tls = setup.tls().await;
        let peer_client = tls.client().unwrap();
        let response = peer_client.get(&setup.url).unwrap().send().await.unwrap();
        assert!(response.status().is_success());
        black_box(response.bytes().await.unwrap());
    }
}

fn floor_connection(material: &common::Material, case: &common::Case, addr: &str) -> impl FnMut() {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(material.server_ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(case.cert_pem.as_bytes())
            .map(Result::unwrap)
            .collect();
    let key = PrivateKeyDer::from_pem_slice(case.key_pem.as_bytes()).unwrap();
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(svc_tls::material::crypto_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_nodelay(true).unwrap();
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    let mut buf = vec![0u8; 4096];
    move || {
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: identity.bench.test\r\n\r\n")
            .unwrap();
        let mut got = 0;
        loop {
            let read = stream.read(&mut buf[got..]).unwrap();
            assert!(read > 0, "the server closed the connection");
            got += read;
            if buf[..got].ends_with(b"\r\n\r\nok") {
                break;
            }
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let case_name = args.next().unwrap_or_else(|| "p256-pkcs8".to_owned());
    let seconds: f64 = args.next().map_or(10.0, |s| s.parse().unwrap());
    let modes: Vec<String> = args
        .next()
        .unwrap_or_else(|| "full,construct,held,held-send,floor".to_owned())
        .split(',')
        .map(str::to_owned)
        .collect();

    let material = common::material();
    let case = material.case(&case_name);
    // `PROFILE_WORKERS` sets the runtime's workers (2, as the bench, by default).
    let workers = std::env::var("PROFILE_WORKERS").map_or(2, |w| w.parse().unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
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
    testbed.upsert(object(common::secret(
        NS,
        "identity",
        &case.cert_pem,
        &case.key_pem,
    )));
    let server = GoServer::spawn(&material.dir).expect("BENCH_GO_BINARY names the Go program");
    let addr = server.https.to_string();
    let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    let m = cmd
        .try_get_matches_from([
            "svc".to_owned(),
            format!("--identity-host=https://{addr}"),
            format!("--identity-ca-secret-namespace={NS}"),
            "--identity-ca-secret-name=peer-ca".to_owned(),
            format!("--client-certificate-namespace={NS}"),
            "--client-certificate-name=identity".to_owned(),
        ])
        .unwrap();
    let setup = Setup {
        watches: WatchedObjects::new(),
        streams: WorkloadApiStreams::new(),
        client: testbed.cluster_client(),
        peer: PeerOptions::from_matches(&m, "identity").unwrap(),
        me: ClientIdentityOptions::from_matches(&m, None).unwrap(),
        url: format!("https://{addr}/"),
    };
    // The first reconcile watches the Secrets; kept so the watches stay.
    let first = rt.block_on(setup.tls());
    let held = first.client().unwrap();
    let mut floor = floor_connection(&material, case, &addr);

    let batch = |mode: &str, n: usize| match mode {
        "full" => {
            let setup = setup.clone();
            rt.block_on(rt.spawn(async move { full(&setup, n).await }))
                .unwrap();
        }
        "construct" => {
            let setup = setup.clone();
            rt.block_on(rt.spawn(async move {
                for _ in 0..n {
                    let tls = setup.tls().await;
                    black_box(tls.client().unwrap());
                }
            }))
            .unwrap();
        }
        "held" | "held-send" => {
            let (held, url, via_send) = (held.clone(), setup.url.clone(), mode == "held-send");
            rt.block_on(rt.spawn(async move {
                for _ in 0..n {
                    let request = held.get(&url).unwrap();
                    let response = if via_send {
                        request.send().await.unwrap()
                    } else {
                        request.into_builder().send().await.unwrap()
                    };
                    black_box(response.bytes().await.unwrap());
                }
            }))
            .unwrap();
        }
        other => panic!("unknown mode {other}"),
    };
    let per_batch = Duration::from_millis(200);
    let mut sizes = Vec::new();
    for mode in &modes {
        // Warm-up and size: ops per 200 ms.
        let start = Instant::now();
        let mut n = 0;
        while start.elapsed() < per_batch {
            if mode == "floor" {
                floor();
            } else {
                batch(mode, 1);
            }
            n += 1;
        }
        sizes.push(n);
    }
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        for (i, mode) in modes.iter().enumerate() {
            let n = sizes[i];
            let (c0, t0) = (process_cpu_ns(), Instant::now());
            if mode == "floor" {
                for _ in 0..n {
                    floor();
                }
            } else {
                batch(mode, n);
            }
            wall[i].push(t0.elapsed().as_nanos() as f64 / n as f64);
            cpu[i].push((process_cpu_ns() - c0) / n as f64);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("case {case_name}, {} batches per mode", wall[0].len());
    println!("{:<10} {:>12} {:>16}", "mode", "wall/op", "process CPU/op");
    for (i, mode) in modes.iter().enumerate() {
        println!(
            "{mode:<10} {:>9.1} us {:>13.1} us",
            median(&mut wall[i]) / 1000.0,
            median(&mut cpu[i]) / 1000.0
        );
    }
    drop(held);
    drop(first);
}
