//! A real `kube-apiserver` and `etcd` for tests, started the way controller-runtime's
//! envtest starts them: etcd on loopback with a temporary data directory and free
//! ports; kube-apiserver on loopback with serving certificates from a test CA, static
//! bearer tokens (`--token-auth-file`: an admin in `system:masters` and restricted
//! users that hold nothing until [`RealServer::grant`] gives them a Role), RBAC
//! authorization and service-account signing keys; `/readyz` awaited; the platform's
//! CRDs installed from the Rust types that generate them.
//!
//! The binaries are the ones `cargo xtask real-peers` builds (once per machine, cached
//! outside the repository by version). Without them [`RealServer::start`] fails and
//! [`shared`] panics, naming that command: the real-server tier fails, it never skips.
//!
//! Never left running: every process runs in a process group of its own under a guard
//! whose lifeline is a pipe this process holds, so the peers stop when the test
//! process ends however it ends (a [`shared`] server is never dropped), and dropping a
//! [`RealServer`] kills them at once.
//!
//! A server yields a `kube::Config` or a [`cluster_id::ClusterClient`] for any of its
//! tokens ([`RealServer::config_for_token`], [`RealServer::cluster_client`]), as
//! `kube_testbed::Testbed` does, so one test body can run against either.

mod apiserver;
mod crds;
mod error;
mod etcd;
pub mod harness;
mod peers;
mod rbac;
mod shared;

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub use error::StartError;
pub use harness::ApiServerUnderTest;
pub use peers::{etcd_version, kube_version};
pub use rbac::rule;
pub use shared::{shared, shared_in, start_blocking};

use apiserver::{ApiServer, Flags, TokenLine};

/// How many restricted users the token file declares (a static token file is read
/// once, at start).
const USERS: usize = 32;

/// How to start a [`RealServer`].
#[derive(Debug, Clone)]
pub struct Options {
    /// API servers over the one etcd (an HA control plane's shape): a second one lets
    /// a test write while the first is down.
    pub apiservers: usize,
    /// Further kube-apiserver flags.
    pub extra_flags: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            apiservers: 1,
            extra_flags: Vec::new(),
        }
    }
}

/// A user of the token file: its name (what RBAC binds) and its bearer token.
#[derive(Debug, Clone)]
pub struct User {
    /// The user name.
    pub name: String,
    /// The bearer token.
    pub token: String,
}

/// A real etcd and one or more kube-apiservers over it.
pub struct RealServer {
    // Dropped in this order: the API servers, etcd, then the directory.
    apiservers: Vec<Mutex<Option<ApiServer>>>,
    etcd: etcd::Etcd,
    dir: tempfile::TempDir,
    ports: Vec<u16>,
    flags: Flags,
    ca_pem: String,
    ca_der: Vec<u8>,
    admin: User,
    users: Vec<User>,
    next_user: AtomicUsize,
}

impl std::fmt::Debug for RealServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealServer")
            .field("kube_apiserver", &kube_version())
            .field("etcd", &etcd_version())
            .field("ports", &self.ports)
            .field("dir", &self.dir.path())
            .finish()
    }
}

fn token() -> String {
    (0..32).map(|_| fastrand::alphanumeric()).collect()
}

/// A free loopback port (bound and released, as envtest picks them).
pub(crate) fn free_port() -> Result<u16, StartError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| StartError::Io(PathBuf::from("127.0.0.1:0"), e))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| StartError::Io(PathBuf::from("127.0.0.1:0"), e))
}

impl RealServer {
    /// Starts etcd and the API servers, waits for `/readyz` and installs the
    /// platform's CRDs. Call inside a Tokio runtime.
    pub async fn start(options: Options) -> Result<RealServer, StartError> {
        let binaries = peers::locate()?;
        let mut dir = tempfile::Builder::new()
            .prefix("real-apiserver-")
            .tempdir()
            .map_err(|e| StartError::Io(std::env::temp_dir(), e))?;
        // REAL_APISERVER_KEEP=1 keeps the directory (logs, certificates) to debug with.
        let keep = std::env::var_os("REAL_APISERVER_KEEP").is_some();
        dir.disable_cleanup(keep);
        let admin = User {
            name: "admin".to_owned(),
            token: token(),
        };
        let users: Vec<User> = (0..USERS)
            .map(|i| User {
                name: format!("user-{i:02}"),
                token: token(),
            })
            .collect();
        let mut lines = vec![TokenLine {
            token: admin.token.clone(),
            user: admin.name.clone(),
            groups: "system:masters",
        }];
        lines.extend(users.iter().map(|u| TokenLine {
            token: u.token.clone(),
            user: u.name.clone(),
            groups: "",
        }));
        let ca = apiserver::write_credentials(dir.path(), &lines)?;
        // The guard removes the directory once etcd stops because the process ended
        // (a shared server is never dropped, so its TempDir never cleans up).
        let cleanup = (!keep).then(|| dir.path());
        let etcd = etcd::Etcd::start(&binaries.etcd, dir.path(), cleanup).await?;
        let flags = Flags {
            binary: binaries.kube_apiserver,
            dir: dir.path().to_owned(),
            etcd_url: etcd.url.clone(),
            extra: options.extra_flags,
        };
        let ports = (0..options.apiservers.max(1))
            .map(|_| free_port())
            .collect::<Result<Vec<_>, _>>()?;
        let mut server = RealServer {
            apiservers: Vec::new(),
            etcd,
            dir,
            ports,
            flags,
            ca_pem: ca.pem(),
            ca_der: ca.der().to_vec(),
            admin,
            users,
            next_user: AtomicUsize::new(0),
        };
        for index in 0..server.ports.len() {
            let started = server.launch(index).await?;
            server.apiservers.push(Mutex::new(Some(started)));
        }
        crds::install(&server.client())
            .await
            .map_err(StartError::Setup)?;
        Ok(server)
    }

