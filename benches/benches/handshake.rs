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
//! These two alternate in their own batches, as above, with go-spiffe's client
//! (`go/handshake/spiffe/p256/<N>`, the SPIFFE anchor: `X509Source` and
//! `tlsconfig.MTLSClientConfig`, its SVID from the same Workload API) among them; and
//! the client alone, ours against go-spiffe's with the CPU time of each
//! (`handshake/spiffe.rs`).
//!
//! One handshake: TCP connect, full handshake (no resumption), one byte from the server
//! (sent after it verified our certificate), close. The loop has the shape of the Go
//! program's (`benches/go`): each client is one task making `batch` handshakes in a
//! row; the server handshakes, writes one byte and closes. Static, reload,
//! watched-ca and reload-x25519 are measured in alternating batches (the order
//! reversed every round), so that drift on a shared machine falls on all alike; each
//! sample is the mean time per handshake of one batch, written to
//! `BENCH_RESULTS_DIR/handshake.jsonl` (the inverse is handshakes per second).
//!
//! Go (the legacy program as a long-lived child, `benches/go`) takes part in the same
//! rounds: its `go/handshake/{static,reload,reload-x25519}/<key>/<N>` batches, each
//! against its own in-process crypto/tls server (the whole stack: each side its own
//! client and server), alternate with ours, so the ratios between the languages are
//! paired round by round.
//!
//! Client against the same server (`client/<server>/<key>`, `go/client/...`): our
//! client (the resolver, X25519 only, one client) and Go's legacy client
//! (`GetClientCertificate` with `tls.X509KeyPair`, `CurvePreferences` X25519, one
//! goroutine) each dial the same two servers, the rustls server above (in this
//! process) and a crypto/tls server (the Go program in `-mode server`, a process of
//! its own), both requiring and verifying client certificates, in alternating
//! batches across the two languages. Beside handshakes per second, the client's CPU
//! time per handshake: ours is the CPU time of the thread running the client (a
//! current-thread runtime; `/proc/thread-self/schedstat`), Go's the Go child
//! process's (`getrusage`; it runs nothing else meanwhile):
//! `client-cpu/<server>/<key>` and `go/client-cpu/<server>/<key>`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use common::tls::{certs, provider, roots, serve, server_config};
#[path = "handshake/spiffe.rs"]
mod spiffe;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, NamedGroup};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivateKeyDer, ServerName};
use svc_tls::client::{TrustMode, client_config};
use svc_tls::identity::IdentityResolver;
use svc_tls::origin::SecretRef;
use svc_tls::trust::TrustVerifier;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use common::go::{Arm, GoChild, GoServer, interleave, thread_cpu_ns};

const NS: &str = "bench";
const TRUST_DOMAIN: &str = "example.org";
const CLIENT_ID: &str = "spiffe://example.org/ns/unikorn/sa/region";
const SERVER_ID: &str = "spiffe://example.org/ns/unikorn/sa/identity";
/// The name the Secret-mode servers are reached by (their certificate's IP SAN).
const IP_NAME: &str = "127.0.0.1";
/// The name the SVID server is reached by (the DNS SAN of the agent-issued SVID).
const SVID_SERVER_NAME: &str = "localhost";

