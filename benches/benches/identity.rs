//! The per-handshake identity cost through `IdentityResolver`, called as rustls calls
//! it (`ResolvesClientCert::resolve`), one resolver per key type and format, each
//! watching its own Secret in the kube-testbed API emulator:
//! - `identity-unchanged/<case>` (criterion): the Secret unchanged since the last load,
//!   what every handshake between rotations costs;
//! - `identity-unchanged-metrics/p256-pkcs8` (criterion): the same with a Prometheus
//!   metrics recorder (`svc_tls::metrics`), in the same run, over the same shared
//!   Secret: what metrics add to a handshake (target <= 1.05x without);
//! - `identity-broken/<case>` (criterion): the Secret broken (a key that does not match
//!   the certificate), each handshake through the resolver: the identity cache returns
//!   the error remembered for these exact bytes (no re-parse), the failure is counted
//!   and the last good identity served;
//! - `identity-rotation/<case>` (sampled, `BENCH_RESULTS_DIR/identity.jsonl`): the
//!   first handshake after a rotation. The resolvers share their Secrets through a
//!   `WatchedObjects` registry, as `PeerTls::from_options` does, which loads each new
//!   version (and warms its key) when the watch delivers it; each sample is one
//!   `resolve` timed alone once that load is done (alternating between two
//!   identities), and checked to present the new certificate. The load itself is
//!   off the handshake path and is what `go/x509keypair/<case>` measures for Go;
//! - `identity-rotation-parses/<case>`: for each of those handshakes, how many
//!   certificate-and-key parses the Secret's identity cache did during it
//!   (`IdentityCache::full_loads`): the target is none at all.
//!
//! Go's `tls.X509KeyPair` (the Go program as a long-lived child) is measured beside
//! every rotation sample, one batch after each timed handshake:
//! `go/rotation-x509keypair/<case>`, paired with `identity-rotation/<case>`.
//!
//! The racing first handshake, `identity-racing/rsa4096-pkcs8`: a new RSA-4096
//! version is written and, as soon as the watch cache holds it (not waiting for the
//! loader), four threads make handshakes (`resolve`, one every 100 us or so) until
//! the new version is presented; each sample is the slowest handshake of a version
//! that started before the loader finished (or the first of each thread);
//! `identity-racing-loads/<case>`
//! counts the full loads (`IdentityCache::full_loads`) each new version cost in all
//! (the loader's and any handshake's), `identity-racing-raced/<case>` whether any of
//! those handshakes started while the loader was still busy (1) or none did (0).
//!
//! The metrics cost where it is paid, P-256: two resolvers over two Secrets of their
//! own, one with svc-tls's Prometheus recorder (`metrics` feature), one without,
//! otherwise alike: `metrics/rotation/{on,off}/p256-pkcs8` (both Secrets rotated,
//! both loads awaited, then the first handshake of each timed, the order alternating)
//! and `metrics/broken/{on,off}/p256-pkcs8` (a failed reload: both Secrets broken,
//! each handshake through the resolver, interleaved batches).
//!
//! Identity from mounted files against from a Secret, P-256 (issue 51): a resolver
//! over `MountedFiles` (the pair in a directory the kubelet's way, `..data` swapped)
//! beside the Secret resolver of the same case:
//! - `files/unchanged/{files,secret}/p256-pkcs8` (sampled, paired): interleaved
//!   rounds, each a batch of handshakes through each resolver (the order
//!   alternating), nothing changed: what each handshake costs from files and from a
//!   Secret (target: within noise, <= 1.05x);
//! - `files/rotation/p256-pkcs8` (sampled): the first handshake after a swap whose
//!   pair the watcher thread already parsed and published, checked to present the new
//!   certificate; `files-rotation-parses/p256-pkcs8`: the pairs parsed during each of
//!   those handshakes (`MountedFiles::identity_loads`), target none.
//!
//! And the same path in SPIFFE mode, next to `p256-pkcs8` (SPIRE issues P-256 SVIDs):
//! a resolver over `SpiffeIdentitySource`, the SVID streamed by the Workload API
//! emulator (`spiffe-testbed`, real gRPC over a unix socket):
//! - `identity-unchanged/spiffe-p256` (criterion): the SVID unchanged since the last
//!   handshake;
//! - `identity-rotation/spiffe-p256` (sampled): the first handshake after the agent
//!   rotated the SVID and the stream delivered it, checked to present the new serial.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use k8s_openapi::api::core::v1::Secret;
use rustls::SignatureScheme;
use rustls::client::ResolvesClientCert;
use svc_tls::IdentityOrigin;
use svc_tls::identity::{IdentityResolver, SecretIdentitySource, SpiffeIdentitySource};
use svc_tls::last_good::{NoopRecorder, ReloadRecorder};
use svc_tls::material::Identity;
use svc_tls::origin::SecretRef;
use svc_tls::spiffe::{SpiffeEndpoint, WorkloadApiSource};
use svc_tls::watch::WatchedObjects;

