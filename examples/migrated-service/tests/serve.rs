//! The migrated service serves mTLS itself (`--serve-bind-address`): it presents the
//! identity it calls with, verifies callers against the client CA Secret, and takes
//! the caller from the connection: a signed principal of the connection's key is
//! accepted, an unsigned one and forged forwarded-certificate headers get nothing,
//! and a caller without a certificate is refused at the handshake.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Running, caller, free_port, signed, write_kubeconfig};
use kube_testbed::Testbed;
use platform_client_compat::tls::principal::PRINCIPAL_HEADER;
use test_support::pki::{Leaf, TestCa};

const NS: &str = "unikorn";

/// The service's own identity: a leaf for 127.0.0.1 good for both halves (it calls
/// with it and serves with it).
fn both_ways_leaf(ca: &TestCa) -> Leaf {
    let mut params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "migrated-service");
    params.serial_number = Some(rcgen::SerialNumber::from(5u64));
    params.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    test_support::pki::valid_around_now(
        &mut params,
        Duration::from_secs(3600),
        Duration::from_secs(3600),
    );
    let key = rcgen::KeyPair::generate().unwrap();
    let cert_pem = ca.issue(&key, &params);
    let der = rustls_pki_types::CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap();
    Leaf {
        cert_pem,
        key_pem: key.serialize_pem(),
        der,
        serial: 5,
    }
}

use rustls_pki_types::pem::PemObject as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_serves_mtls_and_knows_its_caller_from_the_connection() {
    let tb = Testbed::start().await;
    let (platform, clients) = (TestCa::new("platform"), TestCa::new("platform clients"));
    let own = both_ways_leaf(&platform);
    tb.upsert(test_support::secret::tls_secret(
        NS,
        "svc-certificate",
        &own.cert_pem,
        &own.key_pem,
    ));
    tb.upsert(test_support::secret::secret_with(
        NS,
        "svc-client-ca",
        "Opaque",
        &[("ca.crt", &clients.pem())],
    ));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let port = free_port();
    let metrics_port = free_port();
    let audience = format!("https://127.0.0.1:{port}/");
    let _service = Running(
        Command::new(env!("CARGO_BIN_EXE_migrated-service"))
            .args([
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--client-certificate-namespace={NS}"),
                "--client-certificate-name=svc-certificate".to_owned(),
                "--identity-host=https://identity.invalid".to_owned(),
                "--requests=0".to_owned(),
                format!("--serve-bind-address=127.0.0.1:{port}"),
                format!("--client-ca-secret-namespace={NS}"),
                "--client-ca-secret-name=svc-client-ca".to_owned(),
                format!("--principal-audience={audience}"),
                "--serve-for=5m".to_owned(),
                "--request-interval=1h".to_owned(),
                format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
            ])
            .env_remove("KUBECONFIG")
            .env("HOME", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    test_support::poll_until("the service listens", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
    .await;
    let url = format!("https://127.0.0.1:{port}/api/v1/whoami");
    let region = clients.client_leaf("region", 2);
    let http = caller(&platform, Some(&region));

    let response = http
        .get(&url)
        .header(PRINCIPAL_HEADER, signed(&region, &audience, "alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        response.text().await.unwrap().trim(),
        "principal actor=alice caller=region"
    );

    // Issue 49's forged request, made directly: another service's certificate in
    // ingress-nginx's headers and an unsigned principal naming admin.
    let victim = clients.client_leaf("admin-service", 3);
    let escaped: String = victim
        .cert_pem
        .bytes()
        .map(|b| format!("%{b:02X}"))
        .collect();
    let unsigned = base64::Engine::encode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        br#"{"actor":"admin"}"#,
    );
    let response = http
        .get(&url)
        .header("ssl-client-verify", "SUCCESS")
        .header("ssl-client-cert", escaped)
        .header(PRINCIPAL_HEADER, unsigned)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status().as_u16(),
        401,
        "the forged request was served"
    );
    // A principal signed by the victim's key does not match this connection.
    let response = http
        .get(&url)
        .header(PRINCIPAL_HEADER, signed(&victim, &audience, "admin"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
    // No certificate: refused at the handshake.
    let anonymous = caller(&platform, None);
    assert!(anonymous.get(&url).send().await.is_err());
    // And counted on the listener's series, by reason.
    let refused =
        r#"svc_tls_listener_handshake_failures_total{listener="https",reason="no_certificate"}"#;
    test_support::poll_until("the refused caller counted", || {
        scrape(metrics_port).is_some_and(|text| sample(&text, refused).is_some_and(|n| n >= 1.0))
    })
    .await;
}

/// `/metrics` of the service on `port`, `None` when nothing answers 200.
fn scrape(port: u16) -> Option<String> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// The value of the series `series` (name and labels as written) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        line.strip_prefix(series)?
            .strip_prefix(' ')?
            .split(' ')
            .next()?
            .parse()
            .ok()
    })
}
