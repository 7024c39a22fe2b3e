//! The HTTP protocol a peer client speaks, negotiated with a real TLS 1.3 server
//! that offers both `h2` and `http/1.1` and verifies client certificates: HTTP/1.1
//! by default (as Go's transport), h2 only when opted in (`--S-http2`); and the pool
//! idle timeout setting (`--S-pool-idle-timeout=0` keeps no idle connection, so
//! every request runs a handshake and presents the current identity).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support;

use std::time::Duration;

use kube_testbed::Testbed;
use support::*;
use svc_tls::client::PeerTls;
use svc_tls::options::{ClientIdentityOptions, HttpProtocol, PeerOptions};

/// The verifying server offering `h2` and `http/1.1`, requiring a client
/// certificate from `client_ca`, keeping connections open (so pooling is visible);
/// `get` reads `<HTTP version> <ALPN protocol> <client serial>` from its answer.
async fn alpn_server(server_ca: &TestCa, client_ca: &TestCa) -> VerifyingServer {
    VerifyingServer::builder(server_ca, client_ca)
        .alpn(&[b"h2", b"http/1.1"])
        .keep_alive(true)
        .start()
        .await
}

const IDENTITY: &str = "identity-client-certificate";

/// A peer client built from the deployed flags plus `extra`, against `server`.
async fn peer_tls(tb: &Testbed, server: &VerifyingServer, extra: &[&str]) -> PeerTls {
    let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    let mut args = vec![
        "svc".to_owned(),
        format!("--identity-host={}", server.url()),
        format!("--identity-ca-secret-namespace={NS}"),
        "--identity-ca-secret-name=identity-ca".to_owned(),
        format!("--client-certificate-namespace={NS}"),
        format!("--client-certificate-name={IDENTITY}"),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let m = cmd.try_get_matches_from(args).unwrap();
    let peer = PeerOptions::from_matches(&m, "identity").unwrap();
    let me = ClientIdentityOptions::from_matches(&m, None).unwrap();
    from_options_scoped(&tb.cluster_client(), &peer, &me, Duration::from_secs(10))
        .await
        .unwrap()
}

async fn setup() -> (Testbed, VerifyingServer) {
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let leaf = client_ca.client_leaf("svc", 901);
    tb.upsert(secret_with(
        "identity-ca",
        "kubernetes.io/tls",
        &[("tls.crt", &server_ca.pem())],
    ));
    tb.upsert(tls_secret(IDENTITY, &leaf.cert_pem, &leaf.key_pem));
    let server = alpn_server(&server_ca, &client_ca).await;
    (tb, server)
}

async fn get(http: &reqwest::Client, url: &str) -> (reqwest::Version, String) {
    let response = http.get(url).send().await.unwrap();
    let version = response.version();
    let header = |name: &str| response.headers()[name].to_str().unwrap().to_owned();
    let (seen_version, alpn) = (header("x-request-version"), header("x-alpn"));
    let serial = response.text().await.unwrap();
    (version, format!("{seen_version} {alpn} {serial}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_by_default_and_h2_when_opted_in() {
    let (tb, server) = setup().await;

    let tls = peer_tls(&tb, &server, &[]).await;
    assert_eq!(tls.http_protocol(), HttpProtocol::Http1Only);
    let http = tls.reqwest_client().unwrap();
    let url = tls.host().unwrap().to_string();
    assert_eq!(
        get(&http, &url).await,
        (
            reqwest::Version::HTTP_11,
            "HTTP/1.1 http/1.1 901".to_owned()
        )
    );

    let tls = peer_tls(&tb, &server, &["--identity-http2"]).await;
    assert_eq!(tls.http_protocol(), HttpProtocol::Http2Preferred);
    let http = tls.reqwest_client().unwrap();
    assert_eq!(
        get(&http, &url).await,
        (reqwest::Version::HTTP_2, "HTTP/2.0 h2 901".to_owned())
    );
}

/// Two requests in a row: the default pool keeps the connection (one handshake);
/// `--identity-pool-idle-timeout=0` keeps none (a handshake, and so a fresh identity,
/// per request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_idle_timeout_zero_opens_a_connection_per_request() {
    let (tb, server) = setup().await;
    let tls = peer_tls(&tb, &server, &[]).await;
    let url = tls.host().unwrap().to_string();
    let http = tls.reqwest_client().unwrap();
    for _ in 0..10 {
        assert_eq!(get(&http, &url).await.0, reqwest::Version::HTTP_11);
    }
    // Pooled: one connection, a spare or two at most (hyper starts a connect beside a
    // checkout when the previous connection is still on its way back to the pool).
    let pooled = server.handshakes();
    assert!(pooled <= 3, "pooled: {pooled} handshakes for 10 requests");

    let tls = peer_tls(&tb, &server, &["--identity-pool-idle-timeout=0"]).await;
    let http = tls.reqwest_client().unwrap();
    for _ in 0..10 {
        assert_eq!(get(&http, &url).await.0, reqwest::Version::HTTP_11);
    }
    // No idle connection kept: a new handshake for every request.
    let connections = server.handshakes() - pooled;
    assert!(connections >= 10, "one per request, got {connections}");
}

/// An `http://` peer host skips mTLS and would carry the `X-Principal` in clear
/// text: with a client identity configured, a non-loopback one is refused, naming
/// the flag; loopback stays allowed, and without an identity nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_host_is_refused_when_an_identity_is_configured() {
    let (tb, _server) = setup().await;
    let build = |host: &str, identity: bool| {
        let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
        let cmd = ClientIdentityOptions::augment(cmd, None);
        let mut args = vec!["svc".to_owned(), format!("--identity-host={host}")];
        if identity {
            args.push(format!("--client-certificate-namespace={NS}"));
            args.push(format!("--client-certificate-name={IDENTITY}"));
        }
        let m = cmd.try_get_matches_from(args).unwrap();
        (
            PeerOptions::from_matches(&m, "identity").unwrap(),
            ClientIdentityOptions::from_matches(&m, None).unwrap(),
        )
    };
    let tls = |host: &'static str, identity: bool| {
        let (peer, me) = build(host, identity);
        let client = tb.cluster_client();
        async move {
            from_options_scoped(&client, &peer, &me, Duration::from_secs(10))
                .await
                .unwrap()
        }
    };

    let refused = tls("http://identity.example:8080", true).await;
    let err = refused.host().unwrap_err();
    assert_eq!(err.flag(), "identity-host", "{err}");
    assert!(
        matches!(
            &err,
            svc_tls::options::HostError::Invalid {
                problem: svc_tls::options::HostProblem::PlaintextWithCredentials,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("--identity-host"), "{err}");

    for loopback in [
        "http://127.0.0.1:8080",
        "http://localhost:8080",
        "http://[::1]:8080",
    ] {
        tls(loopback, true).await.host().unwrap();
    }
    tls("http://identity.example:8080", false)
        .await
        .host()
        .unwrap();
    tls("https://identity.example:8443", true)
        .await
        .host()
        .unwrap();
}
