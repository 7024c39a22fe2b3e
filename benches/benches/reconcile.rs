//! One "reconcile construction", as the platform's controllers build a peer client per
//! reconcile: the peer's TLS from the options (`PeerTls::from_options_with`, the
//! CA Secret and the identity Secret already watched by the registry, as they are
//! after the first reconcile) and an HTTP client from it (`reqwest_client`).
//!
//! - `reconcile/<case>` (criterion): one construction with the identity of `<case>`,
//!   dropped at the end of the iteration. Each iteration also pays one
//!   `Runtime::block_on` (the constructor is async), about a microsecond.
//!
//! Go's counterpart is `go/reconcile/<case>` in `benches/go`: `TLSClientConfig` per
//! reconcile (the cached-client Get of both Secrets modelled as the map look-up and
//! copy it is, `tls.X509KeyPair`, a root pool, a `tls.Config` and a new
//! `http.Transport`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use svc_tls::client::PeerTls;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::spiffe::WorkloadApiStreams;
use svc_tls::watch::SecretWatches;

const NS: &str = "bench";
/// The cases measured: the key types the platform issues most (cert-manager's
/// defaults), the same names as Go's rows.
pub const CASES: &[&str] = &["p256-pkcs8", "rsa2048-pkcs8"];

fn main() {
    let material = common::material();
    let quick = common::quick();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let testbed = rt.block_on(kube_testbed::Testbed::start());
    let client = testbed.cluster_client();
    let watches = SecretWatches::new();
    let streams = WorkloadApiStreams::new();
    testbed.upsert(
        serde_json::to_value(common::secret(
            NS,
            "peer-ca",
            &material.server_ca_pem,
            &material.server_ca_pem,
        ))
        .map(|mut v| {
            v["apiVersion"] = "v1".into();
            v["kind"] = "Secret".into();
            v
        })
        .unwrap(),
    );

    let mut c = Criterion::default().configure_from_args();
    let (warm_up, measure, samples) = if quick {
        (Duration::from_millis(50), Duration::from_millis(100), 10)
    } else {
        (Duration::from_millis(300), Duration::from_secs(2), 40)
    };
    let mut group = c.benchmark_group("reconcile");
    group
        .warm_up_time(warm_up)
        .measurement_time(measure)
        .sample_size(samples);
    for name in CASES {
        let case = material.case(name);
        let secret = format!("identity-{name}");
        let mut value =
            serde_json::to_value(common::secret(NS, &secret, &case.cert_pem, &case.key_pem))
                .unwrap();
        value["apiVersion"] = "v1".into();
        value["kind"] = "Secret".into();
        testbed.upsert(value);
        let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
        let cmd = ClientIdentityOptions::augment(cmd, None);
        let m = cmd
            .try_get_matches_from([
                "svc".to_owned(),
                "--identity-host=https://identity.bench.test".to_owned(),
                format!("--identity-ca-secret-namespace={NS}"),
                "--identity-ca-secret-name=peer-ca".to_owned(),
                format!("--client-certificate-namespace={NS}"),
                format!("--client-certificate-name={secret}"),
            ])
            .unwrap();
        let peer = PeerOptions::from_matches(&m, "identity").unwrap();
        let me = ClientIdentityOptions::from_matches(&m, None).unwrap();
        let construct = || {
            rt.block_on(PeerTls::from_options_with(
                &watches,
                &streams,
                &client,
                &peer,
                &me,
                Duration::from_secs(30),
            ))
            .unwrap()
        };
        // The first reconcile watches the Secrets; the measured ones do not.
        let first = construct();
        let lists = testbed.requests("list");
        group.bench_function(*name, |b| {
            b.iter(|| {
                let tls = construct();
                black_box(tls.reqwest_client().unwrap());
            })
        });
        assert_eq!(
            testbed.requests("list"),
            lists,
            "a measured reconcile listed"
        );
        drop(first);
    }
    group.finish();
    c.final_summary();
}
