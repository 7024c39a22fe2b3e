//! # real-spire
//!
//! Test support (not published): a real SPIRE server and agent, built from
//! `github.com/spiffe/spire` at the release pinned in `xtask/real-peers/spire/go.mod`
//! by `cargo xtask real-peers`, started the way an operator sets up a single-node
//! SPIRE: the server with its own CA and a SQLite datastore, a join token for the
//! agent, the `unix` workload attestor, and a registration entry that gives this test
//! process (selected by its uid) a SPIFFE ID. [`Spire::start`] returns once the agent
//! serves that SVID over its Workload API socket; dropping the [`Spire`] stops both,
//! and they never outlive the test process (see `test_support::supervised`).
//!
//! [`WorkloadApiUnderTest`] is implemented by it and by `spiffe_testbed::WorkloadApi`,
//! so one SPIFFE test body runs against both.
//!
//! ```no_run
//! # async fn example() -> Result<(), real_spire::SpireError> {
//! let spire = real_spire::Spire::start(real_spire::Options {
//!     trust_domain: "example.org".into(),
//!     workload_id: "spiffe://example.org/ns/unikorn/sa/region".into(),
//!     svid_ttl: std::time::Duration::from_secs(3600),
//! })
//! .await?;
//! let endpoint = spire.endpoint(); // "unix:/tmp/.../agent/public/api.sock"
//! let server = spire.mint("spiffe://example.org/ns/unikorn/sa/identity").await?;
//! spire.restart_agent().await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod agent;
mod cli;
mod config;
mod entries;
mod error;
pub mod harness;
mod peers;
mod served;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustls_pki_types::CertificateDer;
use test_support::supervised::Supervised;

pub use error::SpireError;
pub use harness::WorkloadApiUnderTest;
pub use peers::spire_version;

use cli::ServerCli;
use config::Layout;
use entries::Entry;

/// How long the server and the agent get to start, and the first SVID to be served.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// What to start.
#[derive(Clone, Debug)]
pub struct Options {
    /// The trust domain (`example.org`).
    pub trust_domain: String,
    /// The SPIFFE ID the test process is registered with.
    pub workload_id: String,
    /// The lifetime of the workload's X509-SVIDs (the server's
    /// `default_x509_svid_ttl` and the entry's `x509SVIDTTL`); the agent renews one
    /// once half of it has passed.
    pub svid_ttl: Duration,
}

/// A certificate and key minted by the server's CA (`spire-server x509 mint`) for a
/// TLS server under test.
#[derive(Clone)]
pub struct Minted {
    /// Leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key, PEM.
    pub key_pem: String,
}

impl std::fmt::Debug for Minted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Minted")
            .field("chain", &self.chain.len())
            .finish_non_exhaustive()
    }
}

/// A running SPIRE server and agent. Dropping it stops both at once.
pub struct Spire {
    options: Options,
    cli: ServerCli,
    agent_binary: PathBuf,
    agent_conf: PathBuf,
    agent_socket: PathBuf,
    agent_id: String,
    uid: u32,
    entry: Mutex<Entry>,
    // Dropped in this order: the agent, the server, then the directory.
    agent: Mutex<Option<Supervised>>,
    server: Mutex<Option<Supervised>>,
    dir: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for Spire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spire")
            .field("trust_domain", &self.options.trust_domain)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// A free loopback port (bound and released: the server binds it right after).
fn free_port() -> Result<u16, SpireError> {
    let io = |e| SpireError::Io(PathBuf::from("127.0.0.1:0"), e);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(io)?;
    listener.local_addr().map(|a| a.port()).map_err(io)
}

fn write(path: PathBuf, text: &str) -> Result<PathBuf, SpireError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| SpireError::Io(parent.to_owned(), e))?;
    }
    std::fs::write(&path, text).map_err(|e| SpireError::Io(path.clone(), e))?;
    Ok(path)
}

