//! SPIFFE mode against two Workload APIs with one test body each: the emulator
//! (`spiffe-testbed`) and a real SPIRE server and agent (`real-spire`, built by
//! `cargo xtask real-peers`), behind TLS servers that verify client certificates
//! against the trust domain's bundle. An X509-SVID served and presented over mTLS
//! (the server authorized by exact SPIFFE ID), rotation, federation and
//! de-federation, an agent restart (the last good SVID served meanwhile, one warning)
//! and abrupt stream loss.
//!
//! Where the two differ in how they are driven, `real_spire::WorkloadApiUnderTest`
//! says so (SPIRE renews an SVID by itself at half its lifetime; the emulator on
//! cue). The foreign trust domain of the federation tests is a second emulator in
//! both cases: only its CA is used, and SPIRE is given its bundle with
//! `spire-server bundle set`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use real_spire::{Minted, Options, Spire, WorkloadApiUnderTest};
use rustls::ClientConfig;
use rustls_pki_types::CertificateDer;
use svc_tls::client::PeerTls;
use svc_tls::identity::IdentityResolver;
use svc_tls::material::crypto_provider;
use svc_tls::spiffe::{SpiffeEndpoint, SpiffeId, WorkloadApiSource};
use test_support::logs::CapturedLogs;
use test_support::pki::TestCa;
use test_support::poll_until;
use test_support::tls_server::{Reply, VerifyingServer, request};

const TD: &str = "example.org";
const CLIENT_ID: &str = "spiffe://example.org/ns/unikorn/sa/region";
const SERVER_ID: &str = "spiffe://example.org/ns/unikorn/sa/identity";
const FOREIGN_SERVER: &str = "spiffe://other.org/ns/partner/sa/api";
const STARTUP: Duration = Duration::from_secs(30);
/// The SVID lifetime of the SPIRE rotation test (renewed at about half of it).
const SHORT_TTL: Duration = Duration::from_secs(20);
/// The SVID lifetime of the other SPIRE tests: no renewal during the test.
const LONG_TTL: Duration = Duration::from_secs(3600);

async fn emulator() -> spiffe_testbed::WorkloadApi {
    let api = spiffe_testbed::WorkloadApi::start(TD).await;
    api.set_workload_id(CLIENT_ID);
    api
}

