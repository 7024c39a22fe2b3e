//! Pooled connections across an identity rotation, against client-go's certificate
//! rotation (the anchor: the one Go client that closes its kept-alive connections
//! when its client certificate changes). Each side holds one long-lived pooled client
//! to the same HTTPS server (the Go program in `-mode server`, a process of its own,
//! which requires and verifies client certificates and answers `/whoami` with the hex
//! of the client's leaf certificate), with a kept-alive connection open. One round,
//! on each side: the client certificate is rotated, the side notices, and the first
//! request after the rotation is timed alone (a new connection, a full handshake
//! presenting the new certificate, the GET and its body), checked to have presented
//! the new certificate:
//!
//! - `pooled-rotation/<case>`: ours, `PeerTls::client()` (the process's `PeerClient`
//!   for the peer) over a watched identity Secret in kube-testbed. The Secret is
//!   rotated (written to the API server); noticed once the resolver serves the new
//!   version (the registry's loader parsed it); the request runs as a task on the
//!   runtime's workers and its `PeerClient` opens a new pool for the new identity;
//! - `go/pooled-rotation/<case>`: client-go v0.37's transport from a `rest.Config`
//!   naming certificate files (a mounted Secret, swapped as the kubelet does);
//!   noticed once client-go's rotation controller closed its connections (checked
//!   every 50 ms here instead of client-go's default 5 minutes; the files are re-read
//!   at most once a second); the request through the same `http.Client`;
//! - `pooled-rotation-noticed/<case>`, `go/pooled-rotation-noticed/<case>`: how long
//!   each side took from the rotation written to noticing it (shown, not judged: Go's
//!   depends on the poll period chosen here).
//!
//! The rounds alternate the two sides (the order reversed every round), so each ratio
//! is paired round by round.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use std::cell::RefCell;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use common::go::{Arm, GoChild, GoServer, interleave};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use svc_tls::client::{PeerClient, PeerTls};
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::spiffe::WorkloadApiStreams;
use svc_tls::watch::WatchedObjects;

const NS: &str = "bench";
/// The key types the platform issues most, as the reconcile rows.
const CASES: &[&str] = &["p256-pkcs8", "rsa2048-pkcs8"];

