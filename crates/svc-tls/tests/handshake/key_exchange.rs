//! The key exchange our client configurations negotiate, read from the connection
//! after the handshake (never assumed):
//! - against our verifying rustls server (kube-testbed's `VerifyingServer`, which
//!   has ML-KEM): the hybrid post-quantum `X25519MLKEM768`, as Go's `crypto/tls`
//!   negotiates since Go 1.24;
//! - against servers without ML-KEM, the classical fallback `X25519`, in a full
//!   handshake without a HelloRetryRequest: Debian's nginx (OpenSSL 3.0), and a
//!   Go 1.23 server (which knows only the `X25519Kyber768Draft00` draft hybrid).
//!
//! Every handshake is mTLS: the server verifies the client certificate served by the
//! resolver and answers with its serial.
//!
//! nginx must be installed (`cargo xtask test` installs it); this file's nginx test
//! is never skipped. The Go test needs Go 1.23 (Debian's `golang-1.23-go`, from
//! bookworm-backports; `cargo xtask test` installs it as root): with no Go at all it
//! is skipped with a message; with another Go and no 1.23 it fails.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support;

use std::io::BufRead as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use kube_testbed::Testbed;
use rustls::{ClientConfig, HandshakeKind, NamedGroup};
use rustls_pki_types::ServerName;
use support::nginx::Nginx;
use support::*;
use svc_tls::client::{TrustMode, client_config};
use svc_tls::identity::IdentityResolver;
use svc_tls::origin::SecretRef;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const NAME: &str = "kx-client-certificate";
const SERIAL: u64 = 0x7e1;

/// What one connection negotiated, read on our side, and what the server answered.
#[derive(Debug)]
struct Negotiated {
    group: Option<NamedGroup>,
    kind: Option<HandshakeKind>,
    status: u16,
    body: String,
}

