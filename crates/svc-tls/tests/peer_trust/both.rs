//! The CA-Secret trust bodies that run against kube-testbed and the real
//! kube-apiserver alike: a server moved to a new CA refused until the Secret follows,
//! a broken Secret keeping the last good roots with one limited warning, and a
//! deleted then recreated Secret.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use real_apiserver::{ApiServerUnderTest, both};
use svc_tls::testing::ManualClock;

use crate::support::*;
use crate::{CA_NAME, Recorded, cached_ca_is, call, switching_server, verifier, watched};

both!(without_the_secret_update_the_new_server_is_refused);
both!(a_broken_ca_secret_keeps_the_last_good_roots_with_one_limited_warning);
both!(a_deleted_then_recreated_secret_keeps_old_roots_meanwhile);

/// A CA Secret in `ns` for either server: `Opaque` (the real API server refuses a
/// `kubernetes.io/tls` Secret without `tls.key`), `tls.crt` and `ca.crt`.
fn ca_secret_in(ns: &str, tls_crt: &str, ca_crt: &str) -> serde_json::Value {
    test_support::secret::secret_with(
        ns,
        CA_NAME,
        "Opaque",
        &[("tls.crt", tls_crt), ("ca.crt", ca_crt)],
    )
}

async fn without_the_secret_update_the_new_server_is_refused(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    let (ca_a, ca_b) = (TestCa::new("server CA A"), TestCa::new("server CA B"));
    api.apply(ca_secret_in(ns, &ca_a.pem(), &ca_a.pem())).await;
    let server = switching_server(&ca_a).await;
    let clock = ManualClock::new();
    let trust = verifier(api, ns, Arc::new(Recorded::default()), &clock).await;
    let config = watched(&trust);
    call(config.clone(), server.addr).await.unwrap();

    server.set_server_ca(&ca_b);
    let err = call(config.clone(), server.addr).await.unwrap_err();
    assert!(err.starts_with("handshake:"), "{err}");
    assert!(err.contains("UnknownIssuer"), "{err}");
    // Refusing an untrusted server is not a trust reload failure.
    assert_eq!(trust.state().failures, 0);

    // With the Secret update, the same configuration accepts it.
    api.apply(ca_secret_in(ns, &ca_b.pem(), &ca_b.pem())).await;
    poll_until("the cache sees B", || cached_ca_is(&trust, &ca_b.pem())).await;
    call(config, server.addr).await.unwrap();
}

async fn a_broken_ca_secret_keeps_the_last_good_roots_with_one_limited_warning(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    let ca_a = TestCa::new("server CA A");
    api.apply(ca_secret_in(ns, &ca_a.pem(), &ca_a.pem())).await;
    let server = switching_server(&ca_a).await;
    let clock = ManualClock::new();
    let recorded = Arc::new(Recorded::default());
    let trust = verifier(api, ns, recorded.clone(), &clock).await;
    let config = watched(&trust);
    call(config.clone(), server.addr).await.unwrap();
    assert_eq!(recorded.loads.lock().unwrap().clone(), vec![1]);

    // Not PEM at all.
    api.apply(ca_secret_in(ns, "not a certificate", "not a certificate"))
        .await;
    poll_until("the cache sees the broken Secret", || {
        cached_ca_is(&trust, "not a certificate")
    })
    .await;
    for _ in 0..5 {
        clock.advance(Duration::from_secs(5));
        call(config.clone(), server.addr).await.unwrap();
    }
    assert_eq!(recorded.failures.load(Ordering::SeqCst), 5);
    assert_eq!(
        recorded.warnings.lock().unwrap().clone(),
        vec![(0, Duration::from_secs(5), 1)],
        "one warning for five failures within a minute"
    );
    let state = trust.state();
    assert_eq!((state.roots, state.failures, state.stale), (1, 5, true));

    // PEM certificates, none usable as a root: never replaces the good roots.
    let junk = "-----BEGIN CERTIFICATE-----\nAAECAwQFBgcICQ==\n-----END CERTIFICATE-----\n";
    api.apply(ca_secret_in(ns, junk, junk)).await;
    poll_until("the cache sees the unusable roots", || {
        cached_ca_is(&trust, junk)
    })
    .await;
    clock.advance(Duration::from_secs(60));
    call(config.clone(), server.addr).await.unwrap();
    let warnings = recorded.warnings.lock().unwrap().clone();
    assert_eq!(
        warnings.last().copied(),
        Some((4, Duration::from_secs(85), 1)),
        "after the window the next failure warns, counting the suppressed ones"
    );
    assert_eq!(trust.state().failures, 6);
    assert_eq!(
        recorded.loads.lock().unwrap().clone(),
        vec![1],
        "no new roots"
    );

    // Restored: used again, no longer stale.
    api.apply(ca_secret_in(ns, &ca_a.pem(), &ca_a.pem())).await;
    poll_until("the cache sees the restored Secret", || {
        cached_ca_is(&trust, &ca_a.pem())
    })
    .await;
    call(config, server.addr).await.unwrap();
    assert!(!trust.state().stale);
}

async fn a_deleted_then_recreated_secret_keeps_old_roots_meanwhile(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    let (ca_a, ca_b) = (TestCa::new("server CA A"), TestCa::new("server CA B"));
    api.apply(ca_secret_in(ns, &ca_a.pem(), &ca_a.pem())).await;
    let server = switching_server(&ca_a).await;
    let clock = ManualClock::new();
    let recorded = Arc::new(Recorded::default());
    let trust = verifier(api, ns, recorded.clone(), &clock).await;
    let config = watched(&trust);

    api.delete("v1", "Secret", ns, CA_NAME).await;
    poll_until("the cache sees the deletion", || {
        trust.secret_source().unwrap().get().is_none()
    })
    .await;
    call(config.clone(), server.addr).await.unwrap();
    let state = trust.state();
    assert_eq!((state.failures, state.stale), (1, true));
    assert_eq!(recorded.warnings.lock().unwrap().len(), 1);

    // Recreated with CA B: the next handshake uses it.
    api.apply(ca_secret_in(ns, &ca_b.pem(), &ca_b.pem())).await;
    poll_until("the cache sees the recreated Secret", || {
        cached_ca_is(&trust, &ca_b.pem())
    })
    .await;
    server.set_server_ca(&ca_b);
    call(config.clone(), server.addr).await.unwrap();
    assert!(!trust.state().stale);
    assert_eq!(recorded.loads.lock().unwrap().clone(), vec![1, 1]);
    server.set_server_ca(&ca_a);
    assert!(
        call(config, server.addr).await.is_err(),
        "A is no longer trusted"
    );
}
