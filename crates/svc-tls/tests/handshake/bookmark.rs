//! The real kube-apiserver's periodic watch BOOKMARK: an identity Secret watched by
//! svc-tls (what every handshake presents) and a kube-construct cache of it keep being
//! served across one, and follow a rotation written after it.
//!
//! The real server sends a watch its first periodic bookmark a minute after the watch
//! started (its watch cache's `defaultBookmarkFrequency`, a constant no flag changes;
//! earlier only 2 s before the watch's own deadline, which kube-runtime sets 290 s
//! out), so this test waits about 60 s. It lives in this binary because the binary's
//! other tests keep the second test thread busy for that long anyway: the wait costs
//! the suite far less wall time here than in a binary of its own (docs/testing.md).
//! The emulator sends its own bookmarks every 5 s, so every emulator test of a watch
//! sees them.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube_construct::cache::Selection;
use kube_construct::client::CachedClient;
use real_apiserver::ApiServerUnderTest;
use support::*;
use svc_tls::identity::IdentityResolver;
use svc_tls::origin::SecretRef;
use svc_tls::watch::WatchedObject;

const NAME: &str = "bookmarked-identity";

/// How long the real server may take to send a watch its first periodic BOOKMARK (a
/// minute, give or take its one-second ticks).
const BOOKMARK_LIMIT: Duration = Duration::from_secs(90);

/// Waits for the first periodic BOOKMARK of a WATCH of `name` in `ns` opened now, as
/// kube-runtime's watcher opens its own (bookmarks allowed, `timeoutSeconds=290`, from
/// a list's resourceVersion), and returns its resourceVersion and how long it took.
async fn first_periodic_bookmark(client: kube::Client, ns: &str, name: &str) -> (String, Duration) {
    let secrets: Api<Secret> = Api::namespaced(client, ns);
    let fields = format!("metadata.name={name}");
    let list = secrets
        .list(&ListParams::default().fields(&fields))
        .await
        .unwrap();
    let from = list.metadata.resource_version.unwrap();
    let params = WatchParams::default().fields(&fields).timeout(290);
    let started = std::time::Instant::now();
    let mut events = secrets.watch(&params, &from).await.unwrap().boxed();
    let bookmark = tokio::time::timeout(BOOKMARK_LIMIT, async {
        while let Some(event) = events.next().await {
            match event.unwrap() {
                WatchEvent::Bookmark(bookmark) => return bookmark.metadata.resource_version,
                WatchEvent::Error(error) => panic!("the watch failed: {error:?}"),
                _ => {}
            }
        }
        panic!("the watch ended before a BOOKMARK");
    })
    .await
    .unwrap_or_else(|_| panic!("no BOOKMARK within {BOOKMARK_LIMIT:?}"));
    (bookmark, started.elapsed())
}

/// The watch's relists and errors so far.
fn watch_errors(source: &WatchedObject<Secret>) -> (u64, u64) {
    (source.relists(), source.watch_health().errors)
}

/// The library's watches are opened first, so the server has sent them their bookmark
/// by the time the watch opened after them receives its own: from then on, no relist,
/// no error, the same identity presented, and a rotation followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_identity_and_a_cache_are_served_across_a_real_periodic_bookmark() {
    let api = real_apiserver::shared();
    let ns = real_apiserver::harness::namespace("bookmark");
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let (first, rotated) = (
        client_ca.client_leaf("svc", 31),
        client_ca.client_leaf("svc", 32),
    );
    let secret =
        |leaf: &Leaf| test_support::secret::tls_secret(&ns, NAME, &leaf.cert_pem, &leaf.key_pem);
    api.apply(secret(&first)).await;
    let server = VerifyingServer::start(&server_ca, &client_ca).await;

    let resolver = IdentityResolver::builder(api.client(), SecretRef::new(&ns, NAME))
        .build()
        .await
        .unwrap();
    let config = Arc::new(trusting(&server_ca, Some(&resolver)));
    let cache = CachedClient::builder()
        .cache::<Secret>(Selection::object(Some(&ns), NAME))
        .from_client(api.client())
        .await
        .unwrap();
    assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(31));
    let source = resolver.secret_source().unwrap();
    let before = watch_errors(source);
    let cache_errors = cache.health().caches[0].errors;

    let (bookmark, waited) = first_periodic_bookmark(api.client(), &ns, NAME).await;
    assert!(!bookmark.is_empty(), "a BOOKMARK carries a resourceVersion");
    // The bookmark went out on the same one-second tick to every watch whose minute
    // was up; give kube-runtime a moment to take it. A negative check, so a fixed
    // wait: what follows asserts that nothing happened (no relist, no error), and a
    // bookmark taken quietly leaves no event to wait for (neither kube-runtime's
    // watcher nor the sources count bookmarks).
    tokio::time::sleep(Duration::from_secs(1)).await;
    eprintln!("the real server's first periodic BOOKMARK came after {waited:?}");

    assert_eq!(
        watch_errors(source),
        before,
        "svc-tls's watch took the bookmark without a relist or an error"
    );
    assert!(source.watch_health().connected);
    assert!(cached_cert_is(source, &first.cert_pem));
    assert_eq!(handshake_serial(config.clone(), server.addr).await, Ok(31));
    let health = cache.health();
    assert!(health.is_ready(), "{health}");
    assert_eq!(health.caches[0].errors, cache_errors, "{health}");
    assert!(cache.get::<Secret>(Some(&ns), NAME).unwrap().is_some());

    // A rotation after the bookmark reaches both.
    api.apply(secret(&rotated)).await;
    poll_until("svc-tls's cache holds the rotation", || {
        cached_cert_is(source, &rotated.cert_pem)
    })
    .await;
    assert_eq!(handshake_serial(config, server.addr).await, Ok(32));
    poll_until("kube-construct's cache holds the rotation", || {
        cache
            .get::<Secret>(Some(&ns), NAME)
            .unwrap()
            .and_then(|s| s.data.as_ref()?.get("tls.crt").cloned())
            .is_some_and(|c| c.0 == rotated.cert_pem.as_bytes())
    })
    .await;
    assert_eq!(watch_errors(source), before);
    assert_eq!(resolver.state().failures, 0);
}
