//! The serving half against real clients: our rustls client, curl (OpenSSL), and a
//! raw TLS client that reads the server's leaf; the identity and the client CA in
//! Secrets of the API emulator, rotated under the server.
//!
//! - the caller is taken from the connection's verified certificate; the headers a
//!   gateway forwards a certificate in are removed and counted, and a request whose
//!   connection verified no certificate has no principal whatever its headers say;
//! - a caller from another CA, or none where one is required, is refused;
//! - a signed principal is verified against the connection's leaf, and one signed by
//!   another key is refused;
//! - an identity rotation reaches new handshakes without a failed request, and a
//!   client-CA change refuses the removed CA's callers and closes their established
//!   connections.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod gateways;
mod go_peer;
mod rotation;
mod sni;
mod spiffe;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use kube_testbed::Testbed;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use svc_tls::SecretRef;
use svc_tls::identity::IdentityResolver;
use svc_tls::principal::{AlgorithmPolicy, Principal, VerifyOptions};
use svc_tls::serving::{Caller, ClientAuth, ServerTls, request_principal};
use svc_tls::trust::TrustVerifier;
use test_support::pki::{Leaf, TestCa};
use test_support::secret::tls_secret;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

pub(crate) const NS: &str = "unikorn";
pub(crate) const SERVER_IDENTITY: &str = "identity-server-certificate";
pub(crate) const CLIENT_CA: &str = "identity-client-ca";
pub(crate) const AUDIENCE: &str = "https://identity.svc.test";

/// A running mTLS server over the emulator's Secrets.
pub(crate) struct Served {
    pub(crate) tb: Testbed,
    pub(crate) server_ca: TestCa,
    pub(crate) client_ca: TestCa,
    pub(crate) tls: ServerTls,
    pub(crate) port: u16,
    _task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self._task.abort();
    }
}

/// A server leaf for 127.0.0.1 and localhost with `serial`.
pub(crate) fn server_leaf(ca: &TestCa, serial: u64) -> Leaf {
    server_leaf_for(ca, &["127.0.0.1", "localhost"], serial)
}

/// A server leaf naming `names`, with `serial`.
pub(crate) fn server_leaf_for(ca: &TestCa, names: &[&str], serial: u64) -> Leaf {
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
            .unwrap();
    params.serial_number = Some(rcgen::SerialNumber::from(serial));
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    test_support::pki::valid_around_now(
        &mut params,
        Duration::from_secs(3600),
        Duration::from_secs(3600),
    );
    let key = rcgen::KeyPair::generate().unwrap();
    let cert_pem = ca.issue(&key, &params);
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap();
    Leaf {
        cert_pem,
        key_pem: key.serialize_pem(),
        der,
        serial,
    }
}

/// The handlers' one replay cache (tokens carry random ids: the tests' never collide).
static REPLAY: std::sync::LazyLock<Arc<svc_tls::principal::ReplayCache>> =
    std::sync::LazyLock::new(|| Arc::new(svc_tls::principal::ReplayCache::default()));

/// The handler: who called (from the connection), the principal it signed, and
/// whether any forwarded-certificate header reached it.
pub(crate) async fn whoami_handler(
    request: http::Request<hyper::body::Incoming>,
) -> Result<http::Response<Full<Bytes>>, std::convert::Infallible> {
    let caller = request.extensions().get::<Caller>().cloned();
    let options = VerifyOptions::new(AlgorithmPolicy::Ps512OrEcdsa)
        .with_audiences([AUDIENCE.parse().unwrap()])
        .with_replay_cache(REPLAY.clone());
    let principal = match request_principal::<Principal, _>(&request, &options) {
        Ok(p) => format!("ok:{}", p.actor.unwrap_or_default()),
        Err(e) => format!("refused:{e:?}"),
    };
    let forwarded = svc_tls::serving::FORWARDED_CERTIFICATE_HEADERS
        .iter()
        .any(|name| request.headers().contains_key(*name));
    let body = format!(
        "serial={} via={} spiffe={} principal={principal} forwarded={forwarded}",
        caller.as_ref().map_or("none", |c| c.serial()),
        caller
            .as_ref()
            .and_then(|c| c.via().map(|g| g.serial().to_owned()))
            .unwrap_or_else(|| "none".to_owned()),
        caller
            .as_ref()
            .and_then(|c| c.spiffe_id().map(ToString::to_string))
            .unwrap_or_default(),
    );
    Ok(http::Response::new(Full::new(Bytes::from(body))))
}

