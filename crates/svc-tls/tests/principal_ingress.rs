//! The receiving side of principals behind Debian's nginx as the mTLS ingress: nginx
//! forwards the verified client certificate in `ssl-client-cert` (URL-encoded PEM,
//! `$ssl_client_escaped_cert`) and the outcome in `ssl-client-verify`, as the
//! ingress-nginx controller does. Our reqwest client presents the identity from the
//! watched Secret and signs the `X-Principal` with the same identity, across a
//! rotation. Also the ingress helper's typed errors on hand-made header maps.
//!
//! nginx must be installed (`apt-get install nginx`; `cargo xtask test` does it). A
//! missing nginx fails the nginx test: it is never skipped.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use kube_testbed::Testbed;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use rcgen::{KeyPair, RsaKeySize};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use support::nginx::Nginx;
use support::*;
use svc_tls::client::reqwest_builder;
use svc_tls::options::SecretRef;
use svc_tls::principal::{
    AlgorithmPolicy, CertificateError, DEFAULT_MAX_CERT_HEADER_BYTES, IngressError,
    IngressVerifier, PRINCIPAL_HEADER, PeerCertificate, Principal, PrincipalSigner,
    RequestPrincipalError, VerifyError, peer_certificate_from_ingress, verify_ingress_request,
};
use svc_tls::resolver::IdentityResolver;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

const NAME: &str = "principal-client-certificate";
const POLICY: AlgorithmPolicy = AlgorithmPolicy::Ps512Only;

fn rsa_leaf(ca: &TestCa, serial: u64) -> Leaf {
    let key = KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_2048).unwrap();
    ca.client_leaf_with("svc-principal", serial, key)
}

fn who(actor: &str) -> Principal {
    Principal {
        organization_id: Some("org-1".into()),
        project_id: None,
        actor: Some(actor.into()),
    }
}

// ---------------------------------------------------------------------------------
// nginx in front of an upstream that hands every request's headers to the test.

/// A plain-HTTP upstream: answers 200 to every request and sends its headers (as a
/// `HeaderMap`, the type servers built on `http` hand to handlers) to the test.
async fn upstream() -> (
    u16,
    mpsc::UnboundedReceiver<HeaderMap>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                continue;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tcp.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8(buf).unwrap();
                let mut headers = HeaderMap::new();
                for line in head.split("\r\n").skip(1).take_while(|l| !l.is_empty()) {
                    let (name, value) = line.split_once(':').unwrap();
                    headers.append(
                        HeaderName::from_bytes(name.trim().as_bytes()).unwrap(),
                        HeaderValue::from_str(value.trim()).unwrap(),
                    );
                }
                let _ = tx.send(headers);
                let _ = tcp
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
                let _ = tcp.shutdown().await;
            });
        }
    });
    (port, rx, task)
}

async fn resolver_for(tb: &Testbed, name: &str) -> IdentityResolver {
    IdentityResolver::builder(tb.client(), SecretRef::new(NS, name))
        .sync_timeout(Duration::from_secs(10))
        .build()
        .await
        .unwrap()
}

