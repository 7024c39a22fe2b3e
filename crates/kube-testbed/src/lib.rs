//! # kube-testbed
//!
//! A Kubernetes API server emulator for this workspace's tests (not published).
//!
//! It serves discovery, GET/LIST/WATCH/CREATE/PUT/PATCH/DELETE for Secrets,
//! ConfigMaps, Namespaces, Services and kinds a test registers, over HTTPS (a CA
//! generated at start) or plain HTTP, with bearer-token authentication, RBAC-like
//! rules per token, resourceVersion semantics that kube-runtime relies on, and
//! fault injection. See `docs/testing.md` for what it does not emulate.
//!
//! ```no_run
//! # async fn demo() {
//! use kube_testbed::{KindSpec, Rule, Testbed};
//! let tb = Testbed::start().await;
//! tb.register_kind(KindSpec::namespaced("unikorn-cloud.org", "v1alpha1", "HelmApplication", "helmapplications"));
//! tb.add_token("reader", vec![Rule::new(&["get"], "", "secrets").namespace("ns").names(&["x"])]);
//! let client = tb.client();
//! # let _ = client;
//! # }
//! ```
//!
//! The server runs on its own thread and Tokio runtime, so it keeps serving while a
//! test blocks (e.g. waiting for a `kubectl` child) and works under any test runtime.
#![deny(missing_docs)]

mod auth;
mod discovery;
mod error;
mod http;
mod options;
mod proto;
mod resource;
mod selectors;
mod server;
mod store;
mod watch;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinHandle;

pub use auth::Rule;
pub use error::TestbedError;
pub use options::{Fault, InClusterEnv, Ns, TestbedOptions};

pub use selectors::{FieldSelector, LabelSelector, SelectorError};
pub use store::KindSpec;

use crate::http::{Faults, Shared, lock};
use server::bind;
use store::Store;

/// A running API emulator. Dropping it stops the server.
pub struct Testbed {
    shared: Arc<Shared>,
    runtime: tokio::runtime::Handle,
    server: Mutex<Option<JoinHandle<()>>>,
    ticker: JoinHandle<()>,
    port: u16,
    tls: bool,
    ca_pem: String,
    ca_der: Vec<u8>,
    admin_token: String,
    _stop_runtime: tokio::sync::oneshot::Sender<()>,
}