pub(crate) async fn serve(client_auth: ClientAuth) -> Served {
    serve_with(client_auth, None).await
}

/// A server as [`serve`], whose clients CA also issued the gateways' certificates
/// (`gateways`: which of them may forward their caller's).
pub(crate) async fn serve_with(
    client_auth: ClientAuth,
    gateways: Option<svc_tls::serving::Gateways>,
) -> Served {
    let tb = Testbed::start().await;
    let server_ca = TestCa::new("server CA");
    let client_ca = TestCa::new("client CA");
    let leaf = server_leaf(&server_ca, 1);
    tb.upsert(tls_secret(
        NS,
        SERVER_IDENTITY,
        &leaf.cert_pem,
        &leaf.key_pem,
    ));
    tb.upsert(tls_secret(
        NS,
        CLIENT_CA,
        &client_ca.pem(),
        &server_ca.client_leaf("unused", 99).key_pem,
    ));
    let identity = IdentityResolver::builder(tb.client(), SecretRef::new(NS, SERVER_IDENTITY))
        .build()
        .await
        .unwrap();
    let callers = TrustVerifier::builder(tb.client(), SecretRef::new(NS, CLIENT_CA))
        .build()
        .await
        .unwrap();
    let mut builder = ServerTls::builder(identity)
        .callers(callers)
        .client_auth(client_auth);
    if let Some(gateways) = gateways {
        builder = builder.gateways(gateways);
    }
    let tls = builder.build().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn({
        let tls = tls.clone();
        async move {
            svc_tls::serving::serve(listener, tls, tower::service_fn(whoami_handler))
                .await
                .unwrap();
        }
    });
    Served {
        tb,
        server_ca,
        client_ca,
        tls,
        port,
        _task: task,
    }
}

/// A caller's files for an outside client (Go, curl): `tls.crt`, `tls.key` and the
/// server CA as `ca.crt`, written into `dir`.
pub(crate) fn caller_files(
    dir: &std::path::Path,
    leaf: &Leaf,
    server_ca: &TestCa,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    (
        write("tls.crt", &leaf.cert_pem),
        write("tls.key", &leaf.key_pem),
        write("ca.crt", &server_ca.pem()),
    )
}

/// A raw TLS client trusting `server_ca`, presenting `leaf` when given.
pub(crate) fn client_config(server_ca: &TestCa, leaf: Option<&Leaf>) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(svc_tls::material::crypto_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(server_ca.roots());
    let config = match leaf {
        Some(leaf) => builder
            .with_client_auth_cert(
                vec![leaf.der.clone()],
                PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    Arc::new(config)
}

/// A connection's server leaf serial and the answer to one request on it.
pub(crate) struct Answer {
    pub(crate) server_serial: u64,
    pub(crate) body: String,
}

/// One HTTP/1.1 request on a new connection, with `headers`.
pub(crate) async fn request(
    port: u16,
    config: Arc<rustls::ClientConfig>,
    headers: &[(&str, &str)],
) -> std::io::Result<Answer> {
    let mut stream = connect(port, config).await?;
    let server_serial = server_serial(&stream);
    let body = exchange(&mut stream, headers, true).await?;
    Ok(Answer {
        server_serial,
        body,
    })
}

pub(crate) type Stream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

pub(crate) async fn connect(
    port: u16,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<Stream> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await?;
    // TLS 1.3 sends the server's verdict on the client certificate after the
    // client's Finished: a refusal shows on the first read or write.
    stream.flush().await?;
    Ok(stream)
}

pub(crate) fn server_serial(stream: &Stream) -> u64 {
    let der = &stream.get_ref().1.peer_certificates().unwrap()[0];
    let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
    cert.tbs_certificate
        .serial
        .to_u64_digits()
        .first()
        .copied()
        .unwrap_or(0)
}

/// One request on `stream`; `close` asks the server to close after answering.
pub(crate) async fn exchange(
    stream: &mut Stream,
    headers: &[(&str, &str)],
    close: bool,
) -> std::io::Result<String> {
    let mut text = String::from("GET /whoami HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    if close {
        text.push_str("Connection: close\r\n");
    }
    text.push_str("\r\n");
    stream.write_all(text.as_bytes()).await?;
    read_response(stream).await
}

/// Reads one response with a `content-length` body.
async fn read_response(stream: &mut Stream) -> std::io::Result<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return Ok(text[end + 4..end + 4 + length].to_owned());
            }
        }
    }
}

