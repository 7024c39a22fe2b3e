//! A real handshake to a peer with the client configuration the service builds
//! (`PeerTls::config`: its identity resolver, its trust, TLS 1.3, its key exchange
//! order), then one `GET /` to learn whether the peer accepted the client
//! certificate: in TLS 1.3 a server refuses a client certificate after the client's
//! handshake has completed, with an alert the client reads on its first read (rustls,
//! Go); nginx's `ssl_verify_client on` instead answers `400` with "The SSL
//! certificate error" or "No required SSL certificate was sent".

use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use url::{Host, Url};

use super::cert::describe;
use super::tls_problem;
use crate::report::{PeerReport, Problem};

/// What nginx answers when it refuses a client certificate.
const NGINX_REFUSALS: [&str; 2] = [
    "The SSL certificate error",
    "No required SSL certificate was sent",
];

/// Connects to `url` with `config` and fills the handshake's part of `report`.
pub async fn handshake(
    mut config: ClientConfig,
    url: &Url,
    timeout: Duration,
    report: &mut PeerReport,
) {
    // The probe speaks HTTP/1.1 whatever the service offers: acceptance of the
    // client certificate does not depend on it.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let (host, name) = match url.host() {
        Some(Host::Domain(domain)) => (domain.to_owned(), ServerName::try_from(domain.to_owned())),
        Some(Host::Ipv4(ip)) => (
            ip.to_string(),
            Ok(ServerName::from(std::net::IpAddr::V4(ip))),
        ),
        Some(Host::Ipv6(ip)) => (
            ip.to_string(),
            Ok(ServerName::from(std::net::IpAddr::V6(ip))),
        ),
        None => return fail(report, "NoHost", format!("{url} has no host")),
    };
    let Ok(name) = name else {
        return fail(
            report,
            "InvalidHost",
            format!("{host} is not a valid server name"),
        );
    };
    let port = url.port_or_known_default().unwrap_or(443);
    let tcp = match tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), port))).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(error)) => return fail(report, "ConnectFailed", format!("{host}:{port}: {error}")),
        Err(_) => {
            return fail(
                report,
                "Timeout",
                format!("{host}:{port}: no connection within {timeout:?}"),
            );
        }
    };
    let connector = TlsConnector::from(Arc::new(config));
    let mut tls = match tokio::time::timeout(timeout, connector.connect(name, tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => return report.error = Some(io_problem(&error, "handshake")),
        Err(_) => {
            return fail(
                report,
                "Timeout",
                format!("{host}:{port}: no handshake within {timeout:?}"),
            );
        }
    };
    {
        let (_, conn) = tls.get_ref();
        report.tls_version = conn.protocol_version().map(|v| format!("{v:?}"));
        report.key_exchange_group = conn
            .negotiated_key_exchange_group()
            .map(|g| format!("{:?}", g.name()));
        report.alpn = conn
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        report.server_chain = conn
            .peer_certificates()
            .unwrap_or_default()
            .iter()
            .filter_map(|c| describe(c))
            .collect();
    }
    let request = format!(
        "GET / HTTP/1.1\r\nHost: {}\r\nUser-Agent: svc-tls-inspect\r\nConnection: close\r\n\r\n",
        url.host_str().unwrap_or_default()
    );
    let answer = tokio::time::timeout(timeout, async {
        tls.write_all(request.as_bytes()).await?;
        let mut buffer = vec![0u8; 4096];
        let mut filled = 0;
        while filled < buffer.len() {
            let n = tls.read(&mut buffer[filled..]).await?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        buffer.truncate(filled);
        Ok::<_, std::io::Error>(buffer)
    })
    .await;
    match answer {
        Err(_) => fail(
            report,
            "Timeout",
            format!("{host}:{port}: no answer within {timeout:?}"),
        ),
        Ok(Err(error)) => {
            let problem = io_problem(&error, "first read");
            let refused = error
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .is_some_and(|e| matches!(e, rustls::Error::AlertReceived(_)));
            report.client_certificate_accepted = refused.then_some(false);
            report.error = Some(problem);
        }
        Ok(Ok(bytes)) => judge_answer(&bytes, report),
    }
}

fn judge_answer(bytes: &[u8], report: &mut PeerReport) {
    let text = String::from_utf8_lossy(bytes);
    let status = text
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..5))
        .and_then(|code| code.parse::<u16>().ok());
    let Some(status) = status else {
        return fail(
            report,
            "NoAnswer",
            "the peer closed the connection without an HTTP answer".to_owned(),
        );
    };
    report.http_status = Some(status);
    if let Some(refusal) = NGINX_REFUSALS.iter().find(|r| text.contains(**r)) {
        report.client_certificate_accepted = Some(false);
        report.error = Some(Problem {
            kind: "ClientCertificateRefused".to_owned(),
            message: format!("the peer answered {status}: {refusal}"),
        });
        return;
    }
    report.client_certificate_accepted = Some(true);
    report.ok = true;
}

fn io_problem(error: &std::io::Error, during: &str) -> Problem {
    match error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(tls) => {
            let mut problem = tls_problem(tls);
            problem.message = format!("{during}: {}", problem.message);
            problem
        }
        None => Problem {
            kind: format!("{:?}", error.kind()),
            message: format!("{during}: {error}"),
        },
    }
}

fn fail(report: &mut PeerReport, kind: &str, message: String) {
    report.error = Some(Problem {
        kind: kind.to_owned(),
        message,
    });
}
