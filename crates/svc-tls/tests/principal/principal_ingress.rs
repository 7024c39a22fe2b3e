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

use crate::support;

use std::time::Duration;

use kube_testbed::Testbed;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use rcgen::{KeyPair, RsaKeySize};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use support::nginx::Nginx;
use support::*;
use svc_tls::TrustVerifier;
use svc_tls::client::reqwest_builder;
use svc_tls::identity::IdentityResolver;
use svc_tls::origin::SecretRef;
use svc_tls::principal::{
    AlgorithmPolicy, CertificateError, PRINCIPAL_HEADER, PeerCertificate, Principal,
    PrincipalSigner, VerifyError, sign_with_key,
};
use svc_tls::receiving::{
    AllowedPeer, DEFAULT_MAX_CERT_HEADER_BYTES, IngressError, IngressVerifier,
    RequestPrincipalError,
};
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

/// A CA Secret as cert-manager's CA issuer writes it (`tls.crt` and `ca.crt`): what
/// the ingress's `auth-tls-secret` annotation names.
fn ca_secret(name: &str, ca: &TestCa) -> serde_json::Value {
    let pem = ca.pem();
    secret_with(
        name,
        "kubernetes.io/tls",
        &[("tls.crt", &pem), ("ca.crt", &pem)],
    )
}

/// The documented default: the forwarded certificate verified against the watched
/// CA Secret `name`.
async fn verified_by_secret(tb: &Testbed, name: &str) -> IngressVerifier {
    let trust = TrustVerifier::builder(tb.client(), SecretRef::new(NS, name))
        .settings(svc_tls::trust::TrustSettings::default().sync_timeout(Duration::from_secs(10)))
        .build()
        .await
        .unwrap();
    IngressVerifier::verified(trust)
        .with_policy(POLICY)
        .with_audiences([peer_url()])
}

/// Verified against fixed anchors (the CA that issued the test's leaves).
fn verified_by(ca: &TestCa) -> IngressVerifier {
    IngressVerifier::from_trust_anchors([ca.der()])
        .unwrap()
        .with_policy(POLICY)
        .with_audiences([peer_url()])
}

