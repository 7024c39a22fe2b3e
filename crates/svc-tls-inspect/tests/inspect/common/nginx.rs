//! Debian's nginx as the mTLS ingress (`ssl_verify_client on`): its own prefix in a
//! temp dir, a free loopback port, TLS 1.3, stopped on drop. The same set-up as
//! svc-tls's tests/support/nginx.rs (which lives in that crate's tests, so it cannot
//! be shared), reduced to what these tests use. A missing nginx fails the test: it is
//! never skipped (`apt-get install nginx`; `cargo xtask test` installs it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use test_support::pki::Leaf;

/// An nginx master process with its own prefix, stopped (by its own id) on drop.
pub(crate) struct Nginx {
    prefix: tempfile::TempDir,
    child: Child,
    port: u16,
}

impl Nginx {
    /// Serves `server` on a free loopback port, verifying client certificates against
    /// `client_ca_pem` (`ssl_verify_client on`) and answering `200 ok`.
    pub(crate) fn start(server: &Leaf, client_ca_pem: &str) -> Self {
        let binary = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .expect("nginx is not installed: apt-get install nginx (or cargo xtask test)");
        let prefix = tempfile::tempdir().unwrap();
        let dir = prefix.path();
        // Workers may run as another user when the tests run as root.
        set_mode(dir, 0o755);
        std::fs::write(dir.join("server.crt"), &server.cert_pem).unwrap();
        std::fs::write(dir.join("server.key"), &server.key_pem).unwrap();
        std::fs::write(dir.join("client-ca.crt"), client_ca_pem).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let d = dir.display();
        let conf = format!(
            "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log info;\n\
             events {{ worker_connections 64; }}\nhttp {{\n access_log off;\n\
             client_body_temp_path {d}/client_body;\n proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\n uwsgi_temp_path {d}/uwsgi;\n scgi_temp_path {d}/scgi;\n\
             server {{\n  listen 127.0.0.1:{port} ssl;\n  ssl_protocols TLSv1.3;\n\
             ssl_certificate {d}/server.crt;\n  ssl_certificate_key {d}/server.key;\n\
             ssl_client_certificate {d}/client-ca.crt;\n  ssl_verify_client on;\n\
             location / {{ return 200 \"ok\\n\"; }}\n }}\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        let child = Command::new(&binary)
            .args(prefix_args(dir))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let nginx = Self {
            prefix,
            child,
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nginx did not listen: {}",
                nginx.error_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        nginx
    }

    /// The error log so far (for assertion messages).
    pub(crate) fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.path().join("error.log")).unwrap_or_default()
    }

    /// `https://127.0.0.1:<port>/`.
    pub(crate) fn url(&self) -> String {
        format!("https://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM to the master (our child, by its id): fast shutdown of its workers.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
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

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}
