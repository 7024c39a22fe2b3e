//! The one Workload API stream behind both SPIFFE seams, and the snapshot it keeps.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use futures::StreamExt;
use rustls::crypto::CryptoProvider;
use spiffe::workload_api::{WorkloadApiClient, WorkloadApiError};
use spiffe::{X509Bundle, X509Context, X509Svid};
use tokio::task::AbortHandle;

use super::error::{SpiffeStartError, SvidError};
use super::svid::{anchors_of, identity_of, same_bundle, same_svid};
use crate::follow::{Follower, Followers};
use crate::material::{Identity, MaterialErrorKind, TrustAnchors};
use crate::origin::SourceHealth;

mod backoff;

use backoff::Backoff;

/// The environment variable the SPIFFE specification defines for the Workload API
/// address (`unix:` path or `tcp:` address).
pub const SPIFFE_ENDPOINT_SOCKET: &str = "SPIFFE_ENDPOINT_SOCKET";

/// A Workload API address as `SPIFFE_ENDPOINT_SOCKET` gives it (`unix:` path or
/// `tcp:` address), checked to parse.
#[derive(Clone, PartialEq, Eq)]
pub struct SpiffeEndpoint(String);

impl SpiffeEndpoint {
    /// The address in `SPIFFE_ENDPOINT_SOCKET`.
    pub fn from_env() -> Result<Self, SpiffeStartError> {
        Self::from_var(std::env::var_os(SPIFFE_ENDPOINT_SOCKET).as_deref())
    }

    /// The address in a value of `SPIFFE_ENDPOINT_SOCKET` (`None`: not set). Unset
    /// and empty are [`SpiffeStartError::EndpointUnset`].
    pub fn from_var(value: Option<&std::ffi::OsStr>) -> Result<Self, SpiffeStartError> {
        match value.map(|v| v.to_str()) {
            None => Err(SpiffeStartError::EndpointUnset),
            Some(Some(text)) if text.trim().is_empty() => Err(SpiffeStartError::EndpointUnset),
            Some(Some(text)) => Self::parse(text),
            Some(None) => Err(SpiffeStartError::EndpointInvalid {
                value: value
                    .map(|v| v.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                reason: "not UTF-8".to_owned(),
            }),
        }
    }

    /// An address given explicitly.
    pub fn parse(value: &str) -> Result<Self, SpiffeStartError> {
        spiffe::transport::Endpoint::parse(value).map_err(|error| {
            SpiffeStartError::EndpointInvalid {
                value: value.to_owned(),
                reason: error.to_string(),
            }
        })?;
        Ok(Self(value.to_owned()))
    }

    /// The address as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SpiffeEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SpiffeEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// One stream message, loaded: what the seams read on the handshake path.
pub(crate) struct Snapshot {
    /// Counts messages; orders identities for the resolver.
    pub(crate) generation: u64,
    /// The default SVID as sent, to recognise an unchanged one after a reconnect.
    svid: Option<Arc<X509Svid>>,
    /// The default SVID, loaded (validity is checked per handshake, not here).
    pub(crate) identity: Result<Identity, SvidError>,
    /// Each trust domain's bundle (by trust domain name), with its anchors; the
    /// same `Arc` as the previous snapshot's when the bundle is unchanged.
    pub(crate) bundles: HashMap<String, (Arc<X509Bundle>, Option<Arc<TrustAnchors>>)>,
}

/// Why the link failed, as far as start-up errors care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FailureKind {
    /// No connection or no stream could be opened.
    Unreachable,
    /// The agent answered PermissionDenied / no identity issued.
    NoIdentity,
    /// The stream was open and failed or ended.
    Stream,
}

#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) connected: bool,
    pub(super) last_error: Option<(FailureKind, String)>,
    /// Whether a stream was ever opened (headers received).
    opened: bool,
}

pub(crate) struct Shared {
    pub(super) endpoint: SpiffeEndpoint,
    provider: Arc<CryptoProvider>,
    pub(crate) snapshot: ArcSwapOption<Snapshot>,
    pub(crate) link: ArcSwap<Link>,
    errors: AtomicU64,
    changed: tokio::sync::watch::Sender<u64>,
    /// Resolvers and verifiers over this stream, reloaded after each message and
    /// each failure.
    followers: Followers,
}

