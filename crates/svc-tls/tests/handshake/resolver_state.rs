//! Issue 14, the resolver side: what the resolver makes visible and what it writes.
//! - the served slot is written only on change, never with an older snapshot;
//! - an episode of failures ends with one (throttled) recovery report giving its
//!   failure count and duration, and the next episode starts with a clean count;
//! - an expired last-good identity is reported as such, not as a stale one;
//! - the Secret watch's health is in the state and reported when it fails too long.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use kube_testbed::Testbed;
use support::*;
use svc_tls::identity::{IdentityReloadError, IdentityResolver, IdentitySource};
use svc_tls::last_good::{
    NoopRecorder, OutsideValidity, Recovery, ReloadRecorder, StaleWarning, WatchHealthState,
};
use svc_tls::material::{CertificateValidity, Identity, load_identity_from_pem};
use svc_tls::origin::IdentityOrigin;
use svc_tls::origin::SecretRef;
use svc_tls::testing::ManualClock;

const NAME: &str = "state-client-certificate";

fn secret_ref() -> SecretRef {
    SecretRef::new(NS, NAME)
}

/// Everything the recorder is told, for assertions.
#[derive(Debug, Default)]
struct Events {
    reloaded: Mutex<Vec<String>>,
    stale: Mutex<Vec<u64>>,
    invalid: Mutex<Vec<(CertificateValidity, bool)>>,
    recovered: Mutex<Vec<(u64, Duration)>>,
    watch_failing: Mutex<Vec<(WatchHealthState, Duration)>>,
    watch_recovered: AtomicU64,
}

impl ReloadRecorder<IdentityOrigin, Identity> for Events {
    fn loaded(&self, _: &IdentityOrigin, identity: &Identity, _: SystemTime) {
        self.reloaded
            .lock()
            .unwrap()
            .push(identity.serial_hex().to_owned());
    }
    fn stale_warning(&self, w: &StaleWarning<'_, IdentityOrigin, Identity>) {
        self.stale.lock().unwrap().push(w.suppressed);
    }
    fn recovered(&self, r: &Recovery<'_, IdentityOrigin, Identity>) {
        self.recovered
            .lock()
            .unwrap()
            .push((r.failures, r.duration));
    }
    fn watch_failing(&self, _: &IdentityOrigin, h: &WatchHealthState, d: Duration) {
        self.watch_failing.lock().unwrap().push((h.clone(), d));
    }
    fn watch_recovered(&self, _: &IdentityOrigin, _: Duration) {
        self.watch_recovered.fetch_add(1, Ordering::SeqCst);
    }
    fn outside_validity(&self, e: &OutsideValidity<'_, IdentityOrigin, Identity>) {
        self.invalid
            .lock()
            .unwrap()
            .push((e.validity, e.reload_error.is_some()));
    }
}

struct Harness {
    tb: Testbed,
    server: VerifyingServer,
    server_ca: TestCa,
    client_ca: TestCa,
    clock: ManualClock,
    events: Arc<Events>,
    resolver: IdentityResolver,
}

impl Harness {
    async fn start(
        first: impl Fn(&TestCa) -> test_support::pki::Leaf,
    ) -> (Self, test_support::pki::Leaf) {
        let tb = Testbed::start().await;
        let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
        let leaf = first(&client_ca);
        tb.upsert(tls_secret(NAME, &leaf.cert_pem, &leaf.key_pem));
        let server = VerifyingServer::start(&server_ca, &client_ca).await;
        let clock = ManualClock::new();
        let events = Arc::new(Events::default());
        let resolver = IdentityResolver::builder(tb.client(), secret_ref())
            .settings(
                svc_tls::identity::IdentitySettings::default()
                    .sync_timeout(Duration::from_secs(10)),
            )
            .clock(Arc::new(clock.clone()))
            .recorder(events.clone())
            .build()
            .await
            .unwrap();
        let harness = Self {
            tb,
            server,
            server_ca,
            client_ca,
            clock,
            events,
            resolver,
        };
        (harness, leaf)
    }

