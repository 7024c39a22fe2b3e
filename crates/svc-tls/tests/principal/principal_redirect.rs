//! Principals stay on their host: a peer answering 307 to another origin, or to
//! plain `http://`, gets no request carrying the `X-Principal` there. Real servers
//! throughout: the peer and the other origin are verifying TLS servers, the
//! `http://` target a plain HTTP server; each records the headers it received.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use kube_testbed::Testbed;
use reqwest::header::HeaderMap;
use support::*;
use svc_tls::PeerTls;
use svc_tls::Principal;
use svc_tls::SecretRef;
use svc_tls::client::{RedirectRefused, TrustMode, client_config, reqwest_client};
use svc_tls::identity::IdentityResolver;
use svc_tls::principal::{PRINCIPAL_HEADER, attach_principal};
use test_support::tls_server::{Reply, Seen};

/// The path and headers of every request a server received.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, HeaderMap)>>>);

impl Received {
    fn record(&self, parts: &hyper::http::request::Parts) {
        self.0
            .lock()
            .unwrap()
            .push((parts.uri.path().to_owned(), parts.headers.clone()));
    }

    fn with_principal(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, h)| h.contains_key(PRINCIPAL_HEADER))
            .map(|(path, _)| path.clone())
            .collect()
    }

    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// A TLS server for 127.0.0.1/localhost that records every request and answers
/// `200`, or `307` to the `location` its path maps to.
async fn server(
    server_ca: &TestCa,
    client_ca: Option<&TestCa>,
    redirects: Vec<(&'static str, String)>,
) -> (VerifyingServer, Received) {
    let received = Received::default();
    let seen_by = received.clone();
    let handler = Arc::new(move |_: &Seen, parts: &hyper::http::request::Parts| {
        seen_by.record(parts);
        match redirects.iter().find(|(path, _)| *path == parts.uri.path()) {
            Some((_, location)) => (
                Reply {
                    status: 307,
                    body: String::new(),
                },
                vec![("location", location.clone())],
            ),
            None => (
                Reply {
                    status: 200,
                    body: "landed".into(),
                },
                Vec::new(),
            ),
        }
    });
    let builder = VerifyingServer::builder(server_ca, client_ca.unwrap_or(server_ca))
        .handler_with_headers(handler);
    let builder = match client_ca {
        Some(_) => builder,
        None => builder.no_client_auth(),
    };
    (builder.start().await, received)
}

/// A plain `http://` server on 127.0.0.1 that records every request.
async fn plain_server() -> (String, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://127.0.0.1:{}/landed",
        listener.local_addr().unwrap().port()
    );
    let received = Received::default();
    let seen_by = received.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let seen_by = seen_by.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
                    let (parts, _) = request.into_parts();
                    seen_by.record(&parts);
                    async {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                            Bytes::from("landed"),
                        )))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    (url, received)
}

fn who() -> Principal {
    Principal {
        actor: Some("alice".into()),
        ..Principal::default()
    }
}

/// The `RedirectRefused` in a request's error chain.
fn refusal(error: &reqwest::Error) -> RedirectRefused {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<RedirectRefused>() {
            return refused.clone();
        }
        source = e.source();
    }
    panic!("no RedirectRefused in {error:?}");
}

