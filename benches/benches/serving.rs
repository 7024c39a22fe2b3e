//! The serving half: our server's CPU time per handshake against Go's servers, one
//! client dialling both, in alternating batches (paired round by round):
//! - `server/secret/<key>` and `server-cpu/secret/<key>` (ours): svc-tls's
//!   `ServerTls` presenting the identity Secret (watched in kube-testbed, resolved on
//!   every handshake) and verifying callers against the watched client CA Secret,
//!   served by one thread (a current-thread runtime: its CPU time, read from
//!   `/proc/self/task/<tid>/schedstat`, is the server's);
//!   `go/server/secret/<key>` and `go/server-cpu/secret/<key>`: a crypto/tls server
//!   whose `GetCertificate` reads the same Secret through controller-runtime's
//!   cache-backed client and parses it (`tls.X509KeyPair`) on every handshake, the Go
//!   package's design applied to serving (its client CAs a static pool, parsed once:
//!   ours reads a watched CA, so ours does more), in a Go process that runs nothing
//!   else (its CPU time from `getrusage` before and after the batch, two commands
//!   over a pipe: a few microseconds per batch of the Go side's, counted against Go);
//! - `server/spiffe/p256`, `server-cpu/spiffe/p256` (ours: `ServerTls` over the SVID
//!   and bundle streamed from the Workload API emulator) against go-spiffe v2's
//!   `tlsconfig.MTLSServerConfig` over an `X509Source` on the same Workload API
//!   (`go/server/spiffe/p256`, `go/server-cpu/spiffe/p256`), both accepting callers of
//!   the trust domain.
//!
//! The client is the same for both servers of a row: rustls with a fixed certificate,
//! svc-tls's provider (`X25519MLKEM768` offered first, which both servers negotiate:
//! checked on one handshake), one connection at a time on this thread. One handshake:
//! TCP connect, full TLS 1.3 handshake (no resumption), one byte from the server (sent
//! after it verified the client), close: the shape of every handshake row.
//!
//! And counted, not timed: `server-rotation-parses/<key>`, the key parses the first
//! server handshake after each rotation of the identity Secret paid (0: the watch's
//! loader parsed the new version before it), each handshake checked to present the new
//! leaf.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use common::tls::certs;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use rcgen::{CertificateParams, ExtendedKeyUsagePurpose};
use rustls::{ClientConfig, NamedGroup, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use svc_tls::client::PeerTls;
use svc_tls::identity::{IdentityResolver, IdentitySettings, SpiffeIdentitySource};
use svc_tls::origin::SecretRef;
use svc_tls::serving::ServerTls;
use svc_tls::spiffe::{SpiffeEndpoint, SpiffeId, TrustDomain, WorkloadApiSource};
use svc_tls::trust::{ServerAuthorization, SpiffeTrustSource, TrustSettings, TrustVerifier};
use svc_tls::watch::WatchedObjects;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::go::{Arm, GoChild, interleave};

const NS: &str = "bench";
const TRUST_DOMAIN: &str = "example.org";
const SERVER_ID: &str = "spiffe://example.org/ns/unikorn/sa/identity";
/// The Secret-mode servers' certificates name this IP address.
const IP_NAME: &str = "127.0.0.1";
/// The name the SPIFFE client dials (its verifier checks the SPIFFE ID, not the name).
const SVID_NAME: &str = "localhost";

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(svc_tls::material::crypto_provider())
}

fn upsert(testbed: &kube_testbed::Testbed, secret: &Secret) {
    let mut value = serde_json::to_value(secret).unwrap();
    value["apiVersion"] = "v1".into();
    value["kind"] = "Secret".into();
    testbed.upsert(value);
}

/// A server identity for `127.0.0.1` with a fresh `key` key, signed by `ca`:
/// `tls.crt` (leaf, then the CA, as cert-manager writes it) and `tls.key` (PKCS#8).
fn server_identity(ca: &test_support::pki::TestCa, key: &str) -> (String, String) {
    let pair = common::generate_key(key);
    let mut params = CertificateParams::new(vec![IP_NAME.to_owned()]).unwrap();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let leaf = params.signed_by(&pair, ca.issuer()).unwrap();
    (
        format!("{}{}", leaf.pem(), ca.pem()),
        test_support::keys::key_pem(&pair, test_support::keys::KeyFormat::Pkcs8),
    )
}