/// The hex of the leaf certificate of a `tls.crt`, as the server answers `/whoami`.
fn leaf_hex(cert_pem: &str) -> String {
    let leaf = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    leaf.iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

fn upsert(testbed: &kube_testbed::Testbed, secret: k8s_openapi::api::core::v1::Secret) {
    let mut value = serde_json::to_value(secret).unwrap();
    value["apiVersion"] = "v1".into();
    value["kind"] = "Secret".into();
    testbed.upsert(value);
}

/// One GET of `/whoami` through the pooled client, timed inside a task on the
/// runtime's workers (as a controller's request runs): its time and the answer.
fn whoami(rt: &tokio::runtime::Runtime, peer: &PeerClient, url: &str) -> (f64, String) {
    let (peer, url) = (peer.clone(), url.to_owned());
    rt.block_on(rt.spawn(async move {
        let start = Instant::now();
        let response = peer.get(&url).unwrap().send().await.unwrap();
        assert!(response.status().is_success());
        let body = response.bytes().await.unwrap();
        let ns = start.elapsed().as_nanos() as f64;
        (ns, String::from_utf8(body.to_vec()).unwrap())
    }))
    .unwrap()
}

fn options(host: &str, secret: &str) -> (PeerOptions, ClientIdentityOptions) {
    let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    let m = cmd
        .try_get_matches_from([
            "svc".to_owned(),
            format!("--identity-host={host}"),
            format!("--identity-ca-secret-namespace={NS}"),
            "--identity-ca-secret-name=peer-ca".to_owned(),
            format!("--client-certificate-namespace={NS}"),
            format!("--client-certificate-name={secret}"),
        ])
        .unwrap();
    (
        PeerOptions::from_matches(&m, "identity").unwrap(),
        ClientIdentityOptions::from_matches(&m, None).unwrap(),
    )
}

fn main() {
    let material = common::material();
    let (Some(go), Some(server)) = (
        GoChild::spawn(&material.dir),
        GoServer::spawn(&material.dir),
    ) else {
        eprintln!("bench: pooled rotation needs the Go server (BENCH_GO_BINARY): skipped");
        return;
    };
    let rounds = if common::quick() { 4 } else { 20 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let testbed = rt.block_on(kube_testbed::Testbed::start());
    let client = testbed.cluster_client();
    let (watches, streams) = (WatchedObjects::new(), WorkloadApiStreams::new());
    upsert(
        &testbed,
        common::secret(
            NS,
            "peer-ca",
            &material.server_ca_pem,
            &material.server_ca_pem,
        ),
    );
    go.borrow_mut().peer("https", server.https);
    let url = format!("https://{}/whoami", server.https);

    for name in CASES {
        let case = material.case(name);
        let secret_name = format!("pooled-{name}");
        let versions = [
            (&case.cert_pem, &case.key_pem),
            (&case.rotated_cert_pem, &case.rotated_key_pem),
        ];
        upsert(
            &testbed,
            common::secret(NS, &secret_name, versions[0].0, versions[0].1),
        );
        let (peer, me) = options(&format!("https://{}", server.https), &secret_name);
        let tls = rt
            .block_on(PeerTls::from_options_in(
                &watches,
                &streams,
                &client,
                &peer,
                &me,
                Duration::from_secs(30),
            ))
            .unwrap();
        let resolver = tls.identity().unwrap().clone();
        let pooled = tls.client().unwrap();
        // The kept-alive connection a rotation must retire.
        assert_eq!(whoami(&rt, &pooled, &url).1, leaf_hex(versions[0].0));

        let current = RefCell::new(0usize);
        let (noticed_ours, noticed_go) = (RefCell::new(Vec::new()), RefCell::new(Vec::new()));
        let theirs = format!("go/pooled-rotation/{name}");
        let arms: Vec<Arm<'_>> = vec![
            Box::new(|| {
                let next = 1 - *current.borrow();
                let before = resolver.state().serial_hex;
                let start = Instant::now();
                upsert(
                    &testbed,
                    common::secret(NS, &secret_name, versions[next].0, versions[next].1),
                );
                while resolver.state().serial_hex == before {
                    assert!(
                        start.elapsed() < Duration::from_secs(30),
                        "the rotation was never loaded"
                    );
                    std::thread::sleep(Duration::from_micros(200));
                }
                noticed_ours
                    .borrow_mut()
                    .push(start.elapsed().as_nanos() as f64);
                *current.borrow_mut() = next;
                let (ns, leaf) = whoami(&rt, &pooled, &url);
                assert_eq!(
                    leaf,
                    leaf_hex(versions[next].0),
                    "the first request after a rotation did not present the new certificate"
                );
                ns
            }),
            Box::new(|| {
                let batch = go.borrow_mut().measure(&theirs, 1, Duration::ZERO);
                noticed_go.borrow_mut().push(batch.noticed_ns.unwrap());
                batch.ns
            }),
        ];
        let mut samples = interleave(rounds, arms).into_iter();
        // The warm-up call of each arm is not a round.
        let (mut noticed_ours, mut noticed_go) = (noticed_ours.take(), noticed_go.take());
        noticed_ours.remove(0);
        noticed_go.remove(0);
        common::emit_paired(
            "pooled",
            name,
            &[
                (format!("pooled-rotation/{name}"), samples.next().unwrap()),
                (theirs.clone(), samples.next().unwrap()),
                (format!("pooled-rotation-noticed/{name}"), noticed_ours),
                (format!("go/pooled-rotation-noticed/{name}"), noticed_go),
            ],
        );
        assert_eq!(resolver.state().failures, 0);
    }
}