/// A peer client with a client identity from the emulator, as a service has.
async fn peer_tls(tb: &Testbed, server_ca: &TestCa, client_ca: &TestCa) -> PeerTls {
    let leaf = client_ca.client_leaf("caller", 7);
    tb.upsert(tls_secret("caller", &leaf.cert_pem, &leaf.key_pem));
    let resolver = IdentityResolver::builder(tb.client(), SecretRef::new(NS, "caller"))
        .settings(
            svc_tls::identity::IdentitySettings::default().sync_timeout(Duration::from_secs(10)),
        )
        .build()
        .await
        .unwrap();
    PeerTls::new(
        provider(),
        TrustMode::Roots(server_ca.roots()),
        Some(resolver),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_another_origin_or_to_http_never_carries_the_principal() {
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("servers"), TestCa::new("clients"));
    let tls = peer_tls(&tb, &server_ca, &client_ca).await;
    let signer = tls.principal_signer().unwrap();
    let http = tls.reqwest_client().unwrap();

    // The other origin: another host name and port, trusted by the client and
    // accepting its certificate, so nothing but the policy keeps the request away.
    let (elsewhere, elsewhere_got) = server(&server_ca, Some(&client_ca), Vec::new()).await;
    let elsewhere_url = format!("https://localhost:{}/landed", elsewhere.addr.port());
    let (plain_url, plain_got) = plain_server().await;
    let (peer, peer_got) = server(
        &server_ca,
        Some(&client_ca),
        vec![
            ("/to-elsewhere", elsewhere_url.clone()),
            ("/to-http", plain_url.clone()),
            ("/same-origin", "/landed".to_owned()),
        ],
    )
    .await;
    let peer_url = |path: &str| format!("https://127.0.0.1:{}{path}", peer.addr.port());

    // Same origin: followed, and the principal goes along (the peer asked for it).
    let response = signer
        .attach(http.get(peer_url("/same-origin")), &who())
        .unwrap()
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(peer_got.with_principal(), ["/same-origin", "/landed"]);

    // Another origin: refused, naming both origins.
    let error = signer
        .attach(http.get(peer_url("/to-elsewhere")), &who())
        .unwrap()
        .send()
        .await
        .unwrap_err();
    assert!(error.is_redirect(), "{error:?}");
    assert_eq!(
        refusal(&error),
        RedirectRefused::CrossOrigin {
            from: peer_url("").trim_end_matches('/').to_owned(),
            to: elsewhere_url.trim_end_matches("/landed").to_owned(),
        }
    );

    // https -> http: refused as well.
    let error = signer
        .attach(http.get(peer_url("/to-http")), &who())
        .unwrap()
        .send()
        .await
        .unwrap_err();
    assert!(error.is_redirect(), "{error:?}");
    assert!(
        matches!(refusal(&error), RedirectRefused::CrossOrigin { .. }),
        "{error:?}"
    );

    // The peer did receive both principals; neither target received anything.
    assert_eq!(
        peer_got.with_principal(),
        ["/same-origin", "/landed", "/to-elsewhere", "/to-http"]
    );
    assert_eq!(
        elsewhere_got.count(),
        0,
        "{:?}",
        elsewhere_got.with_principal()
    );
    assert_eq!(plain_got.count(), 0, "{:?}", plain_got.with_principal());
}

/// A client built without an identity (the principal signed elsewhere and put on
/// with `attach_principal`) follows the same policy: it is not `https_only`, so
/// only the redirect policy keeps the token off `http://`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_identity_refuses_the_same_redirects() {
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("servers"), TestCa::new("clients"));
    let tls = peer_tls(&tb, &server_ca, &client_ca).await;
    let signer = tls.principal_signer().unwrap();
    let http = reqwest_client(
        client_config(provider(), TrustMode::Roots(server_ca.roots()), None).unwrap(),
    )
    .unwrap();

    let (elsewhere, elsewhere_got) = server(&server_ca, None, Vec::new()).await;
    let elsewhere_url = format!("https://localhost:{}/landed", elsewhere.addr.port());
    let (plain_url, plain_got) = plain_server().await;
    let (peer, peer_got) = server(
        &server_ca,
        None,
        vec![("/to-elsewhere", elsewhere_url), ("/to-http", plain_url)],
    )
    .await;

    for path in ["/to-elsewhere", "/to-http"] {
        let url: reqwest::Url = format!("https://127.0.0.1:{}{path}", peer.addr.port())
            .parse()
            .unwrap();
        let token = signer.sign(&url, &who()).unwrap();
        let error = attach_principal(http.get(url), &token)
            .unwrap()
            .send()
            .await
            .unwrap_err();
        assert!(
            matches!(refusal(&error), RedirectRefused::CrossOrigin { .. }),
            "{path}: {error:?}"
        );
    }
    assert_eq!(peer_got.with_principal(), ["/to-elsewhere", "/to-http"]);
    assert_eq!(elsewhere_got.count(), 0);
    assert_eq!(plain_got.count(), 0);
}

/// With an identity, the client is `https_only`: a plain `http://` request fails
/// before it is sent (the loopback exception of the host flag included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_identity_is_https_only() {
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("servers"), TestCa::new("clients"));
    let tls = peer_tls(&tb, &server_ca, &client_ca).await;
    let (plain_url, plain_got) = plain_server().await;
    let error = tls
        .reqwest_client()
        .unwrap()
        .get(&plain_url)
        .send()
        .await
        .unwrap_err();
    assert!(error.is_builder() || error.is_request(), "{error:?}");
    assert_eq!(plain_got.count(), 0);
    // Without an identity, plain http is the caller's business.
    let open = reqwest_client(
        client_config(provider(), TrustMode::Roots(server_ca.roots()), None).unwrap(),
    )
    .unwrap();
    assert_eq!(open.get(&plain_url).send().await.unwrap().status(), 200);
    assert_eq!(plain_got.count(), 1);
}

/// `attach_principal` checks the request against the token: a token signed for
/// one origin is not put on a request to another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_principal_refuses_a_token_for_another_origin() {
    use svc_tls::principal::SignError;
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (TestCa::new("servers"), TestCa::new("clients"));
    let tls = peer_tls(&tb, &server_ca, &client_ca).await;
    let signer = tls.principal_signer().unwrap();
    let http = reqwest::Client::new();
    let token = signer
        .sign(&"https://identity.example/api".parse().unwrap(), &who())
        .unwrap();
    assert_eq!(token.audience(), "https://identity.example");
    let ok = attach_principal(http.get("https://identity.example/other"), &token)
        .unwrap()
        .build()
        .unwrap();
    assert!(ok.headers().contains_key(PRINCIPAL_HEADER));
    for other in [
        "https://billing.example/api",
        "https://identity.example:8443/api",
    ] {
        let err = attach_principal(http.get(other), &token).unwrap_err();
        assert!(
            matches!(&err, SignError::AudienceMismatch { token_audience, .. } if token_audience == "https://identity.example"),
            "{other}: {err:?}"
        );
    }
    let err = attach_principal(http.get("http://identity.example/api"), &token).unwrap_err();
    assert!(matches!(err, SignError::PlaintextUrl { .. }), "{err:?}");
    let err = signer
        .sign(&"ftp://identity.example/x".parse().unwrap(), &who())
        .unwrap_err();
    assert!(matches!(err, SignError::UnsupportedUrl { .. }), "{err:?}");
}
