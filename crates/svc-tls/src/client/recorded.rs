//! The per-peer series of a [`PeerClient`](super::PeerClient): found by the request
//! URL's host among the peers the client was configured for, and what a request
//! reports to them. Held only when the client has a recorder: a client without one
//! reads no clock and looks nothing up.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use arc_swap::ArcSwap;

use super::PeerTls;
use crate::recording::{PeerRecorder, PeerSeries, StatusClass, handshake_failure};

/// The label of requests to a host no configuration of the client names.
pub(crate) const OTHER_PEER: &str = "other";

/// One configured peer: its host and explicit port, and its series.
struct Peer {
    host: String,
    port: Option<u16>,
    series: Arc<dyn PeerSeries>,
}

/// The series of the peers one client serves.
pub(super) struct PeerSeriesSet {
    recorder: Arc<dyn PeerRecorder>,
    /// Read per request (one load), replaced when a peer is added (construction).
    peers: ArcSwap<Vec<Arc<Peer>>>,
    other: OnceLock<Arc<dyn PeerSeries>>,
}

/// The `peer` label of a URL: its host, with `:port` when the URL names a port that
/// is not its scheme's default.
pub(crate) fn peer_label(host: &str, port: Option<u16>) -> String {
    match port {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

impl PeerSeriesSet {
    /// The series of `tls`'s peer, when `tls` has a recorder. Construction path.
    pub(super) fn of(tls: &PeerTls) -> Option<Self> {
        let recorder = tls.requests.as_ref()?.0.clone();
        let set = Self {
            recorder,
            peers: ArcSwap::from_pointee(Vec::new()),
            other: OnceLock::new(),
        };
        set.add(tls);
        Some(set)
    }

    /// Adds `tls`'s configured host, if it has one not known yet. Construction path.
    pub(super) fn add(&self, tls: &PeerTls) {
        let Ok(url) = tls.host() else {
            return;
        };
        let Some(host) = url.host_str() else {
            return;
        };
        let port = url.port();
        if self.find(host, port).is_some() {
            return;
        }
        let peer = Arc::new(Peer {
            host: host.to_owned(),
            port,
            series: self.recorder.peer(&peer_label(host, port)),
        });
        self.peers.rcu(|peers| {
            let mut peers = Vec::clone(peers);
            if !peers
                .iter()
                .any(|p| p.host == peer.host && p.port == peer.port)
            {
                peers.push(peer.clone());
            }
            peers
        });
    }

    fn find(&self, host: &str, port: Option<u16>) -> Option<Arc<dyn PeerSeries>> {
        self.peers
            .load()
            .iter()
            .find(|peer| peer.host == host && peer.port == port)
            .map(|peer| peer.series.clone())
    }

    /// The series of a request to `url`: its configured peer's, or `other`.
    pub(super) fn start(&self, url: &url::Url) -> Started {
        let series = url
            .host_str()
            .and_then(|host| self.find(host, url.port()))
            .unwrap_or_else(|| {
                self.other
                    .get_or_init(|| self.recorder.peer(OTHER_PEER))
                    .clone()
            });
        Started {
            series,
            at: Instant::now(),
        }
    }

    /// Every configured peer's pool was replaced.
    pub(super) fn pool_retired(&self) {
        for peer in self.peers.load().iter() {
            peer.series.pool_retired();
        }
    }
}

/// A request under way: its peer's series and when it started.
pub(super) struct Started {
    series: Arc<dyn PeerSeries>,
    at: Instant,
}

impl Started {
    /// Reports how the request ended: its status class, or `error` and, when a
    /// handshake failed, its reason.
    pub(super) fn finish<E>(self, result: Result<&reqwest::Response, &E>)
    where
        E: std::error::Error + 'static,
    {
        let elapsed = self.at.elapsed();
        match result {
            Ok(response) => self
                .series
                .request(StatusClass::of_status(response.status().as_u16()), elapsed),
            Err(error) => {
                if let Some(reason) = handshake_failure(error) {
                    self.series.handshake_failed(reason);
                }
                self.series.request(StatusClass::Error, elapsed);
            }
        }
    }
}