impl Spire {
    /// Starts a server and an agent for `options.trust_domain`, registers this process
    /// (its uid, through the `unix` workload attestor) as `options.workload_id`, and
    /// returns once the agent serves that SVID. `REAL_SPIRE_KEEP=1` keeps the
    /// temporary directory (configurations, logs, datastore) to debug a start.
    ///
    /// # Errors
    /// The binaries are not built ([`SpireError::NotBuilt`]), a process exits or is
    /// not ready in time (with the end of its log), or a `spire-server` command fails.
    pub async fn start(options: Options) -> Result<Spire, SpireError> {
        let binaries = peers::locate()?;
        let temp = tempfile::Builder::new()
            .prefix("real-spire-")
            .tempdir()
            .map_err(|e| SpireError::Io(std::env::temp_dir(), e))?;
        let dir = temp.path().to_owned();
        // The owner of a directory this process created is its effective uid, the
        // one the agent's `unix` attestor finds for our connections.
        let uid = {
            use std::os::unix::fs::MetadataExt as _;
            std::fs::metadata(&dir)
                .map_err(|e| SpireError::Io(dir.clone(), e))?
                .uid()
        };
        let layout = Layout {
            dir: dir.clone(),
            trust_domain: served::bare(&options.trust_domain).to_owned(),
            server_port: free_port()?,
            svid_ttl: options.svid_ttl,
        };
        for sub in ["server/data", "agent/data", "agent/public", "agent/admin"] {
            let path = dir.join(sub);
            std::fs::create_dir_all(&path).map_err(|e| SpireError::Io(path, e))?;
        }
        let server_conf = write(dir.join("server/server.conf"), &layout.server_conf())?;
        let agent_conf = write(dir.join("agent/agent.conf"), &layout.agent_conf())?;
        let keep = std::env::var_os("REAL_SPIRE_KEEP").is_some_and(|v| v == "1");
        let server = Supervised::start(
            "spire-server",
            &binaries.server,
            &[
                "run".to_owned(),
                "-config".to_owned(),
                server_conf.display().to_string(),
            ],
            &dir.join("server.log"),
            (!keep).then_some(dir.as_path()),
        )
        .map_err(|e| SpireError::Spawn("spire-server", e))?;
        let cli = ServerCli {
            binary: binaries.server.clone(),
            socket: layout.server_socket(),
        };
        let spire = Spire {
            options,
            cli,
            agent_binary: binaries.agent,
            agent_conf,
            agent_socket: layout.agent_socket(),
            agent_id: String::new(),
            uid,
            entry: Mutex::new(Entry::default()),
            agent: Mutex::new(None),
            server: Mutex::new(Some(server)),
            dir,
            _dir: if keep {
                // Kept: nothing removes it.
                let _ = temp.keep();
                None
            } else {
                Some(temp)
            },
        };
        spire.finish_start(&layout).await
    }

    async fn finish_start(mut self, layout: &Layout) -> Result<Spire, SpireError> {
        let deadline = Instant::now() + START_TIMEOUT;
        while !self.cli.healthy().await {
            self.check_running(&self.server, "spire-server")?;
            if Instant::now() > deadline {
                return Err(self.not_ready(&self.server, "spire-server"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.cli.bundle(&layout.bootstrap_bundle()).await?;
        let token = self.cli.join_token().await?;
        self.agent_id = format!(
            "spiffe://{}/spire/agent/join_token/{token}",
            served::bare(&self.options.trust_domain)
        );
        self.start_agent_with(Some(&token)).await?;
        let id = self.options.workload_id.clone();
        self.register(&id).await?;
        Ok(self)
    }

    fn check_running(
        &self,
        process: &Mutex<Option<Supervised>>,
        what: &'static str,
    ) -> Result<(), SpireError> {
        let mut guard = process
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(peer) = guard.as_mut()
            && let Some(status) = peer.exited()
        {
            return Err(SpireError::Exited {
                what,
                status,
                log: peer.log_tail(30),
            });
        }
        Ok(())
    }

    fn not_ready(&self, process: &Mutex<Option<Supervised>>, what: &'static str) -> SpireError {
        let guard = process
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        SpireError::NotReady {
            what,
            timeout: START_TIMEOUT,
            log: guard
                .as_ref()
                .map_or_else(String::new, |peer| peer.log_tail(30)),
        }
    }

    /// The agent's Workload API, in the `SPIFFE_ENDPOINT_SOCKET` form
    /// (`unix:/tmp/.../agent/public/api.sock`).
    pub fn endpoint(&self) -> String {
        format!("unix:{}", self.agent_socket.display())
    }

    /// The trust domain's name (`example.org`).
    pub fn trust_domain(&self) -> &str {
        served::bare(&self.options.trust_domain)
    }

    /// The workload SVIDs' lifetime.
    pub fn svid_ttl(&self) -> Duration {
        self.options.svid_ttl
    }

    /// The temporary directory (configurations, `server.log`, `agent.log`).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }
}

impl Drop for Spire {
    fn drop(&mut self) {
        // Agent first: its guard removes nothing; the server's removes the directory.
        self.agent
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        self.server
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }
}
