//! Rotations under the server: the identity (new handshakes present the new leaf,
//! no request fails) and the client CA (the removed CA's callers refused, their
//! established connections closed).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use super::*;
use test_support::poll_until;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_rotation_reaches_new_handshakes_with_no_failed_request() {
    let s = serve(ClientAuth::Required).await;
    let leaf = s.client_ca.client_leaf("region", 7);
    let config = client_config(&s.server_ca, Some(&leaf));
    // Steady load from two tasks, each a new connection per request.
    let stop = Arc::new(AtomicBool::new(false));
    let (served, failed, newest) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut load = Vec::new();
    for _ in 0..2 {
        let (stop, served, failed, newest, config) = (
            stop.clone(),
            served.clone(),
            failed.clone(),
            newest.clone(),
            config.clone(),
        );
        let port = s.port;
        load.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match request(port, config.clone(), &[]).await {
                    Ok(answer) => {
                        served.fetch_add(1, Ordering::Relaxed);
                        newest.fetch_max(answer.server_serial, Ordering::Relaxed);
                    }
                    Err(_) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    poll_until("requests served before the rotation", || {
        served.load(Ordering::Relaxed) >= 20
    })
    .await;
    let rotated = server_leaf(&s.server_ca, 2);
    s.tb.upsert(tls_secret(
        NS,
        SERVER_IDENTITY,
        &rotated.cert_pem,
        &rotated.key_pem,
    ));
    let written = Instant::now();
    poll_until("a new handshake presents the rotated leaf", || {
        newest.load(Ordering::Relaxed) == 2
    })
    .await;
    let seen_after = written.elapsed();
    let before = served.load(Ordering::Relaxed);
    poll_until("more requests served after the rotation", || {
        served.load(Ordering::Relaxed) >= before + 20
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.unwrap();
    }
    // A fresh connection now presents the new leaf.
    let answer = request(s.port, config, &[]).await.unwrap();
    assert_eq!(answer.server_serial, 2);
    eprintln!(
        "identity rotation under load: {} requests served, {} failed, new leaf seen {:?} after the write",
        served.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        seen_after
    );
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "requests failed across the rotation"
    );
    assert!(
        seen_after < Duration::from_secs(2),
        "the rotated leaf took {seen_after:?} to reach a new handshake"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_ca_change_refuses_the_removed_cas_callers_and_closes_their_connections() {
    let s = serve(ClientAuth::Required).await;
    let old_caller = s.client_ca.client_leaf("region", 7);
    let next_ca = TestCa::new("next client CA");
    let new_caller = next_ca.client_leaf("region", 9);
    // An established keep-alive connection of the old CA's caller.
    let mut kept = connect(s.port, client_config(&s.server_ca, Some(&old_caller)))
        .await
        .unwrap();
    let body = exchange(&mut kept, &[], false).await.unwrap();
    assert!(body.starts_with("serial=07 "), "{body}");

    // The client CA Secret now names the next CA only.
    s.tb.upsert(tls_secret(
        NS,
        CLIENT_CA,
        &next_ca.pem(),
        &next_ca.client_leaf("unused", 99).key_pem,
    ));
    let changed = Instant::now();
    poll_until("the next CA's caller is served", || {
        let config = client_config(&s.server_ca, Some(&new_caller));
        let port = s.port;
        futures_ready(async move { request(port, config, &[]).await.is_ok() })
    })
    .await;
    // The established connection is closed by the server: a read sees its end.
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(10), kept.read(&mut byte)).await;
    let closed_after = changed.elapsed();
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "the removed CA's established connection stayed open: {closed:?}"
    );
    assert!(
        closed_after < Duration::from_secs(2),
        "the removed CA's connection closed only after {closed_after:?}"
    );
    eprintln!(
        "client CA change: the removed CA's connection closed {closed_after:?} after the write"
    );
    let refused = request(s.port, client_config(&s.server_ca, Some(&old_caller)), &[]).await;
    assert!(refused.is_err(), "the removed CA's caller was served");
}

/// Runs `future` to completion on a helper thread's runtime: for a condition that
/// needs I/O inside `poll_until`'s synchronous check.
pub(crate) fn futures_ready<F: std::future::Future<Output = bool> + Send + 'static>(
    future: F,
) -> bool {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(future)
    })
    .join()
    .unwrap()
}
