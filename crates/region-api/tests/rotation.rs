//! The generated client, built once at start-up over the pooled peer client, under
//! steady requests against a keep-alive TLS server that verifies client certificates
//! and answers, per request, which connection it came on and which client serial that
//! connection presented (in the region's `metadata`):
//! - an identity rotation, then a CA change (a new server CA added, the server
//!   re-issued under it, the old CA removed): no request fails, and every request sent
//!   more than a second after a change rides a connection opened after it;
//! - every request carries a principal signed for the request's URL.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube_testbed::Testbed;
use svc_tls::client::PeerTls;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::principal::{PRINCIPAL_HEADER, PeerCertificate, Principal};
use test_support::pki::TestCa;
use test_support::poll_until;
use test_support::secret::{secret_with, tls_secret};
use test_support::tls_server::{Reply, VerifyingServer};

const NS: &str = "unikorn";
const IDENTITY: &str = "kubernetes-client-certificate";
const CA: &str = "region-ca";
const WITHIN: Duration = Duration::from_secs(1);

fn ca_secret(cas: &[&TestCa]) -> serde_json::Value {
    let pem: String = cas.iter().map(|ca| ca.pem()).collect();
    secret_with(NS, CA, "Opaque", &[("ca.crt", &pem)])
}

fn who() -> Principal {
    Principal {
        actor: Some("kubernetes-service".into()),
        ..Principal::default()
    }
}

/// The region service: `listRegions` answered with one region whose `id` is the
/// connection's number and whose `name` is the client serial it presented; the
/// `X-Principal` of every request is verified against that connection's
/// certificate, and any failure recorded.
fn region_service(
    server_ca: &TestCa,
    client_ca: &TestCa,
    bad_principals: Arc<Mutex<Vec<String>>>,
) -> test_support::tls_server::Builder {
    VerifyingServer::builder(server_ca, client_ca)
        .keep_alive(true)
        .handler(Arc::new(move |seen, parts| {
            let verified = parts
                .headers
                .get(PRINCIPAL_HEADER)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| "no X-Principal".to_owned())
                .and_then(|token| {
                    let cert = PeerCertificate::from_der(seen.leaf.clone().unwrap())
                        .map_err(|e| e.to_string())?;
                    // Signed with this connection's key, with times and an audience
                    // (the server's origin, which this handler does not know).
                    cert.verify_with_options::<Principal>(
                        token,
                        &svc_tls::principal::VerifyOptions::default()
                            .with_times(svc_tls::principal::TokenTimes::Required)
                            .with_audiences([seen_origin(parts)]),
                    )
                    .map_err(|e| e.to_string())
                });
            match verified {
                Ok(principal) if principal == who() => {}
                other => bad_principals.lock().unwrap().push(format!("{other:?}")),
            }
            Reply {
                status: 200,
                body: serde_json::json!([{
                    "metadata": {
                        "id": seen.connection.to_string(),
                        "name": seen.serial.unwrap_or_default().to_string(),
                    },
                    "spec": {"type": "openstack", "features": {"physicalNetworks": false}},
                }])
                .to_string(),
            }
        }))
}

/// The origin the request was made to, from its `host` header.
fn seen_origin(parts: &hyper::http::request::Parts) -> reqwest::Url {
    let host = parts.headers["host"].to_str().unwrap();
    format!("https://{host}").parse().unwrap()
}

/// One request: when it was sent, and the (connection, serial) it rode, or the
/// error.
type Sent = (Instant, Result<(u64, u64), String>);

