//! A SPIFFE Workload API emulator for tests, standing in for a SPIRE agent (which
//! cannot run here) next to `kube-testbed`'s Kubernetes emulator.
//!
//! [`WorkloadApi::start`] listens on a unix socket in a fresh temporary directory and
//! speaks the real Workload API gRPC protocol there: the `FetchX509SVID` and
//! `FetchX509Bundles` server streams, with the `workload.spiffe.io: true` metadata
//! required on every call (a call without it is rejected with `InvalidArgument`, as
//! SPIRE rejects it). The JWT RPCs answer `Unimplemented`. Point a client at
//! [`WorkloadApi::endpoint`] (the `SPIFFE_ENDPOINT_SOCKET` form).
//!
//! The emulated trust domain has a self-signed P-256 CA; the workload gets a P-256
//! X509-SVID for its SPIFFE ID (`spiffe://<trust domain>/workload` at start, see
//! [`WorkloadApi::set_workload_id`]). Every change (SVID rotation, CA rotation,
//! identity change, deny) is pushed at once to the open streams, as an agent pushes
//! cache updates. Faults: [`WorkloadApi::drop_streams`], [`WorkloadApi::restart`],
//! [`WorkloadApi::stop`]/[`WorkloadApi::resume`], [`WorkloadApi::deny`]
//! (`PermissionDenied` "no identity issued") and [`WorkloadApi::delay_first_svid`].
//!
//! Bundle maps (`federated_bundles`, `FetchX509Bundles`' `bundles`) are keyed by the
//! trust domain's SPIFFE ID (`spiffe://example.org`), as `workload.proto` specifies and
//! SPIRE's agent sends (`TrustDomain.IDString()`).
//!
//! The control methods are synchronous and may be called from any thread; the
//! emulator's tasks run on the Tokio runtime that called [`WorkloadApi::start`].
#![deny(missing_docs)]

mod pki;
pub mod proto;
mod server;
mod state;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

pub use pki::{SVID_TTL, SvidInfo};
pub use server::{FETCH_X509_BUNDLES, FETCH_X509_SVID, SECURITY_HEADER};

use pki::Ca;
use state::{Fault, Shared, State};

/// How long [`WorkloadApi::restart`] leaves the socket gone.
pub const RESTART_PAUSE: Duration = Duration::from_millis(200);

/// How long [`WorkloadApi::stop`] waits at most for the open streams to end.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// The running emulator. Dropping it stops it (streams end, the socket goes).
pub struct WorkloadApi {
    shared: Arc<Shared>,
    trust_domain: String,
    socket: PathBuf,
    serving: Mutex<Option<JoinHandle<()>>>,
    // Last: the directory goes after the listener.
    _dir: tempfile::TempDir,
}

