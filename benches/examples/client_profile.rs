//! Our client's handshakes in a loop on one thread against a rustls server on another
//! (the bench's `client/rustls-server/<key>` row without Go), for a profiler
//! (`perf record -g`): where the client's CPU per handshake goes.
//!
//! `cargo run --release -p platform-benches --example client_profile -- <p256|rsa2048> [seconds] [mode[,mode...]]`
//! where a mode is `resolver` or `static`, optionally `+aes128`, `+aes256` or `+chacha`
//! (that TLS 1.3 suite offered first), then optionally `/rustls` (rustls's own cipher
//! order and signature checks instead of svc-tls's); several modes alternate batch
//! by batch. A mode ending in `@go` dials the bench's crypto/tls server instead (the
//! `client/go-server/<key>` row; needs `BENCH_GO_BINARY`).
//! with `BENCH_MATERIAL_DIR` pointing at the material `cargo xtask bench` wrote (made
//! anew in a temporary directory otherwise). The client runs on the thread named
//! `client` (`perf report --comm client`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use common::tls::{certs, roots, serve, server_config};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ClientConfig;
use rustls::crypto::CryptoProvider;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivateKeyDer, ServerName};
use svc_tls::client::{TrustMode, client_config};
use svc_tls::identity::IdentityResolver;
use svc_tls::origin::SecretRef;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// X25519 only, as the bench's client rows; `first` moves one cipher suite to the
/// front (to compare suites); `plain` takes rustls's own suites and signature checks
/// (without svc-tls's order and memo).
fn x25519_provider(first: Option<rustls::CipherSuite>, plain: bool) -> Arc<CryptoProvider> {
    let mut provider = CryptoProvider {
        kx_groups: vec![rustls::crypto::aws_lc_rs::kx_group::X25519],
        ..svc_tls::material::crypto_provider()
    };
    if plain {
        let rustls = rustls::crypto::aws_lc_rs::default_provider();
        provider.cipher_suites = rustls.cipher_suites;
        provider.signature_verification_algorithms = rustls.signature_verification_algorithms;
    }
    if let Some(first) = first {
        provider.cipher_suites.sort_by_key(|s| s.suite() != first);
    }
    Arc::new(provider)
}

async fn handshake(config: Arc<ClientConfig>, addr: SocketAddr) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .unwrap();
    let mut byte = [0u8; 1];
    tls.read_exact(&mut byte).await.unwrap();
}

fn main() {
    let mut args = std::env::args().skip(1);
    let key = args.next().unwrap_or_else(|| "p256".to_owned());
    let seconds: u64 = args.next().map_or(10, |s| s.parse().unwrap());
    let mode = args.next().unwrap_or_else(|| "resolver".to_owned());
    let material = common::material();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("server")
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let server_config = server_config(&material);
    let addr = rt.block_on(serve(Arc::new(server_config)));
    let testbed = rt.block_on(kube_testbed::Testbed::start());
    let case = material.case(&format!("{key}-pkcs8"));
    let mut secret = serde_json::to_value(common::secret(
        "bench",
        "profile",
        &case.cert_pem,
        &case.key_pem,
    ))
    .unwrap();
    secret["apiVersion"] = "v1".into();
    secret["kind"] = "Secret".into();
    testbed.upsert(secret);
    let resolver = rt
        .block_on(
            IdentityResolver::builder(testbed.client(), SecretRef::new("bench", "profile")).build(),
        )
        .unwrap();
    let config_for = |mode: &str| -> Arc<ClientConfig> {
        let (mode, plain) = match mode.strip_suffix("/rustls") {
            Some(mode) => (mode, true),
            None => (mode, false),
        };
        let (base, first) = match mode.split_once('+') {
            Some((base, "aes128")) => (base, Some(rustls::CipherSuite::TLS13_AES_128_GCM_SHA256)),
            Some((base, "aes256")) => (base, Some(rustls::CipherSuite::TLS13_AES_256_GCM_SHA384)),
            Some((base, "chacha")) => (
                base,
                Some(rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256),
            ),
            Some((_, other)) => panic!("unknown suite {other}"),
            None => (mode, None),
        };
        if base == "static" {
            let mut config = ClientConfig::builder_with_provider(x25519_provider(first, plain))
                .with_protocol_versions(&[&rustls::version::TLS13])
                .unwrap()
                .with_root_certificates(roots(&material.server_ca_pem))
                .with_client_auth_cert(
                    certs(&case.cert_pem),
                    PrivateKeyDer::from_pem_slice(case.key_pem.as_bytes()).unwrap(),
                )
                .unwrap();
            config.resumption = rustls::client::Resumption::disabled();
            Arc::new(config)
        } else {
            Arc::new(
                client_config(
                    x25519_provider(first, plain),
                    TrustMode::Roots(roots(&material.server_ca_pem)),
                    Some(&resolver),
                )
                .unwrap(),
            )
        }
    };
    let go_server = mode
        .contains("@go")
        .then(|| common::go::GoServer::spawn(&material.dir).expect("BENCH_GO_BINARY"));
    let configs: Vec<(String, Arc<ClientConfig>, SocketAddr)> = mode
        .split(',')
        .map(|mode| match mode.strip_suffix("@go") {
            Some(base) => (
                mode.to_owned(),
                config_for(base),
                go_server.as_ref().unwrap().tls,
            ),
            None => (mode.to_owned(), config_for(mode), addr),
        })
        .collect();
    let client = std::thread::Builder::new()
        .name("client".to_owned())
        .spawn(move || {
            let client_rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let until = Instant::now() + Duration::from_secs(seconds);
            // Batches alternate between the modes, so a loaded machine's drift
            // reaches each alike.
            let mut totals = vec![(0f64, 0u64); configs.len()];
            client_rt.block_on(async {
                while Instant::now() < until {
                    for ((_, config, addr), total) in configs.iter().zip(totals.iter_mut()) {
                        let cpu = common::go::thread_cpu_ns();
                        for _ in 0..50 {
                            handshake(config.clone(), *addr).await;
                        }
                        total.0 += common::go::thread_cpu_ns() - cpu;
                        total.1 += 50;
                    }
                }
            });
            for ((mode, _, _), (cpu, n)) in configs.iter().zip(totals) {
                eprintln!(
                    "{key} {mode}: {n} handshakes, {:.1} us client CPU each",
                    cpu / n as f64 / 1e3
                );
            }
        })
        .unwrap();
    client.join().unwrap();
    drop(go_server);
    drop(testbed);
}
