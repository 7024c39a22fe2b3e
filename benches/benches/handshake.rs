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
//!   during the run (the per-handshake trust cost next to the static root store);
//! - `handshake/reload-x25519/<key>/<N>`: as `reload`, offering classical X25519 only:
//!   the like-for-like counterpart of Go's `go/handshake/reload-x25519` (Go with
//!   `CurvePreferences: []tls.CurveID{tls.X25519}`).
//!
//! All but `reload-x25519` use svc-tls's configuration as a service gets it
//! (`svc_tls::material::crypto_provider()`), which offers the hybrid `X25519MLKEM768`
//! first; the server (the same provider) negotiates it. Each configuration's group is
//! checked on one handshake before it is measured.
//!
//! SPIFFE mode against Secret mode on the same server, P-256 (what SPIRE issues): a
//! second in-process server presents an SVID issued by the Workload API emulator
//! (`spiffe-testbed`) for its SPIFFE ID (with a DNS SAN `localhost`) and verifies
//! client certificates against both the bench's client CA and the agent's CA:
//! - `handshake/secret-on-svid-server/p256/<N>`: the resolver over the Secret of the
//!   `p256-pkcs8` case, the server verified against the agent's CA as a static root
//!   store (server name `localhost`);
//! - `handshake/spiffe/p256/<N>`: the resolver over the SVID streamed by the Workload
//!   API, the server verified by the `TrustVerifier` over the streamed bundle and
//!   authorized by its exact SPIFFE ID.
//!
//! These two alternate in their own batches, as above.
//!
//! One handshake: TCP connect, full handshake (no resumption), one byte from the server
//! (sent after it verified our certificate), close. The loop has the shape of the Go
//! program's (`benches/go`): each client is one task making `batch` handshakes in a
//! row; the server handshakes, writes one byte and closes. Static, reload,
//! watched-ca and reload-x25519 are measured in alternating batches (the order
//! reversed every round), so that drift on a shared machine falls on all alike; each
//! sample is the mean time per handshake of one batch, written to
//! `BENCH_RESULTS_DIR/handshake.jsonl` (the inverse is handshakes per second).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, NamedGroup, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use svc_tls::client::{PeerTls, TrustMode, client_config};
use svc_tls::options::SecretRef;
use svc_tls::resolver::IdentityResolver;
use svc_tls::spiffe::{SpiffeEndpoint, SpiffeId, WorkloadApiSource};
use svc_tls::verifier::TrustVerifier;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const NS: &str = "bench";
const TRUST_DOMAIN: &str = "example.org";
const CLIENT_ID: &str = "spiffe://example.org/ns/unikorn/sa/region";
const SERVER_ID: &str = "spiffe://example.org/ns/unikorn/sa/identity";
/// The name the Secret-mode servers are reached by (their certificate's IP SAN).
const IP_NAME: &str = "127.0.0.1";
/// The name the SVID server is reached by (the DNS SAN of the agent-issued SVID).
const SVID_SERVER_NAME: &str = "localhost";

/// svc-tls's provider (aws-lc-rs, `X25519MLKEM768` offered first).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(svc_tls::material::crypto_provider())
}

/// svc-tls's provider offering classical X25519 only.
fn x25519_provider() -> Arc<CryptoProvider> {
    Arc::new(CryptoProvider {
        kx_groups: vec![rustls::crypto::aws_lc_rs::kx_group::X25519],
        ..svc_tls::material::crypto_provider()
    })
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
            // As Go's net package does by default.
            let _ = tcp.set_nodelay(true);
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

/// One handshake; the key exchange group it negotiated.
async fn handshake(
    config: Arc<ClientConfig>,
    addr: SocketAddr,
    name: ServerName<'static>,
) -> Option<NamedGroup> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .unwrap();
    let mut byte = [0u8; 1];
    // The server's byte arrives only after it has verified our certificate.
    tls.read_exact(&mut byte).await.unwrap();
    assert_eq!(&byte, b"k");
    tls.get_ref()
        .1
        .negotiated_key_exchange_group()
        .map(|group| group.name())
}

