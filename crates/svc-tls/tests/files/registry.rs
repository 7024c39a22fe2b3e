//! The followers of mounted directories, scoped: one per directory, layout and
//! watch options while one lives, none left once dropped.

use super::*;
use svc_tls::files::FileWatches;

#[test]
fn one_follower_per_directory_layout_and_options_in_a_scoped_registry() {
    let ca = TestCa::new("issuer");
    let dir = tempfile::tempdir().unwrap();
    let leaf = server_leaf(&ca, 0x71);
    kubelet_publish(
        dir.path(),
        1,
        &[
            ("tls.crt", leaf.cert_pem.as_bytes()),
            ("tls.key", leaf.key_pem.as_bytes()),
            ("ca.crt", ca.pem().as_bytes()),
        ],
    );
    let watches = FileWatches::new();
    let open = |layout: FileLayout, options: FileWatchOptions| {
        watches.open(dir.path(), layout, options).unwrap()
    };
    let first = open(FileLayout::KubernetesTls, FileWatchOptions::default());
    let again = open(FileLayout::KubernetesTls, FileWatchOptions::default());
    assert!(
        first.ptr_eq(&again),
        "the same directory, layout and options: one follower"
    );
    assert_eq!(watches.live(), 1);

    // What tells users apart: another layout, polling, another interval, another
    // provider.
    let others = [
        open(FileLayout::ca_bundle("ca.crt"), FileWatchOptions::default()),
        open(FileLayout::KubernetesTls, polling()),
        open(
            FileLayout::KubernetesTls,
            FileWatchOptions::default().poll_interval(Duration::from_secs(5)),
        ),
        open(
            FileLayout::KubernetesTls,
            FileWatchOptions::default().provider(Arc::new(svc_tls::material::crypto_provider())),
        ),
    ];
    for other in &others {
        assert!(!other.ptr_eq(&first));
    }
    assert_eq!(watches.live(), 5);

    // Another registry is another scope; the process's is untouched.
    let elsewhere = FileWatches::new()
        .open(
            dir.path(),
            FileLayout::KubernetesTls,
            FileWatchOptions::default(),
        )
        .unwrap();
    assert!(!elsewhere.ptr_eq(&first));
    assert_eq!(watches.live(), 5);

    // Dropped: nothing left, and the next open starts a new follower.
    drop((first, again, others, elsewhere));
    assert_eq!(watches.live(), 0);
    let fresh = open(FileLayout::KubernetesTls, FileWatchOptions::default());
    assert_eq!(watches.live(), 1);
    assert_eq!(fresh.generation(), 1);
}