impl std::fmt::Debug for Testbed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Testbed")
            .field("base_url", &self.base_url())
            .field("token", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl Testbed {
    /// Start with HTTPS on an ephemeral port and a random admin token.
    ///
    /// # Panics
    /// If the server cannot start (see [`Testbed::try_start_with`]).
    pub async fn start() -> Testbed {
        Self::start_with(TestbedOptions::default()).await
    }

    /// Start with options.
    ///
    /// # Panics
    /// If the server cannot start (see [`Testbed::try_start_with`]).
    #[allow(clippy::expect_used)] // test support: failing to start is a broken environment
    pub async fn start_with(options: TestbedOptions) -> Testbed {
        Self::try_start_with(options)
            .await
            .expect("kube-testbed failed to start")
    }

    /// Start with options, reporting failures.
    pub async fn try_start_with(options: TestbedOptions) -> Result<Testbed, TestbedError> {
        let (tls_config, ca_pem, ca_der) = if options.tls {
            let (c, p, d) = server::make_tls().map_err(TestbedError::Tls)?;
            (Some(c), p, d)
        } else {
            (None, String::new(), Vec::new())
        };
        let admin_token = options
            .token
            .clone()
            .unwrap_or_else(|| store::random_hex(40));

        let (handle_tx, handle_rx) = tokio::sync::oneshot::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("kube-testbed".into())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => {
                        let _ = handle_tx.send(Ok(rt.handle().clone()));
                        rt.block_on(async {
                            let _ = stop_rx.await;
                        });
                    }
                    Err(e) => {
                        let _ = handle_tx.send(Err(e.to_string()));
                    }
                }
            })
            .map_err(|e| TestbedError::Runtime(e.to_string()))?;
        let runtime = handle_rx
            .await
            .map_err(|e| TestbedError::Runtime(e.to_string()))?
            .map_err(TestbedError::Runtime)?;

        let listener = bind(options.port, &runtime).await?;
        let port = listener
            .local_addr()
            .map_err(|source| TestbedError::Bind {
                port: options.port,
                source,
            })?
            .port();
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new(options.history_limit)),
            auth: Mutex::new(auth::Authenticator::new(&admin_token)),
            faults: Mutex::new(Faults::default()),
            tls: tls_config,
            server_address: Mutex::new(format!("127.0.0.1:{port}")),
            open_watches: Arc::default(),
            requests: Mutex::default(),
        });
        let server = runtime.spawn(server::serve(shared.clone(), listener));
        let interval = options.bookmark_interval.max(Duration::from_millis(10));
        let ticker_shared = shared.clone();
        let ticker = runtime.spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                lock(&ticker_shared.store).bookmark_all();
            }
        });
        Ok(Testbed {
            shared,
            runtime,
            server: Mutex::new(Some(server)),
            ticker,
            port,
            tls: options.tls,
            ca_pem,
            ca_der,
            admin_token,
            _stop_runtime: stop_tx,
        })
    }

    /// `https://127.0.0.1:PORT` (or `http://` without TLS).
    pub fn base_url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The port served on (kept across [`Testbed::restart`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// PEM of the CA that signed the serving certificate (empty without TLS).
    pub fn ca_pem(&self) -> String {
        self.ca_pem.clone()
    }

    /// The admin bearer token (allowed everything).
    pub fn token(&self) -> String {
        self.admin_token.clone()
    }

    /// A kube-rs config for the admin token, trusting the CA.
    pub fn kube_config(&self) -> kube::Config {
        self.config_for_token(&self.admin_token)
    }

    /// A kube-rs config for another token (same server and CA).
    #[allow(clippy::expect_used)] // the URL is built here from a port number
    pub fn config_for_token(&self, token: &str) -> kube::Config {
        let mut config = kube::Config::new(self.base_url().parse().expect("valid base URL"));
        if self.tls {
            config.root_cert = Some(vec![self.ca_der.clone()]);
        }
        config.auth_info.token = Some(token.to_string().into());
        config.default_namespace = "default".to_string();
        config
    }

    /// A kube-rs client from [`Testbed::kube_config`]. Call inside a Tokio runtime.
    ///
    /// # Panics
    /// If kube-rs cannot build the client (no Tokio runtime, TLS set-up failure).
    #[allow(clippy::expect_used)] // test support
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.kube_config()).expect("kube client for the testbed")
    }

    /// A client from [`Testbed::kube_config`] that carries this API server's cluster
    /// identity (what svc-tls's shared watches are keyed by). Call inside a Tokio
    /// runtime.
    ///
    /// # Panics
    /// If kube-rs cannot build the client (no Tokio runtime, TLS set-up failure).
    #[allow(clippy::expect_used)] // test support
    pub fn cluster_client(&self) -> cluster_id::ClusterClient {
        cluster_id::ClusterClient::try_from_config(self.kube_config())
            .expect("kube client for the testbed")
    }

    /// Serve another kind (replaces one with the same group and plural).
    pub fn register_kind(&self, spec: KindSpec) {
        lock(&self.shared.store).register_kind(spec);
    }

    /// Accept `token`, allowed only what `rules` allow (anything else: 403 Forbidden).
    pub fn add_token(&self, token: &str, rules: Vec<Rule>) {
        lock(&self.shared.auth).add_token(token, rules);
    }

    /// Revoke `token` (a deleted service account, a rotated secret): every request
    /// with it gets 401 from now on, and every open WATCH stream ends (so clients
    /// re-list and re-watch, as they do when a real API server's watch times out,
    /// and meet the 401).
    pub fn revoke_token(&self, token: &str) {
        lock(&self.shared.auth).revoke_token(token);
        self.drop_watches();
    }

    /// Write `token`, `ca.crt` and `namespace` (`default`) into `dir` like a pod's
    /// service-account directory, and return the environment values to go with it.
    ///
    /// # Panics
    /// If the files cannot be written (see [`Testbed::try_write_in_cluster_dir`]).
    #[allow(clippy::expect_used)] // test support
    pub fn write_in_cluster_dir(&self, dir: &Path) -> InClusterEnv {
        self.try_write_in_cluster_dir(dir)
            .expect("write in-cluster directory")
    }

    /// [`Testbed::write_in_cluster_dir`], reporting failures.
    pub fn try_write_in_cluster_dir(&self, dir: &Path) -> Result<InClusterEnv, TestbedError> {
        let write = |name: &str, content: &str| {
            let path = dir.join(name);
            std::fs::write(&path, content).map_err(|source| TestbedError::Io {
                path: path.display().to_string(),
                source,
            })
        };
        std::fs::create_dir_all(dir).map_err(|source| TestbedError::Io {
            path: dir.display().to_string(),
            source,
        })?;
        write("token", &self.admin_token)?;
        write("ca.crt", &self.ca_pem)?;
        write("namespace", "default")?;
        Ok(InClusterEnv {
            host: "127.0.0.1".to_string(),
            port: self.port,
        })
    }

    /// Inject a fault.
    pub fn inject(&self, fault: Fault) {
        match fault {
            Fault::DropWatches => self.drop_watches(),
            Fault::Delay(d) => self.set_delay(d),
            Fault::FailNext { count, status } => self.fail_next(count, status),
            Fault::FailNextWith {
                count,
                status,
                message,
            } => self.fail_next_with(count, status, message),
            Fault::ExpireHistory => self.expire_history(),
            Fault::ReplyNextWith {
                count,
                status,
                body,
            } => self.reply_next_with(count, status, body),
            Fault::IgnoreFieldSelectors(ignore) => {
                lock(&self.shared.faults).ignore_field_selectors = ignore;
            }
        }
    }

    /// How many WATCH streams are open now: counted from the moment a WATCH is
    /// answered until its response body is dropped (the stream ended, or the client
    /// went away and the connection closed). Tests use it to prove that dropping a
    /// client, or cancelling its construction, ends its watches.
    pub fn open_watches(&self) -> usize {
        self.shared
            .open_watches
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many resource requests with `verb` (`get`, `list`, `watch`, `create`,
    /// `update`, `patch`, `delete`, `deletecollection`) were authorized so far: a
    /// client that should be served from its cache shows here if it is not.
    pub fn requests(&self, verb: &str) -> usize {
        let counts = lock(&self.shared.requests);
        counts
            .iter()
            .filter(|((v, _), _)| *v == verb)
            .map(|(_, n)| n)
            .sum()
    }

    /// [`Testbed::requests`] on one resource, named as kubectl names it
    /// (`plural.group`, `plural` for the core group; `plural.group/status` for the
    /// status subresource): a controller that watches a kind twice shows here.
    pub fn requests_on(&self, verb: &str, resource: &str) -> usize {
        let counts = lock(&self.shared.requests);
        counts
            .get(&(verb, resource.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// End every open WATCH stream now (clients see the stream end and re-watch).
    pub fn drop_watches(&self) {
        lock(&self.shared.store).drop_watches();
    }

    /// Delay every response by `delay` (zero to stop).
    pub fn set_delay(&self, delay: Duration) {
        lock(&self.shared.faults).delay = delay;
    }

    /// Answer the next `n` requests with `status` (a Status object; 429 adds `Retry-After: 1`).
    pub fn fail_next(&self, n: usize, status: u16) {
        let mut f = lock(&self.shared.faults);
        f.fail_next = n;
        f.fail_status = status;
        f.fail_message = None;
    }

    /// As [`Testbed::fail_next`], with `message` as the Status object's `message`,
    /// sent as given (newlines, escape sequences, any length): a hostile API
    /// server's text, for tests of what callers show of it.
    pub fn fail_next_with(&self, n: usize, status: u16, message: impl Into<String>) {
        let mut f = lock(&self.shared.faults);
        f.fail_next = n;
        f.fail_status = status;
        f.fail_message = Some(message.into());
    }

    /// Answer the next `n` requests with `status` and `body`, sent as given (see
    /// [`Fault::ReplyNextWith`]).
    pub fn reply_next_with(&self, n: usize, status: u16, body: impl Into<Vec<u8>>) {
        let mut f = lock(&self.shared.faults);
        f.reply_next = n;
        f.reply_status = status;
        f.reply_body = body.into().into();
    }

    /// Forget the event history: open watches get a 410 ERROR event and end, and a
    /// WATCH from any earlier resourceVersion gets 410 Gone, so clients relist.
    pub fn expire_history(&self) {
        lock(&self.shared.store).expire_history();
    }

    /// Stop serving: close the listener and every connection (state is kept).
    pub async fn stop(&self) {
        let task = lock(&self.server).take();
        if let Some(task) = task {
            task.abort();
            let _ = task.await;
        }
    }

    /// Serve again on the same port; `keep_state: false` drops every object (registered
    /// kinds and tokens stay; resourceVersions keep increasing, older ones get 410).
    ///
    /// # Panics
    /// If the port cannot be bound again.
    #[allow(clippy::expect_used)] // test support
    pub async fn restart(&self, keep_state: bool) {
        self.try_restart(keep_state)
            .await
            .expect("kube-testbed restart")
    }

    /// [`Testbed::restart`], reporting failures.
    pub async fn try_restart(&self, keep_state: bool) -> Result<(), TestbedError> {
        self.stop().await;
        if !keep_state {
            lock(&self.shared.store).reset_objects();
        }
        let listener = bind(self.port, &self.runtime).await?;
        let task = self
            .runtime
            .spawn(server::serve(self.shared.clone(), listener));
        *lock(&self.server) = Some(task);
        Ok(())
    }

    /// Create or replace an object directly (no HTTP, no preconditions); the kind is
    /// found from `apiVersion` + `kind`, a missing namespace means `default`.
    /// Bumps the resourceVersion and emits a watch event. Returns the stored object.
    ///
    /// # Panics
    /// If the object is rejected (see [`Testbed::try_upsert`]).
    #[allow(clippy::expect_used)] // test support
    pub fn upsert(&self, object: Value) -> Value {
        self.try_upsert(object).expect("kube-testbed upsert")
    }

    /// [`Testbed::upsert`], reporting a rejected object.
    pub fn try_upsert(&self, object: Value) -> Result<Value, TestbedError> {
        lock(&self.shared.store)
            .upsert(object)
            .map_err(|e| TestbedError::Rejected {
                code: e.code,
                message: e.message,
            })
    }

    /// The stored object, if any. `ns` is `""`/`None` for cluster-scoped kinds.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        ns: impl Into<Ns>,
        name: &str,
    ) -> Option<Value> {
        let store = lock(&self.shared.store);
        let spec = store.kind_by_gvk(api_version, kind)?;
        store.get(&spec, ns.into().0.as_deref(), name).ok()
    }

    /// Delete an object directly (finalizers are honoured like an API DELETE).
    /// Returns the object as of the deletion, or `None` if there was none.
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        ns: impl Into<Ns>,
        name: &str,
    ) -> Option<Value> {
        let mut store = lock(&self.shared.store);
        let spec = store.kind_by_gvk(api_version, kind)?;
        store
            .delete(&spec, ns.into().0.as_deref(), name, None, None, false)
            .ok()
    }

    /// Every stored object of a kind (all namespaces).
    pub fn list(&self, api_version: &str, kind: &str) -> Vec<Value> {
        let store = lock(&self.shared.store);
        let Some(spec) = store.kind_by_gvk(api_version, kind) else {
            return Vec::new();
        };
        let (labels, fields) = (LabelSelector::default(), FieldSelector::default());
        store
            .list(
                &spec,
                &store::Scope {
                    ns: None,
                    labels: &labels,
                    fields: &fields,
                },
            )
            .0
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared.store).current_rv()
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.server).take() {
            task.abort();
        }
        self.ticker.abort();
        // dropping `_stop_runtime` ends the runtime thread
    }
}
