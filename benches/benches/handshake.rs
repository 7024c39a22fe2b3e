//! Loopback TLS 1.3 mTLS handshakes per second against an in-process tokio-rustls
//! server that requires and verifies client certificates, with the same server
//! certificate, client identities (ECDSA P-256 and RSA-2048) and concurrency (1 and 2
//! clients) as the Go program's `go/handshake/...`:
//! - `handshake/static/<key>/<N>`: the identity is fixed in the `ClientConfig`;
//! - `handshake/reload/<key>/<N>`: svc-tls's `IdentityResolver` resolves the identity
//!   from its watched Secret (in the kube-testbed API emulator) on every handshake;
//!   the server is verified against a static root store;
//! - `handshake/watched-ca/<key>/<N>`: as `reload`, and the server is verified by
//!   svc-tls's `TrustVerifier` against the roots of a watched CA Secret, unchanged
//!   during the run (the per-handshake trust cost next to the static root store).
//!
//! One handshake: TCP connect, full handshake (no resumption), one byte from the server
//! (sent after it verified our certificate), close. Static, reload and watched-ca are
//! measured in alternating batches (the order reversed every round), so that drift on
//! a shared machine falls on all alike; each sample is the mean time per handshake of one
//! batch, written to `BENCH_RESULTS_DIR/handshake.jsonl` (the inverse is
//! handshakes per second).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use svc_tls::client::{TrustMode, client_config};
use svc_tls::options::SecretRef;
use svc_tls::resolver::IdentityResolver;
use svc_tls::verifier::TrustVerifier;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const NS: &str = "bench";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn certs(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap()
}

fn roots(pem: &str) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    for cert in certs(pem) {
        roots.add(cert).unwrap();
    }
    roots
}

async fn serve(config: Arc<ServerConfig>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let _ = tls.write_all(b"k").await;
                    let _ = tls.shutdown().await;
                }
            });
        }
    });
    addr
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
    // The server's byte arrives only after it has verified our certificate.
    tls.read_exact(&mut byte).await.unwrap();
    assert_eq!(&byte, b"k");
}

/// `batch` iterations of `clients` concurrent handshakes: mean nanoseconds per handshake.
fn round(
    rt: &tokio::runtime::Runtime,
    config: &Arc<ClientConfig>,
    addr: SocketAddr,
    clients: usize,
    batch: usize,
) -> f64 {
    let start = Instant::now();
    rt.block_on(async {
        for _ in 0..batch {
            let tasks: Vec<_> = (0..clients)
                .map(|_| tokio::spawn(handshake(config.clone(), addr)))
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
        }
    });
    start.elapsed().as_nanos() as f64 / (batch * clients) as f64
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported here.
    let material = common::material();
    let (rounds, batch) = if common::quick() { (4, 5) } else { (30, 40) };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // kube's client spawns its service task on creation.
    let _guard = rt.enter();

    let server_config = {
        let verifier = WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots(&material.client_ca_pem)),
            provider(),
        )
        .build()
        .unwrap();
        ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                certs(&material.server_cert_pem),
                PrivateKeyDer::from_pem_slice(material.server_key_pem.as_bytes()).unwrap(),
            )
            .unwrap()
    };
    let testbed = rt.block_on(kube_testbed::Testbed::start());
    let addr = rt.block_on(serve(Arc::new(server_config)));
    // The server CA in a CA Secret as cert-manager writes it (tls.crt and ca.crt).
    let mut ca_secret =
        serde_json::to_value(common::secret(NS, "server-ca", &material.server_ca_pem, "")).unwrap();
    ca_secret["apiVersion"] = "v1".into();
    ca_secret["kind"] = "Secret".into();
    ca_secret["data"]["ca.crt"] = ca_secret["data"]["tls.crt"].clone();
    testbed.upsert(ca_secret);
    let trust = rt
        .block_on(
            TrustVerifier::builder(testbed.client(), SecretRef::new(NS, "server-ca"))
                .provider(provider())
                .sync_timeout(Duration::from_secs(30))
                .build(),
        )
        .unwrap();

    for key in ["p256", "rsa2048"] {
        let case = material.case(&format!("{key}-pkcs8"));
        let name = format!("handshake-{key}");
        let secret = common::secret(NS, &name, &case.cert_pem, &case.key_pem);
        let mut value = serde_json::to_value(&secret).unwrap();
        value["apiVersion"] = "v1".into();
        value["kind"] = "Secret".into();
        testbed.upsert(value);
        let resolver = rt
            .block_on(
                IdentityResolver::builder(testbed.client(), SecretRef::new(NS, &name))
                    .provider(provider())
                    .sync_timeout(Duration::from_secs(30))
                    .build(),
            )
            .unwrap();

        let static_config = {
            let mut config = ClientConfig::builder_with_provider(provider())
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
        };
        let reload_config = Arc::new(
            client_config(
                provider(),
                TrustMode::Roots(roots(&material.server_ca_pem)),
                Some(&resolver),
            )
            .unwrap(),
        );

        let watched_config = Arc::new(
            client_config(
                provider(),
                TrustMode::Watched(trust.clone()),
                Some(&resolver),
            )
            .unwrap(),
        );

        for clients in [1usize, 2] {
            // Warm-up, then alternating batches.
            let configs = [&static_config, &reload_config, &watched_config];
            for config in configs {
                round(&rt, config, addr, clients, batch / 2 + 1);
            }
            let mut samples: [Vec<f64>; 3] = Default::default();
            for i in 0..rounds {
                let order: [usize; 3] = if i % 2 == 0 { [0, 1, 2] } else { [2, 1, 0] };
                for which in order {
                    samples[which].push(round(&rt, configs[which], addr, clients, batch));
                }
            }
            let [stat, reload, watched] = samples;
            common::emit(
                "handshake",
                &format!("handshake/static/{key}/{clients}"),
                &stat,
            );
            common::emit(
                "handshake",
                &format!("handshake/reload/{key}/{clients}"),
                &reload,
            );
            common::emit(
                "handshake",
                &format!("handshake/watched-ca/{key}/{clients}"),
                &watched,
            );
        }
        assert_eq!(resolver.state().failures, 0);
        assert_eq!(trust.state().failures, 0);
    }
    drop(testbed);
}