use common::go::{Arm, GoChild, interleave, size, time};

const NS: &str = "bench";
/// The SPIFFE-mode case's id (`identity-*/spiffe-p256`).
const SPIFFE_CASE: &str = "spiffe-p256";
/// The case measured with a metrics recorder (`identity-unchanged-metrics/<case>`).
const METRICS_CASE: &str = "p256-pkcs8";
/// The case of the racing first handshake.
const RACING_CASE: &str = "rsa4096-pkcs8";
/// Concurrent handshakes racing the loader.
const RACERS: usize = 4;
const CLIENT_ID: &str = "spiffe://example.org/ns/unikorn/sa/region";

fn upsert(testbed: &kube_testbed::Testbed, secret: &Secret) {
    let mut value = serde_json::to_value(secret).unwrap();
    value["apiVersion"] = "v1".into();
    value["kind"] = "Secret".into();
    testbed.upsert(value);
}

/// Waits until the resolver's watch cache holds `secret`'s `tls.crt` and `tls.key`.
fn wait_for(rt: &tokio::runtime::Runtime, resolver: &IdentityResolver, secret: &Secret) {
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if resolver
                .secret_source()
                .and_then(|source| source.get())
                .is_some_and(|seen| seen.data == secret.data)
            {
                return;
            }
            assert!(Instant::now() < deadline, "the watch never delivered");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    });
}

