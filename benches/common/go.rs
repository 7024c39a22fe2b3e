//! The legacy Go program (`benches/go`) as a long-lived child of a Rust benchmark,
//! taking commands over stdin/stdout, so that its batches alternate with ours round
//! by round (every ratio between the languages is then paired within a round); and
//! the same program as a separate crypto/tls and HTTPS server process.
//!
//! `cargo xtask bench` builds the program and names it in `BENCH_GO_BINARY`; without
//! the variable Go is not measured and no Go line is written.

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// One batch measured by the Go child.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GoBatch {
    /// Wall nanoseconds per operation.
    pub ns: f64,
    /// The Go process's CPU time (user + system, `getrusage`) per operation.
    pub cpu_ns: f64,
    /// For `go/pooled-rotation/<case>`: the mean time from the rotation being
    /// written to client-go closing its connections (the rotation noticed).
    pub noticed_ns: Option<f64>,
}

fn binary() -> Option<String> {
    std::env::var("BENCH_GO_BINARY")
        .ok()
        .filter(|path| !path.is_empty())
}

fn spawn(material: &Path, mode: &str) -> (Child, ChildStdin, BufReader<ChildStdout>) {
    let binary = binary().expect("BENCH_GO_BINARY");
    let mut child = Command::new(&binary)
        .arg("-material")
        .arg(material)
        .args(["-mode", mode])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {binary}: {e}"));
    let stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    (child, stdin, stdout)
}

fn reply(stdout: &mut BufReader<ChildStdout>, what: &str) -> serde_json::Value {
    let mut line = String::new();
    let read = stdout.read_line(&mut line).unwrap();
    assert!(read > 0, "the Go program exited during {what}");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("Go answered {line:?} to {what}: {e}"))
}

/// The Go program measuring on command (`-mode child`).
pub(crate) struct GoChild {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl GoChild {
    /// `None` when this run measures no Go (`BENCH_GO_BINARY` unset).
    pub(crate) fn spawn(material: &Path) -> Option<RefCell<Self>> {
        binary()?;
        let (child, stdin, stdout) = spawn(material, "child");
        Some(RefCell::new(Self {
            child,
            stdin: Some(stdin),
            stdout,
        }))
    }

    fn command(&mut self, line: &str) -> serde_json::Value {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        reply(&mut self.stdout, line)
    }

    /// One batch of the operation `id`: `n` operations, or (`n` = 0) a batch sized
    /// by the Go program (once per id) to last about `target`.
    pub(crate) fn measure(&mut self, id: &str, n: usize, target: Duration) -> GoBatch {
        let v = self.command(&format!("measure {id} {n} {}", target.as_nanos()));
        GoBatch {
            ns: v["ns"].as_f64().unwrap(),
            cpu_ns: v["cpu_ns"].as_f64().unwrap(),
            noticed_ns: v["noticed_ns"].as_f64(),
        }
    }

    /// Names a server the `go/client/<name>/<key>` operations dial.
    pub(crate) fn peer(&mut self, name: &str, addr: SocketAddr) {
        self.command(&format!("peer {name} {addr}"));
    }

    /// Points the program's controller-runtime cache-backed client at an API server
    /// (`base_url`, the admin bearer `token`, its serving CA in the PEM file
    /// `ca_file`); answers once the Secret informer over the bench namespace synced.
    pub(crate) fn cluster(&mut self, base_url: &str, token: &str, ca_file: &Path) {
        self.command(&format!("cluster {base_url} {token} {}", ca_file.display()));
    }