    async fn launch(&self, index: usize) -> Result<ApiServer, StartError> {
        let client = kube::Client::try_from(self.config_on(index, &self.admin.token))
            .map_err(|e| StartError::Setup(e.to_string()))?;
        ApiServer::start(&self.flags, index, self.ports[index], &client).await
    }

    /// `https://127.0.0.1:PORT` of the first API server.
    pub fn base_url(&self) -> String {
        self.base_url_on(0)
    }

    /// `https://127.0.0.1:PORT` of API server `index`.
    pub fn base_url_on(&self, index: usize) -> String {
        format!("https://127.0.0.1:{}", self.ports[index])
    }

    /// PEM of the CA that signed the serving certificate.
    pub fn ca_pem(&self) -> String {
        self.ca_pem.clone()
    }

    /// The admin's bearer token (user `admin`, group `system:masters`).
    pub fn token(&self) -> String {
        self.admin.token.clone()
    }

    /// A restricted user of the token file nobody has used yet: it may do nothing
    /// until [`RealServer::grant`] binds it a Role.
    ///
    /// # Panics
    /// When all the token file's users are taken.
    pub fn new_user(&self) -> User {
        let next = self.next_user.fetch_add(1, Ordering::Relaxed);
        match self.users.get(next) {
            Some(user) => user.clone(),
            None => panic!("all {USERS} users of the static token file are taken"),
        }
    }

    /// A kube-rs config for the admin, trusting the serving CA.
    pub fn kube_config(&self) -> kube::Config {
        self.config_for_token(&self.admin.token)
    }

    /// A kube-rs config for `token` on the first API server.
    pub fn config_for_token(&self, token: &str) -> kube::Config {
        self.config_on(0, token)
    }

    /// A kube-rs config for `token` on API server `index`.
    #[allow(clippy::expect_used)] // the URL is built here from a port number
    pub fn config_on(&self, index: usize, token: &str) -> kube::Config {
        let url = self.base_url_on(index).parse().expect("valid base URL");
        let mut config = kube::Config::new(url);
        config.root_cert = Some(vec![self.ca_der.clone()]);
        config.auth_info.token = Some(token.to_owned().into());
        config.default_namespace = "default".to_owned();
        config
    }

    /// The admin's kube-rs client. Call inside a Tokio runtime.
    ///
    /// # Panics
    /// If kube-rs cannot build the client.
    #[allow(clippy::expect_used)] // test support
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.kube_config()).expect("kube client for the real server")
    }

    /// The admin's client carrying this server's cluster identity. Call inside a Tokio
    /// runtime.
    ///
    /// # Panics
    /// If kube-rs cannot build the client.
    #[allow(clippy::expect_used)] // test support
    pub fn cluster_client(&self) -> cluster_id::ClusterClient {
        self.cluster_client_for(&self.admin.token)
    }

    /// A client for `token` carrying this server's cluster identity.
    ///
    /// # Panics
    /// If kube-rs cannot build the client.
    #[allow(clippy::expect_used)] // test support
    pub fn cluster_client_for(&self, token: &str) -> cluster_id::ClusterClient {
        cluster_id::ClusterClient::try_from_config(self.config_for_token(token))
            .expect("kube client for the real server")
    }

    /// Stops API server `index` (TERM, then KILL after 10 s); etcd keeps running.
    pub async fn stop_apiserver(&self, index: usize) {
        let taken = lock(&self.apiservers[index]).take();
        if let Some(server) = taken {
            let _ = tokio::task::spawn_blocking(move || {
                server.process.stop(Duration::from_secs(10));
            })
            .await;
        }
    }

    /// Starts API server `index` again on its port, over the same etcd, and waits for
    /// `/readyz`.
    ///
    /// The stopped server's port may still be held for a moment after
    /// [`RealServer::stop_apiserver`] returns (the supervisor's guard exits on TERM at
    /// once and the group is killed without waiting for the peer), and a new
    /// kube-apiserver exits at once on `bind: address already in use`: so this first
    /// waits (up to 10 s) until the port can be bound.
    pub async fn start_apiserver(&self, index: usize) -> Result<(), StartError> {
        port_free(self.ports[index], Duration::from_secs(10)).await;
        let started = self.launch(index).await?;
        *lock(&self.apiservers[index]) = Some(started);
        Ok(())
    }

    /// Compacts etcd up to its current revision (as `etcdctl compact` would): every
    /// resourceVersion before it is gone, so a watch resumed from one gets `410 Gone`.
    /// Returns the revision compacted to.
    pub async fn compact_etcd(&self) -> Result<i64, String> {
        let revision = etcd::revision(&self.etcd.url).await?;
        etcd::compact(&self.etcd.url, revision).await?;
        Ok(revision)
    }

    /// The end of API server `index`'s log (for a failing test's message).
    pub fn apiserver_log_tail(&self, index: usize, lines: usize) -> String {
        lock(&self.apiservers[index])
            .as_ref()
            .map(|s| s.process.log_tail(lines))
            .unwrap_or_else(|| format!("kube-apiserver {index} is stopped"))
    }
}

/// Waits until `port` on loopback can be bound (as kube-apiserver will bind it, with
/// `SO_REUSEADDR`, which std sets on Unix), or `limit` passed (the start then reports
/// the API server's own error).
async fn port_free(port: u16, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while std::net::TcpListener::bind(("127.0.0.1", port)).is_err()
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
