//! The Workload API streams of a process: one per address, however many identity and
//! trust sources are built in SPIFFE mode (as the Go client's `InitSPIFFE`, called
//! once at start-up, shares one connection between every client).
//!
//! [`WorkloadApiStreams::process`] keeps its streams for the life of the process; a
//! registry made with [`WorkloadApiStreams::new`] (one per test) ends them when it and
//! every source built from it are dropped.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use tokio::sync::OnceCell;

use super::error::SpiffeStartError;
use super::stream::{SpiffeEndpoint, WorkloadApiSource};

/// The registry of Workload API streams, keyed by address; cheap to clone.
#[derive(Clone, Default)]
pub struct WorkloadApiStreams {
    streams: Arc<Mutex<HashMap<String, Arc<OnceCell<WorkloadApiSource>>>>>,
    /// What the options-based constructors built over a stream (a resolver and a
    /// verifier per server ID), shared by every later construction as Secret mode
    /// shares them per Secret. Held by the registry, not the stream, so nothing
    /// forms a cycle with the stream it reads.
    built: Arc<Mutex<HashMap<BuiltKey, Box<dyn Any + Send + Sync>>>>,
}

/// A built value's slot: the stream's address, the caller's key (a server ID), the
/// value's type.
type BuiltKey = (String, String, TypeId);

static PROCESS: LazyLock<WorkloadApiStreams> = LazyLock::new(WorkloadApiStreams::new);

impl fmt::Debug for WorkloadApiStreams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkloadApiStreams")
            .field("streams", &self.len())
            .finish()
    }
}

impl WorkloadApiStreams {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The process's registry, used by
    /// [`PeerTls::from_options`](crate::client::PeerTls::from_options) in SPIFFE mode.
    pub fn process() -> &'static WorkloadApiStreams {
        &PROCESS
    }

    /// The stream at `endpoint`: connected (waiting at most `timeout` for the first
    /// X509-SVID, see [`WorkloadApiSource::connect`]) by the first call, returned at
    /// once by every later one. A failed start is not remembered.
    pub async fn connect(
        &self,
        endpoint: SpiffeEndpoint,
        provider: Arc<CryptoProvider>,
        timeout: Duration,
    ) -> Result<WorkloadApiSource, SpiffeStartError> {
        let cell = {
            let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
            streams
                .entry(endpoint.as_str().to_owned())
                .or_default()
                .clone()
        };
        cell.get_or_try_init(|| WorkloadApiSource::connect(endpoint, provider, timeout))
            .await
            .cloned()
    }

    /// The `T` built over the stream at `endpoint` for `key` by the first successful
    /// `build`, shared by every later caller (a failed build is not remembered).
    /// Construction path only.
    pub(crate) fn built<T, E>(
        &self,
        endpoint: &str,
        key: &str,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E>
    where
        T: Clone + Send + Sync + 'static,
    {
        let slot = (endpoint.to_owned(), key.to_owned(), TypeId::of::<T>());
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = built.get(&slot).and_then(|b| b.downcast_ref::<T>()) {
            return Ok(value.clone());
        }
        let value = build()?;
        built.insert(slot, Box::new(value.clone()));
        Ok(value)
    }

    /// How many streams are connected now.
    pub fn len(&self) -> usize {
        let streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        streams.values().filter(|cell| cell.initialized()).count()
    }

    /// Whether no stream is connected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
