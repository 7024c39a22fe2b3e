//! SPIFFE-mode constructions through a registry of streams share one resolver and
//! one verifier per stream and server ID, as Secret mode shares them per Secret.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::client::PeerTls;
use crate::options::{ClientIdentityOptions, PeerOptions};
use crate::spiffe::{SpiffeEndpoint, WorkloadApiStreams};
use crate::watch::WatchedObjects;

const CLIENT_ID: &str = "spiffe://example.org/ns/unikorn/sa/region";
const SERVER_ID: &str = "spiffe://example.org/ns/unikorn/sa/identity";

fn options() -> (PeerOptions, ClientIdentityOptions) {
    let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    let m = cmd
        .try_get_matches_from([
            "svc",
            "--identity-host=https://identity.example",
            "--client-certificate-source=spiffe",
            &format!("--spiffe-server-id={SERVER_ID}"),
        ])
        .unwrap();
    (
        PeerOptions::from_matches(&m, "identity").unwrap(),
        ClientIdentityOptions::from_matches(&m, None).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_constructions_share_one_resolver_and_verifier_and_outlive_the_agent() {
    let agent = spiffe_testbed::WorkloadApi::start("example.org").await;
    agent.set_workload_id(CLIENT_ID);
    let (peer, me) = options();
    let streams = WorkloadApiStreams::new();
    let endpoint = SpiffeEndpoint::parse(&agent.endpoint()).unwrap();
    let workload = streams
        .connect(
            endpoint.clone(),
            Arc::new(crate::material::crypto_provider()),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    let watches = WatchedObjects::new();
    let server_id = me.required_spiffe_server_id().unwrap();
    let construct = || {
        PeerTls::from_spiffe_in(
            &watches,
            Some((&streams, endpoint.as_str())),
            &peer,
            &me,
            server_id.clone(),
            &workload,
            &super::from_options::PeerTlsSettings::default(),
        )
        .unwrap()
    };
    let first = construct();
    for _ in 0..19 {
        let again = construct();
        assert!(again.identity().unwrap().ptr_eq(first.identity().unwrap()));
        assert!(
            again
                .trust_verifier()
                .unwrap()
                .ptr_eq(first.trust_verifier().unwrap())
        );
        // And so one pooled HTTP client.
        assert!(again.client().unwrap().ptr_eq(&first.client().unwrap()));
    }
    let unshared = PeerTls::from_spiffe_in(
        &watches,
        None,
        &peer,
        &me,
        server_id.clone(),
        &workload,
        &super::from_options::PeerTlsSettings::default(),
    )
    .unwrap();
    assert!(
        !unshared
            .identity()
            .unwrap()
            .ptr_eq(first.identity().unwrap())
    );

    // The agent goes away: a per-reconcile construction still succeeds from the shared
    // halves (which serve the last good SVID), where an unshared one needs the stream.
    agent.stop().await;
    test_support::poll_until("the stream is seen down", || !workload.health().connected).await;
    let during = construct();
    assert!(during.identity().unwrap().ptr_eq(first.identity().unwrap()));
    assert!(
        PeerTls::from_spiffe_in(
            &watches,
            None,
            &peer,
            &me,
            server_id.clone(),
            &workload,
            &super::from_options::PeerTlsSettings::default(),
        )
        .is_err()
    );
}
