//! The real SPIRE itself: what the agent serves to this process after a start, a
//! re-registration and an agent restart, checked with the `spiffe` crate's client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use real_spire::{Options, Spire};
use spiffe::workload_api::WorkloadApiClient;

const TD: &str = "example.org";
const ID: &str = "spiffe://example.org/ns/unikorn/sa/region";

async fn start(ttl: Duration) -> Spire {
    Spire::start(Options {
        trust_domain: TD.to_owned(),
        workload_id: ID.to_owned(),
        svid_ttl: ttl,
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn context(spire: &Spire) -> spiffe::X509Context {
    WorkloadApiClient::connect_to(spire.endpoint())
        .await
        .unwrap()
        .fetch_x509_context()
        .await
        .unwrap()
}

fn now() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_serves_this_process_its_svid_from_the_servers_ca() {
    let spire = start(Duration::from_secs(600)).await;
    let context = context(&spire).await;
    let svid = context.default_svid().expect("an SVID");
    assert_eq!(svid.spiffe_id().to_string(), ID);
    assert_eq!(context.svids().len(), 1, "one entry, one SVID");

    // The agent's bundle is the server's (`bundle show`), and it issued the leaf.
    let server_bundle = spire.bundle().await.unwrap();
    let served: Vec<Vec<u8>> = context
        .bundle_set()
        .iter()
        .find(|(td, _)| td.to_string().ends_with(TD))
        .map(|(_, b)| {
            b.authorities()
                .iter()
                .map(|c| c.as_bytes().to_vec())
                .collect()
        })
        .expect("the trust domain's own bundle");
    let expected: Vec<Vec<u8>> = server_bundle.iter().map(|c| c.as_ref().to_vec()).collect();
    assert_eq!(served, expected);
    let (_, leaf) = x509_parser::parse_x509_certificate(svid.leaf().as_bytes()).unwrap();
    let (_, ca) = x509_parser::parse_x509_certificate(&expected[0]).unwrap();
    // (Chain verification against this bundle is what svc-tls's tests/spiffe_tiers.rs
    // does, through a verifying TLS server.)
    assert_eq!(leaf.issuer(), ca.subject(), "issued by the server's own CA");
    assert_eq!(ca.issuer(), ca.subject(), "the server's CA is self-signed");

    // Valid for the entry's TTL from now, and backdated (SPIRE's 10 s clock-skew
    // allowance): renewal at "half the lifetime" comes earlier than half the TTL.
    let not_before = leaf.validity().not_before.timestamp();
    let not_after = leaf.validity().not_after.timestamp();
    let now = now();
    assert!(
        (not_after - now - 600).abs() <= 5,
        "not after {not_after}, now {now}"
    );
    assert!(
        now - not_before >= 5,
        "backdated: not before {not_before}, now {now}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_id_and_an_agent_restart_are_served() {
    let spire = start(Duration::from_secs(600)).await;
    let first = context(&spire).await.default_svid().unwrap().leaf().clone();

    let other = "spiffe://example.org/ns/unikorn/sa/other";
    spire.register(other).await.unwrap();
    let svid = context(&spire).await.default_svid().unwrap().clone();
    assert_eq!(svid.spiffe_id().to_string(), other);

    // Restarted from its data directory: no join token (it was used), same agent.
    spire.restart_agent().await.unwrap();
    let after = context(&spire).await.default_svid().unwrap().clone();
    assert_eq!(after.spiffe_id().to_string(), other);
    assert_ne!(after.leaf().as_bytes(), first.as_bytes());
}