/// Our server: one thread, a current-thread runtime, accepting with `config`.
struct OurServer {
    addr: SocketAddr,
    /// `/proc/self/task/<tid>/schedstat` of the serving thread.
    schedstat: PathBuf,
}

impl OurServer {
    fn spawn(config: Arc<ServerConfig>) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("bench-server".into())
            .spawn(move || {
                // `/proc/thread-self` links to `<pid>/task/<tid>`.
                let task = std::fs::read_link("/proc/thread-self").unwrap();
                tx.send(PathBuf::from("/proc").join(task).join("schedstat"))
                    .unwrap();
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    let acceptor = tokio_rustls::TlsAcceptor::from(config);
                    loop {
                        let Ok((tcp, _)) = listener.accept().await else {
                            continue;
                        };
                        // As Go's net package does by default.
                        let _ = tcp.set_nodelay(true);
                        let acceptor = acceptor.clone();
                        tokio::spawn(async move {
                            if let Ok(mut tls) = acceptor.accept(tcp).await {
                                let _ = tls.write_all(b"k").await;
                                let _ = tls.shutdown().await;
                            }
                        });
                    }
                });
            })
            .unwrap();
        Self {
            addr,
            schedstat: rx.recv().unwrap(),
        }
    }

    /// The serving thread's CPU time, nanoseconds.
    fn cpu_ns(&self) -> f64 {
        let text = std::fs::read_to_string(&self.schedstat).unwrap();
        text.split_whitespace().next().unwrap().parse().unwrap()
    }
}

/// The client both servers of a row are dialled with: a fixed certificate, svc-tls's
/// provider, no resumption.
fn client(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    roots: RootCertStore,
) -> Arc<ClientConfig> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap();
    config.resumption = rustls::client::Resumption::disabled();
    Arc::new(config)
}

/// One handshake: the server's leaf and the group negotiated.
async fn handshake(
    config: &Arc<ClientConfig>,
    addr: SocketAddr,
    name: &ServerName<'static>,
) -> (CertificateDer<'static>, Option<NamedGroup>) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(config.clone())
        .connect(name.clone(), tcp)
        .await
        .unwrap();
    let mut byte = [0u8; 1];
    // The server's byte arrives only after it has verified our certificate.
    tls.read_exact(&mut byte).await.unwrap();
    assert_eq!(&byte, b"k");
    let connection = tls.get_ref().1;
    (
        connection.peer_certificates().unwrap()[0].clone(),
        connection
            .negotiated_key_exchange_group()
            .map(|group| group.name()),
    )
}