    /// Opens go-spiffe's `X509Source` on the Workload API at `endpoint` (`unix://...`)
    /// with an mTLS client configuration authorizing exactly `server_id`; answers,
    /// once the first SVID arrived, the SPIFFE ID Go will present.
    pub(crate) fn spiffe(&mut self, endpoint: &str, server_id: &str) -> String {
        self.command(&format!("spiffe {endpoint} {server_id}"))["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Starts, in this process, a crypto/tls server whose `GetCertificate` reads the
    /// identity Secret `bench/<name>` through controller-runtime's cache and parses
    /// it on every handshake (after [`cluster`](Self::cluster)); its address.
    pub(crate) fn serve_secret(&mut self, name: &str) -> SocketAddr {
        self.command(&format!("serve-secret {name}"))["addr"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// Starts, in this process, go-spiffe's `MTLSServerConfig` over an `X509Source`
    /// on the Workload API at `endpoint`, callers authorized as members of
    /// `trust_domain`; its address.
    pub(crate) fn serve_spiffe(&mut self, endpoint: &str, trust_domain: &str) -> SocketAddr {
        self.command(&format!("serve-spiffe {endpoint} {trust_domain}"))["addr"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// This process's CPU time (user + system, `getrusage`), nanoseconds.
    pub(crate) fn cpu_ns(&mut self) -> f64 {
        self.command("cpu")["cpu_ns"].as_f64().unwrap()
    }

    /// The group the client of handshake operation `id` offers first.
    pub(crate) fn group(&mut self, id: &str) -> String {
        self.command(&format!("group {id}"))["group"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

impl Drop for GoChild {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// The Go program serving (`-mode server`), in a process of its own: a crypto/tls
/// server (handshake, one byte, close) and an HTTPS server, both requiring and
/// verifying client certificates against the material's client CA.
pub(crate) struct GoServer {
    child: Child,
    stdin: Option<ChildStdin>,
    pub tls: SocketAddr,
    pub https: SocketAddr,
}

impl GoServer {
    pub(crate) fn spawn(material: &Path) -> Option<Self> {
        binary()?;
        let (child, stdin, mut stdout) = spawn(material, "server");
        let v = reply(&mut stdout, "start-up");
        Some(Self {
            child,
            stdin: Some(stdin),
            tls: v["tls"].as_str().unwrap().parse().unwrap(),
            https: v["https"].as_str().unwrap().parse().unwrap(),
        })
    }
}

impl Drop for GoServer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// This thread's CPU time in nanoseconds (`/proc/thread-self/schedstat`: time spent
/// running), for our client's CPU per handshake.
pub(crate) fn thread_cpu_ns() -> f64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    text.split_whitespace().next().unwrap().parse().unwrap()
}

/// This process's CPU time in nanoseconds, all threads (the sum of
/// `/proc/self/task/*/schedstat`): for a client whose work spreads over a runtime's
/// workers. Threads that exited meanwhile are not counted, so measure a batch whose
/// threads outlive it.
pub(crate) fn process_cpu_ns() -> f64 {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| {
            let text = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
            text.split_whitespace().next()?.parse::<f64>().ok()
        })
        .sum()
}

/// How many calls of `op` last about `target` (after a warm-up).
pub(crate) fn size(mut op: impl FnMut(), target: Duration) -> usize {
    let mut batch = 1usize;
    loop {
        let start = Instant::now();
        for _ in 0..batch {
            op();
        }
        let elapsed = start.elapsed();
        if elapsed >= target / 4 || batch >= 1 << 20 {
            let per = elapsed.as_secs_f64() / batch as f64;
            return (target.as_secs_f64() / per) as usize + 1;
        }
        batch *= 2;
    }
}

/// Mean nanoseconds per call of `op` over `n` calls.
pub(crate) fn time(n: usize, mut op: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        op();
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

/// One arm of an interleaved measurement: returns one sample per call.
pub(crate) type Arm<'a> = Box<dyn FnMut() -> f64 + 'a>;

/// Runs `rounds` rounds of all `arms`, in alternating order (reversed every other
/// round) so that drift falls on all alike, after one warm-up call of each: the
/// samples of each arm, index `i` of every arm from the same round `i`.
pub(crate) fn interleave(rounds: usize, mut arms: Vec<Arm<'_>>) -> Vec<Vec<f64>> {
    for arm in &mut arms {
        arm();
    }
    let mut samples = vec![Vec::with_capacity(rounds); arms.len()];
    for round in 0..rounds {
        for j in 0..arms.len() {
            let which = if round % 2 == 0 {
                j
            } else {
                arms.len() - 1 - j
            };
            samples[which].push(arms[which]());
        }
    }
    samples
}
