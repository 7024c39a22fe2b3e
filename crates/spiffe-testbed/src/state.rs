//! What the streams and the control methods share: the emulated agent's state (CA,
//! SVID, bundles, faults) and the counters the tests read.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use tokio::sync::{broadcast, watch};
use tonic::Status;

use crate::pki::{Ca, SvidInfo, concat};
use crate::proto::{X509BundlesResponse, X509Svid, X509SvidResponse};

/// Why the emulator ends an open stream from outside the stream's own updates.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    /// `drop_streams`: the stream ends with `Unavailable`, the connection stays.
    DropStreams,
    /// `stop`/`restart`/drop: the agent goes away.
    Stopped,
}

/// What the streams and the control methods share.
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    /// Bumped on every change of the state; each stream recomputes its message.
    pub(crate) changes: watch::Sender<u64>,
    /// Ends open streams from outside (dropped streams, agent stopped).
    pub(crate) faults: broadcast::Sender<Fault>,
    pub(crate) open_streams: AtomicUsize,
    pub(crate) streams_opened: AtomicUsize,
    pub(crate) without_header: AtomicUsize,
}

pub(crate) struct State {
    pub(crate) trust_domain: String,
    pub(crate) ca: Ca,
    /// The intermediate CA under `ca` that signs leaves, if enabled.
    pub(crate) intermediate: Option<Ca>,
    /// The trust domain's bundle: the current CA first, then any kept old ones.
    pub(crate) bundle: Vec<CertificateDer<'static>>,
    pub(crate) svid: Option<SvidInfo>,
    pub(crate) hint: String,
    pub(crate) federated: BTreeMap<String, Vec<CertificateDer<'static>>>,
    pub(crate) next_serial: u64,
    pub(crate) denied: bool,
    pub(crate) first_delay: Duration,
    pub(crate) svid_ttl: Duration,
}

impl State {
    pub(crate) fn serial(&mut self) -> u64 {
        let serial = self.next_serial;
        self.next_serial += 1;
        serial
    }

    /// The CA that signs leaves: the intermediate if enabled, else the root.
    pub(crate) fn signer(&self) -> &Ca {
        self.intermediate.as_ref().unwrap_or(&self.ca)
    }

    pub(crate) fn issue_workload(&mut self, spiffe_id: &str) -> SvidInfo {
        let serial = self.serial();
        let svid = self.signer().issue(spiffe_id, serial, false, self.svid_ttl);
        self.svid = Some(svid.clone());
        svid
    }
}

fn no_identity() -> Status {
    Status::permission_denied("no identity issued")
}

fn td_key(trust_domain: &str) -> String {
    format!("spiffe://{trust_domain}")
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn changed(&self) {
        self.changes.send_modify(|version| *version += 1);
    }

    /// The `FetchX509SVID` message for the current state, or `PermissionDenied`.
    pub(crate) fn svid_response(&self) -> Result<X509SvidResponse, Status> {
        let state = self.lock();
        let svid = match (&state.svid, state.denied) {
            (Some(svid), false) => svid,
            _ => return Err(no_identity()),
        };
        Ok(X509SvidResponse {
            svids: vec![X509Svid {
                spiffe_id: svid.spiffe_id.clone(),
                x509_svid: svid.chain_der_concat(),
                x509_svid_key: svid.key_pkcs8_der.clone(),
                bundle: concat(&state.bundle),
                hint: state.hint.clone(),
            }],
            crl: Vec::new(),
            federated_bundles: state
                .federated
                .iter()
                .map(|(td, certs)| (td_key(td), concat(certs)))
                .collect(),
        })
    }

    /// The `FetchX509Bundles` message for the current state, or `PermissionDenied`
    /// (SPIRE's agent answers bundle requests only for workloads with an identity).
    pub(crate) fn bundles_response(&self) -> Result<X509BundlesResponse, Status> {
        let state = self.lock();
        if state.svid.is_none() || state.denied {
            return Err(no_identity());
        }
        let mut bundles: std::collections::HashMap<String, Vec<u8>> = state
            .federated
            .iter()
            .map(|(td, certs)| (td_key(td), concat(certs)))
            .collect();
        bundles.insert(td_key(&state.trust_domain), concat(&state.bundle));
        Ok(X509BundlesResponse {
            crl: Vec::new(),
            bundles,
        })
    }
}