impl WorkloadApi {
    /// Starts an emulated agent for `trust_domain` (a name such as `example.org`,
    /// without `spiffe://`) on a unix socket in a new temporary directory. The workload
    /// has the identity `spiffe://<trust_domain>/workload` until
    /// [`set_workload_id`](Self::set_workload_id) changes it.
    ///
    /// # Panics
    /// When the temporary directory or the socket cannot be created (a broken test
    /// environment), or when called outside a Tokio runtime.
    pub async fn start(trust_domain: &str) -> WorkloadApi {
        let trust_domain = trust_domain
            .strip_prefix("spiffe://")
            .unwrap_or(trust_domain)
            .to_owned();
        let mut state = State {
            trust_domain: trust_domain.clone(),
            ca: Ca::new(&trust_domain, 1),
            intermediate: None,
            bundle: Vec::new(),
            svid: None,
            hint: String::new(),
            federated: BTreeMap::new(),
            next_serial: 2,
            denied: false,
            first_delay: Duration::ZERO,
            svid_ttl: SVID_TTL,
        };
        state.bundle.push(state.ca.der());
        state.issue_workload(&format!("spiffe://{trust_domain}/workload"));
        let (changes, _) = watch::channel(0);
        let (faults, _) = broadcast::channel(16);
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            changes,
            faults,
            open_streams: AtomicUsize::new(0),
            streams_opened: AtomicUsize::new(0),
            without_header: AtomicUsize::new(0),
        });
        let dir = tempfile::Builder::new()
            .prefix("spiffe-testbed-")
            .tempdir()
            .unwrap_or_else(|e| panic!("spiffe-testbed: temporary directory: {e}"));
        let socket = dir.path().join("agent.sock");
        let api = WorkloadApi {
            shared,
            trust_domain,
            socket,
            serving: Mutex::new(None),
            _dir: dir,
        };
        api.listen();
        api
    }

    fn listen(&self) {
        let mut serving = self.serving.lock().unwrap_or_else(PoisonError::into_inner);
        if serving.is_some() {
            return;
        }
        // A stale socket file (from a stop) would make bind fail.
        let _ = std::fs::remove_file(&self.socket);
        let listener = tokio::net::UnixListener::bind(&self.socket).unwrap_or_else(|e| {
            panic!(
                "spiffe-testbed: cannot listen on {}: {e}",
                self.socket.display()
            )
        });
        *serving = Some(tokio::spawn(server::accept_loop(
            listener,
            self.shared.clone(),
        )));
    }

    fn halt(&self) -> Option<JoinHandle<()>> {
        let task = self
            .serving
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = &task {
            task.abort();
            let _ = self.shared.faults.send(Fault::Stopped);
            let _ = std::fs::remove_file(&self.socket);
        }
        task
    }

    /// The address for clients, in the `SPIFFE_ENDPOINT_SOCKET` form:
    /// `unix:/tmp/.../agent.sock`.
    pub fn endpoint(&self) -> String {
        format!("unix:{}", self.socket.display())
    }

    /// The unix socket's path.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// The trust domain's name (`example.org`).
    pub fn trust_domain(&self) -> &str {
        &self.trust_domain
    }

    /// Gives the workload the identity `spiffe_id` (e.g. `spiffe://example.org/svc/a`,
    /// the SVID's URI SAN) with a new SVID from the current CA, and pushes it.
    ///
    /// # Panics
    /// When `spiffe_id` is not IA5 text (it could not be a URI SAN).
    pub fn set_workload_id(&self, spiffe_id: &str) -> SvidInfo {
        let svid = self.shared.lock().issue_workload(spiffe_id);
        self.shared.changed();
        svid
    }

    /// Takes the workload's identity away: streams end with `PermissionDenied` "no
    /// identity issued", as when a SPIRE registration entry is deleted.
    pub fn clear_workload_id(&self) {
        self.shared.lock().svid = None;
        self.shared.changed();
    }

    /// Sets the optional `hint` sent with the SVID, and pushes it.
    pub fn set_hint(&self, hint: &str) {
        hint.clone_into(&mut self.shared.lock().hint);
        self.shared.changed();
    }

    /// Issues a new SVID (new key, new serial) for the current identity from the
    /// current CA and pushes it to the open streams.
    ///
    /// # Panics
    /// When the workload has no identity ([`clear_workload_id`](Self::clear_workload_id)).
    pub fn rotate_svid(&self) -> SvidInfo {
        let svid = {
            let mut state = self.shared.lock();
            let Some(id) = state.svid.as_ref().map(|svid| svid.spiffe_id.clone()) else {
                drop(state);
                panic!("spiffe-testbed: rotate_svid without a workload identity");
            };
            state.issue_workload(&id)
        };
        self.shared.changed();
        svid
    }

    /// The workload's current SVID.
    ///
    /// # Panics
    /// When the workload has no identity ([`clear_workload_id`](Self::clear_workload_id)).
    pub fn current_svid(&self) -> SvidInfo {
        match self.try_current_svid() {
            Some(svid) => svid,
            None => panic!("spiffe-testbed: current_svid without a workload identity"),
        }
    }

    /// The workload's current SVID, if it has an identity.
    pub fn try_current_svid(&self) -> Option<SvidInfo> {
        self.shared.lock().svid.clone()
    }

    /// The current CA certificate of the trust domain, DER.
    pub fn ca_der(&self) -> CertificateDer<'static> {
        self.shared.lock().ca.der()
    }

    /// The current CA certificate of the trust domain, PEM.
    pub fn ca_pem(&self) -> String {
        pki::pem_certificate(&self.ca_der())
    }

    /// The trust domain's bundle as the streams send it: the current CA first, then
    /// the old ones kept by [`rotate_ca`](Self::rotate_ca).
    pub fn bundle(&self) -> Vec<CertificateDer<'static>> {
        self.shared.lock().bundle.clone()
    }

    /// Replaces the trust domain's CA with a new one. The bundle becomes the new CA
    /// alone, or the new CA followed by the previous bundle with `keep_old_in_bundle`.
    /// The workload's SVID is re-issued from the new CA. Both are pushed at once.
    /// Returns the new CA certificate.
    pub fn rotate_ca(&self, keep_old_in_bundle: bool) -> CertificateDer<'static> {
        let ca = {
            let mut state = self.shared.lock();
            let serial = state.serial();
            state.ca = Ca::new(&state.trust_domain.clone(), serial);
            let ca = state.ca.der();
            if !keep_old_in_bundle {
                state.bundle.clear();
            }
            state.bundle.insert(0, ca.clone());
            if state.intermediate.is_some() {
                let serial = state.serial();
                state.intermediate = Some(state.ca.intermediate(&state.trust_domain, serial));
            }
            if let Some(id) = state.svid.as_ref().map(|svid| svid.spiffe_id.clone()) {
                state.issue_workload(&id);
            }
            ca
        };
        self.shared.changed();
        ca
    }

    /// Sets (or, with no certificates, removes) the bundle of a foreign trust domain
    /// (`other.org`), sent as a federated bundle; pushed at once.
    pub fn set_federated_bundle(&self, trust_domain: &str, cas: Vec<CertificateDer<'static>>) {
        let name = trust_domain
            .strip_prefix("spiffe://")
            .unwrap_or(trust_domain)
            .to_owned();
        {
            let mut state = self.shared.lock();
            if cas.is_empty() {
                state.federated.remove(&name);
            } else {
                state.federated.insert(name, cas);
            }
        }
        self.shared.changed();
    }

    /// A certificate and key from the current CA for another identity (a TLS server
    /// under test, say), with URI SAN `spiffe_id` and DNS SAN `localhost`, server and
    /// client auth. Not pushed to the workload.
    ///
    /// # Panics
    /// When `spiffe_id` is not IA5 text.
    pub fn issue(&self, spiffe_id: &str) -> SvidInfo {
        let mut state = self.shared.lock();
        let serial = state.serial();
        state
            .signer()
            .issue(spiffe_id, serial, true, state.svid_ttl)
    }

    /// With `true`, leaves are signed by an intermediate CA under the current root, and
    /// chains carry it after the leaf (the bundle keeps the root alone), as with a SPIRE
    /// server under an upstream authority; [`rotate_ca`](Self::rotate_ca) then makes a
    /// new intermediate too. With `false`, the root signs leaves again. The workload's
    /// SVID (if it has an identity) is re-issued and pushed either way.
    pub fn set_intermediate(&self, enabled: bool) {
        {
            let mut state = self.shared.lock();
            state.intermediate = if enabled {
                let serial = state.serial();
                Some(state.ca.intermediate(&state.trust_domain, serial))
            } else {
                None
            };
            if let Some(id) = state.svid.as_ref().map(|svid| svid.spiffe_id.clone()) {
                state.issue_workload(&id);
            }
        }
        self.shared.changed();
    }

    /// Like [`issue`](Self::issue), but from a new CA of the same trust domain that is
    /// in no bundle: a certificate with the right SPIFFE ID whose chain does not lead
    /// to the trust bundle (an impostor, or an agent of another deployment).
    ///
    /// # Panics
    /// When `spiffe_id` is not IA5 text.
    pub fn issue_untrusted(&self, spiffe_id: &str) -> SvidInfo {
        let (ca_serial, serial, trust_domain, ttl) = {
            let mut state = self.shared.lock();
            let ttl = state.svid_ttl;
            (
                state.serial(),
                state.serial(),
                state.trust_domain.clone(),
                ttl,
            )
        };
        Ca::new(&trust_domain, ca_serial).issue(spiffe_id, serial, true, ttl)
    }

    /// Ends every open stream with `Unavailable`; the connections stay up, and new
    /// streams are served as before.
    pub fn drop_streams(&self) {
        let _ = self.shared.faults.send(Fault::DropStreams);
    }

    /// Stops the agent for [`RESTART_PAUSE`] and starts it again on the same socket
    /// path with the same state (CA, SVID, faults), as an agent restart does.
    pub async fn restart(&self) {
        self.stop().await;
        tokio::time::sleep(RESTART_PAUSE).await;
        self.resume().await;
    }

    /// Stops the agent: the socket file goes, every connection is closed, open
    /// streams end with `Unavailable` (they have ended when this returns). Until [`resume`](Self::resume), connecting fails.
    pub async fn stop(&self) {
        if let Some(task) = self.halt() {
            // An aborted task finishes at its next poll; the result is the abort.
            let _ = task.await;
        }
        // The streams end on their own tasks; wait for them (bounded: a stream task
        // that does not end is a bug the tests' `open_streams` checks will show).
        let deadline = tokio::time::Instant::now() + STOP_WAIT;
        while self.open_streams() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Serves again after [`stop`](Self::stop), on the same path, with the same state.
    pub async fn resume(&self) {
        self.listen();
    }

    /// With `true`, the workload is refused: new streams fail and open ones end with
    /// `PermissionDenied` "no identity issued". With `false`, it is served again.
    pub fn deny(&self, deny: bool) {
        self.shared.lock().denied = deny;
        self.shared.changed();
    }

    /// The validity of certificates issued from now on (SVIDs, [`issue`](Self::issue)):
    /// from 10 s ago to `ttl` from now, to the second. [`SVID_TTL`] by default;
    /// `Duration::ZERO` gives certificates that expire within the second. Nothing is
    /// re-issued by this call.
    pub fn set_svid_ttl(&self, ttl: Duration) {
        self.shared.lock().svid_ttl = ttl;
    }

    /// Streams opened from now on send their first response only after `delay` (an
    /// agent that has not yet attested the workload or fetched its SVID).
    pub fn delay_first_svid(&self, delay: Duration) {
        self.shared.lock().first_delay = delay;
    }

    /// The number of streams open now (both RPCs, from the call to the stream's end).
    pub fn open_streams(&self) -> usize {
        self.shared.open_streams.load(Ordering::SeqCst)
    }

    /// The number of streams opened since the start (both RPCs, headers checked):
    /// a reconnecting client shows up here.
    pub fn streams_opened(&self) -> usize {
        self.shared.streams_opened.load(Ordering::SeqCst)
    }

    /// The number of calls rejected for a missing `workload.spiffe.io` header.
    pub fn requests_without_header(&self) -> usize {
        self.shared.without_header.load(Ordering::SeqCst)
    }
}

impl Drop for WorkloadApi {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

impl std::fmt::Debug for WorkloadApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadApi")
            .field("trust_domain", &self.trust_domain)
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}
