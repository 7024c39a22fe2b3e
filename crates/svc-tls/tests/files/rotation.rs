//! Rotations from files while handshakes flow: the kubelet's `..data` swap and a
//! writer that writes in place. No handshake fails (a mismatched pair would fail the
//! client's CertificateVerify check), and the new leaf is presented within a second.

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::*;
use test_support::poll_until;

/// Handshakes in a loop from two tasks until stopped: how many succeeded, how many
/// failed (with the first error), and every serial seen.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    first_error: Arc<Mutex<Option<String>>>,
    newest: Arc<AtomicU64>,
    seen: Arc<Mutex<Vec<u64>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(config: &Arc<rustls::ClientConfig>, port: u16) -> Self {
        let mut load = Self {
            stop: Arc::new(AtomicBool::new(false)),
            ok: Arc::new(AtomicU64::new(0)),
            failed: Arc::new(AtomicU64::new(0)),
            first_error: Arc::new(Mutex::new(None)),
            newest: Arc::new(AtomicU64::new(0)),
            seen: Arc::new(Mutex::new(Vec::new())),
            tasks: Vec::new(),
        };
        for _ in 0..2 {
            let (stop, ok, failed, first_error, newest, seen, config) = (
                load.stop.clone(),
                load.ok.clone(),
                load.failed.clone(),
                load.first_error.clone(),
                load.newest.clone(),
                load.seen.clone(),
                config.clone(),
            );
            load.tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    match handshake(&config, port).await {
                        Ok(serial) => {
                            ok.fetch_add(1, Ordering::SeqCst);
                            newest.fetch_max(serial, Ordering::SeqCst);
                            let mut seen = seen.lock().unwrap();
                            if !seen.contains(&serial) {
                                seen.push(serial);
                            }
                        }
                        Err(e) => {
                            failed.fetch_add(1, Ordering::SeqCst);
                            first_error.lock().unwrap().get_or_insert(e);
                        }
                    }
                }
            }));
        }
        load
    }

    fn ok(&self) -> u64 {
        self.ok.load(Ordering::SeqCst)
    }

    /// Stops the load; asserts no handshake failed and only `allowed` serials were seen.
    async fn finish(mut self, allowed: &[u64]) {
        self.stop.store(true, Ordering::SeqCst);
        for task in self.tasks.drain(..) {
            task.await.unwrap();
        }
        assert_eq!(
            self.failed.load(Ordering::SeqCst),
            0,
            "failed handshakes, the first: {:?}",
            self.first_error.lock().unwrap()
        );
        for serial in self.seen.lock().unwrap().iter() {
            assert!(allowed.contains(serial), "unexpected serial {serial:#x}");
        }
    }
}

fn pair(leaf: &Leaf) -> [(&'static str, Vec<u8>); 2] {
    [
        ("tls.crt", leaf.cert_pem.clone().into_bytes()),
        ("tls.key", leaf.key_pem.clone().into_bytes()),
    ]
}

fn as_files<'a>(pair: &'a [(&'static str, Vec<u8>)]) -> Vec<(&'static str, &'a [u8])> {
    pair.iter().map(|(n, b)| (*n, b.as_slice())).collect()
}

async fn kubelet_swaps_under_load(options: FileWatchOptions, bound: Duration) {
    let (server_ca, client_ca) = (TestCa::new("server CA"), TestCa::new("client CA"));
    let dir = tempfile::tempdir().unwrap();
    let first = server_leaf(&server_ca, 1);
    kubelet_publish(dir.path(), 1, &as_files(&pair(&first)));
    let files = MountedFiles::open_with(dir.path(), FileLayout::KubernetesTls, options).unwrap();
    let identity = IdentityResolver::from_files(&files).unwrap();
    let (_ca_dir, ca_files) = ca_bundle_dir(&client_ca);
    let server = serve(identity.clone(), callers(&ca_files)).await;
    let config = client_config(&server_ca, &client_ca.client_leaf("caller", 7));
    let load = Load::start(&config, server.port);
    poll_until("handshakes flowing", || load.ok() > 5).await;

    let mut allowed = vec![1];
    for version in 2..=6u64 {
        let leaf = server_leaf(&server_ca, version);
        allowed.push(version);
        let before = load.ok();
        let swapped = Instant::now();
        kubelet_publish(dir.path(), version, &as_files(&pair(&leaf)));
        poll_until("the new leaf presented", || {
            load.newest.load(Ordering::SeqCst) == version
        })
        .await;
        let took = swapped.elapsed();
        assert!(took <= bound, "leaf {version} presented after {took:?}");
        poll_until("handshakes still flowing", || load.ok() > before + 5).await;
    }
    load.finish(&allowed).await;
    assert_eq!(
        identity.state().failures,
        0,
        "no read of a swap ever failed"
    );
    assert!(server.accepted.load(Ordering::SeqCst) > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_swap_under_load_presents_the_new_leaf_within_a_second_and_fails_nothing() {
    kubelet_swaps_under_load(FileWatchOptions::default(), Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_poll_path_under_load_fails_nothing() {
    // Polling every 50 ms: the bound is the interval plus a read, well under a second.
    kubelet_swaps_under_load(polling(), Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_place_writer_never_gets_a_mismatched_pair_presented() {
    let (server_ca, client_ca) = (TestCa::new("server CA"), TestCa::new("client CA"));
    let dir = tempfile::tempdir().unwrap();
    let first = server_leaf(&server_ca, 1);
    let (crt, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&crt, &first.cert_pem).unwrap();
    std::fs::write(&key, &first.key_pem).unwrap();
    let files = MountedFiles::open(dir.path(), FileLayout::KubernetesTls).unwrap();
    let identity = IdentityResolver::from_files(&files).unwrap();
    let (_ca_dir, ca_files) = ca_bundle_dir(&client_ca);
    let server = serve(identity.clone(), callers(&ca_files)).await;
    let config = client_config(&server_ca, &client_ca.client_leaf("caller", 7));
    let load = Load::start(&config, server.port);
    poll_until("handshakes flowing", || load.ok() > 5).await;

    let second = server_leaf(&server_ca, 2);
    let generation = files.generation();
    // Slowly: the certificate cut in half first, as a writer mid-write leaves it.
    let (head, tail) = second.cert_pem.split_at(second.cert_pem.len() / 2);
    std::fs::write(&crt, head).unwrap();
    poll_until("the half-written certificate read", || {
        files.generation() > generation
    })
    .await;
    let before = load.ok();
    poll_until("handshakes flowing on the last good pair", || {
        load.ok() > before + 5
    })
    .await;
    assert_eq!(load.newest.load(Ordering::SeqCst), 1);
    assert!(identity.state().stale, "the half-written pair is reported");

    // The whole new certificate, with the old key: a pair that does not match.
    let generation = files.generation();
    std::fs::write(&crt, format!("{head}{tail}")).unwrap();
    poll_until("the new certificate with the old key read", || {
        files.generation() > generation
    })
    .await;
    let before = load.ok();
    poll_until("handshakes flowing on the last good pair", || {
        load.ok() > before + 5
    })
    .await;
    assert_eq!(
        load.newest.load(Ordering::SeqCst),
        1,
        "the new certificate is never presented with the old key"
    );

    // The key, last: the pair matches, the new leaf is presented.
    std::fs::write(&key, &second.key_pem).unwrap();
    poll_until("the new pair presented", || {
        load.newest.load(Ordering::SeqCst) == 2
    })
    .await;
    poll_until("no longer stale", || !identity.state().stale).await;
    load.finish(&[1, 2]).await;
}
