//! One watch per Secret per process, as a controller that builds its peer client per
//! reconcile needs: constructions from the options against the API emulator and a TLS
//! server that verifies client certificates, counted with the emulator's open watches
//! and LIST requests; constructions through an API-server outage; one Workload API
//! stream for every SPIFFE-mode construction.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support;

use std::time::Duration;

use kube_testbed::Testbed;
use support::*;
use svc_tls::client::{PeerClientError, PeerTls};
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::spiffe::WorkloadApiStreams;
use svc_tls::watch::WatchedObjects;

const CA: &str = "identity-ca";
const IDENTITY: &str = "region-client-certificate";
const TIMEOUT: Duration = Duration::from_secs(10);

/// The deployed flags of a service calling `identity` at `url`.
fn options(url: &str) -> (PeerOptions, ClientIdentityOptions) {
    let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    let m = cmd
        .try_get_matches_from([
            "svc".to_owned(),
            format!("--identity-host={url}"),
            format!("--identity-ca-secret-namespace={NS}"),
            format!("--identity-ca-secret-name={CA}"),
            format!("--client-certificate-namespace={NS}"),
            format!("--client-certificate-name={IDENTITY}"),
        ])
        .unwrap();
    (
        PeerOptions::from_matches(&m, "identity").unwrap(),
        ClientIdentityOptions::from_matches(&m, None).unwrap(),
    )
}

struct Setup {
    tb: Testbed,
    client_ca: TestCa,
    server: VerifyingServer,
    peer: PeerOptions,
    me: ClientIdentityOptions,
}

async fn setup() -> Setup {
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let leaf = client_ca.client_leaf("region", 1);
    tb.upsert(secret_with(
        CA,
        "kubernetes.io/tls",
        &[("tls.crt", &server_ca.pem()), ("ca.crt", &server_ca.pem())],
    ));
    tb.upsert(tls_secret(IDENTITY, &leaf.cert_pem, &leaf.key_pem));
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    let (peer, me) = options(&server.url());
    Setup {
        tb,
        client_ca,
        server,
        peer,
        me,
    }
}

/// Polls the asynchronous `check` until it holds (at most ten seconds).
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}");
}

