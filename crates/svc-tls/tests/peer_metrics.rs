//! Per-peer request metrics (issue 52) after real requests, read from the registry's
//! text and through a real Prometheus scrape:
//!
//! - peer clients built from the options over a registry with metrics count each
//!   request by peer (the configured `--S-host`'s host and port) and status class, time
//!   it, and count each failed handshake by reason: a server under an unknown CA, one
//!   whose certificate names another host, one whose certificate expired, and one
//!   that refuses the client's certificate; five peers sharing one pooled client
//!   still count apart, a URL of a host no peer is configured with counts as
//!   `other`, and an identity rotation counts one pool retirement per peer;
//! - the serving half counts callers' failed handshakes per listener: an unknown CA,
//!   an expired certificate, none at all, and a caller refusing the server;
//! - `svc_tls_info` carries the version, the provider and its FIPS mode;
//! - no label carries a certificate's name or an error's text.
#![cfg(feature = "metrics")]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kube_testbed::Testbed;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;
use support::*;
use svc_tls::client::{PeerClient, PeerTls};
use svc_tls::identity::IdentityResolver;
use svc_tls::metrics::Metrics;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::origin::SecretRef;
use svc_tls::serving::ServerTls;
use svc_tls::spiffe::WorkloadApiStreams;
use svc_tls::trust::TrustVerifier;
use svc_tls::watch::WatchedObjects;
use test_support::prometheus::{Prometheus, serve_metrics};
use test_support::tls_server::{Handler, Reply};

const CA: &str = "region-ca";
const IDENTITY: &str = "region-client-certificate";
const TIMEOUT: Duration = Duration::from_secs(10);

fn text(registry: &Registry) -> String {
    let mut text = String::new();
    encode(&mut text, registry).unwrap();
    text
}

