//! Each layout read, and what a failure says.

use super::*;
use svc_tls::files::{FileError, WatchMode};
use svc_tls::origin::IdentityOrigin;
use test_support::poll_until;

#[tokio::test]
async fn a_mounted_kubernetes_tls_secret_gives_identity_and_trust() {
    let (server_ca, client_ca) = (TestCa::new("server CA"), TestCa::new("client CA"));
    let leaf = server_leaf(&server_ca, 0x11);
    let dir = tempfile::tempdir().unwrap();
    kubelet_publish(
        dir.path(),
        1,
        &[
            ("tls.crt", leaf.cert_pem.as_bytes()),
            ("tls.key", leaf.key_pem.as_bytes()),
            ("ca.crt", client_ca.pem().as_bytes()),
        ],
    );
    let files = MountedFiles::open(dir.path(), FileLayout::KubernetesTls).unwrap();
    assert_eq!(files.mode(), WatchMode::Inotify);
    let identity = IdentityResolver::from_files(&files).unwrap();
    let trust = TrustVerifier::from_files(&files, ServerAuthorization::HostName).unwrap();
    assert_eq!(identity.state().serial_hex, "11");
    assert!(matches!(
        identity.state().origin,
        IdentityOrigin::Files { .. }
    ));
    assert_eq!(trust.state().roots, 1);
    // And it serves: a client trusting the server CA sees the leaf.
    let server = serve(identity, trust).await;
    let config = client_config(&server_ca, &client_ca.client_leaf("caller", 7));
    assert_eq!(handshake(&config, server.port).await.unwrap(), 0x11);
}

#[tokio::test]
async fn cert_manager_csi_driver_files_written_directly_are_read() {
    let ca = TestCa::new("issuer");
    let leaf = server_leaf(&ca, 0x21);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), &leaf.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &leaf.key_pem).unwrap();
    std::fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
    let files = MountedFiles::open(dir.path(), FileLayout::CsiDriver).unwrap();
    let identity = IdentityResolver::from_files(&files).unwrap();
    let trust = TrustVerifier::from_files(&files, ServerAuthorization::HostName).unwrap();
    assert_eq!(identity.state().serial_hex, "21");
    assert_eq!(trust.state().roots, 1);
}

#[tokio::test]
async fn spiffe_helper_files_are_read() {
    let ca = TestCa::new("spire");
    let leaf = server_leaf(&ca, 0x31);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("svid.pem"), &leaf.cert_pem).unwrap();
    std::fs::write(dir.path().join("svid_key.pem"), &leaf.key_pem).unwrap();
    std::fs::write(dir.path().join("svid_bundle.pem"), ca.pem()).unwrap();
    let files = MountedFiles::open(dir.path(), FileLayout::SpiffeHelper).unwrap();
    let identity = IdentityResolver::from_files(&files).unwrap();
    let trust = TrustVerifier::from_files(&files, ServerAuthorization::HostName).unwrap();
    assert_eq!(identity.state().serial_hex, "31");
    assert_eq!(trust.state().roots, 1);
}

#[tokio::test]
async fn a_pod_certificate_credential_bundle_holds_key_and_chain_in_one_file() {
    let ca = TestCa::new("signer");
    let leaf = server_leaf(&ca, 0x41);
    let dir = tempfile::tempdir().unwrap();
    // As the projection writes it: the key first, then the chain.
    let bundle = format!("{}{}{}", leaf.key_pem, leaf.cert_pem, ca.pem());
    kubelet_publish(
        dir.path(),
        1,
        &[("credentialbundle.pem", bundle.as_bytes())],
    );
    let files = MountedFiles::open(
        dir.path(),
        FileLayout::pod_certificate("credentialbundle.pem"),
    )
    .unwrap();
    let identity = IdentityResolver::from_files(&files).unwrap();
    assert_eq!(identity.state().serial_hex, "41");
    assert_eq!(identity.current().chain().len(), 2);
    // No CA file in this layout: a trust source over it says so.
    let error = TrustVerifier::from_files(&files, ServerAuthorization::HostName).unwrap_err();
    assert!(format!("{:?}", error).contains("NotInLayout"), "{error:?}");
}

#[tokio::test]
async fn a_key_that_is_not_the_certificates_is_refused_naming_the_files_not_the_key() {
    let ca = TestCa::new("issuer");
    let (leaf, other) = (server_leaf(&ca, 1), server_leaf(&ca, 2));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), &leaf.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &other.key_pem).unwrap();
    let files = MountedFiles::open(dir.path(), FileLayout::KubernetesTls).unwrap();
    let error = IdentityResolver::from_files(&files).unwrap_err();
    let text = svc_tls::excerpt::chain(&error);
    assert!(
        text.contains("tls.crt") && text.contains("tls.key"),
        "{text}"
    );
    assert!(text.contains("does not match"), "{text}");
    let key_body: String = other.key_pem.lines().nth(1).unwrap().to_owned();
    assert!(!text.contains(&key_body), "key material in {text}");
    assert!(!format!("{error:?}").contains(&key_body));
}

#[tokio::test]
async fn a_missing_directory_is_named() {
    let error = MountedFiles::open("/nonexistent/svc-tls", FileLayout::KubernetesTls).unwrap_err();
    assert!(matches!(error, FileError::NotFound { .. }));
    assert!(error.to_string().contains("/nonexistent/svc-tls"));
}

