//! SPIFFE mode against Secret mode on one server presenting an SVID, and go-spiffe's
//! client against the same server (the SPIFFE anchor), included by `handshake.rs`:
//! - `handshake/{secret-on-svid-server,spiffe}/p256/<N>` (ours) and
//!   `go/handshake/spiffe/p256/<N>` (go-spiffe v2's `X509Source` with
//!   `tlsconfig.MTLSClientConfig`, its SVID fetched from the same Workload API
//!   emulator, the server's SPIFFE ID authorized), interleaved batch by batch;
//! - `client/svid-server/spiffe-p256` and `client-cpu/svid-server/spiffe-p256` (ours,
//!   one client on a current-thread runtime, the client thread's CPU time) against
//!   `go/client/svid-server/spiffe-p256` and `go/client-cpu/...` (go-spiffe, one
//!   goroutine, its process's CPU time), interleaved: the client alone against the
//!   same server, as the Secret-mode client rows are. Both sides offer their default
//!   hybrid, `X25519MLKEM768` (Go 1.24 and later as ours).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::ServerName;
use svc_tls::client::{PeerTls, TrustMode, client_config};
use svc_tls::identity::IdentityResolver;
use svc_tls::spiffe::{SpiffeEndpoint, SpiffeId, WorkloadApiSource};

use super::common::go::{Arm, GoChild, interleave, thread_cpu_ns};
use super::{
    CLIENT_ID, SERVER_ID, SVID_SERVER_NAME, TRUST_DOMAIN, common, handshake, provider, roots,
    round, serve,
};

/// `handshake/{secret-on-svid-server,spiffe}/p256/<N>`: Secret mode (`secret`, the
/// resolver over the p256 Secret) against SPIFFE mode on one server presenting an SVID.
pub(crate) fn secret_vs_spiffe(
    rt: &tokio::runtime::Runtime,
    material: &common::Material,
    secret: &IdentityResolver,
    go: Option<&RefCell<GoChild>>,
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

    // go-spiffe's source on the same Workload API, dialling the same server.
    if let Some(go) = go {
        let mut go = go.borrow_mut();
        go.peer("svid-server", addr);
        let id = go.spiffe(&agent.endpoint(), SERVER_ID);
        assert_eq!(
            id, CLIENT_ID,
            "go-spiffe's X509Source holds the agent's SVID"
        );
    }

    for clients in [1usize, 2] {
        let mut arms: Vec<Arm<'_>> = [&secret_config, &spiffe_config]
            .into_iter()
            .map(|config| {
                Box::new(move || round(rt, config, addr, SVID_SERVER_NAME, clients, batch))
                    as Arm<'_>
            })
            .collect();
        let mut ids = vec![
            format!("handshake/secret-on-svid-server/p256/{clients}"),
            format!("handshake/spiffe/p256/{clients}"),
        ];
        if let Some(go) = go {
            let id = format!("go/handshake/spiffe/p256/{clients}");
            ids.push(id.clone());
            arms.push(Box::new(move || {
                go.borrow_mut()
                    .measure(&id, batch * clients, Duration::ZERO)
                    .ns
            }));
        }
        let series: Vec<(String, Vec<f64>)> =
            ids.into_iter().zip(interleave(rounds, arms)).collect();
        common::emit_paired("handshake", &format!("spiffe/{clients}"), &series);
    }
    if let Some(go) = go {
        client_vs_go_spiffe(rt, addr, &spiffe_config, go, rounds, batch);
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

/// Our SPIFFE-mode client and go-spiffe's, one client each, against the SVID server:
/// handshakes per second and the client's CPU time per handshake (ours this thread's,
/// on a current-thread runtime; Go's its process's), paired round by round.
fn client_vs_go_spiffe(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    ours: &Arc<ClientConfig>,
    go: &RefCell<GoChild>,
    rounds: usize,
    batch: usize,
) {
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let name = ServerName::try_from(SVID_SERVER_NAME).unwrap();
    let (cpu_ours, cpu_go) = (RefCell::new(Vec::new()), RefCell::new(Vec::new()));
    let go_id = "go/client/svid-server/spiffe-p256";
    let arms: Vec<Arm<'_>> = vec![
        Box::new(|| {
            let (cpu, start) = (thread_cpu_ns(), Instant::now());
            client_rt.block_on(async {
                for _ in 0..batch {
                    handshake(ours.clone(), addr, name.clone()).await;
                }
            });
            let wall = start.elapsed().as_nanos() as f64 / batch as f64;
            cpu_ours
                .borrow_mut()
                .push((thread_cpu_ns() - cpu) / batch as f64);
            wall
        }),
        Box::new(|| {
            let measured = go.borrow_mut().measure(go_id, batch, Duration::ZERO);
            cpu_go.borrow_mut().push(measured.cpu_ns);
            measured.ns
        }),
    ];
    let mut samples = interleave(rounds, arms).into_iter();
    // The first CPU value of each is the warm-up call's.
    let (mut cpu_ours, mut cpu_go) = (cpu_ours.take(), cpu_go.take());
    cpu_ours.remove(0);
    cpu_go.remove(0);
    common::emit_paired(
        "handshake",
        "spiffe-client",
        &[
            (
                "client/svid-server/spiffe-p256".to_owned(),
                samples.next().unwrap(),
            ),
            (go_id.to_owned(), samples.next().unwrap()),
            ("client-cpu/svid-server/spiffe-p256".to_owned(), cpu_ours),
            ("go/client-cpu/svid-server/spiffe-p256".to_owned(), cpu_go),
        ],
    );
}