/// One connection: TLS handshake, `GET /`, the answer read to the end.
async fn connect(config: Arc<ClientConfig>, addr: SocketAddr) -> Negotiated {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .unwrap_or_else(|e| panic!("handshake with {addr} failed: {e}"));
    let (_, connection) = tls.get_ref();
    let group = connection
        .negotiated_key_exchange_group()
        .map(|group| group.name());
    let kind = connection.handshake_kind();
    tls.write_all(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = Vec::new();
    // A server may close without close_notify after answering (nginx does not, Go's
    // raw server below does); what was read before is the answer.
    let _ = tls.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer from {addr}: {response:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    Negotiated {
        group,
        kind,
        status,
        body: body.trim().to_owned(),
    }
}

/// The client configuration a service builds: svc-tls's provider, the resolver over
/// a watched Secret, roots of `server_ca`.
struct Client {
    _testbed: Testbed,
    resolver: IdentityResolver,
    config: Arc<ClientConfig>,
}

async fn client(server_ca: &TestCa, client_ca: &TestCa) -> Client {
    let testbed = Testbed::start().await;
    let leaf = client_ca.client_leaf("svc", SERIAL);
    testbed.upsert(tls_secret(NAME, &leaf.cert_pem, &leaf.key_pem));
    let resolver = IdentityResolver::builder(testbed.client(), SecretRef::new(NS, NAME))
        .settings(
            svc_tls::identity::IdentitySettings::default().sync_timeout(Duration::from_secs(10)),
        )
        .build()
        .await
        .unwrap();
    let config = client_config(
        Arc::new(svc_tls::material::crypto_provider()),
        TrustMode::Roots(server_ca.roots()),
        Some(&resolver),
    )
    .unwrap();
    Client {
        _testbed: testbed,
        resolver,
        config: Arc::new(config),
    }
}

#[test]
fn the_provider_offers_the_hybrid_first_then_the_classical_groups() {
    let names: Vec<NamedGroup> = svc_tls::material::crypto_provider()
        .kx_groups
        .iter()
        .map(|group| group.name())
        .collect();
    assert_eq!(
        names,
        [
            NamedGroup::X25519MLKEM768,
            NamedGroup::X25519,
            NamedGroup::secp256r1,
            NamedGroup::secp384r1,
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x25519mlkem768_is_negotiated_with_our_verifying_rustls_server() {
    let (server_ca, client_ca) = (TestCa::new("servers"), TestCa::new("clients"));
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    let client = client(&server_ca, &client_ca).await;

    let got = connect(client.config.clone(), server.addr).await;
    assert_eq!((got.status, got.body.as_str()), (200, "2017"), "{got:?}");
    assert_eq!(got.group, Some(NamedGroup::X25519MLKEM768), "{got:?}");
    assert_eq!(got.kind, Some(HandshakeKind::Full), "{got:?}");
    assert_eq!(client.resolver.state().failures, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x25519_fallback_with_debian_nginx_openssl_3_0_without_ml_kem() {
    let (server_ca, client_ca) = (TestCa::new("servers"), TestCa::new("clients"));
    let nginx = Nginx::start(
        &server_ca.server_leaf(),
        &client_ca.pem(),
        "on",
        r#"default_type text/plain; return 200 "$ssl_client_serial";"#,
    );
    let client = client(&server_ca, &client_ca).await;
    let addr: SocketAddr = nginx
        .url("")
        .trim_start_matches("https://")
        .parse()
        .unwrap();

    let got = connect(client.config.clone(), addr).await;
    assert_eq!(
        (got.status, got.body.as_str()),
        (200, "07E1"),
        "{got:?}\n{}",
        nginx.error_log()
    );
    assert_eq!(got.group, Some(NamedGroup::X25519), "{got:?}");
    // The X25519 share was in the first ClientHello: no extra round trip.
    assert_eq!(got.kind, Some(HandshakeKind::Full), "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x25519_fallback_with_a_go_1_23_server_that_knows_only_the_kyber_draft() {
    let Some(go) = go_1_23() else {
        return;
    };
    let (server_ca, client_ca) = (TestCa::new("servers"), TestCa::new("clients"));
    let server = GoServer::start(&go, &server_ca.server_leaf(), &client_ca.pem());
    let client = client(&server_ca, &client_ca).await;

    let got = connect(client.config.clone(), server.addr).await;
    assert_eq!(got.status, 200, "{got:?}");
    // "<serial> <Go version> <groups the client offered, in its order>"
    let words: Vec<&str> = got.body.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"7e1"), "{got:?}");
    assert!(
        words.get(1).is_some_and(|v| v.starts_with("go1.23")),
        "{got:?}"
    );
    // The server saw the hybrid offered first (0x11ec = X25519MLKEM768, unknown to it)...
    assert_eq!(words.get(2).copied(), Some("4588,29,23,24"), "{got:?}");
    // ... and both sides settled on X25519 in one round trip.
    assert_eq!(got.group, Some(NamedGroup::X25519), "{got:?}");
    assert_eq!(got.kind, Some(HandshakeKind::Full), "{got:?}");
}

/// A Go 1.23 `crypto/tls` server with Go's default key exchange (`CurvePreferences`
/// unset: `X25519Kyber768Draft00`, X25519, P-256, P-384, P-521), requiring and
/// verifying client certificates. It answers one HTTP/1.1 request per connection
/// with the client leaf's serial (hex), its Go version, and the groups the client
/// offered.
const GO_SERVER: &str = r#"package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
)

func main() {
	cert, err := tls.LoadX509KeyPair(os.Args[1], os.Args[2])
	if err != nil {
		panic(err)
	}
	caPEM, err := os.ReadFile(os.Args[3])
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		panic("no client CA")
	}
	base := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(listener.Addr().String())
	for {
		conn, err := listener.Accept()
		if err != nil {
			continue
		}
		go func(conn net.Conn) {
			defer conn.Close()
			var offered []string
			config := base.Clone()
			config.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
				for _, c := range hello.SupportedCurves {
					offered = append(offered, fmt.Sprint(uint16(c)))
				}
				return nil, nil
			}
			server := tls.Server(conn, config)
			if err := server.Handshake(); err != nil {
				fmt.Fprintln(os.Stderr, "handshake:", err)
				return
			}
			reader := bufio.NewReader(server)
			for {
				line, err := reader.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			leaf := server.ConnectionState().PeerCertificates[0]
			body := fmt.Sprintf("%x %s %s\n", leaf.SerialNumber, runtime.Version(), strings.Join(offered, ","))
			fmt.Fprintf(server, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
			server.Close()
		}(conn)
	}
}
"#;

/// A Go 1.23 toolchain: `$GO`, `go` on PATH, or Debian's `/usr/lib/go-1.23`. `None`
/// (the test is skipped, with a message) only when there is no Go at all.
fn go_1_23() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("GO")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.push("go".into());
    candidates.push("/usr/lib/go-1.23/bin/go".into());
    let mut found = Vec::new();
    for go in candidates {
        let Ok(output) = Command::new(&go).arg("version").output() else {
            continue;
        };
        let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if version.contains(" go1.23") {
            return Some(go);
        }
        found.push(format!("{}: {version}", go.display()));
    }
    if found.is_empty() {
        eprintln!(
            "SKIPPED: no Go toolchain: this test needs Go 1.23 (Debian's golang-1.23-go from \
             bookworm-backports; `cargo xtask test` installs it as root)"
        );
        return None;
    }
    panic!(
        "this test needs Go 1.23 (a server with only the Kyber draft hybrid), found {found:?}: \
         install Debian's golang-1.23-go from bookworm-backports (`cargo xtask test` does it \
         as root) or point $GO at a Go 1.23"
    );
}

/// The Go server, built in a temporary directory and stopped on drop.
struct GoServer {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl GoServer {
    fn start(go: &Path, server: &Leaf, client_ca_pem: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path();
        std::fs::write(path.join("go.mod"), "module kxserver\n\ngo 1.23\n").unwrap();
        std::fs::write(path.join("main.go"), GO_SERVER).unwrap();
        std::fs::write(path.join("server.crt"), &server.cert_pem).unwrap();
        std::fs::write(path.join("server.key"), &server.key_pem).unwrap();
        std::fs::write(path.join("client-ca.crt"), client_ca_pem).unwrap();
        let binary = path.join("kxserver");
        let output = Command::new(go)
            .args(["build", "-o"])
            .arg(&binary)
            .arg(".")
            .current_dir(path)
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .env("GOFLAGS", "-mod=mod")
            // Shared between runs (building crypto/tls takes a while the first time).
            .env(
                "GOCACHE",
                std::env::temp_dir().join("svc-tls-tests-go-cache"),
            )
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "go build failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let mut child = Command::new(&binary)
            .arg(path.join("server.crt"))
            .arg(path.join("server.key"))
            .arg(path.join("client-ca.crt"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("the Go server printed {line:?}: {e}"));
        Self {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for GoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