#[tokio::test]
async fn a_deleted_file_keeps_the_last_good_identity_and_reports_it_stale() {
    let ca = TestCa::new("issuer");
    let leaf = server_leaf(&ca, 0x51);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), &leaf.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &leaf.key_pem).unwrap();
    let files = MountedFiles::open(dir.path(), FileLayout::KubernetesTls).unwrap();
    let identity = IdentityResolver::from_files(&files).unwrap();
    assert!(!identity.state().stale);

    std::fs::remove_file(dir.path().join("tls.key")).unwrap();
    poll_until("the deleted key reported stale", || identity.state().stale).await;
    let state = identity.state();
    assert_eq!(state.serial_hex, "51", "the last good identity is served");
    assert!(state.failures > 0);
    assert_eq!(identity.reload().serial_hex(), "51");

    // Back: served again, no longer stale.
    let renewed = server_leaf(&ca, 0x52);
    std::fs::write(dir.path().join("tls.crt"), &renewed.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &renewed.key_pem).unwrap();
    poll_until("the restored files served", || {
        let state = identity.state();
        state.serial_hex == "52" && !state.stale
    })
    .await;
}

#[tokio::test]
async fn the_poll_path_follows_a_kubelet_swap() {
    let ca = TestCa::new("issuer");
    let dir = tempfile::tempdir().unwrap();
    let first = server_leaf(&ca, 0x61);
    kubelet_publish(
        dir.path(),
        1,
        &[
            ("tls.crt", first.cert_pem.as_bytes()),
            ("tls.key", first.key_pem.as_bytes()),
        ],
    );
    let files = MountedFiles::open_with(dir.path(), FileLayout::KubernetesTls, polling()).unwrap();
    assert_eq!(files.mode(), WatchMode::Poll);
    let identity = IdentityResolver::from_files(&files).unwrap();
    assert_eq!(identity.state().serial_hex, "61");

    let second = server_leaf(&ca, 0x62);
    kubelet_publish(
        dir.path(),
        2,
        &[
            ("tls.crt", second.cert_pem.as_bytes()),
            ("tls.key", second.key_pem.as_bytes()),
        ],
    );
    poll_until("the poll path sees the swap", || {
        identity.state().serial_hex == "62"
    })
    .await;
    assert!(files.health().connected);

    // An in-place write, too (same size is possible: the mtime and inode decide).
    let third = server_leaf(&ca, 0x63);
    std::fs::remove_file(dir.path().join("tls.crt")).unwrap();
    std::fs::remove_file(dir.path().join("tls.key")).unwrap();
    std::fs::write(dir.path().join("tls.crt"), &third.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &third.key_pem).unwrap();
    // `..data` still names the old version: the kubelet's link wins over files
    // written beside it, exactly as the kubelet means it.
    poll_until("still the published version", || {
        identity.state().serial_hex == "62"
    })
    .await;
    std::fs::remove_file(dir.path().join("..data")).unwrap();
    poll_until("the files beside it, once ..data is gone", || {
        identity.state().serial_hex == "63"
    })
    .await;
}

/// inotify watches an inode: a directory deleted and recreated (a volume remounted,
/// a tool that replaces the whole directory) took its watch with it. The watcher
/// finds the new directory (looked for every 100 ms while it is gone) and watches it
/// again, so a later change is seen at once, not at the next poll: here the poll
/// interval is a minute, longer than the test, so only inotify can see it.
#[tokio::test]
async fn inotify_is_rearmed_on_a_directory_deleted_and_recreated() {
    let ca = TestCa::new("issuer");
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("tls");
    std::fs::create_dir(&dir).unwrap();
    let write = |leaf: &Leaf| {
        kubelet_publish(
            &dir,
            leaf.serial,
            &[
                ("tls.crt", leaf.cert_pem.as_bytes()),
                ("tls.key", leaf.key_pem.as_bytes()),
            ],
        );
    };
    write(&server_leaf(&ca, 0x61));
    let files = MountedFiles::open_with(
        &dir,
        FileLayout::KubernetesTls,
        FileWatchOptions::default().poll_interval(Duration::from_secs(60)),
    )
    .unwrap();
    assert_eq!(files.mode(), svc_tls::files::WatchMode::Inotify);
    let identity = IdentityResolver::from_files(&files).unwrap();
    let serial = || identity.state().serial_hex;
    // Followed by inotify: the poll interval is longer than the test.
    write(&server_leaf(&ca, 0x62));
    poll_until("a swap seen by inotify", || serial() == "62").await;

    std::fs::remove_dir_all(&dir).unwrap();
    poll_until("the directory reported gone", || !files.health().connected).await;
    assert_eq!(serial(), "62", "the last good identity is served meanwhile");

    std::fs::create_dir(&dir).unwrap();
    write(&server_leaf(&ca, 0x63));
    poll_until("the recreated directory read", || serial() == "63").await;
    assert!(files.health().connected);
    assert_eq!(files.mode(), svc_tls::files::WatchMode::Inotify);

    // A swap in the recreated directory: seen through the new watch, well within
    // the minute the poll would take.
    let swapped = std::time::Instant::now();
    write(&server_leaf(&ca, 0x64));
    poll_until("a swap in the recreated directory", || serial() == "64").await;
    assert!(
        swapped.elapsed() < Duration::from_secs(5),
        "seen by inotify, not by the poll: {:?}",
        swapped.elapsed()
    );
}
