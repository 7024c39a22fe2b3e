//! Go's `crypto/tls` and `net/http` (the machine's Go 1.26, standard library only)
//! as a real caller of the Rust server, through an identity rotation under steady
//! load.

use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use super::*;
use test_support::poll_until;

/// `$GO`, else `go` on PATH: Go 1.26, as `cargo xtask test` provides.
fn go() -> PathBuf {
    std::env::var_os("GO").map_or_else(|| "go".into(), PathBuf::from)
}

struct GoClient {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Drop for GoClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl GoClient {
    fn start(url: &str, leaf: &Leaf, server_ca: &TestCa) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let source =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serving/go_client");
        let binary = dir.path().join("client");
        let built = Command::new(go())
            .args(["build", "-o"])
            .arg(&binary)
            .arg(".")
            .current_dir(&source)
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .env("GOFLAGS", "-mod=mod")
            .output()
            .expect("Go 1.26 runs (cargo xtask test provides it as $GO)");
        assert!(
            built.status.success(),
            "go build: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let (cert, key, ca) = (
            write("tls.crt", &leaf.cert_pem),
            write("tls.key", &leaf.key_pem),
            write("ca.crt", &server_ca.pem()),
        );
        let mut child = Command::new(&binary)
            .arg(url)
            .arg(cert)
            .arg(key)
            .arg(ca)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        std::thread::spawn({
            let lines = lines.clone();
            move || {
                for line in std::io::BufReader::new(stdout)
                    .lines()
                    .map_while(Result::ok)
                {
                    lines.lock().unwrap().push(line);
                }
            }
        });
        Self {
            child,
            lines,
            _dir: dir,
        }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_client_is_served_as_its_caller_through_an_identity_rotation() {
    let s = serve(ClientAuth::Required).await;
    let leaf = s.client_ca.client_leaf("go-caller", 0x33);
    let url = format!("https://127.0.0.1:{}/whoami", s.port);
    let go = GoClient::start(&url, &leaf, &s.server_ca);
    poll_until("the Go client is served", || {
        go.lines().iter().filter(|l| l.starts_with("ok 1 ")).count() >= 10
    })
    .await;
    let rotated = server_leaf(&s.server_ca, 2);
    s.tb.upsert(tls_secret(
        NS,
        SERVER_IDENTITY,
        &rotated.cert_pem,
        &rotated.key_pem,
    ));
    let written = Instant::now();
    poll_until("the Go client sees the rotated leaf", || {
        go.lines().iter().any(|l| l.starts_with("ok 2 "))
    })
    .await;
    let seen_after = written.elapsed();
    let before = go.lines().len();
    poll_until("the Go client is served after the rotation", || {
        go.lines().len() >= before + 10
    })
    .await;
    let lines = go.lines();
    let failed: Vec<&String> = lines.iter().filter(|l| !l.starts_with("ok ")).collect();
    eprintln!(
        "Go client through an identity rotation: {} requests, {} failed, new leaf seen {seen_after:?} after the write",
        lines.len(),
        failed.len()
    );
    assert!(failed.is_empty(), "Go requests failed: {failed:?}");
    assert!(
        lines.iter().all(|l| l.contains("serial=33 ")),
        "the Go client was not served as its own certificate: {:?}",
        lines.first()
    );
}
