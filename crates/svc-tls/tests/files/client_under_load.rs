//! The client half from files while requests flow to a real verifying TLS server
//! (`VerifyingServer`, which verifies each caller's chain and CertificateVerify and
//! records the leaf it saw): the identity rewritten as the kubelet does (`..data`
//! swapped) and in place (a careless writer: `tls.crt`, then `tls.key`), and the
//! trusted CA bundle rotated from files (old and new CA, then the new one only) while
//! the server moves to the new CA. No request fails, every leaf the server saw is one
//! the test wrote (with its own key: the server checked the signature), and a new
//! leaf is presented within a second.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::*;
use svc_tls::client::{TrustMode, client_config as peer_client_config};
use test_support::poll_until;
use test_support::tls_server::VerifyingServer;

/// Requests in a loop from two tasks, each on a new connection, until stopped.
struct Requests {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    first_error: Arc<Mutex<Option<String>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Requests {
    fn start(config: &Arc<rustls::ClientConfig>, server: &VerifyingServer) -> Self {
        let mut load = Self {
            stop: Arc::new(AtomicBool::new(false)),
            ok: Arc::new(AtomicU64::new(0)),
            failed: Arc::new(AtomicU64::new(0)),
            first_error: Arc::new(Mutex::new(None)),
            tasks: Vec::new(),
        };
        for _ in 0..2 {
            let (stop, ok, failed, first_error, config, addr) = (
                load.stop.clone(),
                load.ok.clone(),
                load.failed.clone(),
                load.first_error.clone(),
                config.clone(),
                server.addr,
            );
            load.tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    match test_support::tls_server::request(config.clone(), addr).await {
                        Ok(reply) if reply.status == 200 => {
                            ok.fetch_add(1, Ordering::SeqCst);
                        }
                        other => {
                            failed.fetch_add(1, Ordering::SeqCst);
                            first_error
                                .lock()
                                .unwrap()
                                .get_or_insert(format!("{other:?}"));
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

    /// Waits for `n` more successful requests.
    async fn flowing(&self, n: u64) {
        let before = self.ok();
        poll_until("requests flowing", || self.ok() >= before + n).await;
    }

    async fn finish(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for task in self.tasks.drain(..) {
            task.await.unwrap();
        }
        assert_eq!(
            self.failed.load(Ordering::SeqCst),
            0,
            "failed requests, the first: {:?}",
            self.first_error.lock().unwrap()
        );
    }
}

/// Every leaf `server` saw is one of `written` (by DER), and it refused no caller.
fn only_written_leaves_presented(server: &VerifyingServer, written: &HashMap<u64, Leaf>) {
    let seen = server.leaves();
    assert!(!seen.is_empty());
    for leaf in seen {
        let serial = serial_of(&leaf);
        let ours = written
            .get(&serial)
            .unwrap_or_else(|| panic!("a leaf the test never wrote: serial {serial:#x}"));
        assert_eq!(leaf, ours.der, "leaf {serial:#x} is the one written");
    }
    assert_eq!(
        server.rejected(),
        0,
        "no caller refused: {:?}",
        server.rejection_reasons()
    );
}

/// The newest serial the server saw.
fn newest_seen(server: &VerifyingServer) -> Option<u64> {
    server.last_leaf().map(|leaf| serial_of(&leaf))
}

fn identity_files(leaf: &Leaf) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("tls.crt", leaf.cert_pem.clone().into_bytes()),
        ("tls.key", leaf.key_pem.clone().into_bytes()),
    ]
}

fn borrowed<'a>(files: &'a [(&'static str, Vec<u8>)]) -> Vec<(&'static str, &'a [u8])> {
    files.iter().map(|(n, b)| (*n, b.as_slice())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_swaps_of_identity_and_trust_under_load_fail_no_request() {
    let (server_ca, next_server_ca, client_ca) = (
        TestCa::new("server CA"),
        TestCa::new("next server CA"),
        TestCa::new("client CA"),
    );
    let mut written = HashMap::new();
    let first = client_ca.client_leaf("caller", 1);
    let identity_dir = tempfile::tempdir().unwrap();
    kubelet_publish(identity_dir.path(), 1, &borrowed(&identity_files(&first)));
    written.insert(1, first);
    let trust_dir = tempfile::tempdir().unwrap();
    kubelet_publish(
        trust_dir.path(),
        1,
        &[("ca.crt", server_ca.pem().as_bytes())],
    );

    let identity_files_ =
        MountedFiles::open(identity_dir.path(), FileLayout::KubernetesTls).unwrap();
    let trust_files =
        MountedFiles::open(trust_dir.path(), FileLayout::ca_bundle("ca.crt")).unwrap();
    let identity = IdentityResolver::from_files(&identity_files_).unwrap();
    let trust = TrustVerifier::from_files(&trust_files, ServerAuthorization::HostName).unwrap();
    let config = Arc::new(
        peer_client_config(
            Arc::new(svc_tls::material::crypto_provider()),
            TrustMode::Watched(trust.clone()),
            Some(&identity),
        )
        .unwrap(),
    );
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    let load = Requests::start(&config, &server);
    load.flowing(5).await;

    // The identity swapped five times: each new leaf presented within a second.
    for version in 2..=6u64 {
        let leaf = client_ca.client_leaf("caller", version);
        let files = identity_files(&leaf);
        written.insert(version, leaf);
        let swapped = Instant::now();
        kubelet_publish(identity_dir.path(), version, &borrowed(&files));
        poll_until("the new leaf presented", || {
            newest_seen(&server) == Some(version)
        })
        .await;
        let took = swapped.elapsed();
        assert!(
            took <= Duration::from_secs(1),
            "leaf {version} presented after {took:?}"
        );
        load.flowing(5).await;
    }

    // The trust rotated as a ClusterTrustBundle projection would: both CAs, the
    // server moved to the new one, then the new one alone.
    let both = format!("{}{}", server_ca.pem(), next_server_ca.pem());
    let generation = trust_files.generation();
    kubelet_publish(trust_dir.path(), 2, &[("ca.crt", both.as_bytes())]);
    poll_until("both CAs read", || {
        trust_files.generation() > generation && trust.state().roots == 2
    })
    .await;
    load.flowing(5).await;
    server.set_server_ca(&next_server_ca);
    load.flowing(5).await;
    kubelet_publish(
        trust_dir.path(),
        3,
        &[("ca.crt", next_server_ca.pem().as_bytes())],
    );
    poll_until("the new CA alone", || trust.state().roots == 1).await;
    load.flowing(5).await;

    load.finish().await;
    only_written_leaves_presented(&server, &written);
    assert_eq!(identity.state().failures, 0, "no read of a swap failed");
    assert_eq!(trust.state().failures, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_place_writer_under_load_never_gets_a_mismatched_pair_presented() {
    let (server_ca, client_ca) = (TestCa::new("server CA"), TestCa::new("client CA"));
    let mut written = HashMap::new();
    let dir = tempfile::tempdir().unwrap();
    let (crt, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let first = client_ca.client_leaf("caller", 1);
    std::fs::write(&crt, &first.cert_pem).unwrap();
    std::fs::write(&key, &first.key_pem).unwrap();
    written.insert(1, first);
    let files = MountedFiles::open(dir.path(), FileLayout::KubernetesTls).unwrap();
    let identity = IdentityResolver::from_files(&files).unwrap();
    let config = Arc::new(
        peer_client_config(
            Arc::new(svc_tls::material::crypto_provider()),
            TrustMode::Roots(server_ca.roots()),
            Some(&identity),
        )
        .unwrap(),
    );
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    let load = Requests::start(&config, &server);
    load.flowing(5).await;

    for version in 2..=4u64 {
        let leaf = client_ca.client_leaf("caller", version);
        // Careless: the certificate first, the key after it, each written in place
        // (truncate, then write); requests flow between the two.
        let generation = files.generation();
        std::fs::write(&crt, &leaf.cert_pem).unwrap();
        poll_until("the new certificate with the old key read", || {
            files.generation() > generation
        })
        .await;
        load.flowing(5).await;
        assert_eq!(
            newest_seen(&server),
            Some(version - 1),
            "the new certificate is never presented with the old key"
        );
        let written_at = Instant::now();
        std::fs::write(&key, &leaf.key_pem).unwrap();
        written.insert(version, leaf);
        poll_until("the new leaf presented", || {
            newest_seen(&server) == Some(version)
        })
        .await;
        let took = written_at.elapsed();
        assert!(
            took <= Duration::from_secs(1),
            "leaf {version} presented {took:?} after its key"
        );
        load.flowing(5).await;
    }
    load.finish().await;
    only_written_leaves_presented(&server, &written);
}
