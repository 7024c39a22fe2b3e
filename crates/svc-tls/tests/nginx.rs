//! Debian's nginx as the mTLS ingress (`ssl_verify_client on`), reloaded with a new
//! client CA while our `reqwest` client keeps running: the client goes through the
//! rotation without a restart.
//!
//! nginx must be installed (`apt-get install nginx`; `cargo xtask test` does it). A
//! missing nginx fails this test: it is never skipped.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kube_testbed::Testbed;
use support::*;
use svc_tls::client::{Trust, client_config, reqwest_builder};
use svc_tls::options::SecretRef;
use svc_tls::resolver::IdentityResolver;

const NAME: &str = "ingress-client-certificate";

fn nginx_binary() -> PathBuf {
    let candidates = [
        PathBuf::from("/usr/sbin/nginx"),
        PathBuf::from("/usr/bin/nginx"),
    ];
    candidates
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "nginx is not installed: install Debian's `nginx` package \
                 (`apt-get install nginx`, or run `cargo xtask test`, which installs it); \
                 this test needs it and is never skipped"
            )
        })
}

/// An nginx master process with its own prefix, stopped on drop.
struct Nginx {
    binary: PathBuf,
    prefix: tempfile::TempDir,
    child: Child,
    port: u16,
}

impl Nginx {
    fn conf(&self) -> PathBuf {
        self.prefix.path().join("nginx.conf")
    }

    fn control(&self, signal: &str) -> std::process::Output {
        let prefix = self.prefix.path();
        Command::new(&self.binary)
            .arg("-p")
            .arg(prefix)
            .arg("-c")
            .arg(self.conf())
            .arg("-e")
            .arg(prefix.join("error.log"))
            .args(["-s", signal])
            .output()
            .unwrap()
    }

    fn start(server: &Leaf, client_ca_pem: &str) -> Self {
        let binary = nginx_binary();
        let prefix = tempfile::tempdir().unwrap();
        let dir = prefix.path();
        // Workers may run as another user when the tests run as root.
        set_mode(dir, 0o755);
        std::fs::write(dir.join("server.crt"), &server.cert_pem).unwrap();
        std::fs::write(dir.join("server.key"), &server.key_pem).unwrap();
        std::fs::write(dir.join("client-ca.crt"), client_ca_pem).unwrap();
        let port = free_port();
        let d = dir.display();
        let conf = format!(
            r#"daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_protocols TLSv1.3;
        ssl_certificate {d}/server.crt;
        ssl_certificate_key {d}/server.key;
        ssl_client_certificate {d}/client-ca.crt;
        ssl_verify_client on;
        location / {{
            default_type text/plain;
            return 200 "$ssl_client_serial";
        }}
    }}
}}
"#
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        let child = Command::new(&binary)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-e")
            .arg(dir.join("error.log"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let nginx = Self {
            binary,
            prefix,
            child,
            port,
        };
        nginx.wait_listening();
        nginx
    }

    fn wait_listening(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "nginx did not listen on port {}: {}",
                self.port,
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.path().join("error.log")).unwrap_or_default()
    }

    /// Trusts only `client_ca_pem` for client certificates, by `nginx -s reload`.
    fn reload_client_ca(&self, client_ca_pem: &str) {
        std::fs::write(self.prefix.path().join("client-ca.crt"), client_ca_pem).unwrap();
        let out = self.control("reload");
        assert!(
            out.status.success(),
            "nginx -s reload failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.error_log()
        );
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.control("stop");
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One request: `Ok(serial)` on 200, `Err(description)` otherwise.
async fn serial_seen(http: &reqwest::Client, url: &str) -> Result<u64, String> {
    let response = http.get(url).send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("HTTP {status}"));
    }
    u64::from_str_radix(body.trim(), 16).map_err(|e| format!("serial {body:?}: {e}"))
}

/// Requests until `want(result)` holds, for at most 20 s.
async fn eventually(
    http: &reqwest::Client,
    url: &str,
    what: &str,
    want: impl Fn(&Result<u64, String>) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = serial_seen(http, url).await;
        if want(&got) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: last result {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reqwest_client_goes_through_an_nginx_client_ca_rotation_without_restart() {
    let tb = Testbed::start().await;
    let server_ca = TestCa::new("ingress");
    let (ca_a, ca_b) = (TestCa::new("clients A"), TestCa::new("clients B"));
    let (leaf_a, leaf_b) = (
        ca_a.client_leaf("svc", 0x601),
        ca_b.client_leaf("svc", 0x602),
    );
    tb.upsert(tls_secret(NAME, &leaf_a.cert_pem, &leaf_a.key_pem));
    let nginx = Nginx::start(&server_ca.server_leaf(), &ca_a.pem());

    let resolver = IdentityResolver::builder(tb.client(), SecretRef::new(NS, NAME))
        .sync_timeout(Duration::from_secs(10))
        .build()
        .await
        .unwrap();
    let config =
        client_config(provider(), Trust::Roots(server_ca.roots()), Some(&resolver)).unwrap();
    // One client for the whole test, with its connection pool (keep-alive) as usual.
    let http = reqwest_builder(config).build().unwrap();
    assert_eq!(serial_seen(&http, &nginx.url()).await, Ok(0x601));

    // The ingress rotates its client CA to B: the A-issued leaf is refused (on new
    // connections; nginx closes idle keep-alive ones when it reloads).
    nginx.reload_client_ca(&ca_b.pem());
    eventually(
        &http,
        &nginx.url(),
        "nginx refuses the A-issued leaf",
        |r| r.is_err(),
    )
    .await;

    // cert-manager writes the B-issued leaf: the same client presents it.
    tb.upsert(tls_secret(NAME, &leaf_b.cert_pem, &leaf_b.key_pem));
    eventually(
        &http,
        &nginx.url(),
        "nginx accepts the B-issued leaf",
        |r| *r == Ok(0x602),
    )
    .await;
    assert_eq!(serial_seen(&http, &nginx.url()).await, Ok(0x602));
    assert_eq!(resolver.state().failures, 0);
}