/// Resolves until a handshake counts the failure of the (broken) Secret now in the
/// watch cache: its load may still be in flight on the loader.
fn wait_broken(resolver: &IdentityResolver) {
    let failures = resolver.state().failures;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        resolve(resolver);
        if resolver.state().failures > failures {
            return;
        }
        assert!(Instant::now() < deadline, "the Secret is not broken");
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn resolve(resolver: &IdentityResolver) -> Arc<rustls::sign::CertifiedKey> {
    ResolvesClientCert::resolve(
        resolver,
        &[],
        &[
            SignatureScheme::ECDSA_NISTP256_SHA256,
            SignatureScheme::RSA_PSS_SHA256,
            SignatureScheme::ED25519,
        ],
    )
    .unwrap()
}

fn main() {
    let material = common::material();
    let quick = common::quick();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // kube's client spawns its service task on creation.
    let _guard = rt.enter();
    let testbed = rt.block_on(kube_testbed::Testbed::start());

    let watches = WatchedObjects::new();
    let mut resolvers = Vec::new();
    for case in &material.cases {
        let name = format!("identity-{}", case.name);
        upsert(
            &testbed,
            &common::secret(NS, &name, &case.cert_pem, &case.key_pem),
        );
        let resolver = rt
            .block_on(
                IdentityResolver::builder(testbed.client(), SecretRef::new(NS, &name))
                    .settings(
                        svc_tls::identity::IdentitySettings::default()
                            .sync_timeout(Duration::from_secs(30)),
                    )
                    .watches(&watches, &testbed.cluster_client())
                    .build(),
            )
            .unwrap();
        let shared = rt
            .block_on(watches.watch(
                &testbed.cluster_client(),
                &SecretRef::new(NS, &name),
                Duration::from_secs(30),
            ))
            .unwrap();
        resolvers.push((case, name, resolver, shared));
    }

    // The same p256-pkcs8 Secret, with a metrics recorder, as `from_options` builds it
    // once metrics are registered.
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = svc_tls::metrics::Metrics::new(&mut registry);
    let with_metrics = resolvers
        .iter()
        .find(|(case, ..)| case.name == METRICS_CASE)
        .map(|(_, name, _, shared)| {
            let origin = IdentityOrigin::Secret(SecretRef::new(NS, name));
            let resolver = rt
                .block_on(
                    IdentityResolver::source_builder(Arc::new(SecretIdentitySource::shared(
                        shared,
                    )))
                    .recorder(metrics.identity_recorder(&origin, None, None))
                    .build(),
                )
                .unwrap();
            metrics.track_identity(&resolver, None);
            resolver
        });

    // SPIFFE mode: the SVID from the Workload API stream.
    let agent = rt.block_on(spiffe_testbed::WorkloadApi::start("example.org"));
    agent.set_workload_id(CLIENT_ID);
    let workload = rt
        .block_on(WorkloadApiSource::connect(
            SpiffeEndpoint::parse(&agent.endpoint()).unwrap(),
            Arc::new(rustls::crypto::aws_lc_rs::default_provider()),
            Duration::from_secs(30),
        ))
        .unwrap();
    let spiffe = rt
        .block_on(
            IdentityResolver::source_builder(Arc::new(SpiffeIdentitySource::new(workload.clone())))
                .build(),
        )
        .unwrap();

    let mut c = Criterion::default().configure_from_args();
    let (warm_up, measure, samples) = if quick {
        (Duration::from_millis(50), Duration::from_millis(100), 10)
    } else {
        (Duration::from_millis(300), Duration::from_secs(1), 40)
    };

    let mut group = c.benchmark_group("identity-unchanged");
    group
        .warm_up_time(warm_up)
        .measurement_time(measure)
        .sample_size(samples);
    for (case, _, resolver, _) in &resolvers {
        let first = resolve(resolver);
        group.bench_function(case.name.as_str(), |b| {
            b.iter(|| black_box(resolve(black_box(resolver))))
        });
        assert!(
            Arc::ptr_eq(&first, &resolve(resolver)),
            "not the cached path"
        );
    }
    {
        let first = resolve(&spiffe);
        group.bench_function(SPIFFE_CASE, |b| {
            b.iter(|| black_box(resolve(black_box(&spiffe))))
        });
        assert!(
            Arc::ptr_eq(&first, &resolve(&spiffe)),
            "not the cached path (SPIFFE)"
        );
    }
    group.finish();
    if let Some(resolver) = &with_metrics {
        let mut group = c.benchmark_group("identity-unchanged-metrics");
        group
            .warm_up_time(warm_up)
            .measurement_time(measure)
            .sample_size(samples);
        let first = resolve(resolver);
        group.bench_function(METRICS_CASE, |b| {
            b.iter(|| black_box(resolve(black_box(resolver))))
        });
        assert!(
            Arc::ptr_eq(&first, &resolve(resolver)),
            "not the cached path (metrics)"
        );
        group.finish();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("svc_tls_identity_cert_expiration_timestamp_seconds{"),
            "the metrics recorder records: {text}"
        );
    }

    // The first handshake after each rotation: one timed resolve per new version.
    let rotations = if quick { 5 } else { 40 };
    let go_target = Duration::from_millis(if quick { 2 } else { 20 });
    let go = GoChild::spawn(&material.dir);
    for (case, name, resolver, shared) in &resolvers {
        let versions = [
            common::secret(NS, name, &case.rotated_cert_pem, &case.rotated_key_pem),
            common::secret(NS, name, &case.cert_pem, &case.key_pem),
        ];
        let mut samples = Vec::with_capacity(rotations);
        let mut go_samples = Vec::with_capacity(rotations);
        let go_id = format!("go/rotation-x509keypair/{}", case.name);
        // Per timed handshake: how many certificate-and-key parses it paid (0: the
        // watch's loader parsed the version before it).
        let mut parses = Vec::with_capacity(rotations);
        let cache = shared.identity_cache();
        for i in 0..rotations {
            let secret = &versions[i % 2];
            let before = resolver.state().serial_hex;
            let loaded = shared.loaded_changes();
            upsert(&testbed, secret);
            wait_for(&rt, resolver, secret);
            rt.block_on(async {
                let deadline = Instant::now() + Duration::from_secs(30);
                while shared.loaded_changes() == loaded {
                    assert!(
                        Instant::now() < deadline,
                        "the new version was never loaded"
                    );
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
            });
            let parsed = cache.full_loads();
            let start = Instant::now();
            black_box(resolve(black_box(resolver)));
            samples.push(start.elapsed().as_nanos() as f64);
            parses.push((cache.full_loads() - parsed) as f64);
            assert_ne!(
                resolver.state().serial_hex,
                before,
                "the new version is not presented"
            );
            // Go's parse, measured while ours is quiet (the load is done).
            if let Some(go) = &go {
                go_samples.push(go.borrow_mut().measure(&go_id, 0, go_target).ns);
            }
        }
        let mut series = vec![(format!("identity-rotation/{}", case.name), samples)];
        if go.is_some() {
            series.push((go_id, go_samples));
        }
        common::emit_paired("identity", &format!("rotation/{}", case.name), &series);
        if case.name == RACING_CASE {
            racing(&rt, &testbed, case, name, resolver, shared, rotations);
        }
        common::emit_counts(
            "identity",
            &format!("identity-rotation-parses/{}", case.name),
            &parses,
        );
    }

    metrics_cost(
        &rt, &testbed, &watches, &material, &metrics, rotations, go_target,
    );

    if let Some((case, _, resolver, _)) = resolvers
        .iter()
        .find(|(case, ..)| case.name == METRICS_CASE)
    {
        files_cost(case, resolver, rotations, quick);
    }

    // SPIFFE mode: the first handshake after each SVID rotation the stream delivered.
    let mut svid_samples = Vec::with_capacity(rotations);
    for _ in 0..rotations {
        let generation = workload.generation();
        let before = spiffe.state().serial_hex;
        agent.rotate_svid();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(30), workload.changed_after(generation))
                .await
                .expect("the stream never delivered the rotation")
        });
        let start = Instant::now();
        black_box(resolve(black_box(&spiffe)));
        svid_samples.push(start.elapsed().as_nanos() as f64);
        assert_ne!(
            spiffe.state().serial_hex,
            before,
            "the rotated SVID is not presented"
        );
    }
    common::emit(
        "identity",
        &format!("identity-rotation/{SPIFFE_CASE}"),
        &svid_samples,
    );

    // A broken Secret: the rotated key with the first certificate.
    let mut group = c.benchmark_group("identity-broken");
    group
        .warm_up_time(warm_up)
        .measurement_time(measure)
        .sample_size(samples);
    for (case, name, resolver, _) in &resolvers {
        let broken = common::secret(NS, name, &case.cert_pem, &case.rotated_key_pem);
        upsert(&testbed, &broken);
        wait_for(&rt, resolver, &broken);
        wait_broken(resolver);
        group.bench_function(case.name.as_str(), |b| {
            b.iter(|| black_box(resolve(black_box(resolver))))
        });
    }
    group.finish();
    c.final_summary();

    drop(resolvers);
    drop(spiffe);
    drop(workload);
    drop(agent);
    drop(testbed);
}

