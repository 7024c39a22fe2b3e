//! Debian's nginx as the mTLS ingress in front of the tests: its own prefix in a temp
//! dir, a free loopback port, TLS 1.3, stopped on drop. A missing nginx fails the test
//! (`apt-get install nginx`; `cargo xtask test` installs it): it is never skipped.
//!
//! To stand for the platform's ingress-nginx in front of a service, forward the
//! verified client certificate as it does:
//! `proxy_pass http://127.0.0.1:PORT; proxy_set_header ssl-client-cert $ssl_client_escaped_cert; proxy_set_header ssl-client-verify $ssl_client_verify;`

// Set-up failures panic, as everywhere in test support.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::pki::Leaf;

fn nginx_binary() -> PathBuf {
    [
        PathBuf::from("/usr/sbin/nginx"),
        PathBuf::from("/usr/bin/nginx"),
    ]
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
pub struct Nginx {
    binary: PathBuf,
    prefix: tempfile::TempDir,
    child: Child,
    port: u16,
}

impl Nginx {
    /// Serves `server` on a free loopback port, verifying client certificates against
    /// `client_ca_pem` with `ssl_verify_client {verify_client}`, and answering every
    /// request with the `location /` block body `location`.
    pub fn start(server: &Leaf, client_ca_pem: &str, verify_client: &str, location: &str) -> Self {
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
        ssl_verify_client {verify_client};
        location / {{
            {location}
        }}
    }}
}}
"#
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        // Its own process group, so that dropping it ends the workers too, and no
        // inherited output: a worker left behind must never hold the test runner's
        // (or CI's) pipes open. It logs to error.log.
        let child = Command::new(&binary)
            .args(Self::prefix_args(dir))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
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

    fn prefix_args(dir: &Path) -> [std::ffi::OsString; 6] {
        [
            "-p".into(),
            dir.into(),
            "-c".into(),
            dir.join("nginx.conf").into(),
            "-e".into(),
            dir.join("error.log").into(),
        ]
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

    /// `nginx -s <signal>` for this instance.
    pub fn control(&self, signal: &str) -> Output {
        Command::new(&self.binary)
            .args(Self::prefix_args(self.prefix.path()))
            .args(["-s", signal])
            .output()
            .unwrap()
    }

    /// The error log so far (for assertion messages).
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.path().join("error.log")).unwrap_or_default()
    }

    /// Trusts only `client_ca_pem` for client certificates, by `nginx -s reload`.
    pub fn reload_client_ca(&self, client_ca_pem: &str) {
        std::fs::write(self.prefix.path().join("client-ca.crt"), client_ca_pem).unwrap();
        let out = self.control("reload");
        assert!(
            out.status.success(),
            "nginx -s reload failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.error_log()
        );
    }

    /// `https://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.control("stop");
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The master and any worker it left behind: the whole process group.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
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
