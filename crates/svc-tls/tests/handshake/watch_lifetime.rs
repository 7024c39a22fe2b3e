//! Dropping a `WatchedObject` or an `IdentityResolver` ends its Secret watch: the
//! emulator's count of open WATCH streams returns to zero (within a second; the
//! bound only keeps a broken test from hanging).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use kube_testbed::Testbed;
use support::{NS, TestCa, tls_secret};
use svc_tls::identity::IdentityResolver;
use svc_tls::origin::SecretRef;
use svc_tls::watch::{Secret, WatchedObject};
use test_support::poll_until;

const NAME: &str = "lifetime-client-certificate";

async fn testbed_with_identity() -> Testbed {
    let tb = Testbed::start().await;
    let leaf = TestCa::new("clients").client_leaf("svc", 1);
    tb.upsert(tls_secret(NAME, &leaf.cert_pem, &leaf.key_pem));
    tb
}

async fn all_watches_closed(tb: &Testbed) {
    tokio::time::timeout(
        Duration::from_secs(1),
        poll_until("every WATCH stream closed", || tb.open_watches() == 0),
    )
    .await
    .unwrap_or_else(|_| panic!("{} WATCH streams still open after 1 s", tb.open_watches()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_secret_source_ends_its_watch() {
    let tb = testbed_with_identity().await;
    let source = WatchedObject::<Secret>::watch(
        tb.client(),
        SecretRef::new(NS, NAME),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    poll_until("the Secret watched", || tb.open_watches() == 1).await;
    drop(source);
    all_watches_closed(&tb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_an_identity_resolver_ends_its_watch() {
    let tb = testbed_with_identity().await;
    let resolver = IdentityResolver::builder(tb.client(), SecretRef::new(NS, NAME))
        .settings(
            svc_tls::identity::IdentitySettings::default().sync_timeout(Duration::from_secs(10)),
        )
        .build()
        .await
        .unwrap();
    poll_until("the Secret watched", || tb.open_watches() == 1).await;
    drop(resolver);
    all_watches_closed(&tb).await;
}