/// Stops the stream task when the last handle goes.
struct Owner {
    shared: Arc<Shared>,
    task: AbortHandle,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The Workload API stream (`FetchX509SVID`) and the newest SVID and bundles it
/// delivered. Cheap to clone; the stream ends when the last clone (and the last
/// source built from it) is dropped.
#[derive(Clone)]
pub struct WorkloadApiSource {
    owner: Arc<Owner>,
}

impl fmt::Debug for WorkloadApiSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = &self.owner.shared;
        let snapshot = shared.snapshot.load();
        f.debug_struct("WorkloadApiSource")
            .field("endpoint", &shared.endpoint)
            .field("generation", &snapshot.as_ref().map(|s| s.generation))
            .field("connected", &shared.link.load().connected)
            .finish_non_exhaustive()
    }
}

impl WorkloadApiSource {
    /// Connects to the Workload API at `endpoint` and waits (at most `timeout`) for
    /// the first X509-SVID. The stream then lives, reconnecting with backoff, as long
    /// as the source (or a seam built from it) does. Dropping the returned future
    /// stops it.
    ///
    /// Must be called within a Tokio runtime.
    pub async fn connect(
        endpoint: SpiffeEndpoint,
        provider: Arc<CryptoProvider>,
        timeout: Duration,
    ) -> Result<Self, SpiffeStartError> {
        let (changed, mut seen) = tokio::sync::watch::channel(0);
        let shared = Arc::new(Shared {
            endpoint,
            provider,
            snapshot: ArcSwapOption::empty(),
            link: ArcSwap::from_pointee(Link {
                connected: false,
                last_error: None,
                opened: false,
            }),
            errors: AtomicU64::new(0),
            changed,
            followers: Followers::default(),
        });
        let task = tokio::spawn(run(shared.clone())).abort_handle();
        let source = Self {
            owner: Arc::new(Owner {
                shared: shared.clone(),
                task,
            }),
        };
        // The sender lives in `shared`, so the wait ends only with a snapshot or the
        // timeout.
        let _ = tokio::time::timeout(timeout, seen.wait_for(|_| shared.snapshot.load().is_some()))
            .await;
        let endpoint = shared.endpoint.to_string();
        match shared.snapshot.load_full() {
            Some(first) => match &first.identity {
                Ok(_) => Ok(source),
                Err(error) => Err(SpiffeStartError::InvalidSvid {
                    endpoint,
                    error: error.clone(),
                }),
            },
            None => {
                let link = shared.link.load();
                let last = link.last_error.clone();
                Err(match last {
                    Some((FailureKind::NoIdentity, error)) => SpiffeStartError::NoIdentityIssued {
                        endpoint,
                        timeout,
                        error,
                    },
                    Some((FailureKind::Unreachable, error)) if !link.opened => {
                        SpiffeStartError::Unreachable {
                            endpoint,
                            timeout,
                            error,
                        }
                    }
                    last => SpiffeStartError::NoSvid {
                        endpoint,
                        timeout,
                        last_error: last.map(|(_, e)| e),
                    },
                })
            }
        }
    }

    /// The Workload API address.
    pub fn endpoint(&self) -> &SpiffeEndpoint {
        &self.owner.shared.endpoint
    }

    /// The SPIFFE ID of the newest SVID.
    pub fn spiffe_id(&self) -> String {
        self.owner
            .shared
            .snapshot
            .load()
            .as_ref()
            .and_then(|s| s.identity.as_ref().ok())
            .and_then(|i| i.spiffe_id().map(str::to_owned))
            .unwrap_or_default()
    }

    /// The newest SVID, loaded, without a validity check.
    pub fn svid(&self) -> Option<Result<Identity, SvidError>> {
        self.owner
            .shared
            .snapshot
            .load()
            .as_ref()
            .map(|s| s.identity.clone())
    }

    /// How many stream messages have been received.
    pub fn generation(&self) -> u64 {
        self.owner
            .shared
            .snapshot
            .load()
            .as_ref()
            .map_or(0, |s| s.generation)
    }

    /// Whether the stream is up, its last error, and how many errors it has seen.
    pub fn health(&self) -> SourceHealth {
        let shared = &self.owner.shared;
        let link = shared.link.load();
        SourceHealth {
            connected: link.connected,
            last_error: if link.connected {
                None
            } else {
                link.last_error.as_ref().map(|(_, e)| e.clone())
            },
            errors: shared.errors.load(Ordering::Acquire),
        }
    }

    /// Waits until a message newer than `generation` arrives (for callers that
    /// react to rotations; the handshake path never waits).
    pub async fn changed_after(&self, generation: u64) {
        let mut rx = self.owner.shared.changed.subscribe();
        let _ = rx.wait_for(|g| *g > generation).await;
    }