/// Requests from four tasks, one every 25 ms each (pacing), until `stop`; each
/// recorded in `sent` as it completes, so that the test waits for the requests it
/// needs rather than for a fixed time.
async fn steady(
    client: Arc<region_api::Client>,
    stop: Arc<AtomicBool>,
    sent: Arc<Mutex<Vec<Sent>>>,
) {
    let mut handles = Vec::new();
    for _ in 0..4 {
        let (client, stop, sent) = (client.clone(), stop.clone(), sent.clone());
        handles.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let at = Instant::now();
                let result = client
                    .list_regions()
                    .organization_id("org-1")
                    .send()
                    .await
                    .map_err(|e| e.to_string())
                    .map(|regions| {
                        let region = &regions.into_inner()[0];
                        (
                            region.metadata.id.parse().unwrap(),
                            region.metadata.name.parse().unwrap(),
                        )
                    });
                sent.lock().unwrap().push((at, result));
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
}

/// How many of the requests recorded so far were answered and sent after `from`.
fn answered_after(sent: &Mutex<Vec<Sent>>, from: Instant) -> usize {
    sent.lock()
        .unwrap()
        .iter()
        .filter(|(at, result)| *at > from && result.is_ok())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generated_client_follows_an_identity_rotation_and_a_ca_change_under_load() {
    let tb = Testbed::start().await;
    let (old_server_ca, new_server_ca, client_ca) = (
        TestCa::new("region server CA"),
        TestCa::new("region server CA, renewed"),
        TestCa::new("platform clients"),
    );
    let first = client_ca.client_leaf("kubernetes", 1);
    tb.upsert(tls_secret(NS, IDENTITY, &first.cert_pem, &first.key_pem));
    tb.upsert(ca_secret(&[&old_server_ca]));
    let bad_principals = Arc::new(Mutex::new(Vec::new()));
    let server = region_service(&old_server_ca, &client_ca, bad_principals.clone())
        .start()
        .await;

    // The service's start-up: its flags, its region peer, the generated client once.
    let peer = PeerOptions::new("region")
        .with_host_value(server.url())
        .with_ca_secret(NS, CA);
    let me = ClientIdentityOptions::new(None).with_secret(NS, IDENTITY);
    let tls = PeerTls::from_options(&tb.cluster_client(), &peer, &me, Duration::from_secs(10))
        .await
        .unwrap();
    let client = Arc::new(region_api::connect(&tls, who).unwrap());

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(Mutex::new(Vec::new()));
    let load = tokio::spawn(steady(client.clone(), stop.clone(), sent.clone()));
    poll_until("more than 10 requests answered before the rotation", || {
        sent.lock()
            .unwrap()
            .iter()
            .filter(|(_, r)| r.is_ok())
            .count()
            > 10
    })
    .await;

    // 1. The identity rotates.
    let renewed = client_ca.client_leaf("kubernetes", 2);
    let rotated = Instant::now();
    tb.upsert(tls_secret(
        NS,
        IDENTITY,
        &renewed.cert_pem,
        &renewed.key_pem,
    ));
    poll_until(
        "more than 40 requests sent over 1 s after the rotation answered",
        || answered_after(&sent, rotated + WITHIN) > 40,
    )
    .await;

    // 2. The CA changes: the new server CA is added, the server re-issued under it
    //    once the client trusts it (its pool retired for it), then the old CA removed.
    let pooled = tls.client().unwrap();
    let verifier = tls.trust_verifier().unwrap();
    let retired = pooled.retired_pools();
    tb.upsert(ca_secret(&[&old_server_ca, &new_server_ca]));
    poll_until("the client trusts both server CAs", || {
        verifier.state().roots == 2 && pooled.retired_pools() > retired
    })
    .await;
    server.set_server_ca(&new_server_ca);
    // Half a second of load on the re-issued server before the removal: a window,
    // not a wait for an event.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let connections_before_removal = server.handshakes();
    let removed = Instant::now();
    tb.upsert(ca_secret(&[&new_server_ca]));
    poll_until(
        "more than 20 requests sent over 1 s after the removal answered",
        || answered_after(&sent, removed + WITHIN) > 20,
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();
    let sent = std::mem::take(&mut *sent.lock().unwrap());

    let failed: Vec<_> = sent.iter().filter(|(_, r)| r.is_err()).collect();
    assert!(failed.is_empty(), "failed requests: {failed:?}");
    let ok = |from: Instant, to: Instant| -> Vec<(u64, u64)> {
        sent.iter()
            .filter(|(at, _)| *at > from && *at < to)
            .map(|(_, r)| *r.as_ref().unwrap())
            .collect()
    };
    let early = ok(rotated - Duration::from_secs(10), rotated);
    assert!(early.len() > 10, "only {} requests before", early.len());
    assert!(early.iter().all(|(_, serial)| *serial == 1), "{early:?}");
    // After the rotation: the new leaf only.
    let after_rotation = ok(rotated + WITHIN, removed);
    assert!(after_rotation.len() > 40, "{}", after_rotation.len());
    let old: Vec<_> = after_rotation.iter().filter(|(_, s)| *s != 2).collect();
    assert!(
        old.is_empty(),
        "on an old connection after the rotation: {old:?}"
    );
    // After the old CA's removal: connections opened after it only.
    let after_removal = ok(removed + WITHIN, Instant::now());
    assert!(after_removal.len() > 20, "{}", after_removal.len());
    let stale: Vec<_> = after_removal
        .iter()
        .filter(|(connection, _)| *connection <= connections_before_removal)
        .collect();
    assert!(
        stale.is_empty(),
        "on a connection from before the CA change: {stale:?}"
    );
    // Kept alive, not a handshake per request.
    assert!(
        server.handshakes() < 30,
        "{} handshakes",
        server.handshakes()
    );
    assert!(tls.client().unwrap().retired_pools() >= 3);
    let bad = bad_principals.lock().unwrap();
    assert!(bad.is_empty(), "principals not verified: {bad:?}");
}
