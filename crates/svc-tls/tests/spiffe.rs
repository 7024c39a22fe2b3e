//! SPIFFE mode against the Workload API emulator (`spiffe-testbed`, real gRPC over a
//! unix socket) and a TLS server that verifies client certificates: SVID rotation
//! during handshakes, server authorization by exact SPIFFE ID and by the bundle,
//! bundle rotation, agent restarts, and every start-up failure as its own error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use spiffe_testbed::{SvidInfo, WorkloadApi};
use svc_tls::client::PeerTls;
use svc_tls::identity::IdentityResolver;
use svc_tls::material::crypto_provider;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::origin::IdentityOrigin;
use svc_tls::spiffe::{SpiffeEndpoint, SpiffeId, SpiffeStartError, WorkloadApiSource};
use test_support::logs::CapturedLogs;
use test_support::pki::TestCa;
use test_support::poll_until;
use test_support::tls_server::{VerifyingServer, request, request_serial};

const TD: &str = "example.org";
const CLIENT_ID: &str = "spiffe://example.org/ns/unikorn/sa/region";
const SERVER_ID: &str = "spiffe://example.org/ns/unikorn/sa/identity";
const STARTUP: Duration = Duration::from_secs(10);

/// A serial as `IdentityState::serial_hex` writes it: lowercase, whole bytes.
fn hex(serial: u64) -> String {
    let s = format!("{serial:x}");
    if s.len() % 2 == 1 { format!("0{s}") } else { s }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(crypto_provider())
}

async fn agent() -> WorkloadApi {
    let agent = WorkloadApi::start(TD).await;
    agent.set_workload_id(CLIENT_ID);
    agent
}

async fn connect(agent: &WorkloadApi) -> WorkloadApiSource {
    connect_to(&agent.endpoint(), STARTUP).await.unwrap()
}

/// Connects to `endpoint`, waiting at most `timeout` for the first SVID.
async fn connect_to(
    endpoint: &str,
    timeout: Duration,
) -> Result<WorkloadApiSource, SpiffeStartError> {
    WorkloadApiSource::connect(
        SpiffeEndpoint::parse(endpoint).unwrap(),
        provider(),
        timeout,
    )
    .await
}

/// A server presenting `server` (an SVID issued by the agent, or anything else) and
/// verifying client certificates against `client_roots`.
async fn server(
    server: &SvidInfo,
    client_roots: Vec<rustls_pki_types::CertificateDer<'static>>,
) -> VerifyingServer {
    let unused = TestCa::new("unused");
    VerifyingServer::builder(&unused, &unused)
        .server_chain(server.chain.clone(), &server.key_pem())
        .client_roots(client_roots)
        .start()
        .await
}