/// `identity-racing/<case>`: handshakes started as soon as the watch cache holds a new
/// version, while the shared source's loader may still be parsing it.
fn racing(
    rt: &tokio::runtime::Runtime,
    testbed: &kube_testbed::Testbed,
    case: &common::Case,
    name: &str,
    resolver: &IdentityResolver,
    shared: &svc_tls::watch::SharedObject<svc_tls::watch::Secret>,
    rotations: usize,
) {
    let versions = [
        common::secret(NS, name, &case.rotated_cert_pem, &case.rotated_key_pem),
        common::secret(NS, name, &case.cert_pem, &case.key_pem),
    ];
    let cache = shared.identity_cache();
    let mut times = Vec::with_capacity(rotations);
    let (mut loads, mut raced) = (Vec::new(), Vec::new());
    for _ in 0..rotations {
        // The version not served now.
        let current = resolver
            .secret_source()
            .and_then(|source| source.get())
            .and_then(|seen| seen.data.clone());
        let secret = if current == versions[0].data {
            &versions[1]
        } else {
            &versions[0]
        };
        let loaded = shared.loaded_changes();
        let parsed = cache.full_loads();
        upsert(testbed, secret);
        // Spin until the watch cache holds the new bytes: no sleep, so the handshakes
        // start while the loader is parsing.
        let deadline = Instant::now() + Duration::from_secs(30);
        while resolver
            .secret_source()
            .and_then(|source| source.get())
            .is_none_or(|seen| seen.data != secret.data)
        {
            assert!(Instant::now() < deadline, "the watch never delivered");
            std::hint::spin_loop();
        }
        let busy_at_start = shared.loaded_changes() == loaded;
        // The racers: handshakes arriving every 100 us or so from the moment the
        // watch cache holds the new version until it is presented; a handshake
        // "raced" when the loader had not finished when it started.
        let before = resolver.state().serial_hex;
        let barrier = std::sync::Barrier::new(RACERS);
        let mut slowest: Option<f64> = None;
        let mut any_raced = busy_at_start;
        std::thread::scope(|scope| {
            let racers: Vec<_> = (0..RACERS)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        let mut slowest: Option<f64> = None;
                        let mut first = true;
                        let mut raced = false;
                        loop {
                            let busy = shared.loaded_changes() == loaded;
                            let start = Instant::now();
                            black_box(resolve(black_box(resolver)));
                            let took = start.elapsed().as_nanos() as f64;
                            raced |= busy;
                            if busy || first {
                                // The first call of each racer always counts: it
                                // started as soon as the cache held the version.
                                slowest = Some(slowest.map_or(took, |s: f64| s.max(took)));
                            }
                            first = false;
                            if resolver.state().serial_hex != before || Instant::now() > deadline {
                                return (slowest, raced);
                            }
                            std::thread::sleep(Duration::from_micros(100));
                        }
                    })
                })
                .collect();
            for racer in racers {
                let (took, raced) = racer.join().unwrap();
                any_raced |= raced;
                if let Some(took) = took {
                    slowest = Some(slowest.map_or(took, |s| s.max(took)));
                }
            }
        });
        times.push(slowest.unwrap());
        raced.push(if any_raced { 1.0 } else { 0.0 });
        // Let the loader finish before counting what this version cost.
        rt.block_on(async {
            while shared.loaded_changes() == loaded {
                assert!(
                    Instant::now() < deadline,
                    "the new version was never loaded"
                );
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        });
        loads.push((cache.full_loads() - parsed) as f64);
    }
    common::emit(
        "identity",
        &format!("identity-racing/{}", case.name),
        &times,
    );
    common::emit_counts(
        "identity",
        &format!("identity-racing-loads/{}", case.name),
        &loads,
    );
    common::emit_counts(
        "identity",
        &format!("identity-racing-raced/{}", case.name),
        &raced,
    );
}

