//! The file sources: identity and trust from a mounted directory, in each layout
//! users have (a mounted `kubernetes.io/tls` Secret, cert-manager's csi-driver,
//! spiffe-helper, the kubelet's pod-certificate credential bundle), followed as the
//! kubelet updates it (the `..data` swap) and as a careless writer does (in place),
//! by inotify and by polling. Handshakes flow through a rustls server presenting the
//! identity from files while the files change: none fails, a mismatched pair is never
//! presented, the new leaf is presented within a second.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod client_under_load;
mod flags;
mod layouts;
mod registry;
mod rotation;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use svc_tls::files::{FileLayout, FileWatchOptions, MountedFiles};
use svc_tls::identity::IdentityResolver;
use svc_tls::serving::ServerTls;
use svc_tls::trust::{ServerAuthorization, TrustVerifier};
use test_support::pki::{Leaf, TestCa};

/// A server leaf for localhost with `serial`.
pub(crate) fn server_leaf(ca: &TestCa, serial: u64) -> Leaf {
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.serial_number = Some(rcgen::SerialNumber::from(serial));
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    test_support::pki::valid_around_now(
        &mut params,
        Duration::from_secs(3600),
        Duration::from_secs(3600),
    );
    let key = rcgen::KeyPair::generate().unwrap();
    let cert_pem = ca.issue(&key, &params);
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap();
    Leaf {
        cert_pem,
        key_pem: key.serialize_pem(),
        der,
        serial,
    }
}

/// Publishes `files` in `dir` as the kubelet's atomic writer does: a new timestamped
/// directory written whole, `..data_tmp` pointed at it and renamed over `..data`, the
/// user-visible names linked through `..data`, the old version removed.
pub(crate) fn kubelet_publish(dir: &Path, version: u64, files: &[(&str, &[u8])]) {
    let name = format!("..2026_12_06_00_00_{version:02}.{version}");
    let versioned = dir.join(&name);
    std::fs::create_dir(&versioned).unwrap();
    for (file, bytes) in files {
        std::fs::write(versioned.join(file), bytes).unwrap();
    }
    let old = std::fs::read_link(dir.join("..data")).ok();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(&name, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for (file, _) in files {
        let link = dir.join(file);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(PathBuf::from("..data").join(file), &link).unwrap();
        }
    }
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old)).unwrap();
    }
}

/// A running TLS server presenting the identity from files, its callers verified
/// against a CA bundle from files; counts handshakes.
pub(crate) struct Server {
    pub(crate) port: u16,
    pub(crate) accepted: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) async fn serve(identity: IdentityResolver, callers: TrustVerifier) -> Server {
    let tls = ServerTls::builder(identity)
        .callers(callers)
        .build()
        .unwrap();
    let acceptor = tls.acceptor();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicU64::new(0));
    let task = tokio::spawn({
        let accepted = accepted.clone();
        async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, accepted) = (acceptor.clone(), accepted.clone());
                tokio::spawn(async move {
                    if acceptor.accept(stream).await.is_ok() {
                        accepted.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        }
    });
    Server {
        port,
        accepted,
        task,
    }
}

/// A client trusting `server_ca`, presenting `leaf`.
pub(crate) fn client_config(server_ca: &TestCa, leaf: &Leaf) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(svc_tls::material::crypto_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(server_ca.roots())
        .with_client_auth_cert(
            vec![leaf.der.clone()],
            PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    Arc::new(config)
}

/// One handshake: the serial of the leaf the server presented (its CertificateVerify
/// checked by rustls against that leaf: a mismatched pair fails here).
pub(crate) async fn handshake(
    config: &Arc<rustls::ClientConfig>,
    port: u16,
) -> Result<u64, String> {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let connector = tokio_rustls::TlsConnector::from(config.clone());
    let tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), stream)
        .await
        .map_err(|e| e.to_string())?;
    let (_, connection) = tls.get_ref();
    let leaf = connection
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or("no server certificate")?;
    Ok(serial_of(leaf))
}

pub(crate) fn serial_of(der: &CertificateDer<'_>) -> u64 {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
    cert.tbs_certificate
        .raw_serial()
        .iter()
        .fold(0u64, |n, b| (n << 8) | u64::from(*b))
}

/// A CA bundle directory trusting `ca`, followed (a ClusterTrustBundle projection).
pub(crate) fn ca_bundle_dir(ca: &TestCa) -> (tempfile::TempDir, MountedFiles) {
    let dir = tempfile::tempdir().unwrap();
    kubelet_publish(dir.path(), 1, &[("ca.crt", ca.pem().as_bytes())]);
    let files = MountedFiles::open(dir.path(), FileLayout::ca_bundle("ca.crt")).unwrap();
    (dir, files)
}

pub(crate) fn callers(files: &MountedFiles) -> TrustVerifier {
    TrustVerifier::from_files(files, ServerAuthorization::HostName).unwrap()
}

/// Fast polling, for the poll-path tests.
pub(crate) fn polling() -> FileWatchOptions {
    FileWatchOptions::default()
        .force_poll(true)
        .poll_interval(Duration::from_millis(50))
}