/// Our server and Go's, dialled by one client in alternating batches: wall time and
/// the server's CPU time per handshake, emitted as `server{,-cpu}/<row>` and
/// `go/server{,-cpu}/<row>`.
#[allow(clippy::too_many_arguments)]
fn server_vs_go(
    client_rt: &tokio::runtime::Runtime,
    client: &Arc<ClientConfig>,
    name: &str,
    ours: &OurServer,
    go_server: Option<(&RefCell<GoChild>, SocketAddr)>,
    row: &str,
    rounds: usize,
    batch: usize,
) {
    let name = ServerName::try_from(name.to_owned()).unwrap();
    let mut addrs = vec![ours.addr];
    addrs.extend(go_server.map(|(_, addr)| addr));
    for &addr in &addrs {
        let (_, group) = client_rt.block_on(handshake(client, addr, &name));
        assert_eq!(
            group,
            Some(NamedGroup::X25519MLKEM768),
            "{row}: both servers negotiate the hybrid"
        );
    }
    let batch_of = |addr: SocketAddr| {
        let start = Instant::now();
        client_rt.block_on(async {
            for _ in 0..batch {
                handshake(client, addr, &name).await;
            }
        });
        start.elapsed().as_nanos() as f64 / batch as f64
    };
    let (cpu_ours, cpu_go) = (RefCell::new(Vec::new()), RefCell::new(Vec::new()));
    let mut ids = vec![format!("server/{row}")];
    let mut arms: Vec<Arm<'_>> = vec![Box::new(|| {
        let cpu = ours.cpu_ns();
        let wall = batch_of(ours.addr);
        cpu_ours
            .borrow_mut()
            .push((ours.cpu_ns() - cpu) / batch as f64);
        wall
    })];
    if let Some((go, addr)) = go_server {
        let (cpu_go, batch_of) = (&cpu_go, &batch_of);
        ids.push(format!("go/server/{row}"));
        arms.push(Box::new(move || {
            let cpu = go.borrow_mut().cpu_ns();
            let wall = batch_of(addr);
            cpu_go
                .borrow_mut()
                .push((go.borrow_mut().cpu_ns() - cpu) / batch as f64);
            wall
        }));
    }
    let samples = interleave(rounds, arms);
    let mut series: Vec<(String, Vec<f64>)> = ids.iter().cloned().zip(samples).collect();
    for (id, cpu) in ids.iter().zip([cpu_ours, cpu_go]) {
        let mut cpu = cpu.into_inner();
        if cpu.is_empty() {
            continue;
        }
        // The first value is the warm-up batch's.
        cpu.remove(0);
        series.push((id.replacen("server/", "server-cpu/", 1), cpu));
    }
    common::emit_paired("serving", row, &series);
}