/// `clients` tasks, each making `batch` handshakes in a row: mean nanoseconds per
/// handshake.
fn round(
    rt: &tokio::runtime::Runtime,
    config: &Arc<ClientConfig>,
    addr: SocketAddr,
    name: &str,
    clients: usize,
    batch: usize,
) -> f64 {
    let name = ServerName::try_from(name.to_owned()).unwrap();
    let start = Instant::now();
    rt.block_on(async {
        let tasks: Vec<_> = (0..clients)
            .map(|_| {
                let (config, name) = (config.clone(), name.clone());
                tokio::spawn(async move {
                    for _ in 0..batch {
                        handshake(config.clone(), addr, name.clone()).await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    start.elapsed().as_nanos() as f64 / (batch * clients) as f64
}

/// Checks on one handshake that `config` negotiates `want` with the server at `addr`.
fn negotiates(
    rt: &tokio::runtime::Runtime,
    config: &Arc<ClientConfig>,
    addr: SocketAddr,
    name: &str,
    want: NamedGroup,
) {
    let name = ServerName::try_from(name.to_owned()).unwrap();
    let got = rt.block_on(handshake(config.clone(), addr, name));
    assert_eq!(got, Some(want), "the configuration negotiated {got:?}");
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
        let x25519_config = Arc::new(
            client_config(
                x25519_provider(),
                TrustMode::Roots(roots(&material.server_ca_pem)),
                Some(&resolver),
            )
            .unwrap(),
        );
        let configs = [
            &static_config,
            &reload_config,
            &watched_config,
            &x25519_config,
        ];
        for (config, group) in configs.into_iter().zip([
            NamedGroup::X25519MLKEM768,
            NamedGroup::X25519MLKEM768,
            NamedGroup::X25519MLKEM768,
            NamedGroup::X25519,
        ]) {
            negotiates(&rt, config, addr, IP_NAME, group);
        }

        for clients in [1usize, 2] {
            // Warm-up, then alternating batches.
            for config in configs {
                round(&rt, config, addr, IP_NAME, clients, batch / 2 + 1);
            }
            let mut samples: [Vec<f64>; 4] = Default::default();
            for i in 0..rounds {
                for j in 0..configs.len() {
                    let which = if i % 2 == 0 { j } else { configs.len() - 1 - j };
                    samples[which].push(round(&rt, configs[which], addr, IP_NAME, clients, batch));
                }
            }
            let [stat, reload, watched, x25519] = samples;
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
            common::emit(
                "handshake",
                &format!("handshake/reload-x25519/{key}/{clients}"),
                &x25519,
            );
        }
        assert_eq!(resolver.state().failures, 0);
        assert_eq!(trust.state().failures, 0);
        if key == "p256" {
            secret_vs_spiffe(&rt, &material, &resolver, rounds, batch);
        }
    }
    drop(testbed);
}

/// `handshake/{secret-on-svid-server,spiffe}/p256/<N>`: Secret mode (`secret`, the
/// resolver over the p256 Secret) against SPIFFE mode on one server presenting an SVID.
fn secret_vs_spiffe(
    rt: &tokio::runtime::Runtime,
    material: &common::Material,
    secret: &IdentityResolver,
    rounds: usize,
    batch: usize,
) {
    let agent = rt.block_on(spiffe_testbed::WorkloadApi::start(TRUST_DOMAIN));
    agent.set_workload_id(CLIENT_ID);
    let server_svid = agent.issue(SERVER_ID);

    // Client certificates from the bench's client CA (Secret mode) and from the agent.
    let mut client_roots = roots(&material.client_ca_pem);
    client_roots.add(agent.ca_der()).unwrap();
    let server_config = {
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(client_roots), provider())
                .build()
                .unwrap();
        ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(server_svid.chain.clone(), server_svid.key_der())
            .unwrap()
    };
    let addr = rt.block_on(serve(Arc::new(server_config)));

    let mut agent_roots = RootCertStore::empty();
    agent_roots.add(agent.ca_der()).unwrap();
    let secret_config =
        Arc::new(client_config(provider(), TrustMode::Roots(agent_roots), Some(secret)).unwrap());

    let workload = rt
        .block_on(WorkloadApiSource::connect(
            SpiffeEndpoint::parse(&agent.endpoint()).unwrap(),
            provider(),
            Duration::from_secs(30),
        ))
        .unwrap();
    // SPIFFE mode as a service builds it (svc-tls's `PeerTls::for_spiffe_id`).
    let spiffe_tls = PeerTls::for_spiffe_id(&workload, SpiffeId::new(SERVER_ID).unwrap()).unwrap();
    let resolver = spiffe_tls.identity().unwrap().clone();
    let trust = spiffe_tls.trust_verifier().unwrap().clone();
    let spiffe_config = Arc::new(spiffe_tls.config().unwrap());

    for clients in [1usize, 2] {
        let configs = [&secret_config, &spiffe_config];
        for config in configs {
            round(rt, config, addr, SVID_SERVER_NAME, clients, batch / 2 + 1);
        }
        let mut samples: [Vec<f64>; 2] = Default::default();
        for i in 0..rounds {
            let order: [usize; 2] = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                samples[which].push(round(
                    rt,
                    configs[which],
                    addr,
                    SVID_SERVER_NAME,
                    clients,
                    batch,
                ));
            }
        }
        let [secret_mode, spiffe_mode] = samples;
        common::emit(
            "handshake",
            &format!("handshake/secret-on-svid-server/p256/{clients}"),
            &secret_mode,
        );
        common::emit(
            "handshake",
            &format!("handshake/spiffe/p256/{clients}"),
            &spiffe_mode,
        );
    }
    // Every SPIFFE-mode handshake presented the agent's SVID and trusted the server.
    assert_eq!(resolver.state().failures, 0);
    assert_eq!(trust.state().failures, 0);
    assert_eq!(
        resolver.state().serial_hex,
        {
            let s = format!("{:x}", agent.current_svid().serial);
            if s.len() % 2 == 1 { format!("0{s}") } else { s }
        },
        "SPIFFE mode did not present the agent's SVID"
    );
    assert_eq!(secret.state().failures, 0);
}