/// One reconcile: build the peer's TLS and an HTTP client from the options, make one
/// request, drop both. Returns the client serial the server saw.
async fn reconcile(s: &Setup, watches: &WatchedObjects) -> Result<String, PeerClientError> {
    let tls = PeerTls::from_options_in(
        watches,
        &WorkloadApiStreams::new(),
        &s.tb.cluster_client(),
        &s.peer,
        &s.me,
        TIMEOUT,
    )
    .await?;
    let http = tls.reqwest_client()?;
    let body = http
        .get(tls.host().unwrap().clone())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    Ok(body.trim().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_reconciles_share_one_watch_per_secret_and_list_once() {
    let s = setup().await;
    let watches = WatchedObjects::new();
    assert_eq!(reconcile(&s, &watches).await.unwrap(), "1");
    let lists = s.tb.requests("list");
    poll_until("both watches open", || s.tb.open_watches() == 2).await;
    for i in 0..100 {
        assert_eq!(reconcile(&s, &watches).await.unwrap(), "1", "reconcile {i}");
        // A second watch of either Secret would show here at once.
        assert_eq!(s.tb.open_watches(), 2, "reconcile {i}");
    }
    assert_eq!(s.tb.requests("list"), lists, "no LIST after the first sync");
    assert_eq!(watches.watched().len(), 2);
    assert_eq!(s.server.rejected(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_reaches_the_next_reconcile_without_a_new_watch() {
    let s = setup().await;
    let watches = WatchedObjects::new();
    assert_eq!(reconcile(&s, &watches).await.unwrap(), "1");
    let renewed = s.client_ca.client_leaf("region", 2);
    s.tb.upsert(tls_secret(IDENTITY, &renewed.cert_pem, &renewed.key_pem));
    until(
        "the next reconcile presents the renewed certificate",
        || {
            let (s, watches) = (&s, &watches);
            async move { reconcile(s, watches).await.unwrap() == "2" }
        },
    )
    .await;
    assert_eq!(s.tb.open_watches(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciles_go_on_through_an_api_outage_and_see_a_rotation_made_during_it() {
    let s = setup().await;
    let watches = WatchedObjects::new();
    assert_eq!(reconcile(&s, &watches).await.unwrap(), "1");

    s.tb.stop().await;
    for _ in 0..5 {
        let started = std::time::Instant::now();
        assert_eq!(reconcile(&s, &watches).await.unwrap(), "1");
        assert!(
            started.elapsed() < TIMEOUT,
            "served from the shared cache, not after a sync timeout"
        );
    }
    // The Secret is renewed while the API server is away...
    let renewed = s.client_ca.client_leaf("region", 2);
    s.tb.upsert(tls_secret(IDENTITY, &renewed.cert_pem, &renewed.key_pem));
    assert_eq!(reconcile(&s, &watches).await.unwrap(), "1");
    // ...and seen once it is back.
    s.tb.restart(true).await;
    until("the renewal made during the outage is presented", || {
        let (s, watches) = (&s, &watches);
        async move { reconcile(s, watches).await.unwrap() == "2" }
    })
    .await;
}

/// After an 8 s API outage, a renewal written during it is presented within 2 s of
/// the API's return: the watch's retries are bounded (watch-ready's quick retry),
/// not kube-runtime's default backoff (up to 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_written_during_an_outage_is_served_within_two_seconds_of_the_return() {
    let s = setup().await;
    let watches = WatchedObjects::new();
    assert_eq!(reconcile(&s, &watches).await.unwrap(), "1");
    s.tb.stop().await;
    let renewed = s.client_ca.client_leaf("region", 2);
    s.tb.upsert(tls_secret(IDENTITY, &renewed.cert_pem, &renewed.key_pem));
    // The outage itself, not a wait for an event: 8 s, long enough that kube-runtime's
    // default backoff (what this test rules out) would have grown past the 2 s
    // asserted below.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(
        reconcile(&s, &watches).await.unwrap(),
        "1",
        "the cache during the outage"
    );
    s.tb.restart(true).await;
    let back = std::time::Instant::now();
    loop {
        if reconcile(&s, &watches).await.unwrap() == "2" {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(2),
            "the renewal was not served within 2 s of the API's return"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("renewal served {:?} after the API returned", back.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_never_watched_still_fails_after_the_sync_timeout_naming_it() {
    let s = setup().await;
    let watches = WatchedObjects::new();
    s.tb.stop().await;
    let err = PeerTls::from_options_in(
        &watches,
        &WorkloadApiStreams::new(),
        &s.tb.cluster_client(),
        &s.peer,
        &s.me,
        Duration::from_millis(500),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&format!("{NS}/{CA}")), "{text}");
    assert!(text.contains("timed out"), "{text}");
    assert!(
        watches.watched().is_empty(),
        "a failed start leaves nothing behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_registry_ends_its_watches_when_dropped() {
    let s = setup().await;
    let watches = WatchedObjects::new();
    let tls = PeerTls::from_options_in(
        &watches,
        &WorkloadApiStreams::new(),
        &s.tb.cluster_client(),
        &s.peer,
        &s.me,
        TIMEOUT,
    )
    .await
    .unwrap();
    poll_until("both watches open", || s.tb.open_watches() == 2).await;
    drop(watches);
    assert_eq!(s.tb.open_watches(), 2, "a client built from it keeps them");
    drop(tls);
    poll_until("no watch left open", || s.tb.open_watches() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_identity_verifier_and_signer_of_one_secret_share_one_watch() {
    let s = setup().await;
    let watches = WatchedObjects::new();
    // The identity Secret is also used as CA here (as a service trusting its own
    // issuer): one watch serves both.
    let resolver =
        svc_tls::IdentityResolver::builder(s.tb.client(), svc_tls::SecretRef::new(NS, IDENTITY))
            .watches(&watches, &s.tb.cluster_client())
            .build()
            .await
            .unwrap();
    let again =
        svc_tls::IdentityResolver::builder(s.tb.client(), svc_tls::SecretRef::new(NS, IDENTITY))
            .watches(&watches, &s.tb.cluster_client())
            .build()
            .await
            .unwrap();
    let trust = svc_tls::TrustVerifier::builder(s.tb.client(), svc_tls::SecretRef::new(NS, CA))
        .watches(&watches, &s.tb.cluster_client())
        .build()
        .await
        .unwrap();
    poll_until("the watches open", || s.tb.open_watches() >= 2).await;
    assert_eq!(s.tb.open_watches(), 2, "one per Secret");
    assert!(
        std::sync::Arc::ptr_eq(
            resolver.current().certified_key(),
            again.current().certified_key()
        ),
        "one load of the key for both"
    );
    let signer = svc_tls::PrincipalSigner::new(resolver.clone());
    let to = reqwest::Url::parse("https://peer.svc.test/").unwrap();
    assert!(signer.sign(&to, &svc_tls::Principal::default()).is_ok());
    assert_eq!(trust.state().roots, 1);
}

/// SPIFFE mode: twenty constructions, one Workload API stream; an SVID rotation in
/// the middle reaches every client, those built before it and those built after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spiffe_constructions_share_one_workload_api_stream() {
    use svc_tls::spiffe::SpiffeEndpoint;
    const CLIENT_ID: &str = "spiffe://example.org/ns/unikorn/sa/region";
    const SERVER_ID: &str = "spiffe://example.org/ns/unikorn/sa/identity";

    let agent = spiffe_testbed::WorkloadApi::start("example.org").await;
    agent.set_workload_id(CLIENT_ID);
    let svid = agent.issue(SERVER_ID);
    let unused = TestCa::new("unused");
    let server = VerifyingServer::builder(&unused, &unused)
        .server_chain(svid.chain.clone(), &svid.key_pem())
        .client_roots(agent.bundle())
        .start()
        .await;
    let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    let m = cmd
        .try_get_matches_from([
            "svc".to_owned(),
            format!("--identity-host={}", server.url()),
            "--client-certificate-source=spiffe".to_owned(),
            format!("--spiffe-server-id={SERVER_ID}"),
        ])
        .unwrap();
    let peer = PeerOptions::from_matches(&m, "identity").unwrap();
    let me = ClientIdentityOptions::from_matches(&m, None).unwrap();

    // What `from_options` does in SPIFFE mode, with the address it would read from
    // SPIFFE_ENDPOINT_SOCKET.
    let streams = WorkloadApiStreams::new();
    let endpoint = SpiffeEndpoint::parse(&agent.endpoint()).unwrap();
    let provider = std::sync::Arc::new(svc_tls::material::crypto_provider());
    let mut clients = Vec::new();
    for i in 0..20 {
        let workload = streams
            .connect(endpoint.clone(), provider.clone(), TIMEOUT)
            .await
            .unwrap();
        clients.push(PeerTls::from_spiffe(&peer, &me, &workload).unwrap());
        if i == 9 {
            agent.rotate_svid();
        }
    }
    assert_eq!(
        agent.streams_opened(),
        1,
        "one stream for twenty constructions"
    );
    assert_eq!(streams.len(), 1);

    let rotated = agent.current_svid().serial.to_string();
    for (i, tls) in clients.iter().enumerate() {
        until(&format!("client {i} presents the rotated SVID"), || async {
            let http = tls.reqwest_client().unwrap();
            let body = http
                .get(tls.host().unwrap().clone())
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            body.trim() == rotated
        })
        .await;
    }
    assert_eq!(agent.streams_opened(), 1);
}