    fn config(&self) -> Arc<rustls::ClientConfig> {
        Arc::new(trusting(&self.server_ca, Some(&self.resolver)))
    }

    async fn handshake(&self) -> Result<u64, String> {
        handshake_serial(self.config(), self.server.addr).await
    }

    /// Writes the Secret and waits until the cache holds this version.
    async fn set(&self, cert_pem: &str, key_pem: &str) {
        let before = self.tb.resource_version();
        self.tb.upsert(tls_secret(NAME, cert_pem, key_pem));
        poll_until("the cache sees the write", || {
            self.resolver
                .secret_source()
                .unwrap()
                .get()
                .is_some_and(|s| {
                    s.metadata
                        .resource_version
                        .as_deref()
                        .and_then(|rv| rv.parse::<u64>().ok())
                        .is_some_and(|rv| rv > before)
                })
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_secret_writes_nothing_and_a_rotation_writes_once() {
    let (h, first) = Harness::start(|ca| ca.client_leaf("svc", 0x11)).await;
    for _ in 0..5 {
        assert_eq!(h.handshake().await, Ok(0x11));
    }
    assert_eq!(
        h.events.reloaded.lock().unwrap().clone(),
        vec!["11".to_owned()],
        "one load at start-up, nothing written per handshake"
    );
    let loaded_at = h.resolver.state().last_good_reload;
    let second = h.client_ca.client_leaf("svc", 0x12);
    h.set(&second.cert_pem, &second.key_pem).await;
    for _ in 0..3 {
        assert_eq!(h.handshake().await, Ok(0x12));
    }
    assert_eq!(
        h.events.reloaded.lock().unwrap().clone(),
        vec!["11".to_owned(), "12".to_owned()]
    );
    assert!(h.resolver.state().last_good_reload >= loaded_at);
    let _ = first;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_episode_ends_with_its_count_and_duration_and_the_next_starts_clean() {
    let (h, good) = Harness::start(|ca| ca.client_leaf("svc", 0x21)).await;
    let other = h.client_ca.client_leaf("svc", 0x22);

    // Episode 1: three failures, ten seconds apart.
    h.set(&good.cert_pem, &other.key_pem).await;
    for _ in 0..3 {
        h.clock.advance(Duration::from_secs(10));
        assert_eq!(h.handshake().await, Ok(0x21));
    }
    assert_eq!(
        h.events.stale.lock().unwrap().clone(),
        vec![0],
        "one warning, two suppressed"
    );
    h.set(&good.cert_pem, &good.key_pem).await;
    assert_eq!(h.handshake().await, Ok(0x21));
    assert_eq!(
        h.events.recovered.lock().unwrap().clone(),
        vec![(3, Duration::from_secs(20))],
        "first failure at 10 s, recovery at 30 s"
    );
    assert!(!h.resolver.state().stale);

    // Episode 2, after the window: its first warning does not carry episode 1's
    // two suppressed failures.
    h.clock.advance(Duration::from_secs(61));
    h.set(&good.cert_pem, &other.key_pem).await;
    assert_eq!(h.handshake().await, Ok(0x21));
    assert_eq!(h.events.stale.lock().unwrap().clone(), vec![0, 0]);
    h.set(&good.cert_pem, &good.key_pem).await;
    assert_eq!(h.handshake().await, Ok(0x21));
    assert_eq!(h.events.recovered.lock().unwrap().len(), 2);

    // Episode 3 at once: its recovery is throttled (within the period of the last).
    h.clock.advance(Duration::from_secs(5));
    h.set(&good.cert_pem, &other.key_pem).await;
    assert_eq!(h.handshake().await, Ok(0x21));
    h.set(&good.cert_pem, &good.key_pem).await;
    assert_eq!(h.handshake().await, Ok(0x21));
    assert_eq!(
        h.events.recovered.lock().unwrap().len(),
        2,
        "a flapping Secret does not flood the log with recoveries"
    );
    assert!(!h.resolver.state().stale);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_last_good_identity_is_reported_as_invalid_not_stale() {
    let (h, short) =
        Harness::start(|ca| ca.short_lived_client_leaf(0x31, Duration::from_secs(3))).await;
    assert_eq!(h.resolver.state().validity, CertificateValidity::Valid);
    let other = h.client_ca.client_leaf("svc", 0x32);
    h.set(&short.cert_pem, &other.key_pem).await;
    let not_after = h.resolver.current().not_after();
    poll_until("the clock past the leaf's notAfter", || {
        SystemTime::now() > not_after + Duration::from_secs(1)
    })
    .await;
    for _ in 0..3 {
        assert!(
            h.handshake().await.is_err(),
            "peers refuse the expired leaf"
        );
    }
    let state = h.resolver.state();
    assert!(
        matches!(state.validity, CertificateValidity::Expired { not_after: t } if t == not_after),
        "{state:?}"
    );
    assert!(state.stale);
    assert_eq!(
        h.events.invalid.lock().unwrap().clone(),
        vec![(state.validity, true)],
        "one rate-limited report"
    );
    assert!(
        h.events.stale.lock().unwrap().is_empty(),
        "not the generic stale warning"
    );
    // After the period it is reported again.
    h.clock.advance(Duration::from_secs(60));
    assert!(h.handshake().await.is_err());
    assert_eq!(h.events.invalid.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_watch_is_in_the_state_and_warned_about_after_the_threshold() {
    let (h, _leaf) = Harness::start(|ca| ca.client_leaf("svc", 0x41)).await;
    let watch = h
        .resolver
        .state()
        .watch
        .expect("a Secret source has a watch");
    assert!(
        watch.connected && watch.failing_since.is_none(),
        "{watch:?}"
    );

    h.tb.stop().await;
    poll_until("the watch notices the API is gone", || {
        !h.resolver.secret_source().unwrap().watch_health().connected
    })
    .await;
    let watch = h.resolver.state().watch.unwrap();
    assert!(!watch.connected, "{watch:?}");
    assert!(watch.last_error.is_some(), "{watch:?}");
    let since = watch.failing_since.expect("since when");

    // Handshakes still work (the identity last seen), and no warning before the
    // threshold.
    h.clock.advance(Duration::from_secs(30));
    assert_eq!(h.handshake().await, Ok(0x41));
    assert!(h.events.watch_failing.lock().unwrap().is_empty());
    // Past the threshold: one warning, rate-limited.
    h.clock.advance(Duration::from_secs(31));
    assert_eq!(h.handshake().await, Ok(0x41));
    for _ in 0..3 {
        h.clock.advance(Duration::from_secs(2));
        assert_eq!(h.handshake().await, Ok(0x41));
    }
    let failing = h.events.watch_failing.lock().unwrap().clone();
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert_eq!(failing[0].1, Duration::from_secs(61));
    assert_eq!(failing[0].0.failing_since, Some(since));
    assert_eq!(h.resolver.state().failures, 0, "the Secret itself is fine");

    // The API is back: the watch resumes and the state clears.
    h.tb.restart(true).await;
    poll_until("the watch resumes", || {
        h.resolver.secret_source().unwrap().watch_health().connected
    })
    .await;
    h.clock.advance(Duration::from_secs(2));
    assert_eq!(h.handshake().await, Ok(0x41));
    assert_eq!(h.events.watch_recovered.load(Ordering::SeqCst), 1);
    let watch = h.resolver.state().watch.unwrap();
    assert!(watch.connected && watch.failing_since.is_none() && watch.last_error.is_none());
}

// ------------------------------------------------------------- ordering of versions

/// A source answering with identity `versions[v]` for the version set by the test.
#[derive(Debug)]
struct Scripted {
    origin: IdentityOrigin,
    identities: Vec<Identity>,
    version: AtomicU64,
    /// Concurrent readers pause between reading the version and answering, so that
    /// a slow reader answers with an older version than a fast one.
    slow: AtomicBool,
}

impl IdentitySource for Scripted {
    fn origin(&self) -> &IdentityOrigin {
        &self.origin
    }
    fn current(&self) -> Result<Identity, IdentityReloadError> {
        self.current_versioned().map(|(identity, _)| identity)
    }
    fn current_versioned(&self) -> Result<(Identity, Option<u64>), IdentityReloadError> {
        let version = self.version.load(Ordering::SeqCst);
        if self.slow.load(Ordering::SeqCst) && version.is_multiple_of(3) {
            std::thread::yield_now();
            std::thread::sleep(Duration::from_micros(200));
        }
        let identity = self.identities[version as usize % self.identities.len()].clone();
        Ok((identity, Some(version)))
    }
}

fn scripted(count: usize) -> Arc<Scripted> {
    let ca = TestCa::new("clients");
    let identities = (0..count)
        .map(|i| {
            let leaf = ca.client_leaf("svc", 0x100 + i as u64);
            load_identity_from_pem(
                &secret_ref(),
                leaf.cert_pem.as_bytes(),
                leaf.key_pem.as_bytes(),
                &provider(),
            )
            .unwrap()
        })
        .collect();
    Arc::new(Scripted {
        origin: IdentityOrigin::Secret(secret_ref()),
        identities,
        version: AtomicU64::new(1),
        slow: AtomicBool::new(false),
    })
}

fn resolver_over(source: Arc<Scripted>) -> IdentityResolver {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(
            IdentityResolver::source_builder(source)
                .recorder(Arc::new(NoopRecorder))
                .clock(Arc::new(ManualClock::new()))
                .settings(
                    svc_tls::identity::IdentitySettings::default()
                        .warning_period(Duration::from_secs(60)),
                )
                .build(),
        )
        .unwrap()
}

#[test]
fn a_handshake_with_an_older_snapshot_does_not_replace_the_newer_identity() {
    let source = scripted(4);
    let resolver = resolver_over(source.clone());
    source.version.store(3, Ordering::SeqCst);
    assert_eq!(resolver.reload().serial_hex(), "0103");
    // A handshake that read version 2 (an older snapshot) finishes later: it presents
    // the newer identity, and the served one stays.
    source.version.store(2, Ordering::SeqCst);
    assert_eq!(resolver.reload().serial_hex(), "0103");
    assert_eq!(resolver.current().serial_hex(), "0103");
    assert_eq!(resolver.state().serial_hex, "0103");
    // Newer again: installed.
    source.version.store(5, Ordering::SeqCst);
    assert_eq!(resolver.reload().serial_hex(), "0101");
}

#[test]
fn concurrent_handshakes_while_the_version_advances_never_go_back() {
    let source = scripted(64);
    source.slow.store(true, Ordering::SeqCst);
    let resolver = resolver_over(source.clone());
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    let _ = resolver.reload();
                }
            });
        }
        // The served identity's serial (0x100 + version) never decreases.
        let watcher = s.spawn(|| {
            let mut last = 0u64;
            let mut observed = 0u32;
            while !done.load(Ordering::SeqCst) {
                let serial = u64::from_str_radix(resolver.current().serial_hex(), 16).unwrap();
                assert!(serial >= last, "served {serial:x} after {last:x}");
                last = serial;
                observed += 1;
            }
            observed
        });
        for version in 2..64 {
            source.version.store(version, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(2));
        }
        done.store(true, Ordering::SeqCst);
        assert!(watcher.join().unwrap() > 0);
    });
    // The last version may land after the handshake threads stopped: the next
    // handshake installs it, and it stays served.
    assert_eq!(resolver.reload().serial_hex(), "013f");
    assert_eq!(resolver.current().serial_hex(), "013f");
}