/// svc-tls's provider offering classical X25519 only.
fn x25519_provider() -> Arc<CryptoProvider> {
    Arc::new(CryptoProvider {
        kx_groups: vec![rustls::crypto::aws_lc_rs::kx_group::X25519],
        ..svc_tls::material::crypto_provider()
    })
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
    let go = GoChild::spawn(&material.dir);
    // 90 rounds: the reload-vs-static bars are 2% from parity and the client-CPU bar
    // a few percent from where our P-256 client sits; with 30, the 95% intervals of
    // the paired ratios (about +-3%) straddled them run after run. About four
    // minutes of the full run.
    let (rounds, batch) = if common::quick() { (4, 5) } else { (90, 40) };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // kube's client spawns its service task on creation.
    let _guard = rt.enter();

    let server_config = server_config(&material);
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
                .settings(
                    svc_tls::trust::TrustSettings::default().sync_timeout(Duration::from_secs(30)),
                )
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
                    .settings(
                        svc_tls::identity::IdentitySettings::default()
                            .sync_timeout(Duration::from_secs(30)),
                    )
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

        if let Some(go) = &go {
            let mut go = go.borrow_mut();
            let default = go.group(&format!("go/handshake/reload/{key}/1"));
            eprintln!("bench: Go's default configuration offers {default} first");
            let x25519 = go.group(&format!("go/handshake/reload-x25519/{key}/1"));
            assert_eq!(x25519, "X25519", "Go's X25519 configuration");
        }

        for clients in [1usize, 2] {
            // Alternating batches (after one warm-up batch each), Go's among ours.
            let mut arms: Vec<Arm<'_>> = configs
                .iter()
                .map(|config| {
                    let rt = &rt;
                    Box::new(move || round(rt, config, addr, IP_NAME, clients, batch)) as Arm<'_>
                })
                .collect();
            let mut ids: Vec<String> = ["static", "reload", "watched-ca", "reload-x25519"]
                .iter()
                .map(|mode| format!("handshake/{mode}/{key}/{clients}"))
                .collect();
            if let Some(go) = &go {
                for mode in ["static", "reload", "reload-x25519"] {
                    let id = format!("go/handshake/{mode}/{key}/{clients}");
                    ids.push(id.clone());
                    arms.push(Box::new(move || {
                        go.borrow_mut()
                            .measure(&id, batch * clients, Duration::ZERO)
                            .ns
                    }));
                }
            }
            let samples = interleave(rounds, arms);
            let series: Vec<(String, Vec<f64>)> = ids.into_iter().zip(samples).collect();
            common::emit_paired("handshake", &format!("{key}/{clients}"), &series);
        }
        if let Some(go) = &go {
            client_vs_same_server(&rt, addr, key, &x25519_config, go, &material, rounds, batch);
        }
        assert_eq!(resolver.state().failures, 0);
        assert_eq!(trust.state().failures, 0);
        if key == "p256" {
            spiffe::secret_vs_spiffe(&rt, &material, &resolver, go.as_ref(), rounds, batch);
        }
    }
    drop(testbed);
}

/// Our client and Go's each dialling the same two servers (ours in this process,
/// Go's in a process of its own), X25519 on both sides, one client, in alternating
/// batches: `client/<server>/<key>` and `client-cpu/<server>/<key>` (ours),
/// `go/client/...` and `go/client-cpu/...` (Go's), paired round by round.
#[allow(clippy::too_many_arguments)]
fn client_vs_same_server(
    rt: &tokio::runtime::Runtime,
    rustls_server: SocketAddr,
    key: &str,
    ours: &Arc<ClientConfig>,
    go: &std::cell::RefCell<GoChild>,
    material: &common::Material,
    rounds: usize,
    batch: usize,
) {
    let Some(go_server) = GoServer::spawn(&material.dir) else {
        return;
    };
    // Our client on this thread alone: its CPU time is this thread's.
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let servers = [
        ("rustls-server", rustls_server),
        ("go-server", go_server.tls),
    ];
    for (name, addr) in servers {
        go.borrow_mut().peer(name, addr);
        // Both servers negotiate X25519 with our X25519-only client.
        let _guard = rt.enter();
        negotiates(&client_rt, ours, addr, IP_NAME, NamedGroup::X25519);
    }
    let cpu: Vec<std::cell::RefCell<Vec<f64>>> = (0..4).map(|_| Default::default()).collect();
    let mut arms: Vec<Arm<'_>> = Vec::new();
    let mut ids = Vec::new();
    for (i, (name, addr)) in servers.into_iter().enumerate() {
        let (client_rt, cpu_ours, cpu_go) = (&client_rt, &cpu[2 * i], &cpu[2 * i + 1]);
        let server_name = ServerName::try_from(IP_NAME).unwrap();
        ids.push(format!("client/{name}/{key}"));
        arms.push(Box::new(move || {
            let (cpu, start) = (thread_cpu_ns(), Instant::now());
            client_rt.block_on(async {
                for _ in 0..batch {
                    handshake(ours.clone(), addr, server_name.clone()).await;
                }
            });
            let wall = start.elapsed().as_nanos() as f64 / batch as f64;
            cpu_ours
                .borrow_mut()
                .push((thread_cpu_ns() - cpu) / batch as f64);
            wall
        }));
        let id = format!("go/client/{name}/{key}");
        ids.push(id.clone());
        arms.push(Box::new(move || {
            let measured = go.borrow_mut().measure(&id, batch, Duration::ZERO);
            cpu_go.borrow_mut().push(measured.cpu_ns);
            measured.ns
        }));
    }
    let samples = interleave(rounds, arms);
    let mut series: Vec<(String, Vec<f64>)> = ids.iter().cloned().zip(samples).collect();
    for (id, cpu) in ids.iter().zip(cpu) {
        // The first value is the warm-up batch's.
        let mut cpu = cpu.into_inner();
        cpu.remove(0);
        series.push((id.replacen("client/", "client-cpu/", 1), cpu));
    }
    common::emit_paired("handshake", &format!("client/{key}"), &series);
}