async fn resolver_for(tb: &Testbed, name: &str) -> IdentityResolver {
    IdentityResolver::builder(tb.client(), SecretRef::new(NS, name))
        .settings(
            svc_tls::identity::IdentitySettings::default().sync_timeout(Duration::from_secs(10)),
        )
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

    tb.upsert(ca_secret("clients-ca", &client_ca));
    // The documented constructor over a registry of watched Secrets (with metrics
    // when the feature is on: every request below is then counted).
    #[cfg(feature = "metrics")]
    let mut registry = prometheus_client::registry::Registry::default();
    #[cfg(feature = "metrics")]
    let watches = svc_tls::metrics::Metrics::new_watches(&mut registry);
    #[cfg(not(feature = "metrics"))]
    let watches = svc_tls::watch::WatchedObjects::new();
    // Strict: the principals below are signed for nginx's origin, this receiver's.
    let ingress = svc_tls::receiving::IngressBuilder::new(
        SecretRef::new(NS, "clients-ca"),
        svc_tls::receiving::ReceivingMode::Strict,
    )
    .audiences([nginx.url("/").parse().unwrap()])
    .sync_timeout(Duration::from_secs(10))
    .build_in(&watches, &tb.cluster_client())
    .await
    .unwrap()
    .with_policy(POLICY);
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
    let got: Principal = ingress.verify_request(&headers).unwrap();
    assert_eq!(got, who("alice"));
    assert_eq!(ingress.peer_certificate(&headers).unwrap().der(), &one.der);

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
    assert_eq!(ingress.peer_certificate(&headers).unwrap().der(), &two.der);
    let got: Principal = ingress.verify_request(&headers).unwrap();
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
    let err = ingress.verify_request::<Principal>(&headers).unwrap_err();
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
    let err = ingress.verify_request::<Principal>(&headers).unwrap_err();
    assert!(
        matches!(&err, RequestPrincipalError::Ingress(IngressError::NotVerified { value }) if value.starts_with("FAILED")),
        "{err:?}"
    );

    // What the metrics counted, behind the real ingress: two principals accepted,
    // two requests refused for the ingress's verdict, no header text in a label.
    #[cfg(feature = "metrics")]
    {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let roots = format!(
            "svc_tls_trust_roots{{source=\"secret\",name=\"unikorn/clients-ca\",cluster=\"{}\"}} 1\n",
            tb.cluster_client().cluster().label()
        );
        for expected in [
            "svc_tls_principal_verified_total{algorithm=\"PS512\",result=\"ok\"} 2\n",
            "svc_tls_principal_verified_total{algorithm=\"unknown\",result=\"certificate_not_verified\"} 2\n",
            roots.as_str(),
        ] {
            assert!(text.contains(expected), "{expected}in:\n{text}");
        }
        assert!(!text.contains("FAILED"), "{text}");
    }

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
    let ca = TestCa::new("clients");
    let ingress = verified_by(&ca);
    let leaf = rsa_leaf(&ca, 1);
    let encoded = utf8_percent_encode(&leaf.cert_pem, NON_ALPHANUMERIC).to_string();

    let ok = ingress.peer_certificate(&ingress_headers(Some("SUCCESS"), Some(&encoded)));
    assert_eq!(ok.unwrap().der(), &leaf.der);
    // Only newlines and spaces escaped ('+', '/' and '=' left as they are) reads the
    // same: '+' is never taken for a space.
    let light = leaf.cert_pem.replace('\n', "%0A").replace(' ', "%20");
    assert!(light.contains('+') || light.contains('/'));
    let ok = ingress.peer_certificate(&ingress_headers(Some("SUCCESS"), Some(&light)));
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
        let err = ingress.peer_certificate(&headers).unwrap_err();
        assert!(expected(&err), "{headers:?}: {err:?}");
    }

    // A repeated header is ambiguous (possibly injected): refused.
    let mut twice = ingress_headers(Some("SUCCESS"), Some(&encoded));
    twice.append("ssl-client-verify", HeaderValue::from_static("SUCCESS"));
    let err = ingress.peer_certificate(&twice).unwrap_err();
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
    let err = ingress.peer_certificate(&twice).unwrap_err();
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
    let ca = TestCa::new("clients");
    let ingress = verified_by(&ca);
    let leaf = rsa_leaf(&ca, 1);
    let encoded = utf8_percent_encode(&leaf.cert_pem, NON_ALPHANUMERIC).to_string();
    let headers = ingress_headers(Some("SUCCESS"), Some(&encoded));
    let err = ingress.verify_request::<Principal>(&headers).unwrap_err();
    assert!(
        matches!(err, RequestPrincipalError::MissingPrincipal),
        "{err:?}"
    );

    let mut twice = headers.clone();
    twice.append(PRINCIPAL_HEADER, HeaderValue::from_static("a.b.c"));
    twice.append(PRINCIPAL_HEADER, HeaderValue::from_static("a.b.c"));
    let err = ingress.verify_request::<Principal>(&twice).unwrap_err();
    assert!(
        matches!(err, RequestPrincipalError::MissingPrincipal),
        "{err:?}"
    );

    let mut garbage = headers;
    garbage.insert(PRINCIPAL_HEADER, HeaderValue::from_static("a.b"));
    let err = ingress.verify_request::<Principal>(&garbage).unwrap_err();
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
    let anchored = verified_by(&ca);
    let got = anchored
        .peer_certificate(&forwarded_cert(&leaf.cert_pem))
        .unwrap();
    assert_eq!(got.der(), &leaf.der);

    // A self-made certificate: believed only by the explicitly unverified opt-in
    // (the gap the anchors close), refused by the verified default.
    let own_key = KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["attacker".to_owned()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let own = params.self_signed(&own_key).unwrap().pem();
    IngressVerifier::unverified_headers_only()
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
fn allow_list_matches_typed_names() {
    let ca = san_ca();
    let leaf = san_leaf(&ca, "svc-a.ns.svc");
    let anchored = verified_by(&ca);
    anchored
        .clone()
        .with_allowed_peers([AllowedPeer::dns("svc-a.ns.svc")])
        .peer_certificate(&forwarded_cert(&leaf))
        .unwrap();
    anchored
        .clone()
        .with_allowed_peers([AllowedPeer::dns("SVC-A.ns.svc")])
        .peer_certificate(&forwarded_cert(&leaf))
        .unwrap();
    anchored
        .clone()
        .with_allowed_peers([AllowedPeer::common_name("san leaf")])
        .peer_certificate(&forwarded_cert(&leaf))
        .unwrap();
    // A name of one kind never matches a name of another kind.
    let err = anchored
        .clone()
        .with_allowed_peers([
            AllowedPeer::common_name("svc-a.ns.svc"),
            AllowedPeer::dns("san leaf"),
            AllowedPeer::dns("svc-b.ns.svc"),
            AllowedPeer::uri("svc-a.ns.svc"),
        ])
        .peer_certificate(&forwarded_cert(&leaf))
        .unwrap_err();
    assert!(
        matches!(&err, IngressError::NotAllowed { subject } if subject.contains("san leaf")),
        "{err:?}"
    );

    // A SPIFFE ID is a URI SAN, compared exactly.
    let spiffe = "spiffe://example.org/ns/unikorn/sa/region";
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.subject_alt_names = vec![rcgen::SanType::URI(spiffe.try_into().unwrap())];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let svid = ca.issue(&KeyPair::generate().unwrap(), &params);
    anchored
        .clone()
        .with_allowed_peers([spiffe.parse::<AllowedPeer>().unwrap()])
        .peer_certificate(&forwarded_cert(&svid))
        .unwrap();
    let err = anchored
        .clone()
        .with_allowed_peers([AllowedPeer::uri(format!("{spiffe}/x"))])
        .peer_certificate(&forwarded_cert(&svid))
        .unwrap_err();
    assert!(matches!(err, IngressError::NotAllowed { .. }), "{err:?}");
}

/// The DN-injection case: a certificate whose common name is the text
/// `svc, O=Acme` used to match the entry `CN=svc, O=Acme` (the rendered subject DN
/// was compared). Typed names keep it out; a DN text is not an entry at all.
#[test]
fn a_common_name_holding_dn_text_is_not_the_peer_it_spells() {
    let ca = san_ca();
    let issue = |subject: &[(rcgen::DnType, &str)]| {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (kind, value) in subject {
            params.distinguished_name.push(kind.clone(), *value);
        }
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        ca.issue(&KeyPair::generate().unwrap(), &params)
    };
    let real = issue(&[
        (rcgen::DnType::CommonName, "svc"),
        (rcgen::DnType::OrganizationName, "Acme"),
    ]);
    let hostile = issue(&[(rcgen::DnType::CommonName, "svc, O=Acme")]);
    let allowed = verified_by(&ca).with_allowed_peers([AllowedPeer::common_name("svc")]);
    allowed.peer_certificate(&forwarded_cert(&real)).unwrap();
    let err = allowed
        .peer_certificate(&forwarded_cert(&hostile))
        .unwrap_err();
    assert!(matches!(err, IngressError::NotAllowed { .. }), "{err:?}");

    // Configuration text names its kind; the DN text of the old entry is refused.
    assert!("CN=svc, O=Acme".parse::<AllowedPeer>().is_err());
    assert_eq!(
        "cn:svc".parse::<AllowedPeer>().unwrap(),
        AllowedPeer::common_name("svc")
    );
    assert_eq!(
        "dns:svc.ns".parse::<AllowedPeer>().unwrap(),
        AllowedPeer::dns("svc.ns")
    );
    // Even an entry spelling the hostile common name as a DN matches nothing.
    let err = verified_by(&ca)
        .with_allowed_peers([AllowedPeer::common_name("CN=svc, O=Acme")])
        .peer_certificate(&forwarded_cert(&hostile))
        .unwrap_err();
    assert!(matches!(err, IngressError::NotAllowed { .. }), "{err:?}");
}

/// The attack of the issue: a self-signed certificate in the forwarded header and a
/// principal signed with its key. The verified default refuses it; only the
/// explicitly unverified opt-in believes it.
#[test]
fn a_self_signed_certificate_with_its_own_token_is_no_principal() {
    let ca = TestCa::new("clients");
    let own_key = KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["svc-principal".to_owned()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let own = params.self_signed(&own_key).unwrap().pem();
    let signing = rustls::crypto::aws_lc_rs::sign::any_supported_type(
        &rustls_pki_types::PrivateKeyDer::try_from(own_key.serialize_der()).unwrap(),
    )
    .unwrap();
    let token = sign_with_key(
        signing.as_ref(),
        &peer_url(),
        &who("root"),
        AlgorithmPolicy::default(),
    )
    .unwrap();
    let mut headers = forwarded_cert(&own);
    headers.insert(PRINCIPAL_HEADER, token.header_value());

    let err = verified_by(&ca)
        .verify_request::<Principal>(&headers)
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestPrincipalError::Ingress(IngressError::Untrusted(webpki::Error::UnknownIssuer))
        ),
        "{err:?}"
    );
    let believed: Principal = IngressVerifier::unverified_headers_only()
        .with_audiences([peer_url()])
        .verify_request(&headers)
        .unwrap();
    assert_eq!(believed, who("root"));
}