/// The value of the sample `series` (name and labels exactly as encoded), if present.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn assert_value(text: &str, series: &str, expected: f64) {
    assert_eq!(
        value(text, series),
        Some(expected),
        "{series} in:\n{}",
        text.lines()
            .filter(|l| l.contains("svc_tls_peer") || l.contains("svc_tls_listener"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The deployed flags of a service calling `region` at `url`, trusting the CA Secret.
fn options(url: &str) -> (PeerOptions, ClientIdentityOptions) {
    let cmd = PeerOptions::augment(clap::Command::new("svc"), "region");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    let m = cmd
        .try_get_matches_from([
            "svc".to_owned(),
            format!("--region-host={url}"),
            format!("--client-certificate-namespace={NS}"),
            format!("--client-certificate-name={IDENTITY}"),
            format!("--region-ca-secret-namespace={NS}"),
            format!("--region-ca-secret-name={CA}"),
        ])
        .unwrap();
    (
        PeerOptions::from_matches(&m, "region").unwrap(),
        ClientIdentityOptions::from_matches(&m, None).unwrap(),
    )
}

/// A server leaf for 127.0.0.1 issued by `ca`, expired a year ago.
fn expired_server_leaf(ca: &TestCa) -> Leaf {
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca.issuer()).unwrap();
    Leaf {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        der: cert.der().clone(),
        serial: 7,
    }
}

/// `/fail` answers 503, anything else 200.
fn handler() -> Handler {
    Arc::new(|_, parts| Reply {
        status: if parts.uri.path() == "/fail" {
            503
        } else {
            200
        },
        body: "ok".to_owned(),
    })
}

/// The `peer` label of a test server: its configured host and port.
fn peer_of(server: &VerifyingServer) -> String {
    let url = reqwest::Url::parse(&server.url()).unwrap();
    format!("127.0.0.1:{}", url.port().unwrap())
}

async fn peer_tls(tb: &Testbed, watches: &WatchedObjects, server: &VerifyingServer) -> PeerTls {
    let (peer, me) = options(&server.url());
    PeerTls::from_options_in(
        watches,
        &WorkloadApiStreams::new(),
        &tb.cluster_client(),
        &peer,
        &me,
        TIMEOUT,
    )
    .await
    .unwrap()
}

async fn get(client: &PeerClient, url: &str) -> Result<u16, String> {
    client
        .send(client.get(url).unwrap())
        .await
        .map(|response| response.status().as_u16())
        .map_err(|error| format!("{error:?}"))
}

/// A registry with metrics over kube-testbed holding the CA Secret (the server CA)
/// and the client identity Secret (issued by the client CA), and a kept-alive server
/// under the server CA that verifies callers against the client CA.
struct Peered {
    tb: Testbed,
    registry: Registry,
    watches: WatchedObjects,
    server_ca: TestCa,
    client_ca: TestCa,
    server: VerifyingServer,
}

async fn peered() -> Peered {
    let tb = Testbed::start().await;
    let mut registry = Registry::default();
    let watches = Metrics::new_watches(&mut registry);
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let leaf = client_ca.client_leaf("region", 1);
    tb.upsert(secret_with(
        CA,
        "kubernetes.io/tls",
        &[("tls.crt", &server_ca.pem()), ("ca.crt", &server_ca.pem())],
    ));
    tb.upsert(tls_secret(IDENTITY, &leaf.cert_pem, &leaf.key_pem));
    let server = VerifyingServer::builder(&server_ca, &client_ca)
        .handler(handler())
        .keep_alive(true)
        .start()
        .await;
    Peered {
        tb,
        registry,
        watches,
        server_ca,
        client_ca,
        server,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_requests_are_counted_per_peer_class_and_handshake_failure() {
    let Peered {
        tb,
        registry,
        watches,
        server_ca,
        client_ca,
        server: good,
    } = peered().await;
    let (stranger_ca, other_clients) = (TestCa::new("stranger"), TestCa::new("other clients"));
    let unknown_ca = VerifyingServer::start(&stranger_ca, &client_ca).await;
    let other_name = VerifyingServer::builder(&server_ca, &client_ca)
        .server_leaf(&server_ca.server_leaf_with(&["elsewhere.example"], &[]))
        .start()
        .await;
    let expired = expired_server_leaf(&server_ca);
    let expired = VerifyingServer::builder(&server_ca, &client_ca)
        .server_chain(vec![expired.der.clone()], &expired.key_pem)
        .start()
        .await;
    let refusing = VerifyingServer::start(&server_ca, &other_clients).await;

    // One construction per peer, as a service with five peers makes them: the same
    // identity and CA, so one shared pooled client.
    let mut clients = Vec::new();
    for server in [&good, &unknown_ca, &other_name, &expired, &refusing] {
        clients.push(peer_tls(&tb, &watches, server).await.client().unwrap());
    }
    assert!(clients.iter().all(|c| c.ptr_eq(&clients[0])), "one pool");
    let client = &clients[0];

    assert_eq!(get(client, &good.url()).await, Ok(200));
    assert_eq!(get(client, &format!("{}ok", good.url())).await, Ok(200));
    assert_eq!(get(client, &format!("{}fail", good.url())).await, Ok(503));
    // The same server by a name no peer is configured with.
    let port = good
        .url()
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(
        get(client, &format!("https://localhost:{port}/")).await,
        Ok(200)
    );
    for server in [&unknown_ca, &other_name, &expired, &refusing] {
        let failed = get(client, &server.url()).await;
        assert!(failed.is_err(), "{failed:?}");
    }

    let t = text(&registry);
    let good_peer = peer_of(&good);
    assert_value(
        &t,
        &format!(r#"svc_tls_peer_requests_total{{peer="{good_peer}",class="2xx"}}"#),
        2.0,
    );
    assert_value(
        &t,
        &format!(r#"svc_tls_peer_requests_total{{peer="{good_peer}",class="5xx"}}"#),
        1.0,
    );
    assert_value(
        &t,
        &format!(r#"svc_tls_peer_requests_total{{peer="{good_peer}",class="error"}}"#),
        0.0,
    );
    assert_value(
        &t,
        &format!(r#"svc_tls_peer_request_duration_seconds_count{{peer="{good_peer}"}}"#),
        3.0,
    );
    assert_value(
        &t,
        r#"svc_tls_peer_requests_total{peer="other",class="2xx"}"#,
        1.0,
    );
    for (server, reason) in [
        (&unknown_ca, "unknown_ca"),
        (&other_name, "name_mismatch"),
        (&expired, "expired"),
        (&refusing, "refused_by_peer"),
    ] {
        let peer = peer_of(server);
        assert_value(
            &t,
            &format!(r#"svc_tls_peer_handshake_failures_total{{peer="{peer}",reason="{reason}"}}"#),
            1.0,
        );
        assert_value(
            &t,
            &format!(r#"svc_tls_peer_handshake_failures_total{{peer="{peer}",reason="other"}}"#),
            0.0,
        );
        assert_value(
            &t,
            &format!(r#"svc_tls_peer_requests_total{{peer="{peer}",class="error"}}"#),
            1.0,
        );
    }
    assert_value(
        &t,
        &format!(
            r#"svc_tls_peer_handshake_failures_total{{peer="{good_peer}",reason="unknown_ca"}}"#
        ),
        0.0,
    );
    assert_value(
        &t,
        &format!(
            r#"svc_tls_info{{version="{}",crypto_provider="aws-lc-rs",fips="{}"}}"#,
            env!("CARGO_PKG_VERSION"),
            svc_tls::material::crypto_provider().fips()
        ),
        1.0,
    );
    for secret in ["elsewhere", "stranger", "region-client", "localhost"] {
        assert!(
            !t.lines()
                .any(|l| l.starts_with("svc_tls_peer") && l.contains(secret)),
            "{secret} in a label"
        );
    }

    // An identity rotation replaces the shared pool: one retirement per peer.
    let rotated = client_ca.client_leaf("region", 2);
    tb.upsert(tls_secret(IDENTITY, &rotated.cert_pem, &rotated.key_pem));
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while client.retired_pools() == 0 {
        assert!(tokio::time::Instant::now() < deadline, "no pool retired");
        let _ = get(client, &good.url()).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let t = text(&registry);
    for server in [&good, &unknown_ca, &other_name, &expired, &refusing] {
        assert_value(
            &t,
            &format!(
                r#"svc_tls_peer_pool_retirements_total{{peer="{}"}}"#,
                peer_of(server)
            ),
            client.retired_pools() as f64,
        );
    }

    // The same through a real Prometheus scrape.
    let registry = Arc::new(registry);
    let port = {
        let registry = registry.clone();
        serve_metrics(move || text(&registry)).await
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(prometheus) = Prometheus::scraping(dir.path(), port) else {
        return;
    };
    let failures = prometheus
        .wait_for(
            "svc_tls_peer_handshake_failures_total > 0",
            "the handshake failures scraped",
            |samples| samples.len() == 4,
        )
        .await;
    let mut reasons: Vec<_> = failures
        .iter()
        .map(|s| s.labels["reason"].clone())
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        ["expired", "name_mismatch", "refused_by_peer", "unknown_ca"]
    );
    let ratio = prometheus
        .query(&format!(
            r#"sum(svc_tls_peer_requests_total{{peer="{good_peer}",class="5xx"}}) / sum(svc_tls_peer_requests_total{{peer="{good_peer}"}})"#
        ))
        .await;
    assert_eq!(ratio.len(), 1, "{ratio:?}");
    assert!(ratio[0].value > 0.0 && ratio[0].value < 1.0, "{ratio:?}");
    let info = prometheus.query("svc_tls_info").await;
    assert_eq!(info.len(), 1, "{info:?}");
    assert_eq!(info[0].labels["crypto_provider"], "aws-lc-rs");
    let buckets = prometheus
        .query(&format!(
            r#"svc_tls_peer_request_duration_seconds_bucket{{peer="{good_peer}",le="+Inf"}}"#
        ))
        .await;
    assert_eq!(buckets.len(), 1, "{buckets:?}");
}

/// A raw TLS client trusting `server_ca`, presenting `leaf` when given.
fn raw_client(server_ca: &TestCa, leaf: Option<&Leaf>) -> Arc<rustls::ClientConfig> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(server_ca.roots());
    Arc::new(match leaf {
        Some(leaf) => builder
            .with_client_auth_cert(
                vec![leaf.der.clone()],
                PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    })
}

/// A request built with `PeerClient::get` and sent with its own `send` goes through
/// `PeerClient::send`: counted for its peer, its body capped. (Before, `get` returned
/// reqwest's builder, whose `send` went around both.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_sent_from_the_builder_is_counted_and_capped() {
    let Peered {
        tb,
        registry,
        watches,
        server,
        ..
    } = peered().await;
    // The handler's body is "ok": two bytes, one over this cap.
    let client = peer_tls(&tb, &watches, &server)
        .await
        .with_max_response_body(1)
        .client()
        .unwrap();

    let response = client
        .get(server.url())
        .unwrap()
        .header("x-request-id", "7")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let error = response.bytes().await.unwrap_err();
    let too_large = svc_tls::client::ResponseBodyTooLarge::find(&error)
        .unwrap_or_else(|| panic!("not capped: {error:?}"));
    assert_eq!(too_large.cap, 1);

    let peer = peer_of(&server);
    assert_value(
        &text(&registry),
        &format!(r#"svc_tls_peer_requests_total{{peer="{peer}",class="2xx"}}"#),
        1.0,
    );
    // Its Debug names the method and origin, never a header.
    let request = client
        .get(format!("{}secret/path?token=abc", server.url()))
        .unwrap()
        .bearer_auth("hunter2");
    let debug = format!("{request:?}");
    assert!(
        debug.contains("GET") && debug.contains("127.0.0.1"),
        "{debug}"
    );
    assert!(
        !debug.contains("hunter2") && !debug.contains("token=abc"),
        "{debug}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_failed_handshakes_are_counted_per_listener() {
    const SERVER_IDENTITY: &str = "region-server-certificate";
    const CLIENT_CA: &str = "region-client-ca";
    let tb = Testbed::start().await;
    let mut registry = Registry::default();
    let metrics = Metrics::new(&mut registry);
    let (server_ca, client_ca, stranger) = (
        TestCa::new("server"),
        TestCa::new("clients"),
        TestCa::new("stranger"),
    );
    let leaf = server_ca.server_leaf();
    tb.upsert(tls_secret(SERVER_IDENTITY, &leaf.cert_pem, &leaf.key_pem));
    tb.upsert(secret_with(
        CLIENT_CA,
        "kubernetes.io/tls",
        &[("tls.crt", &client_ca.pem()), ("ca.crt", &client_ca.pem())],
    ));
    let identity = IdentityResolver::builder(tb.client(), SecretRef::new(NS, SERVER_IDENTITY))
        .build()
        .await
        .unwrap();
    let callers = TrustVerifier::builder(tb.client(), SecretRef::new(NS, CLIENT_CA))
        .build()
        .await
        .unwrap();
    let tls = ServerTls::builder(identity)
        .callers(callers)
        .handshake_recorder(metrics.listener_recorder("https"))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let service = tower::service_fn(|_: http::Request<hyper::body::Incoming>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
                bytes::Bytes::from_static(b"ok"),
            )))
        });
        let _ = svc_tls::serving::serve(listener, tls, service).await;
    });

    let known = client_ca.client_leaf("caller", 1);
    let ok = test_support::tls_server::request(raw_client(&server_ca, Some(&known)), addr).await;
    assert_eq!(ok.map(|r| r.status), Ok(200));
    for (config, reason) in [
        (
            raw_client(&server_ca, Some(&stranger.client_leaf("caller", 2))),
            "unknown_ca",
        ),
        (
            raw_client(&server_ca, Some(&client_ca.expired_client_leaf(3))),
            "expired",
        ),
        (raw_client(&server_ca, None), "no_certificate"),
        // The caller trusts another CA: it refuses the server.
        (raw_client(&stranger, Some(&known)), "refused_by_peer"),
    ] {
        let refused = test_support::tls_server::request(config, addr).await;
        assert!(refused.is_err(), "{reason}: {refused:?}");
        let series = format!(
            r#"svc_tls_listener_handshake_failures_total{{listener="https",reason="{reason}"}}"#
        );
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        while value(&text(&registry), &series) != Some(1.0) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{series} never 1:\n{}",
                text(&registry)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let t = text(&registry);
    assert_value(
        &t,
        r#"svc_tls_listener_handshake_failures_total{listener="https",reason="other"}"#,
        0.0,
    );
    for secret in ["stranger", "caller", "clients"] {
        assert!(
            !t.lines()
                .any(|l| l.starts_with("svc_tls_listener") && l.contains(secret)),
            "{secret} in a label"
        );
    }
    task.abort();
}