/// `metrics/{rotation,broken}/{on,off}/p256-pkcs8`: the recorder's cost where it is
/// paid, on two resolvers alike but for the recorder.
fn metrics_cost(
    rt: &tokio::runtime::Runtime,
    testbed: &kube_testbed::Testbed,
    watches: &WatchedObjects,
    material: &common::Material,
    metrics: &svc_tls::metrics::Metrics,
    rotations: usize,
    target: Duration,
) {
    let case = material.case(METRICS_CASE);
    let mut sides = Vec::new();
    for side in ["on", "off"] {
        let name = format!("metrics-{side}-{METRICS_CASE}");
        upsert(
            testbed,
            &common::secret(NS, &name, &case.cert_pem, &case.key_pem),
        );
        let shared = rt
            .block_on(watches.watch(
                &testbed.cluster_client(),
                &SecretRef::new(NS, &name),
                Duration::from_secs(30),
            ))
            .unwrap();
        let origin = IdentityOrigin::Secret(SecretRef::new(NS, &name));
        let recorder: Arc<dyn ReloadRecorder<IdentityOrigin, Identity>> = if side == "on" {
            metrics.identity_recorder(&origin, None, None)
        } else {
            Arc::new(NoopRecorder)
        };
        let resolver = rt
            .block_on(
                IdentityResolver::source_builder(Arc::new(SecretIdentitySource::shared(&shared)))
                    .recorder(recorder)
                    .build(),
            )
            .unwrap();
        if side == "on" {
            metrics.track_identity(&resolver, None);
        }
        resolve(&resolver);
        sides.push((side, name, shared, resolver));
    }
    let versions = |i: usize, name: &str| {
        if i.is_multiple_of(2) {
            common::secret(NS, name, &case.rotated_cert_pem, &case.rotated_key_pem)
        } else {
            common::secret(NS, name, &case.cert_pem, &case.key_pem)
        }
    };
    let mut samples = [Vec::new(), Vec::new()];
    for i in 0..rotations {
        let loaded: Vec<u64> = sides
            .iter()
            .map(|(_, _, s, _)| s.loaded_changes())
            .collect();
        for (_, name, _, _) in &sides {
            upsert(testbed, &versions(i, name));
        }
        rt.block_on(async {
            let deadline = Instant::now() + Duration::from_secs(30);
            while sides
                .iter()
                .zip(&loaded)
                .any(|((_, _, s, _), before)| s.loaded_changes() == *before)
            {
                assert!(Instant::now() < deadline, "a new version was never loaded");
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        });
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let resolver = &sides[which].3;
            let before = resolver.state().serial_hex;
            let start = Instant::now();
            black_box(resolve(black_box(resolver)));
            samples[which].push(start.elapsed().as_nanos() as f64);
            assert_ne!(resolver.state().serial_hex, before, "not the new version");
        }
    }
    let [on, off] = samples;
    common::emit_paired(
        "identity",
        "metrics/rotation",
        &[
            (format!("metrics/rotation/on/{METRICS_CASE}"), on),
            (format!("metrics/rotation/off/{METRICS_CASE}"), off),
        ],
    );

    // A failed reload: the rotated key with the first certificate.
    for (_, name, _, resolver) in &sides {
        let broken = common::secret(NS, name, &case.cert_pem, &case.rotated_key_pem);
        upsert(testbed, &broken);
        wait_for(rt, resolver, &broken);
        wait_broken(resolver);
    }
    let arms: Vec<Arm<'_>> = sides
        .iter()
        .map(|(_, _, _, resolver)| {
            let op = move || {
                black_box(resolve(black_box(resolver)));
            };
            let n = size(op, target);
            Box::new(move || time(n, op)) as Arm<'_>
        })
        .collect();
    let mut broken = interleave(if common::quick() { 4 } else { 30 }, arms).into_iter();
    common::emit_paired(
        "identity",
        "metrics/broken",
        &[
            (
                format!("metrics/broken/on/{METRICS_CASE}"),
                broken.next().unwrap(),
            ),
            (
                format!("metrics/broken/off/{METRICS_CASE}"),
                broken.next().unwrap(),
            ),
        ],
    );
}