/// The anchors come from the watched CA Secret through the trust seam: a CA
/// rotation in the Secret is followed on the next request, with no restart and no
/// new verifier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watched_ca_secret_is_followed_without_a_restart() {
    let tb = Testbed::start().await;
    let (old_ca, new_ca) = (TestCa::new("clients old"), TestCa::new("clients new"));
    tb.upsert(ca_secret("rotating-ca", &old_ca));
    let ingress = verified_by_secret(&tb, "rotating-ca").await;

    let from_old = old_ca.client_leaf("svc-principal", 1);
    let from_new = new_ca.client_leaf("svc-principal", 2);
    ingress
        .peer_certificate(&forwarded_cert(&from_old.cert_pem))
        .unwrap();
    let err = ingress
        .peer_certificate(&forwarded_cert(&from_new.cert_pem))
        .unwrap_err();
    assert!(
        matches!(err, IngressError::Untrusted(webpki::Error::UnknownIssuer)),
        "{err:?}"
    );

    tb.upsert(ca_secret("rotating-ca", &new_ca));
    poll_until("the new CA is used", || {
        ingress
            .peer_certificate(&forwarded_cert(&from_new.cert_pem))
            .is_ok()
    })
    .await;
    let err = ingress
        .peer_certificate(&forwarded_cert(&from_old.cert_pem))
        .unwrap_err();
    assert!(
        matches!(err, IngressError::Untrusted(webpki::Error::UnknownIssuer)),
        "{err:?}"
    );
}

