//! The serving half on SPIFFE: the server presents its X509-SVID and verifies callers
//! against a federated trust domain's bundle, both from the Workload API (emulated);
//! a de-federated domain's callers are refused at once, on new handshakes and on the
//! connections they already hold.

use std::time::Instant;

use spiffe_testbed::WorkloadApi;
use svc_tls::client::PeerTls;
use svc_tls::identity::SpiffeIdentitySource;
use svc_tls::material::crypto_provider;
use svc_tls::spiffe::{SpiffeEndpoint, SpiffeId, WorkloadApiSource};
use svc_tls::trust::{ServerAuthorization, SpiffeTrustSource};

use super::*;
use test_support::poll_until;

const SERVER_ID: &str = "spiffe://example.org/ns/unikorn/sa/identity";
const CALLER_ID: &str = "spiffe://other.org/ns/partner/sa/region";

async fn workload(api: &WorkloadApi) -> WorkloadApiSource {
    WorkloadApiSource::connect(
        SpiffeEndpoint::parse(&api.endpoint()).unwrap(),
        Arc::new(crypto_provider()),
        Duration::from_secs(10),
    )
    .await
    .unwrap()
}

async fn call(tls: &PeerTls, http: &reqwest::Client) -> Result<String, String> {
    let response = http
        .get(tls.host().unwrap().join("whoami").unwrap())
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    response.text().await.map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_de_federated_domains_callers_are_refused_at_once_and_their_connections_closed() {
    let home = WorkloadApi::start("example.org").await;
    home.set_workload_id(SERVER_ID);
    let foreign = WorkloadApi::start("other.org").await;
    let caller_svid = foreign.set_workload_id(CALLER_ID);
    home.set_federated_bundle("other.org", foreign.bundle());
    foreign.set_federated_bundle("example.org", home.bundle());

    // The server: its SVID, callers of other.org.
    let server_workload = workload(&home).await;
    let identity = IdentityResolver::source_builder(Arc::new(SpiffeIdentitySource::new(
        server_workload.clone(),
    )))
    .build()
    .await
    .unwrap();
    let other_org = svc_tls::spiffe::TrustDomain::new("other.org").unwrap();
    let callers = TrustVerifier::source_builder(
        Arc::new(SpiffeTrustSource::new(server_workload, &other_org)),
        ServerAuthorization::HostName,
    )
    .build()
    .await
    .unwrap();
    let tls = ServerTls::builder(identity)
        .callers(callers.clone())
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        svc_tls::serving::serve(listener, tls, tower::service_fn(super::whoami_handler))
            .await
            .unwrap();
    });

    // The caller: its SVID, the server authorized by its SPIFFE ID.
    let caller_workload = workload(&foreign).await;
    let peer = PeerTls::for_spiffe_id(&caller_workload, SpiffeId::new(SERVER_ID).unwrap())
        .unwrap()
        .with_host(format!("https://127.0.0.1:{port}/").parse().unwrap());
    let http = peer.reqwest_client().unwrap();
    let body = call(&peer, &http).await.unwrap();
    assert!(
        body.contains(&format!("spiffe={CALLER_ID} ")),
        "{body} (caller serial {:x})",
        caller_svid.serial
    );

    // De-federation: example.org's agent stops sending other.org's bundle.
    home.set_federated_bundle("other.org", Vec::new());
    let withdrawn = Instant::now();
    poll_until(
        "the caller's kept-alive connection and new handshakes refused",
        || {
            let (peer, http) = (peer.clone(), http.clone());
            super::rotation::futures_ready(async move { call(&peer, &http).await.is_err() })
        },
    )
    .await;
    eprintln!(
        "de-federation: the caller refused {:?} after it",
        withdrawn.elapsed()
    );
    assert!(callers.state().withdrawn);
    server.abort();
}