/// A principal for `actor`, signed with `leaf`'s key for this service's audience.
pub(crate) fn signed_principal(leaf: &Leaf, actor: &str) -> String {
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let key = svc_tls::material::crypto_provider()
        .key_provider
        .load_private_key(key)
        .unwrap();
    let principal = Principal {
        actor: Some(actor.to_owned()),
        ..Principal::default()
    };
    let to: url::Url = format!("{AUDIENCE}/api/v1/whoami").parse().unwrap();
    svc_tls::principal::sign_with_key(key.as_ref(), &to, &principal, AlgorithmPolicy::Ps512OrEcdsa)
        .unwrap()
        .into_string()
}

/// The forged request of issue 49: a caller holding no key names a platform
/// service's certificate in ingress-nginx's headers and an unsigned principal.
pub(crate) fn forged_headers(victim: &Leaf) -> Vec<(&'static str, String)> {
    let escaped: String =
        percent_encoding::utf8_percent_encode(&victim.cert_pem, percent_encoding::NON_ALPHANUMERIC)
            .to_string();
    let unsigned = base64::Engine::encode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        br#"{"actor":"admin"}"#,
    );
    vec![
        ("ssl-client-verify", "SUCCESS".to_owned()),
        ("ssl-client-cert", escaped),
        (
            "x-forwarded-client-cert",
            "Hash=00;Subject=\"CN=admin\"".to_owned(),
        ),
        ("X-Principal", unsigned),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_is_its_connections_certificate_and_forwarded_headers_never_reach_a_handler() {
    let s = serve(ClientAuth::Required).await;
    let leaf = s.client_ca.client_leaf("region", 7);
    let victim = s.client_ca.client_leaf("admin-service", 8);
    let forged = forged_headers(&victim);
    let headers: Vec<(&str, &str)> = forged.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let answer = request(s.port, client_config(&s.server_ca, Some(&leaf)), &headers)
        .await
        .unwrap();
    assert_eq!(answer.server_serial, 1);
    assert!(answer.body.starts_with("serial=07 "), "{}", answer.body);
    assert!(
        answer.body.contains("principal=refused:Verify"),
        "the unsigned principal was accepted: {}",
        answer.body
    );
    assert!(answer.body.ends_with("forwarded=false"), "{}", answer.body);
    assert_eq!(s.tls.removed_forwarded_headers(), 1);

    // Signed with the connection's own key: accepted. Signed with another
    // certificate's key (the victim's, as if stolen from a header): refused.
    let own = signed_principal(&leaf, "alice");
    let answer = request(
        s.port,
        client_config(&s.server_ca, Some(&leaf)),
        &[("X-Principal", own.as_str())],
    )
    .await
    .unwrap();
    assert!(
        answer.body.contains("principal=ok:alice"),
        "{}",
        answer.body
    );
    let other = signed_principal(&victim, "admin");
    let answer = request(
        s.port,
        client_config(&s.server_ca, Some(&leaf)),
        &[("X-Principal", other.as_str())],
    )
    .await
    .unwrap();
    assert!(
        answer.body.contains("principal=refused:Verify"),
        "a principal signed by another key was accepted: {}",
        answer.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_without_a_certificate_or_from_another_ca_is_refused_where_one_is_required() {
    let s = serve(ClientAuth::Required).await;
    let none = request(s.port, client_config(&s.server_ca, None), &[]).await;
    assert!(
        none.is_err(),
        "served without a client certificate: {:?}",
        none.ok().map(|a| a.body)
    );
    let stranger = TestCa::new("stranger").client_leaf("region", 7);
    let other = request(s.port, client_config(&s.server_ca, Some(&stranger)), &[]).await;
    assert!(
        other.is_err(),
        "served a caller of another CA: {:?}",
        other.ok().map(|a| a.body)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_a_certificate_is_optional_a_caller_without_one_has_no_principal() {
    let s = serve(ClientAuth::Optional).await;
    let victim = s.client_ca.client_leaf("admin-service", 8);
    let forged = forged_headers(&victim);
    let mut headers: Vec<(&str, &str)> = forged.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let signed = signed_principal(&victim, "admin");
    headers.retain(|(name, _)| *name != "X-Principal");
    headers.push(("X-Principal", signed.as_str()));
    let answer = request(s.port, client_config(&s.server_ca, None), &headers)
        .await
        .unwrap();
    assert!(
        answer.body.starts_with("serial=none ")
            && answer.body.contains("principal=refused:NoCaller"),
        "{}",
        answer.body
    );
    assert!(answer.body.ends_with("forwarded=false"), "{}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_with_a_client_certificate_is_served_as_its_caller() {
    let s = serve(ClientAuth::Required).await;
    let leaf = s.client_ca.client_leaf("curl-caller", 0x2a);
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, ca) = caller_files(dir.path(), &leaf, &s.server_ca);
    let url = format!("https://127.0.0.1:{}/whoami", s.port);
    let curl = move |with_cert: bool| {
        let mut command = std::process::Command::new("curl");
        command
            .args(["-sS", "--max-time", "20", "--cacert"])
            .arg(&ca);
        if with_cert {
            command.arg("--cert").arg(&cert).arg("--key").arg(&key);
        }
        command.arg(&url).output().unwrap()
    };
    let out = tokio::task::spawn_blocking(move || {
        let _dir = dir;
        (curl(true), curl(false))
    })
    .await
    .unwrap();
    assert!(
        out.0.status.success(),
        "{}",
        String::from_utf8_lossy(&out.0.stderr)
    );
    let body = String::from_utf8_lossy(&out.0.stdout);
    assert!(body.starts_with("serial=2a "), "{body}");
    assert!(
        !out.1.status.success(),
        "curl without a certificate was served"
    );
}

/// A signed principal captured on its way (the same token sent again, on the
/// caller's own connection): refused the second time; a signed token without a
/// `jti` (an older or a Go sender's) is refused by a receiver that checks replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_principal_is_accepted_once() {
    let s = serve(ClientAuth::Required).await;
    let leaf = s.client_ca.client_leaf("region", 7);
    let token = signed_principal(&leaf, "alice");
    let config = client_config(&s.server_ca, Some(&leaf));
    let first = request(s.port, config.clone(), &[("X-Principal", token.as_str())])
        .await
        .unwrap();
    assert!(first.body.contains("principal=ok:alice"), "{}", first.body);
    let again = request(s.port, config.clone(), &[("X-Principal", token.as_str())])
        .await
        .unwrap();
    assert!(
        again.body.contains("principal=refused:Verify(Replayed)"),
        "a replayed token was accepted: {}",
        again.body
    );
    // The header without its jti, re-signed with the caller's own key.
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let key = svc_tls::material::crypto_provider()
        .key_provider
        .load_private_key(key)
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let b64 = |bytes: &[u8]| {
        base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, bytes)
    };
    let signer = key
        .choose_scheme(&[rustls::SignatureScheme::ECDSA_NISTP256_SHA256])
        .unwrap();
    let input = format!(
        "{}.{}",
        b64(format!(
            r#"{{"alg":"ES256","iat":{now},"exp":{},"aud":"{AUDIENCE}"}}"#,
            now + 60
        )
        .as_bytes()),
        b64(br#"{"actor":"mallory"}"#)
    );
    let der = signer.sign(input.as_bytes()).unwrap();
    let (r, s_) = raw_ecdsa(&der);
    let mut raw = r;
    raw.extend(s_);
    let untagged = format!("{input}.{}", b64(&raw));
    let answer = request(s.port, config, &[("X-Principal", untagged.as_str())])
        .await
        .unwrap();
    assert!(
        answer.body.contains("principal=refused:Verify(MissingJti)"),
        "{}",
        answer.body
    );
}

/// An ECDSA DER signature's r and s, 32 bytes each.
fn raw_ecdsa(der: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (_, sequence) = x509_parser::der_parser::parse_der(der).unwrap();
    let items = sequence.as_sequence().unwrap();
    let fixed = |bytes: &[u8]| {
        let bytes = bytes.strip_prefix(&[0]).unwrap_or(bytes);
        let mut out = vec![0u8; 32 - bytes.len()];
        out.extend_from_slice(bytes);
        out
    };
    (
        fixed(items[0].as_slice().unwrap()),
        fixed(items[1].as_slice().unwrap()),
    )
}