/// The client of a SPIFFE-mode service: the SVID per handshake, the server verified
/// against the bundle and authorized by `server_id`.
fn spiffe_client(
    workload: &WorkloadApiSource,
    server_id: &str,
) -> (IdentityResolver, Arc<ClientConfig>) {
    let tls = PeerTls::for_spiffe_id(workload, SpiffeId::new(server_id).unwrap()).unwrap();
    (
        tls.identity().unwrap().clone(),
        Arc::new(tls.config().unwrap()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_svid_is_presented_on_the_next_connection() {
    let agent = agent().await;
    let workload = connect(&agent).await;
    let (resolver, config) = spiffe_client(&workload, SERVER_ID);
    let server = server(&agent.issue(SERVER_ID), agent.bundle()).await;

    let first = agent.current_svid();
    assert_eq!(
        request_serial(config.clone(), server.addr).await.unwrap(),
        first.serial
    );
    let state = resolver.state();
    assert_eq!(state.spiffe_id.as_deref(), Some(CLIENT_ID));
    assert!(
        matches!(state.origin, IdentityOrigin::Spiffe { ref endpoint } if *endpoint == agent.endpoint())
    );
    assert_eq!(state.serial_hex, hex(first.serial));

    // Rotations while handshakes run: once the stream has delivered a rotation, the
    // next new connection presents it (no restart, no new client configuration).
    for _ in 0..3 {
        let generation = workload.generation();
        let next = agent.rotate_svid();
        assert_ne!(next.serial, first.serial);
        tokio::time::timeout(STARTUP, workload.changed_after(generation))
            .await
            .expect("the stream delivers the rotation");
        assert_eq!(
            request_serial(config.clone(), server.addr).await.unwrap(),
            next.serial,
            "the first connection after the rotation presents the new SVID"
        );
        assert_eq!(resolver.state().serial_hex, hex(next.serial));
    }
    assert_eq!(server.rejected(), 0, "{:?}", server.rejection_reasons());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_must_present_exactly_the_configured_spiffe_id() {
    let agent = agent().await;
    let workload = connect(&agent).await;
    let (_resolver, config) = spiffe_client(&workload, SERVER_ID);

    // Same trust domain, same CA, another workload: refused by ID.
    let impostor = server(
        &agent.issue("spiffe://example.org/ns/unikorn/sa/other"),
        agent.bundle(),
    )
    .await;
    let err = request(config.clone(), impostor.addr).await.unwrap_err();
    assert!(err.starts_with("handshake:"), "{err}");
    assert!(
        err.contains("SpiffeIdMismatch")
            && err.contains(SERVER_ID)
            && err.contains("spiffe://example.org/ns/unikorn/sa/other"),
        "{err}"
    );

    // The right ID from a CA outside the bundle: refused by the chain.
    let foreign = TestCa::new("not in the bundle");
    let leaf = foreign.server_leaf_with(&["localhost"], &[SERVER_ID]);
    let unused = TestCa::new("unused");
    let outsider = VerifyingServer::builder(&unused, &unused)
        .server_leaf(&leaf)
        .client_roots(agent.bundle())
        .start()
        .await;
    let err = request(config.clone(), outsider.addr).await.unwrap_err();
    assert!(
        err.contains("UnknownIssuer") || err.contains("unknown issuer"),
        "{err}"
    );

    // The right server is accepted (and no host name is checked: it is reached as
    // 127.0.0.1, which its SVID does not name).
    let right = server(&agent.issue(SERVER_ID), agent.bundle()).await;
    request_serial(config, right.addr).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_rotation_applies_to_the_next_connection() {
    let agent = agent().await;
    let workload = connect(&agent).await;
    let (_resolver, config) = spiffe_client(&workload, SERVER_ID);
    let old_server_svid = agent.issue(SERVER_ID);

    // The trust domain's CA rotates; the new bundle keeps the old CA for an overlap.
    let generation = workload.generation();
    agent.rotate_ca(true);
    tokio::time::timeout(STARTUP, workload.changed_after(generation))
        .await
        .unwrap();
    let new_server = server(&agent.issue(SERVER_ID), agent.bundle()).await;
    let old_server = server(&old_server_svid, agent.bundle()).await;
    // The client's own SVID was re-issued from the new CA and is presented.
    assert_eq!(
        request_serial(config.clone(), new_server.addr)
            .await
            .unwrap(),
        agent.current_svid().serial
    );
    request_serial(config.clone(), old_server.addr)
        .await
        .unwrap();

    // The old CA leaves the bundle: its servers are refused from the next connection.
    let generation = workload.generation();
    agent.rotate_ca(false);
    tokio::time::timeout(STARTUP, workload.changed_after(generation))
        .await
        .unwrap();
    let err = request(config.clone(), old_server.addr).await.unwrap_err();
    assert!(err.starts_with("handshake:"), "{err}");
    let newest = server(&agent.issue(SERVER_ID), agent.bundle()).await;
    assert_eq!(
        request_serial(config, newest.addr).await.unwrap(),
        agent.current_svid().serial
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_restart_serves_the_last_svid_with_one_warning_and_reconnects() {
    let logs = CapturedLogs::global().clone();
    let agent = agent().await;
    let workload = connect(&agent).await;
    let (resolver, config) = spiffe_client(&workload, SERVER_ID);
    let server = server(&agent.issue(SERVER_ID), agent.bundle()).await;
    let before = agent.current_svid();
    request_serial(config.clone(), server.addr).await.unwrap();
    let opened = agent.streams_opened();

    agent.stop().await;
    poll_until("the source sees the stream down", || {
        !workload.health().connected
    })
    .await;
    // Many handshakes while the agent is down: each presents the last good SVID.
    for _ in 0..5 {
        assert_eq!(
            request_serial(config.clone(), server.addr).await.unwrap(),
            before.serial
        );
    }
    let state = resolver.state();
    assert!(state.stale, "{state:?}");
    assert!(state.failures >= 5, "{state:?}");
    let warnings: Vec<String> = logs
        .text()
        .lines()
        .filter(|l| {
            l.contains("WARN")
                && l.contains(&agent.endpoint())
                && l.contains("serving the last good identity")
        })
        .map(str::to_owned)
        .collect();
    assert_eq!(warnings.len(), 1, "one rate-limited warning: {warnings:#?}");
    assert!(warnings[0].contains("is down"), "{}", warnings[0]);

    // The agent comes back: the stream reconnects, and the next rotation is used.
    agent.resume().await;
    poll_until("the stream reconnects", || {
        workload.health().connected && agent.streams_opened() > opened
    })
    .await;
    assert_eq!(
        request_serial(config.clone(), server.addr).await.unwrap(),
        before.serial
    );
    assert!(!resolver.state().stale);
    let generation = workload.generation();
    let next = agent.rotate_svid();
    tokio::time::timeout(STARTUP, workload.changed_after(generation))
        .await
        .unwrap();
    assert_eq!(
        request_serial(config, server.addr).await.unwrap(),
        next.serial
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_source_ends_its_stream() {
    let agent = agent().await;
    let workload = connect(&agent).await;
    let (resolver, config) = spiffe_client(&workload, SERVER_ID);
    assert_eq!(agent.open_streams(), 1);
    drop((workload, resolver, config));
    poll_until("the stream is closed", || agent.open_streams() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_startup_failure_is_its_own_error() {
    // Not an address.
    let err = SpiffeEndpoint::parse("http://agent:8081").unwrap_err();
    assert!(
        matches!(err, SpiffeStartError::EndpointInvalid { ref value, .. } if value == "http://agent:8081"),
        "{err:?}"
    );

    // Nothing listens there.
    let dir = tempfile::tempdir().unwrap();
    let nowhere = format!("unix:{}", dir.path().join("agent.sock").display());
    let err = connect_to(&nowhere, Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(
        matches!(err, SpiffeStartError::Unreachable { ref endpoint, .. } if *endpoint == nowhere),
        "{err:?}"
    );
    assert!(err.to_string().contains("unreachable"), "{err}");

    // The agent answers and issues no identity to this workload.
    let agent = agent().await;
    agent.deny(true);
    let err = connect_to(&agent.endpoint(), Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(
        matches!(err, SpiffeStartError::NoIdentityIssued { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("no identity issued"), "{err}");
    agent.deny(false);

    // The stream opens and no SVID comes in time; with a longer wait it does.
    agent.delay_first_svid(Duration::from_secs(2));
    let err = connect_to(&agent.endpoint(), Duration::from_millis(500))
        .await
        .unwrap_err();
    assert!(matches!(err, SpiffeStartError::NoSvid { .. }), "{err:?}");
    assert!(err.to_string().contains("sent no X509-SVID"), "{err}");
    let workload = connect_to(&agent.endpoint(), STARTUP).await.unwrap();
    assert_eq!(workload.spiffe_id(), CLIENT_ID);
}

#[test]
fn an_unset_or_empty_spiffe_endpoint_socket_is_its_own_error() {
    use std::ffi::OsStr;
    for value in [None, Some(OsStr::new("")), Some(OsStr::new("  "))] {
        let err = SpiffeEndpoint::from_var(value).unwrap_err();
        assert!(
            matches!(err, SpiffeStartError::EndpointUnset),
            "{value:?}: {err:?}"
        );
        assert!(err.to_string().contains("SPIFFE_ENDPOINT_SOCKET"), "{err}");
    }
    let endpoint =
        SpiffeEndpoint::from_var(Some(OsStr::new("unix:///run/spire/agent.sock"))).unwrap();
    assert_eq!(endpoint.as_str(), "unix:///run/spire/agent.sock");
    let endpoint = SpiffeEndpoint::from_var(Some(OsStr::new("tcp:127.0.0.1:8081"))).unwrap();
    assert_eq!(endpoint.as_str(), "tcp:127.0.0.1:8081");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_tls_from_spiffe_options_calls_the_server() {
    let agent = agent().await;
    let server = server(&agent.issue(SERVER_ID), agent.bundle()).await;
    let m = {
        let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
        let cmd = ClientIdentityOptions::augment(cmd, None);
        cmd.get_matches_from([
            "svc".to_owned(),
            format!("--identity-host={}", server.url()),
            "--client-certificate-source=spiffe".to_owned(),
            format!("--spiffe-server-id={SERVER_ID}"),
        ])
    };
    let peer = PeerOptions::from_matches(&m, "identity").unwrap();
    let identity = ClientIdentityOptions::from_matches(&m, None).unwrap();
    let workload = connect(&agent).await;
    let tls = PeerTls::from_spiffe(&peer, &identity, &workload).unwrap();
    let state = tls.identity().unwrap().state();
    assert_eq!(state.spiffe_id.as_deref(), Some(CLIENT_ID));
    assert_eq!(state.serial_hex, hex(agent.current_svid().serial));

    // Through reqwest, as a service calls its peer.
    let http = tls.reqwest_client().unwrap();
    let body = http
        .get(tls.host().unwrap().clone())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(body.trim(), agent.current_svid().serial.to_string());
}
