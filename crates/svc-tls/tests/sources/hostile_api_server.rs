//! A hostile API server (issue 50): it ignores the field selector and sends thousands
//! of other Secrets, then an oversized version of the identity Secret, then rewrites
//! the Secret in a loop. The service keeps serving: the resolver presents the last good
//! identity throughout and the final one after the loop, the cache holds one object,
//! and the rewrites cost at most one load per coalescing interval.

use std::time::{Duration, Instant};

use kube_testbed::Fault;
use kube_testbed::Testbed;
use svc_tls::IdentityResolver;
use svc_tls::watch::{LimitError, WatchedObjects, default_limits};

use crate::support::*;

const NAME: &str = "hostile-client-certificate";
const TIMEOUT: Duration = Duration::from_secs(30);
const INTERVAL: Duration = Duration::from_millis(300);

fn presents(resolver: &IdentityResolver, leaf: &Leaf) -> bool {
    resolver.current().certified_key().cert.first() == Some(&leaf.der)
}

/// The resident set size of this process, in KiB (Linux), for the record.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_api_server_is_bounded_and_the_service_keeps_serving() {
    let tb = Testbed::start().await;
    let ca = TestCa::new("clients");
    let first = ca.client_leaf("svc", 1);
    tb.upsert(tls_secret(NAME, &first.cert_pem, &first.key_pem));
    const OTHERS: u64 = 2000;
    for i in 0..OTHERS {
        tb.upsert(secret_with(&format!("other-{i}"), "Opaque", &[("v", "x")]));
    }
    tb.inject(Fault::IgnoreFieldSelectors(true));
    let rss_before = rss_kib();

    let watches = WatchedObjects::with_watch_limits(default_limits().coalesce(Some(INTERVAL)));
    let cluster = tb.cluster_client();
    let secret = svc_tls::SecretRef::new(NS, NAME);
    let resolver = IdentityResolver::builder(tb.client(), secret.clone())
        .watches(&watches, &cluster)
        .build()
        .await
        .unwrap();
    let shared = watches.watch(&cluster, &secret, TIMEOUT).await.unwrap();
    let source = shared.source();
    assert!(presents(&resolver, &first));
    // Thousands of other Secrets: ignored and counted, none kept.
    assert_eq!(source.cached_objects(), 1);
    assert_eq!(source.watch_status().foreign_ignored, OTHERS);

    // An oversized version: refused by name, the last good identity kept.
    let mut huge = tls_secret(NAME, &first.cert_pem, &first.key_pem);
    huge["data"]["padding"] = serde_json::Value::String("A".repeat(2 * 1024 * 1024));
    tb.upsert(huge);
    poll_until("the oversized version is refused", || {
        source.watch_status().over_limit >= 1
    })
    .await;
    match source.watch_status().last_limit_error {
        Some(LimitError::ObjectTooLarge { object, cap, .. }) => {
            assert_eq!(object, format!("{NS}/{NAME}"));
            assert_eq!(cap, 1024 * 1024);
        }
        other => panic!("expected ObjectTooLarge, got {other:?}"),
    }
    assert!(presents(&resolver, &first));

    // The Secret rewritten in a loop: at most one load per interval, the last applied.
    let leaves: Vec<Leaf> = (2..=41)
        .map(|serial| ca.client_leaf("svc", serial))
        .collect();
    let loads_before = shared.loaded_changes();
    let started = Instant::now();
    for leaf in &leaves {
        tb.upsert(tls_secret(NAME, &leaf.cert_pem, &leaf.key_pem));
    }
    let last = leaves.last().unwrap();
    poll_until("the last version is served", || presents(&resolver, last)).await;
    let elapsed = started.elapsed();
    let loads = shared.loaded_changes() - loads_before;
    let allowed = u64::try_from(elapsed.as_millis() / INTERVAL.as_millis()).unwrap() + 2;
    assert!(loads <= allowed, "{loads} loads in {elapsed:?}");
    let status = source.watch_status();
    assert!(status.coalesced > 0, "{status:?}");
    assert_eq!(source.cached_objects(), 1);

    // Still serving, with one object held; the memory taken is reported.
    assert!(presents(&resolver, last));
    if let (Some(before), Some(after)) = (rss_before, rss_kib()) {
        eprintln!(
            "RSS {before} KiB -> {after} KiB after {OTHERS} foreign objects, a 2 MiB version, {} rewrites",
            leaves.len()
        );
    }
}