/// Publishes `files` in `dir` as the kubelet's atomic writer does: a new versioned
/// directory, `..data` swapped to it, the names linked through `..data` (once), the
/// old version removed.
fn kubelet_publish(dir: &std::path::Path, version: usize, files: &[(&str, &str)]) {
    let name = format!("..2026_12_06_00_00_00.{version}");
    std::fs::create_dir(dir.join(&name)).unwrap();
    for (file, text) in files {
        std::fs::write(dir.join(&name).join(file), text).unwrap();
    }
    let old = std::fs::read_link(dir.join("..data")).ok();
    std::os::unix::fs::symlink(&name, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    for (file, _) in files {
        let link = dir.join(file);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(std::path::Path::new("..data").join(file), &link).unwrap();
        }
    }
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old)).unwrap();
    }
}

/// Identity from files against from a Secret for `case` (see the module's docs):
/// `files/unchanged/*` paired, `files/rotation/*` and `files-rotation-parses/*`.
fn files_cost(case: &common::Case, from_secret: &IdentityResolver, rotations: usize, quick: bool) {
    use svc_tls::files::{FileLayout, MountedFiles};
    let dir = std::env::temp_dir().join(format!(
        "svc-tls-bench-files-{}-{}",
        std::process::id(),
        case.name
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let versions = [
        [
            ("tls.crt", case.cert_pem.as_str()),
            ("tls.key", case.key_pem.as_str()),
        ],
        [
            ("tls.crt", case.rotated_cert_pem.as_str()),
            ("tls.key", case.rotated_key_pem.as_str()),
        ],
    ];
    kubelet_publish(&dir, 0, &versions[0]);
    let files = MountedFiles::open(&dir, FileLayout::KubernetesTls).unwrap();
    let from_files = IdentityResolver::from_files(&files).unwrap();
    let first = resolve(&from_files);
    assert!(
        Arc::ptr_eq(&first, &resolve(&from_files)),
        "not the cached path (files)"
    );

    // Unchanged: interleaved batches, the order alternating per round.
    let (rounds, batch) = if quick { (5, 200) } else { (40, 5_000) };
    let time_batch = |resolver: &IdentityResolver| {
        let start = Instant::now();
        for _ in 0..batch {
            black_box(resolve(black_box(resolver)));
        }
        start.elapsed().as_nanos() as f64 / batch as f64
    };
    let (mut on_files, mut on_secret) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 0 {
            on_files.push(time_batch(&from_files));
            on_secret.push(time_batch(from_secret));
        } else {
            on_secret.push(time_batch(from_secret));
            on_files.push(time_batch(&from_files));
        }
    }
    common::emit_paired(
        "identity",
        &format!("files/unchanged/{}", case.name),
        &[
            (format!("files/unchanged/files/{}", case.name), on_files),
            (format!("files/unchanged/secret/{}", case.name), on_secret),
        ],
    );

    // The first handshake after each swap, once the watcher thread published it.
    let mut samples = Vec::with_capacity(rotations);
    let mut parses = Vec::with_capacity(rotations);
    for i in 1..=rotations {
        let before = from_files.state().serial_hex;
        let generation = files.generation();
        kubelet_publish(&dir, i, &versions[i % 2]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while files.generation() == generation {
            assert!(Instant::now() < deadline, "the swap was never published");
            std::thread::sleep(Duration::from_micros(200));
        }
        let parsed = files.identity_loads();
        let start = Instant::now();
        black_box(resolve(black_box(&from_files)));
        samples.push(start.elapsed().as_nanos() as f64);
        parses.push((files.identity_loads() - parsed) as f64);
        assert_ne!(
            from_files.state().serial_hex,
            before,
            "the new version is not presented"
        );
    }
    common::emit(
        "identity",
        &format!("files/rotation/{}", case.name),
        &samples,
    );
    common::emit_counts(
        "identity",
        &format!("files-rotation-parses/{}", case.name),
        &parses,
    );
    drop((from_files, files));
    let _ = std::fs::remove_dir_all(&dir);
}