async fn spire(svid_ttl: Duration) -> Spire {
    Spire::start(Options {
        trust_domain: TD.to_owned(),
        workload_id: CLIENT_ID.to_owned(),
        svid_ttl,
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// `body` against the emulator and against SPIRE (SVIDs living `ttl`), as two tests.
macro_rules! both {
    ($body:ident, $ttl:ident) => {
        mod $body {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn spiffe_testbed() {
                super::$body(&super::emulator().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn spire() {
                super::$body(&super::spire(super::$ttl).await).await;
            }
        }
    };
}

both!(an_svid_is_served_and_presented_over_mtls, LONG_TTL);
both!(
    a_renewed_svid_is_presented_on_the_next_connection,
    SHORT_TTL
);
both!(
    federation_and_de_federation_apply_to_the_next_handshake,
    LONG_TTL
);
both!(
    an_agent_restart_serves_the_last_svid_with_one_warning,
    LONG_TTL
);
both!(abrupt_stream_loss_keeps_serving_and_reconnects, LONG_TTL);

/// The serial of the client leaf a server saw, as `IdentityState::serial_hex` writes
/// it (SPIRE's serials are 128-bit: more than the default handler's u64).
fn serial_hex(der: &[u8]) -> String {
    let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
    let raw = cert.tbs_certificate.raw_serial();
    let skip = raw.iter().take_while(|&&b| b == 0).count();
    raw[skip.min(raw.len().saturating_sub(1))..]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A TLS server presenting `minted` and verifying clients against `client_roots`; it
/// answers with the client leaf's serial in hex.
async fn server(minted: &Minted, client_roots: Vec<CertificateDer<'static>>) -> VerifyingServer {
    let unused = TestCa::new("unused");
    VerifyingServer::builder(&unused, &unused)
        .server_chain(minted.chain.clone(), &minted.key_pem)
        .client_roots(client_roots)
        .handler(Arc::new(|seen, _| Reply {
            status: 200,
            body: seen
                .leaf
                .as_deref()
                .map_or_else(|| "none".to_owned(), serial_hex),
        }))
        .start()
        .await
}

/// One request on a new connection: the client serial the server saw (hex).
async fn presented(config: &Arc<ClientConfig>, server: &VerifyingServer) -> Result<String, String> {
    let reply = request(config.clone(), server.addr).await?;
    if reply.status != 200 {
        return Err(format!("status {}: {}", reply.status, reply.body));
    }
    Ok(reply.body.trim().to_owned())
}

async fn connect(api: &impl WorkloadApiUnderTest) -> WorkloadApiSource {
    WorkloadApiSource::connect(
        SpiffeEndpoint::parse(&api.endpoint()).unwrap(),
        Arc::new(crypto_provider()),
        STARTUP,
    )
    .await
    .unwrap_or_else(|e| panic!("{}: {e}", api.name()))
}

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

/// Waits (at most `limit`) until `check` holds, re-checking on every stream message
/// and every 100 ms.
async fn within<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not within {limit:?}: {what}");
}

async fn an_svid_is_served_and_presented_over_mtls(api: &impl WorkloadApiUnderTest) {
    let workload = connect(api).await;
    assert_eq!(workload.spiffe_id(), CLIENT_ID, "{}", api.name());
    let (resolver, config) = spiffe_client(&workload, SERVER_ID);
    let right = server(&api.mint(SERVER_ID).await, api.bundle().await).await;

    let seen = presented(&config, &right).await.unwrap();
    let state = resolver.state();
    assert_eq!(
        seen,
        state.serial_hex,
        "{}: the served SVID is presented",
        api.name()
    );
    assert_eq!(state.spiffe_id.as_deref(), Some(CLIENT_ID));
    assert!(!state.stale, "{state:?}");

    // Same trust domain, same CA, another workload: refused by ID.
    let other = server(
        &api.mint("spiffe://example.org/ns/unikorn/sa/other").await,
        api.bundle().await,
    )
    .await;
    let err = presented(&config, &other).await.unwrap_err();
    assert!(
        err.starts_with("handshake:") && err.contains("SpiffeIdMismatch"),
        "{err}"
    );
    assert_eq!(right.rejected(), 0, "{:?}", right.rejection_reasons());
}

async fn a_renewed_svid_is_presented_on_the_next_connection(api: &impl WorkloadApiUnderTest) {
    let workload = connect(api).await;
    let (resolver, config) = spiffe_client(&workload, SERVER_ID);
    let server = server(&api.mint(SERVER_ID).await, api.bundle().await).await;
    let mut last = presented(&config, &server).await.unwrap();
    assert_eq!(last, resolver.state().serial_hex);

    // Two renewals while handshakes run: once the stream has delivered one, the next
    // new connection presents it (no restart, no new client configuration).
    for _ in 0..2 {
        api.rotate();
        within(
            &format!("{}: a renewed SVID delivered", api.name()),
            api.propagation(),
            || {
                let changed = resolver.state().serial_hex != last;
                async move { changed }
            },
        )
        .await;
        let now = resolver.state().serial_hex;
        assert_eq!(presented(&config, &server).await.unwrap(), now);
        assert_ne!(now, last);
        last = now;
    }
    assert_eq!(server.rejected(), 0, "{:?}", server.rejection_reasons());
}

async fn call(tls: &PeerTls) -> Result<String, String> {
    let http = tls.reqwest_client().map_err(|e| e.to_string())?;
    let response = http
        .get(tls.host().map_err(|e| e.to_string())?.clone())
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    response.text().await.map_err(|e| e.to_string())
}

async fn federation_and_de_federation_apply_to_the_next_handshake(api: &impl WorkloadApiUnderTest) {
    // other.org: only its CA is used (its bundle, a server certificate from it).
    let foreign = spiffe_testbed::WorkloadApi::start("other.org").await;
    let svid = foreign.issue(FOREIGN_SERVER);
    let unused = TestCa::new("unused");
    let server = VerifyingServer::builder(&unused, &unused)
        .server_chain(svid.chain.clone(), &svid.key_pem())
        .client_roots(api.bundle().await)
        .start()
        .await;
    let workload = connect(api).await;
    api.federate("other.org", foreign.bundle()).await;
    let limit = api.propagation();
    within("the federated bundle reaches the source", limit, || {
        let federated =
            PeerTls::for_spiffe_id(&workload, SpiffeId::new(FOREIGN_SERVER).unwrap()).is_ok();
        async move { federated }
    })
    .await;
    let tls = PeerTls::for_spiffe_id(&workload, SpiffeId::new(FOREIGN_SERVER).unwrap())
        .unwrap()
        .with_host(server.url().parse().unwrap());
    assert!(
        call(&tls).await.is_ok(),
        "{}: federated: accepted",
        api.name()
    );

    api.defederate("other.org").await;
    within("de-federated: refused", limit, || async {
        call(&tls).await.is_err()
    })
    .await;
    let state = tls.trust_verifier().unwrap().state();
    assert!(state.withdrawn, "{}: {state:?}", api.name());

    api.federate("other.org", foreign.bundle()).await;
    within("federated again: accepted", limit, || async {
        call(&tls).await.is_ok()
    })
    .await;
    assert!(!tls.trust_verifier().unwrap().state().withdrawn);
}

async fn an_agent_restart_serves_the_last_svid_with_one_warning(api: &impl WorkloadApiUnderTest) {
    let logs = CapturedLogs::global().clone();
    let workload = connect(api).await;
    let (resolver, config) = spiffe_client(&workload, SERVER_ID);
    let server = server(&api.mint(SERVER_ID).await, api.bundle().await).await;
    let before = presented(&config, &server).await.unwrap();

    api.stop_agent().await;
    poll_until("the source sees the stream down", || {
        !workload.health().connected
    })
    .await;
    // Many handshakes while the agent is down: each presents the last good SVID.
    for _ in 0..5 {
        assert_eq!(
            presented(&config, &server).await.unwrap(),
            before,
            "{}",
            api.name()
        );
    }
    let state = resolver.state();
    assert!(
        state.stale && state.failures >= 5,
        "{}: {state:?}",
        api.name()
    );
    let endpoint = api.endpoint();
    let warnings = logs
        .text()
        .lines()
        .filter(|l| {
            l.contains("WARN")
                && l.contains(&endpoint)
                && l.contains("serving the last good identity")
        })
        .count();
    assert_eq!(warnings, 1, "{}: one rate-limited warning", api.name());

    // The agent comes back: the stream reconnects and what it serves is presented (a
    // restarted SPIRE agent fetches new SVIDs; the emulator resends the same one).
    api.start_agent().await;
    within("the stream reconnects", api.propagation(), || {
        let back = workload.health().connected && !resolver.state().stale;
        async move { back }
    })
    .await;
    let now = resolver.state().serial_hex;
    assert_eq!(presented(&config, &server).await.unwrap(), now);
    assert_eq!(workload.spiffe_id(), CLIENT_ID);
}

async fn abrupt_stream_loss_keeps_serving_and_reconnects(api: &impl WorkloadApiUnderTest) {
    let workload = connect(api).await;
    let (resolver, config) = spiffe_client(&workload, SERVER_ID);
    let server = server(&api.mint(SERVER_ID).await, api.bundle().await).await;
    presented(&config, &server).await.unwrap();
    let errors = workload.health().errors;

    api.lose_streams().await;
    // Handshakes go on throughout: the last good SVID, then what the stream serves.
    within(
        "the loss is seen and the stream is back",
        api.propagation(),
        || {
            let health = workload.health();
            let back = health.errors > errors && health.connected;
            let config = config.clone();
            let server = &server;
            async move {
                let served = presented(&config, server).await;
                assert!(
                    served.is_ok(),
                    "a handshake failed during the loss: {served:?}"
                );
                back
            }
        },
    )
    .await;
    let now = resolver.state().serial_hex;
    assert_eq!(presented(&config, &server).await.unwrap(), now);
    assert!(!resolver.state().stale);
}
