//! Debian's nginx as the mTLS ingress (`ssl_verify_client on`), reloaded with a new
//! client CA while our `reqwest` client keeps running: the client goes through the
//! rotation without a restart.
//!
//! nginx must be installed (`apt-get install nginx`; `cargo xtask test` does it). A
//! missing nginx fails this test: it is never skipped.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support;

use std::time::Duration;

use kube_testbed::Testbed;
use support::nginx::Nginx;
use support::*;
use svc_tls::client::reqwest_builder;
use svc_tls::identity::IdentityResolver;
use svc_tls::origin::SecretRef;

const NAME: &str = "ingress-client-certificate";

/// One request: `Ok(serial)` on 200, `Err(description)` otherwise.
async fn serial_seen(http: &reqwest::Client, url: &str) -> Result<u64, String> {
    let response = http.get(url).send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("HTTP {status}"));
    }
    u64::from_str_radix(body.trim(), 16).map_err(|e| format!("serial {body:?}: {e}"))
}

/// Requests until `want(result)` holds, for at most 20 s.
async fn eventually(
    http: &reqwest::Client,
    url: &str,
    what: &str,
    want: impl Fn(&Result<u64, String>) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = serial_seen(http, url).await;
        if want(&got) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: last result {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reqwest_client_goes_through_an_nginx_client_ca_rotation_without_restart() {
    let tb = Testbed::start().await;
    let server_ca = TestCa::new("ingress");
    let (ca_a, ca_b) = (TestCa::new("clients A"), TestCa::new("clients B"));
    let (leaf_a, leaf_b) = (
        ca_a.client_leaf("svc", 0x601),
        ca_b.client_leaf("svc", 0x602),
    );
    tb.upsert(tls_secret(NAME, &leaf_a.cert_pem, &leaf_a.key_pem));
    let nginx = Nginx::start(
        &server_ca.server_leaf(),
        &ca_a.pem(),
        "on",
        r#"default_type text/plain; return 200 "$ssl_client_serial";"#,
    );

    let resolver = IdentityResolver::builder(tb.client(), SecretRef::new(NS, NAME))
        .settings(
            svc_tls::identity::IdentitySettings::default().sync_timeout(Duration::from_secs(10)),
        )
        .build()
        .await
        .unwrap();
    let config = trusting(&server_ca, Some(&resolver));
    // One client for the whole test, with its connection pool (keep-alive) as usual.
    let http = reqwest_builder(config).build().unwrap();
    assert_eq!(serial_seen(&http, &nginx.url("/")).await, Ok(0x601));

    // The ingress rotates its client CA to B: the A-issued leaf is refused (on new
    // connections; nginx closes idle keep-alive ones when it reloads).
    nginx.reload_client_ca(&ca_b.pem());
    eventually(
        &http,
        &nginx.url("/"),
        "nginx refuses the A-issued leaf",
        |r| r.is_err(),
    )
    .await;

    // cert-manager writes the B-issued leaf: the same client presents it.
    tb.upsert(tls_secret(NAME, &leaf_b.cert_pem, &leaf_b.key_pem));
    eventually(
        &http,
        &nginx.url("/"),
        "nginx accepts the B-issued leaf",
        |r| *r == Ok(0x602),
    )
    .await;
    assert_eq!(serial_seen(&http, &nginx.url("/")).await, Ok(0x602));
    assert_eq!(resolver.state().failures, 0);
}
