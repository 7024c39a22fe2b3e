//! Go's `crypto/tls` and `net/http` (the machine's Go 1.26, standard library only) and
//! curl (OpenSSL) as real callers of the Rust server, through identity and client-CA
//! rotations under steady load (each a new connection per request).

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
    lines: Arc<Mutex<Vec<(Instant, String)>>>,
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
        let (cert, key, ca) = caller_files(dir.path(), leaf, server_ca);
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
                    lines.lock().unwrap().push((Instant::now(), line));
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
        self.lines
            .lock()
            .unwrap()
            .iter()
            .map(|(_, line)| line.clone())
            .collect()
    }

    /// Each request's outcome and when its line arrived.
    fn outcomes(&self) -> Vec<Outcome> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .map(|(at, line)| Outcome {
                at: *at,
                server_serial: line
                    .strip_prefix("ok ")
                    .and_then(|rest| rest.split(' ').next())
                    .map(normal_serial),
                line: line.clone(),
            })
            .collect()
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

/// One request of a looping caller: when it ended, the server leaf's serial when it
/// succeeded (lower-case hex, no leading zeros), what it printed.
#[derive(Clone, Debug)]
struct Outcome {
    at: Instant,
    server_serial: Option<String>,
    line: String,
}

fn lines(outcomes: &[Outcome]) -> Vec<&str> {
    outcomes.iter().map(|o| o.line.as_str()).collect()
}

fn normal_serial(hex: &str) -> String {
    let hex = hex.replace(':', "").to_ascii_lowercase();
    let trimmed = hex.trim_start_matches('0');
    if trimmed.is_empty() {
        "0".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// curl in a loop, one process (a new connection) per request, until dropped.
struct CurlLoop {
    stop: Arc<std::sync::atomic::AtomicBool>,
    outcomes: Arc<Mutex<Vec<Outcome>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl CurlLoop {
    fn start(url: &str, leaf: &Leaf, server_ca: &TestCa) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key, ca) = caller_files(dir.path(), leaf, server_ca);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let outcomes = Arc::new(Mutex::new(Vec::new()));
        let url = url.to_owned();
        let thread = std::thread::spawn({
            let (stop, outcomes) = (stop.clone(), outcomes.clone());
            move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // `%{certs}`: the server's chain as curl saw it, its serial
                    // included (curl 7.88 and later).
                    let out = Command::new("curl")
                        .args(["-sS", "--fail", "--max-time", "10", "-o", "/dev/null"])
                        .args(["-w", "%{certs}", "--cacert"])
                        .arg(&ca)
                        .arg("--cert")
                        .arg(&cert)
                        .arg("--key")
                        .arg(&key)
                        .arg(&url)
                        .stdin(Stdio::null())
                        .output()
                        .unwrap();
                    let text = String::from_utf8_lossy(&out.stdout);
                    let server_serial = out
                        .status
                        .success()
                        .then(|| {
                            text.lines()
                                .find_map(|l| l.strip_prefix("Serial Number:"))
                                .map(|s| normal_serial(s.trim()))
                        })
                        .flatten();
                    outcomes.lock().unwrap().push(Outcome {
                        at: Instant::now(),
                        line: if out.status.success() {
                            format!("ok {}", server_serial.clone().unwrap_or_default())
                        } else {
                            format!("fail {}", String::from_utf8_lossy(&out.stderr).trim())
                        },
                        server_serial: if out.status.success() {
                            Some(server_serial.unwrap_or_default())
                        } else {
                            None
                        },
                    });
                }
            }
        });
        Self {
            stop,
            outcomes,
            thread: Some(thread),
            _dir: dir,
        }
    }

    fn outcomes(&self) -> Vec<Outcome> {
        self.outcomes.lock().unwrap().clone()
    }
}

impl Drop for CurlLoop {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A looping caller's outcomes, whichever kind.
trait Looping {
    fn name(&self) -> &'static str;
    fn all(&self) -> Vec<Outcome>;
    fn served_since(&self, since: Instant) -> usize {
        self.all()
            .iter()
            .filter(|o| o.at > since && o.server_serial.is_some())
            .count()
    }
    fn failed(&self) -> Vec<Outcome> {
        self.all()
            .into_iter()
            .filter(|o| o.server_serial.is_none())
            .collect()
    }
    /// When the first request after `since` that presented `serial` ended.
    fn first_serial_after(&self, serial: &str, since: Instant) -> Option<Instant> {
        self.all()
            .iter()
            .find(|o| o.at > since && o.server_serial.as_deref() == Some(serial))
            .map(|o| o.at)
    }
    /// When the first request after `since` failed.
    fn first_failure_after(&self, since: Instant) -> Option<Instant> {
        self.all()
            .iter()
            .find(|o| o.at > since && o.server_serial.is_none())
            .map(|o| o.at)
    }
}

impl Looping for GoClient {
    fn name(&self) -> &'static str {
        "Go"
    }
    fn all(&self) -> Vec<Outcome> {
        self.outcomes()
    }
}

impl Looping for CurlLoop {
    fn name(&self) -> &'static str {
        "curl"
    }
    fn all(&self) -> Vec<Outcome> {
        self.outcomes()
    }
}