/// Sends one request (a new connection each time: no pooling) and returns the
/// headers the upstream received.
async fn forwarded(
    http: &reqwest::Client,
    request: reqwest::RequestBuilder,
    rx: &mut mpsc::UnboundedReceiver<HeaderMap>,
) -> HeaderMap {
    let _ = http;
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principal_signed_with_the_handshake_identity_verifies_behind_nginx_across_rotation() {
    let tb = Testbed::start().await;
    let (server_ca, client_ca, rogue_ca) = (
        TestCa::new("ingress"),
        TestCa::new("clients"),
        TestCa::new("rogue"),
    );
    let (one, two) = (rsa_leaf(&client_ca, 0x701), rsa_leaf(&client_ca, 0x702));
    tb.upsert(tls_secret(NAME, &one.cert_pem, &one.key_pem));
    let (upstream_port, mut rx, upstream_task) = upstream().await;
    // optional_no_ca: a certificate from an unknown CA reaches the upstream with
    // ssl-client-verify "FAILED:...", so the helper's refusal can be observed.
    let nginx = Nginx::start(
        &server_ca.server_leaf(),
        &client_ca.pem(),
        "optional_no_ca",
        &format!(
            "proxy_pass http://127.0.0.1:{upstream_port}; \
             proxy_set_header ssl-client-cert $ssl_client_escaped_cert; \
             proxy_set_header ssl-client-verify $ssl_client_verify;"
        ),
    );

    let resolver = resolver_for(&tb, NAME).await;
    let config = trusting(&server_ca, Some(&resolver));
    // No pooling: every request is a new handshake, so the presented certificate is
    // the current one (a pooled connection keeps the one it was opened with).
    let http = reqwest_builder(config)
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let signer = PrincipalSigner::new(&resolver);

    // 1. The ingress-verified certificate and the principal signed with our identity.
    let request = signer
        .attach(http.get(nginx.url("/api")), &who("alice"))
        .unwrap();
    let headers = forwarded(&http, request, &mut rx).await;
    let raw_cert = headers.get("ssl-client-cert").unwrap().to_str().unwrap();
    assert!(
        raw_cert.starts_with("-----BEGIN%20CERTIFICATE-----%0A"),
        "nginx sends URL-encoded PEM: {raw_cert:.40}"
    );
    assert_eq!(headers.get("ssl-client-verify").unwrap(), "SUCCESS");
    let got: Principal = verify_ingress_request(&headers, POLICY).unwrap();
    assert_eq!(got, who("alice"));
    assert_eq!(
        peer_certificate_from_ingress(&headers).unwrap().der(),
        &one.der
    );

    // 2. cert-manager rotates the Secret: the next request presents and signs with
    //    the new identity, no restart, no new signer.
    tb.upsert(tls_secret(NAME, &two.cert_pem, &two.key_pem));
    poll_until("the cache sees the new Secret", || {
        cached_cert_is(resolver.secret_source().unwrap(), &two.cert_pem)
    })
    .await;
    let request = signer
        .attach(http.get(nginx.url("/api")), &who("bob"))
        .unwrap();
    let headers = forwarded(&http, request, &mut rx).await;
    assert_eq!(
        peer_certificate_from_ingress(&headers).unwrap().der(),
        &two.der
    );
    let got: Principal = verify_ingress_request(&headers, POLICY).unwrap();
    assert_eq!(got, who("bob"));
    // Signed with the new key: the old certificate no longer verifies it.
    let token = headers.get(PRINCIPAL_HEADER).unwrap().to_str().unwrap();
    let old = PeerCertificate::from_der(one.der.clone()).unwrap();
    let err = old.verify::<Principal>(token, POLICY).unwrap_err();
    assert!(matches!(err, VerifyError::BadSignature), "{err:?}");

    // 3. No client certificate, with forged ingress headers: nginx overwrites them,
    //    and the helper refuses the request.
    let anonymous = reqwest_builder(trusting(&server_ca, None)).build().unwrap();
    let forged = utf8_percent_encode(&one.cert_pem, NON_ALPHANUMERIC).to_string();
    let request = anonymous
        .get(nginx.url("/api"))
        .header("ssl-client-verify", "SUCCESS")
        .header("ssl-client-cert", forged)
        .header(PRINCIPAL_HEADER, token);
    let headers = forwarded(&anonymous, request, &mut rx).await;
    let err = verify_ingress_request::<Principal>(&headers, POLICY).unwrap_err();
    assert!(
        matches!(&err, RequestPrincipalError::Ingress(IngressError::NotVerified { value }) if value == "NONE"),
        "{err:?}"
    );

    // 4. A certificate from a CA the ingress does not trust reaches the upstream as
    //    FAILED:... and is refused, however well the principal is signed.
    let rogue = rsa_leaf(&rogue_ca, 0x7ff);
    tb.upsert(tls_secret("rogue", &rogue.cert_pem, &rogue.key_pem));
    let rogue_resolver = resolver_for(&tb, "rogue").await;
    let rogue_http = reqwest_builder(trusting(&server_ca, Some(&rogue_resolver)))
        .build()
        .unwrap();
    let request = PrincipalSigner::new(&rogue_resolver)
        .attach(rogue_http.get(nginx.url("/api")), &who("mallory"))
        .unwrap();
    let headers = forwarded(&rogue_http, request, &mut rx).await;
    let err = verify_ingress_request::<Principal>(&headers, POLICY).unwrap_err();
    assert!(
        matches!(&err, RequestPrincipalError::Ingress(IngressError::NotVerified { value }) if value.starts_with("FAILED")),
        "{err:?}"
    );

    drop(nginx);
    upstream_task.abort();
}

// ---------------------------------------------------------------------------------
// The helper on hand-made header maps.

fn ingress_headers(verify: Option<&str>, cert: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(v) = verify {
        headers.insert("ssl-client-verify", HeaderValue::from_str(v).unwrap());
    }
    if let Some(c) = cert {
        headers.insert("ssl-client-cert", HeaderValue::from_str(c).unwrap());
    }
    headers
}

#[test]
fn ingress_helper_names_what_is_wrong() {
    let leaf = rsa_leaf(&TestCa::new("clients"), 1);
    let encoded = utf8_percent_encode(&leaf.cert_pem, NON_ALPHANUMERIC).to_string();

    let ok = peer_certificate_from_ingress(&ingress_headers(Some("SUCCESS"), Some(&encoded)));
    assert_eq!(ok.unwrap().der(), &leaf.der);
    // Only newlines and spaces escaped ('+', '/' and '=' left as they are) reads the
    // same: '+' is never taken for a space.
    let light = leaf.cert_pem.replace('\n', "%0A").replace(' ', "%20");
    assert!(light.contains('+') || light.contains('/'));
    let ok = peer_certificate_from_ingress(&ingress_headers(Some("SUCCESS"), Some(&light)));
    assert_eq!(ok.unwrap().der(), &leaf.der);

    type Expect = fn(&IngressError) -> bool;
    let cases: Vec<(HeaderMap, Expect)> = vec![
        (ingress_headers(None, Some(&encoded)), |e| {
            matches!(e, IngressError::MissingVerify)
        }),
        (
            ingress_headers(Some("NONE"), Some(&encoded)),
            |e| matches!(e, IngressError::NotVerified { value } if value == "NONE"),
        ),
        (
            ingress_headers(Some("success"), Some(&encoded)),
            |e| matches!(e, IngressError::NotVerified { value } if value == "success"),
        ),
        (
            ingress_headers(Some("FAILED:certificate has expired"), Some(&encoded)),
            |e| matches!(e, IngressError::NotVerified { value } if value.starts_with("FAILED:")),
        ),
        (ingress_headers(Some("SUCCESS"), None), |e| {
            matches!(e, IngressError::MissingCertificate)
        }),
        (ingress_headers(Some("SUCCESS"), Some("%FF%FE")), |e| {
            matches!(e, IngressError::CertificateEncoding)
        }),
        (
            ingress_headers(Some("SUCCESS"), Some("not%20a%20certificate")),
            |e| {
                matches!(
                    e,
                    IngressError::Certificate(CertificateError::NoCertificate)
                )
            },
        ),
    ];
    for (headers, expected) in cases {
        let err = peer_certificate_from_ingress(&headers).unwrap_err();
        assert!(expected(&err), "{headers:?}: {err:?}");
    }

    // A repeated header is ambiguous (possibly injected): refused.
    let mut twice = ingress_headers(Some("SUCCESS"), Some(&encoded));
    twice.append("ssl-client-verify", HeaderValue::from_static("SUCCESS"));
    let err = peer_certificate_from_ingress(&twice).unwrap_err();
    assert!(
        matches!(
            err,
            IngressError::Duplicate {
                name: "ssl-client-verify"
            }
        ),
        "{err:?}"
    );
    let mut twice = ingress_headers(Some("SUCCESS"), Some(&encoded));
    twice.append("ssl-client-cert", HeaderValue::from_str(&encoded).unwrap());
    let err = peer_certificate_from_ingress(&twice).unwrap_err();
    assert!(
        matches!(
            err,
            IngressError::Duplicate {
                name: "ssl-client-cert"
            }
        ),
        "{err:?}"
    );
}

#[test]
fn verify_ingress_request_requires_exactly_one_principal_header() {
    let leaf = rsa_leaf(&TestCa::new("clients"), 1);
    let encoded = utf8_percent_encode(&leaf.cert_pem, NON_ALPHANUMERIC).to_string();
    let headers = ingress_headers(Some("SUCCESS"), Some(&encoded));
    let err = verify_ingress_request::<Principal>(&headers, POLICY).unwrap_err();
    assert!(
        matches!(err, RequestPrincipalError::MissingPrincipal),
        "{err:?}"
    );

    let mut twice = headers.clone();
    twice.append(PRINCIPAL_HEADER, HeaderValue::from_static("a.b.c"));
    twice.append(PRINCIPAL_HEADER, HeaderValue::from_static("a.b.c"));
    let err = verify_ingress_request::<Principal>(&twice, POLICY).unwrap_err();
    assert!(
        matches!(err, RequestPrincipalError::MissingPrincipal),
        "{err:?}"
    );

    let mut garbage = headers;
    garbage.insert(PRINCIPAL_HEADER, HeaderValue::from_static("a.b"));
    let err = verify_ingress_request::<Principal>(&garbage, POLICY).unwrap_err();
    assert!(
        matches!(
            err,
            RequestPrincipalError::Verify(VerifyError::SegmentCount { found: 2 })
        ),
        "{err:?}"
    );
}

// ---------------------------------------------------------------------------------
// IngressVerifier: caps, trust anchors, validity and the allow-list.

fn encoded(pem: &str) -> String {
    utf8_percent_encode(pem, NON_ALPHANUMERIC).to_string()
}

fn forwarded_cert(pem: &str) -> HeaderMap {
    ingress_headers(Some("SUCCESS"), Some(&encoded(pem)))
}

/// The CA whose leaves carry SANs (issued with [`TestCa::issue`]).
fn san_ca() -> TestCa {
    TestCa::new("san clients")
}

fn san_leaf(ca: &TestCa, dns: &str) -> String {
    let mut params = rcgen::CertificateParams::new(vec![dns.to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "san leaf");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    ca.issue(&KeyPair::generate().unwrap(), &params)
}

#[test]
fn trust_anchors_refuse_self_made_and_expired_certificates() {
    let ca = TestCa::new("clients");
    let leaf = ca.client_leaf("svc-principal", 1);
    let anchored = IngressVerifier::new(POLICY)
        .with_trust_anchors([ca.der()])
        .unwrap();
    let got = anchored
        .peer_certificate(&forwarded_cert(&leaf.cert_pem))
        .unwrap();
    assert_eq!(got.der(), &leaf.der);

    // A self-made certificate: believed without anchors (the gap the anchors
    // close), refused with them.
    let own_key = KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["attacker".to_owned()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let own = params.self_signed(&own_key).unwrap().pem();
    IngressVerifier::new(POLICY)
        .peer_certificate(&forwarded_cert(&own))
        .unwrap();
    let err = anchored
        .peer_certificate(&forwarded_cert(&own))
        .unwrap_err();
    assert!(
        matches!(err, IngressError::Untrusted(webpki::Error::UnknownIssuer)),
        "{err:?}"
    );

    // Issued by another CA: refused.
    let other = TestCa::new("other").client_leaf("svc-principal", 2);
    let err = anchored
        .peer_certificate(&forwarded_cert(&other.cert_pem))
        .unwrap_err();
    assert!(
        matches!(err, IngressError::Untrusted(webpki::Error::UnknownIssuer)),
        "{err:?}"
    );

    // Issued by the anchor CA but expired: refused.
    let expired = ca.expired_client_leaf(3);
    let err = anchored
        .peer_certificate(&forwarded_cert(&expired.cert_pem))
        .unwrap_err();
    assert!(
        matches!(
            err,
            IngressError::Untrusted(webpki::Error::CertExpired { .. })
        ),
        "{err:?}"
    );

    // A server-only certificate from the anchor CA is not a client certificate.
    let server = ca.server_leaf();
    let err = anchored
        .peer_certificate(&forwarded_cert(&server.cert_pem))
        .unwrap_err();
    assert!(matches!(err, IngressError::Untrusted(_)), "{err:?}");
}

#[test]
fn allow_list_matches_sans_and_common_names() {
    let ca = san_ca();
    let leaf = san_leaf(&ca, "svc-a.ns.svc");
    let anchored = IngressVerifier::new(POLICY)
        .with_trust_anchors([ca.der()])
        .unwrap();
    anchored
        .clone()
        .with_allowed_peers(["svc-a.ns.svc"])
        .peer_certificate(&forwarded_cert(&leaf))
        .unwrap();
    anchored
        .clone()
        .with_allowed_peers(["san leaf"])
        .peer_certificate(&forwarded_cert(&leaf))
        .unwrap();
    let err = anchored
        .with_allowed_peers(["svc-b.ns.svc", "svc-a"])
        .peer_certificate(&forwarded_cert(&leaf))
        .unwrap_err();
    assert!(
        matches!(&err, IngressError::NotAllowed { subject } if subject.contains("san leaf")),
        "{err:?}"
    );
}

#[test]
fn oversized_and_forged_headers_are_refused_before_decoding() {
    let leaf = TestCa::new("clients").client_leaf("svc-principal", 1);
    let huge = "A".repeat(DEFAULT_MAX_CERT_HEADER_BYTES + 1);
    let err =
        peer_certificate_from_ingress(&ingress_headers(Some("SUCCESS"), Some(&huge))).unwrap_err();
    assert!(
        matches!(
            err,
            IngressError::TooLarge {
                name: "ssl-client-cert",
                ..
            }
        ),
        "{err:?}"
    );
    // A real certificate fits easily; a smaller configured cap refuses it.
    let headers = forwarded_cert(&leaf.cert_pem);
    peer_certificate_from_ingress(&headers).unwrap();
    let err = IngressVerifier::new(POLICY)
        .with_max_cert_header_bytes(100)
        .peer_certificate(&headers)
        .unwrap_err();
    assert!(matches!(err, IngressError::TooLarge { .. }), "{err:?}");

    // An oversized X-Principal is refused by size.
    let mut with_token = headers.clone();
    with_token.insert(
        PRINCIPAL_HEADER,
        HeaderValue::from_str(&"a".repeat(20_000)).unwrap(),
    );
    let err = verify_ingress_request::<Principal>(&with_token, POLICY).unwrap_err();
    assert!(
        matches!(
            err,
            RequestPrincipalError::Verify(VerifyError::TooLarge { len: 20_000, .. })
        ),
        "{err:?}"
    );

    // A forged log line in ssl-client-verify is escaped and cut.
    // (Header values cannot hold CR or LF; a tab and obs-text can.)
    let forged = format!("FAILED:x\tERROR forged {}", "B".repeat(500));
    let err = peer_certificate_from_ingress(&ingress_headers(Some(&forged), None)).unwrap_err();
    let shown = err.to_string();
    assert!(!shown.contains('\t'), "{shown}");
    assert!(shown.contains(r"\tERROR forged"), "{shown}");
    assert!(shown.len() < 200, "{shown}");
}