    /// The stream's shared state, which the seams' SPIFFE adapters read on every
    /// handshake (pointer loads, no I/O).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.owner.shared
    }

    /// Reloads `follower` after each message the stream installs and each failure,
    /// so what it serves follows the agent without waiting for a handshake.
    pub(crate) fn follow(&self, follower: Box<dyn Follower>) {
        self.owner.shared.followers.add(follower);
    }
}

/// The stream task: connect, stream, install every message; on failure record it
/// and reconnect after a backoff. Never returns; aborted by [`Owner`]'s drop.
async fn run(shared: Arc<Shared>) {
    let mut backoff = Backoff::new(fastrand::Rng::with_seed(fastrand::u64(..)));
    loop {
        let mut opened_at = None;
        match WorkloadApiClient::connect_to(shared.endpoint.as_str()).await {
            Err(error) => shared.down(FailureKind::Unreachable, &error),
            Ok(client) => match client.stream_x509_contexts().await {
                Err(error) => shared.down(classify(&error), &error),
                Ok(mut stream) => {
                    shared.opened();
                    opened_at = Some(std::time::Instant::now());
                    loop {
                        match stream.next().await {
                            Some(Ok(context)) => shared.install(&context),
                            Some(Err(error)) => {
                                shared.down(classify(&error), &error);
                                break;
                            }
                            None => {
                                shared.down(FailureKind::Stream, &"the stream ended");
                                break;
                            }
                        }
                    }
                }
            },
        }
        backoff.stream_ended(opened_at.map(|at| at.elapsed()));
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

fn classify(error: &WorkloadApiError) -> FailureKind {
    match error {
        WorkloadApiError::NoIdentityIssued | WorkloadApiError::PermissionDenied(_) => {
            FailureKind::NoIdentity
        }
        WorkloadApiError::Transport(_) => FailureKind::Unreachable,
        _ => FailureKind::Stream,
    }
}

impl Shared {
    fn opened(&self) {
        let link = self.link.load();
        if !link.opened {
            self.link.store(Arc::new(Link {
                opened: true,
                ..Link::clone(&link)
            }));
        }
    }

    fn down(&self, kind: FailureKind, error: &dyn fmt::Display) {
        self.errors.fetch_add(1, Ordering::AcqRel);
        let opened = self.link.load().opened;
        // Cut and escaped: kept for the state and logged.
        let error = watch_ready::excerpt::display(error);
        tracing::debug!(endpoint = %self.endpoint, %error, "SPIFFE Workload API stream failed");
        self.link.store(Arc::new(Link {
            connected: false,
            last_error: Some((kind, error)),
            opened,
        }));
        self.followers.notify();
    }

    fn install(&self, context: &X509Context) {
        let previous = self.snapshot.load_full();
        let generation = previous.as_ref().map_or(0, |s| s.generation) + 1;
        let svid = context.default_svid().cloned();
        let unchanged = previous.as_ref().filter(|p| match (&p.svid, &svid) {
            (Some(old), Some(new)) => same_svid(old, new),
            _ => false,
        });
        let identity = match (&svid, unchanged) {
            // The same SVID again (a reconnect resends it): keep the loaded identity,
            // so the resolver sees no change.
            (_, Some(previous)) => previous.identity.clone(),
            (Some(svid), None) => identity_of(svid, &self.provider, None),
            (None, _) => Err(SvidError {
                spiffe_id: String::new(),
                part: "x509_svid",
                kind: MaterialErrorKind::NoCertificate,
            }),
        };
        let mut bundles = HashMap::new();
        for (trust_domain, bundle) in context.bundle_set().iter() {
            let name = trust_domain.to_string();
            let kept = previous
                .as_ref()
                .and_then(|p| p.bundles.get(&name))
                .filter(|(old, _)| same_bundle(old, bundle));
            let entry = match kept {
                Some(kept) => kept.clone(),
                None => (bundle.clone(), anchors_of(bundle).map(Arc::new)),
            };
            bundles.insert(name, entry);
        }
        if let Err(error) = &identity {
            tracing::warn!(endpoint = %self.endpoint, error = %watch_ready::excerpt::chain(error), "SPIFFE Workload API sent an unusable X509-SVID");
        }
        self.snapshot.store(Some(Arc::new(Snapshot {
            generation,
            svid,
            identity,
            bundles,
        })));
        let link = self.link.load();
        if !link.connected {
            self.link.store(Arc::new(Link {
                connected: true,
                last_error: None,
                opened: true,
            }));
        }
        self.changed.send_replace(generation);
        self.followers.notify();
    }
}
