//! The generated client against peers that misbehave, over plain HTTP on loopback
//! (no identity, so no TLS needed for what is tested here): a body without end, a
//! body announced at 10 GiB, a peer that never answers, an error answer with a long
//! header and body, and an answer that is not JSON. Each call ends, within the caps
//! and the timeout, with a typed [`RegionError`] that names the peer and quotes no
//! more than a short escaped excerpt. Every call is wrapped in a 20 s bound so that
//! a client without the caps fails the test instead of hanging it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use region_api::RegionError;
use svc_tls::client::{DEFAULT_MAX_RESPONSE_BODY, DEFAULT_REQUEST_TIMEOUT, PeerTls, TrustMode};
use svc_tls::principal::Principal;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Long enough for any of these calls with the caps; a client without them hangs.
const BOUND: Duration = Duration::from_secs(20);

/// How a fake peer answers a request (its head already read).
type Answer = fn(TcpStream) -> futures_like::BoxFuture;

mod futures_like {
    pub(crate) type BoxFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
}

/// A peer on loopback answering every request with `answer`; its base URL.
async fn peer(answer: Answer) -> reqwest::Url {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                // The request head (these requests have no body).
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte).await {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                answer(stream).await;
            });
        }
    });
    format!("http://{address}/").parse().unwrap()
}

fn tls(host: reqwest::Url) -> PeerTls {
    PeerTls::new(
        Arc::new(svc_tls::material::crypto_provider()),
        TrustMode::Platform,
        None,
    )
    .with_host(host)
}

async fn call(tls: &PeerTls) -> RegionError {
    let client = region_api::connect(tls, Principal::default).unwrap();
    let result = tokio::time::timeout(BOUND, client.list_regions().organization_id("org-1").send())
        .await
        .expect("the call ended within the bound");
    RegionError::from(result.expect_err("the call failed"))
}

fn endless(mut stream: TcpStream) -> futures_like::BoxFuture {
    Box::pin(async move {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                    transfer-encoding: chunked\r\n\r\n";
        if stream.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let chunk = format!("4000\r\n[{}\r\n", " ".repeat(0x4000 - 1));
        // Until the client goes away.
        while stream.write_all(chunk.as_bytes()).await.is_ok() {}
    })
}

fn announced_huge(mut stream: TcpStream) -> futures_like::BoxFuture {
    Box::pin(async move {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                    content-length: 10737418240\r\n\r\n[";
        let _ = stream.write_all(head.as_bytes()).await;
        // Then nothing more: a client that waits for the 10 GiB hangs.
        let _ = stream.read(&mut [0u8; 1]).await;
    })
}

fn silent(mut stream: TcpStream) -> futures_like::BoxFuture {
    Box::pin(async move {
        // Never answers; holds the connection until the client closes it.
        let _ = stream.read(&mut [0u8; 1]).await;
    })
}

const SECRET_HEADER: &str = "set-cookie: session=SECRET-HEADER-VALUE";

fn error_with_long_header_and_body(mut stream: TcpStream) -> futures_like::BoxFuture {
    Box::pin(async move {
        let body = format!("SECRET-BODY \x1b[31m{}", "x".repeat(10_000));
        let answer = format!(
            "HTTP/1.1 503 Service Unavailable\r\n{SECRET_HEADER}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(answer.as_bytes()).await;
    })
}

fn not_json(mut stream: TcpStream) -> futures_like::BoxFuture {
    Box::pin(async move {
        let body = format!("not json \u{202e}\x1b[2J {}", "y".repeat(100_000));
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(answer.as_bytes()).await;
    })
}

#[test]
fn the_defaults_are_a_30_s_timeout_and_a_4_mib_body_cap() {
    let tls = tls("http://127.0.0.1:1/".parse().unwrap());
    assert_eq!(DEFAULT_REQUEST_TIMEOUT, Duration::from_secs(30));
    assert_eq!(DEFAULT_MAX_RESPONSE_BODY, 4 * 1024 * 1024);
    assert_eq!(tls.request_timeout(), Some(DEFAULT_REQUEST_TIMEOUT));
    assert_eq!(tls.max_response_body(), DEFAULT_MAX_RESPONSE_BODY);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_body_fails_at_the_cap_naming_the_peer_and_the_cap() {
    let url = peer(endless).await;
    let error = call(&tls(url.clone()).with_max_response_body(64 * 1024)).await;
    match &error {
        RegionError::BodyTooLarge(too_large) => {
            assert_eq!(too_large.host, format!("127.0.0.1:{}", url.port().unwrap()));
            assert_eq!(too_large.cap, 64 * 1024);
            assert_eq!(too_large.announced, None);
        }
        other => panic!("expected BodyTooLarge, got {other:?}"),
    }
    let text = error.to_string();
    assert!(
        text.contains("127.0.0.1") && text.contains("65536"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_announced_over_the_default_cap_fails_before_it_is_read() {
    let error = call(&tls(peer(announced_huge).await)).await;
    match &error {
        RegionError::BodyTooLarge(too_large) => {
            assert_eq!(too_large.cap, DEFAULT_MAX_RESPONSE_BODY);
            assert_eq!(too_large.announced, Some(10 * 1024 * 1024 * 1024));
        }
        other => panic!("expected BodyTooLarge, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_answers_times_out() {
    let url = peer(silent).await;
    let error =
        call(&tls(url.clone()).with_request_timeout(Some(Duration::from_millis(300)))).await;
    match &error {
        RegionError::Timeout { host, .. } => {
            assert_eq!(host, &format!("127.0.0.1:{}", url.port().unwrap()));
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_answer_is_reported_by_status_without_its_headers_or_body() {
    let client = region_api::connect(
        &tls(peer(error_with_long_header_and_body).await),
        Principal::default,
    )
    .unwrap();
    let error = tokio::time::timeout(BOUND, client.list_regions().organization_id("o").send())
        .await
        .unwrap()
        .unwrap_err();
    // progenitor's own text prints the headers: what the conversion is for.
    assert!(error.to_string().contains("SECRET-HEADER-VALUE"), "{error}");
    let error = RegionError::from(error);
    assert!(matches!(&error, RegionError::Status { status, .. } if status.as_u16() == 503));
    let text = format!("{error} {error:?}");
    assert!(!text.contains("SECRET"), "{text}");
    assert!(text.len() < 400, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_is_not_json_is_quoted_escaped_and_short() {
    let client = region_api::connect(&tls(peer(not_json).await), Principal::default).unwrap();
    let error = tokio::time::timeout(BOUND, client.list_regions().organization_id("o").send())
        .await
        .unwrap()
        .unwrap_err();
    // progenitor's own text prints the whole body.
    assert!(error.to_string().len() > 100_000);
    let error = RegionError::from(error);
    let RegionError::InvalidPayload { excerpt, .. } = &error else {
        panic!("expected InvalidPayload, got {error:?}");
    };
    assert!(
        excerpt.starts_with("not json \\u{202e}\\u{1b}[2J"),
        "{excerpt}"
    );
    let text = error.to_string();
    assert!(
        !text.contains('\u{202e}') && !text.contains('\x1b'),
        "{text}"
    );
    assert!(text.len() < 400, "{text}");
}
