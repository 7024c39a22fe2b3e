//! The flags of the file sources: `--[P-]client-certificate-source=file` with
//! `--[P-]client-certificate-dir` and `--[P-]client-certificate-layout`, and a peer's
//! `--S-ca-file`; a peer client built from them serves with no API access.

use clap::Command;
use svc_tls::options::{ClientIdentityOptions, IdentityConfig, OptionsError, PeerCa, PeerOptions};

use super::*;

fn command() -> Command {
    let cmd = Command::new("svc");
    let cmd = PeerOptions::augment(cmd, "region");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    ClientIdentityOptions::augment(cmd, Some("region"))
}

#[test]
fn the_file_source_reads_its_directory_and_layout() {
    let m = command().get_matches_from([
        "svc",
        "--client-certificate-source=file",
        "--client-certificate-dir=/var/run/secrets/tls",
        "--region-client-certificate-source=file",
        "--region-client-certificate-dir=/svid",
        "--region-client-certificate-layout=spiffe-helper",
        "--region-ca-file=/var/run/trust/ca.crt",
    ]);
    let me = ClientIdentityOptions::from_matches(&m, None).unwrap();
    assert_eq!(
        me.config().unwrap(),
        IdentityConfig::Files {
            dir: "/var/run/secrets/tls".into(),
            layout: FileLayout::KubernetesTls,
        }
    );
    let region = ClientIdentityOptions::from_matches(&m, Some("region")).unwrap();
    assert_eq!(
        region.config().unwrap(),
        IdentityConfig::Files {
            dir: "/svid".into(),
            layout: FileLayout::SpiffeHelper,
        }
    );
    let peer = PeerOptions::from_matches(&m, "region").unwrap();
    assert_eq!(
        peer.ca().unwrap(),
        PeerCa::File("/var/run/trust/ca.crt".into())
    );
}

#[test]
fn the_file_source_refuses_what_cannot_work() {
    let parse = |args: &[&str]| {
        let mut argv = vec!["svc"];
        argv.extend_from_slice(args);
        let m = command().get_matches_from(argv);
        ClientIdentityOptions::from_matches(&m, None)
    };
    assert!(matches!(
        parse(&["--client-certificate-source=file"]),
        Err(OptionsError::MissingFlag { flag }) if flag == "client-certificate-dir"
    ));
    assert!(matches!(
        parse(&[
            "--client-certificate-source=file",
            "--client-certificate-dir=/tls",
            "--client-certificate-name=x",
        ]),
        Err(OptionsError::SourceConflict { .. })
    ));
    assert!(matches!(
        parse(&[
            "--client-certificate-source=file",
            "--client-certificate-dir=/tls",
            "--client-certificate-layout=pkcs12",
        ]),
        Err(OptionsError::InvalidValue { .. })
    ));
    let m = command().get_matches_from([
        "svc",
        "--region-ca-file=/trust/ca.crt",
        "--region-ca-secret-namespace=ns",
        "--region-ca-secret-name=ca",
    ]);
    let peer = PeerOptions::from_matches(&m, "region").unwrap();
    assert!(matches!(
        peer.ca(),
        Err(OptionsError::CaFileConflict { .. })
    ));
}

#[tokio::test]
async fn a_peer_client_from_the_file_flags_presents_the_files_identity() {
    let (server_ca, client_ca) = (TestCa::new("server CA"), TestCa::new("client CA"));
    // The server: identity and callers' CA from files.
    let server_dir = tempfile::tempdir().unwrap();
    let server = server_leaf(&server_ca, 0x71);
    kubelet_publish(
        server_dir.path(),
        1,
        &[
            ("tls.crt", server.cert_pem.as_bytes()),
            ("tls.key", server.key_pem.as_bytes()),
            ("ca.crt", client_ca.pem().as_bytes()),
        ],
    );
    let files = MountedFiles::open(server_dir.path(), FileLayout::KubernetesTls).unwrap();
    let running = serve(
        IdentityResolver::from_files(&files).unwrap(),
        callers(&files),
    )
    .await;

    // The client: from flags only (no Secret, no API access).
    let client_dir = tempfile::tempdir().unwrap();
    let leaf = client_ca.client_leaf("region", 0x72);
    std::fs::write(
        client_dir.path().join("credentialbundle.pem"),
        format!("{}{}", leaf.key_pem, leaf.cert_pem),
    )
    .unwrap();
    let trust_dir = tempfile::tempdir().unwrap();
    kubelet_publish(
        trust_dir.path(),
        1,
        &[("ca.crt", server_ca.pem().as_bytes())],
    );
    let peer = PeerOptions::new("region")
        .with_host_value(format!("https://localhost:{}", running.port))
        .with_ca_file(trust_dir.path().join("ca.crt"));
    let me = ClientIdentityOptions::new(None).with_files(
        client_dir.path(),
        FileLayout::pod_certificate("credentialbundle.pem"),
    );
    let tb = kube_testbed::Testbed::start().await;
    let tls =
        svc_tls::PeerTls::from_options(&tb.cluster_client(), &peer, &me, Duration::from_secs(5))
            .await
            .unwrap();
    let presented = tls.identity().unwrap().current();
    assert_eq!(presented.serial_hex(), "72");
    let client = tls.client().unwrap();
    let response = client
        .send(client.get(tls.host().unwrap().clone()).unwrap())
        .await;
    // The handshake succeeded (the server answers nothing over HTTP: a protocol
    // error, never a TLS one).
    if let Err(error) = &response {
        let text = svc_tls::excerpt::chain(error);
        assert!(!text.contains("certificate"), "{text}");
    }
    poll_until_accepted(&running).await;
}

async fn poll_until_accepted(server: &Server) {
    test_support::poll_until("the server accepted the client's handshake", || {
        server.accepted.load(Ordering::SeqCst) > 0
    })
    .await;
}