fn main() {
    let material = common::material();
    let quick = common::quick();
    let (rounds, batch, rotations) = if quick { (4, 5, 5) } else { (30, 40, 40) };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // kube's client spawns its service task on creation.
    let _guard = rt.enter();
    // The client: this thread, one connection at a time.
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let testbed = rt.block_on(kube_testbed::Testbed::start());
    let watches = WatchedObjects::new();

    // Go's server process: its cache-backed client on the same API server.
    let go = GoChild::spawn(&material.dir);
    if let Some(go) = &go {
        let ca_file = material.dir.join("serving-kube-testbed-ca.crt");
        std::fs::write(&ca_file, testbed.ca_pem()).unwrap();
        go.borrow_mut()
            .cluster(&testbed.base_url(), &testbed.token(), &ca_file);
    }

    // Callers are verified against the client CA, watched in a CA Secret.
    let mut ca_secret = common::secret(NS, "serving-client-ca", &material.client_ca_pem, "");
    ca_secret.data.get_or_insert_default().insert(
        "ca.crt".into(),
        k8s_openapi::ByteString(material.client_ca_pem.clone().into()),
    );
    ca_secret.data.get_or_insert_default().remove("tls.key");
    upsert(&testbed, &ca_secret);
    let callers = rt
        .block_on(
            TrustVerifier::builder(testbed.client(), SecretRef::new(NS, "serving-client-ca"))
                .provider(provider())
                .settings(TrustSettings::default().sync_timeout(Duration::from_secs(30)))
                .build(),
        )
        .unwrap();
    let client_case = material.case("p256-pkcs8");
    let serving_ca = common::ca();
    let mut server_roots = RootCertStore::empty();
    server_roots.add(serving_ca.der()).unwrap();
    let secret_client = client(
        certs(&client_case.cert_pem),
        PrivateKeyDer::from_pem_slice(client_case.key_pem.as_bytes()).unwrap(),
        server_roots,
    );

    for key in ["p256", "rsa2048"] {
        let name = format!("serving-{key}");
        let versions = [
            server_identity(&serving_ca, key),
            server_identity(&serving_ca, key),
        ];
        let secrets: Vec<Secret> = versions
            .iter()
            .map(|(cert, key)| common::secret(NS, &name, cert, key))
            .collect();
        upsert(&testbed, &secrets[0]);
        let identity = rt
            .block_on(
                IdentityResolver::builder(testbed.client(), SecretRef::new(NS, &name))
                    .provider(provider())
                    .settings(IdentitySettings::default().sync_timeout(Duration::from_secs(30)))
                    .watches(&watches, &testbed.cluster_client())
                    .build(),
            )
            .unwrap();
        let tls = ServerTls::builder(identity.clone())
            .callers(callers.clone())
            .build()
            .unwrap();
        let ours = OurServer::spawn(tls.config().clone());
        let go_server = go
            .as_ref()
            .map(|go| (go, go.borrow_mut().serve_secret(&name)));
        server_vs_go(
            &client_rt,
            &secret_client,
            IP_NAME,
            &ours,
            go_server,
            &format!("secret/{key}"),
            rounds,
            batch,
        );

        // The first handshake after each rotation, once the watch's loader has the new
        // version: the key parses it paid.
        let shared = rt
            .block_on(watches.watch(
                &testbed.cluster_client(),
                &SecretRef::new(NS, &name),
                Duration::from_secs(30),
            ))
            .unwrap();
        let cache = shared.identity_cache();
        let server_name = ServerName::try_from(IP_NAME).unwrap();
        let mut parses = Vec::with_capacity(rotations);
        for i in 1..=rotations {
            let (cert_pem, _) = &versions[i % 2];
            let leaf = certs(cert_pem).remove(0);
            let loaded = shared.loaded_changes();
            upsert(&testbed, &secrets[i % 2]);
            rt.block_on(async {
                let deadline = Instant::now() + Duration::from_secs(30);
                while shared.loaded_changes() == loaded {
                    assert!(
                        Instant::now() < deadline,
                        "the new version was never loaded"
                    );
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
            });
            let parsed = cache.full_loads();
            let (presented, _) =
                client_rt.block_on(handshake(&secret_client, ours.addr, &server_name));
            parses.push((cache.full_loads() - parsed) as f64);
            assert_eq!(presented, leaf, "the server presents the new version");
        }
        common::emit_counts("serving", &format!("server-rotation-parses/{key}"), &parses);
        assert_eq!(identity.state().failures, 0);
    }
    assert_eq!(callers.state().failures, 0);

    // SPIFFE: both servers take their SVID and bundle from one Workload API.
    let agent = rt.block_on(spiffe_testbed::WorkloadApi::start(TRUST_DOMAIN));
    agent.set_workload_id(SERVER_ID);
    let workload = rt
        .block_on(WorkloadApiSource::connect(
            SpiffeEndpoint::parse(&agent.endpoint()).unwrap(),
            provider(),
            Duration::from_secs(30),
        ))
        .unwrap();
    // The client, on the same Workload API, presents the same SVID (a member of the
    // trust domain, all both servers ask) and authorizes the server by its SPIFFE ID
    // (the SVIDs name no host).
    let spiffe_client = Arc::new(
        PeerTls::for_spiffe_id(&workload, SpiffeId::new(SERVER_ID).unwrap())
            .unwrap()
            .config()
            .unwrap(),
    );
    let identity = rt
        .block_on(
            IdentityResolver::source_builder(Arc::new(SpiffeIdentitySource::new(workload.clone())))
                .build(),
        )
        .unwrap();
    let spiffe_callers = rt
        .block_on(
            TrustVerifier::source_builder(
                Arc::new(SpiffeTrustSource::new(
                    workload,
                    &TrustDomain::new(TRUST_DOMAIN).unwrap(),
                )),
                ServerAuthorization::HostName,
            )
            .build(),
        )
        .unwrap();
    let tls = ServerTls::builder(identity.clone())
        .callers(spiffe_callers.clone())
        .build()
        .unwrap();
    let ours = OurServer::spawn(tls.config().clone());
    let go_server = go.as_ref().map(|go| {
        (
            go,
            go.borrow_mut()
                .serve_spiffe(&agent.endpoint(), TRUST_DOMAIN),
        )
    });
    server_vs_go(
        &client_rt,
        &spiffe_client,
        SVID_NAME,
        &ours,
        go_server,
        "spiffe/p256",
        rounds,
        batch,
    );
    assert_eq!(identity.state().failures, 0);
    assert_eq!(spiffe_callers.state().failures, 0);
    drop(testbed);
}