#[test]
fn oversized_and_forged_headers_are_refused_before_decoding() {
    let ca = TestCa::new("clients");
    let ingress = verified_by(&ca);
    let leaf = ca.client_leaf("svc-principal", 1);
    let huge = "A".repeat(DEFAULT_MAX_CERT_HEADER_BYTES + 1);
    let err = ingress
        .peer_certificate(&ingress_headers(Some("SUCCESS"), Some(&huge)))
        .unwrap_err();
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
    ingress.peer_certificate(&headers).unwrap();
    let err = ingress
        .clone()
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
    let err = ingress
        .verify_request::<Principal>(&with_token)
        .unwrap_err();
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
    let err = ingress
        .peer_certificate(&ingress_headers(Some(&forged), None))
        .unwrap_err();
    let shown = err.to_string();
    assert!(!shown.contains('\t'), "{shown}");
    assert!(shown.contains(r"\tERROR forged"), "{shown}");
    assert!(shown.len() < 200, "{shown}");
}

/// A 40 KiB hostile `ssl-client-cert` (a PEM "section start" line with a forged log
/// record and escape sequences in it): the error names the header, and its whole
/// chain, as logged through `svc_tls::excerpt::chain`, is cut and escaped. Without
/// the cut the chain quotes the line (well over 40 KiB).
#[test]
fn a_hostile_certificate_header_reaches_a_log_only_as_a_short_escaped_excerpt() {
    let ca = TestCa::new("clients");
    let ingress = verified_by(&ca);
    let hostile = format!(
        "-----BEGIN {}\t2026-12-03T00:00:00Z ERROR forged record\u{1b}[2J",
        "A".repeat(40 * 1024)
    );
    let headers = forwarded_cert(&hostile);
    let cert_len = headers["ssl-client-cert"].len();
    assert!(cert_len > 40 * 1024 && cert_len <= DEFAULT_MAX_CERT_HEADER_BYTES);
    let err = ingress.peer_certificate(&headers).unwrap_err();
    assert!(
        matches!(err, IngressError::Certificate(CertificateError::Pem(_))),
        "{err:?}"
    );
    let mut raw = String::new();
    let mut layer: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    while let Some(e) = layer {
        raw.push_str(&e.to_string());
        layer = e.source();
    }
    assert!(raw.len() > 40 * 1024, "the hazard: {}", raw.len());

    let logged = svc_tls::excerpt::chain(&err);
    assert!(
        logged.chars().count() <= svc_tls::excerpt::LOGGED_CHAIN_CHARS + 1,
        "{} chars",
        logged.chars().count()
    );
    assert!(
        logged.starts_with("ssl-client-cert header holds no usable certificate"),
        "{logged}"
    );
    assert!(
        !logged.contains('\n') && !logged.contains('\u{1b}'),
        "{logged}"
    );
}

/// The URL the tokens here are signed for (their audience is its origin).
fn peer_url() -> reqwest::Url {
    reqwest::Url::parse("https://peer.svc.test/api").unwrap()
}