async fn served_again(callers: &[&dyn Looping], since: Instant, what: &str) {
    for caller in callers {
        poll_until(&format!("{} served {what}", caller.name()), || {
            caller.served_since(since) >= 5
        })
        .await;
    }
}

/// A client CA Secret whose roots are `pem` (in `ca.crt`, and in `tls.crt` as
/// cert-manager's CA Secrets also carry it).
fn client_ca_secret(pem: &str) -> serde_json::Value {
    test_support::secret::secret_with(
        NS,
        CLIENT_CA,
        "kubernetes.io/tls",
        &[("tls.crt", pem), ("ca.crt", pem)],
    )
}

/// The bar for both: the new server leaf presented, a removed client CA
/// refused, within 1 s of the write. Asserted at 2 s (a loaded CI machine); the
/// measured times are printed.
const WITHIN: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_and_curl_callers_through_identity_and_client_ca_rotations_under_load() {
    let s = serve(ClientAuth::Required).await;
    s.tb.upsert(client_ca_secret(&s.client_ca.pem()));
    let url = format!("https://127.0.0.1:{}/whoami", s.port);
    let go_old = GoClient::start(
        &url,
        &s.client_ca.client_leaf("go-caller", 0x41),
        &s.server_ca,
    );
    let curl_old = CurlLoop::start(
        &url,
        &s.client_ca.client_leaf("curl-caller", 0x42),
        &s.server_ca,
    );
    let start = Instant::now();
    served_again(&[&go_old, &curl_old], start, "before any rotation").await;

    // 1. The server's identity rotates.
    let rotated = server_leaf(&s.server_ca, 2);
    s.tb.upsert(tls_secret(
        NS,
        SERVER_IDENTITY,
        &rotated.cert_pem,
        &rotated.key_pem,
    ));
    let written = Instant::now();
    let mut leaf_seen = Vec::new();
    for caller in [&go_old as &dyn Looping, &curl_old] {
        poll_until(
            &format!("{} is presented the rotated leaf", caller.name()),
            || caller.first_serial_after("2", written).is_some(),
        )
        .await;
        leaf_seen.push((
            caller.name(),
            caller.first_serial_after("2", written).unwrap() - written,
        ));
    }
    served_again(
        &[&go_old, &curl_old],
        written,
        "after the identity rotation",
    )
    .await;

    // 2. The client CA Secret adds the next CA (the overlap of a CA rotation); callers
    // of the next CA start.
    let next_ca = TestCa::new("next client CA");
    s.tb.upsert(client_ca_secret(&format!(
        "{}{}",
        s.client_ca.pem(),
        next_ca.pem()
    )));
    let overlap = Instant::now();
    let probe = next_ca.client_leaf("probe", 0x50);
    poll_until("a caller of the next CA is served", || {
        let config = client_config(&s.server_ca, Some(&probe));
        let port = s.port;
        super::rotation::futures_ready(async move { request(port, config, &[]).await.is_ok() })
    })
    .await;
    let go_next = GoClient::start(&url, &next_ca.client_leaf("go-caller", 0x51), &s.server_ca);
    let curl_next = CurlLoop::start(
        &url,
        &next_ca.client_leaf("curl-caller", 0x52),
        &s.server_ca,
    );
    served_again(
        &[&go_old, &curl_old, &go_next, &curl_next],
        overlap,
        "in the overlap",
    )
    .await;

    // 3. The old CA is removed: its callers are refused, the next CA's served on.
    s.tb.upsert(client_ca_secret(&next_ca.pem()));
    let removed = Instant::now();
    let mut refused = Vec::new();
    for caller in [&go_old as &dyn Looping, &curl_old] {
        poll_until(
            &format!("the removed CA's {} caller is refused", caller.name()),
            || caller.first_failure_after(removed).is_some(),
        )
        .await;
        refused.push((
            caller.name(),
            caller.first_failure_after(removed).unwrap() - removed,
        ));
    }
    served_again(
        &[&go_next, &curl_next],
        removed,
        "after the old CA's removal",
    )
    .await;

    let count = |caller: &dyn Looping| caller.all().len();
    eprintln!(
        "rotations under load: requests Go (old CA) {}, curl (old CA) {}, Go (next CA) {}, \
         curl (next CA) {}; rotated leaf presented after {leaf_seen:?}; removed CA refused \
         after {refused:?}",
        count(&go_old),
        count(&curl_old),
        count(&go_next),
        count(&curl_next),
    );
    // No request failed that should have been served: none of the next CA's callers',
    // none of the old CA's before its removal.
    for caller in [&go_next as &dyn Looping, &curl_next] {
        assert!(
            caller.failed().is_empty(),
            "{} (next CA) requests failed: {:?}",
            caller.name(),
            lines(&caller.failed())
        );
    }
    for caller in [&go_old as &dyn Looping, &curl_old] {
        let early: Vec<Outcome> = caller
            .failed()
            .into_iter()
            .filter(|o| o.at < removed)
            .collect();
        assert!(
            early.is_empty(),
            "{} (old CA) requests failed before its CA was removed: {:?}",
            caller.name(),
            lines(&early)
        );
    }
    for (name, after) in leaf_seen.iter().chain(&refused) {
        assert!(*after < WITHIN, "{name}: {after:?} after the write");
    }
}
