//! The per-peer request families, the listeners' handshake failures, and
//! `svc_tls_info`.
//!
//! | family | type | labels |
//! |---|---|---|
//! | `svc_tls_peer_requests_total` | counter | `peer`, `class` (one of [`STATUS_CLASSES`]) |
//! | `svc_tls_peer_request_duration_seconds` | histogram | `peer` |
//! | `svc_tls_peer_handshake_failures_total` | counter | `peer`, `reason` (one of [`HANDSHAKE_FAILURES`]) |
//! | `svc_tls_peer_pool_retirements_total` | counter | `peer` |
//! | `svc_tls_listener_handshake_failures_total` | counter | `listener`, `reason` |
//! | `svc_tls_info` | gauge (1) | `version`, `crypto_provider`, `fips` |
//!
//! A peer's series are all created with its first client (zero until they count),
//! so that a ratio of them is defined from the start; a listener's with its
//! recorder. `peer` and `listener` are configuration (see [`crate::recording`]):
//! their number is that of the peers and listeners the service is configured with.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::install::LabelSet;
use crate::recording::{
    HANDSHAKE_FAILURES, HandshakeFailure, ListenerSeries, PeerRecorder, PeerSeries, STATUS_CLASSES,
    StatusClass,
};

/// The request duration buckets, in seconds: from a pooled request on a local
/// network to the default request timeout (30 s).
pub const REQUEST_DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

fn duration_histogram() -> Histogram {
    Histogram::new(REQUEST_DURATION_BUCKETS)
}

type Histograms = Family<LabelSet, Histogram, fn() -> Histogram>;

/// The families, registered once per Prometheus registry. Cheap to clone.
#[derive(Clone)]
pub(crate) struct PeerFamilies {
    requests: Family<LabelSet, Counter>,
    duration: Histograms,
    handshakes: Family<LabelSet, Counter>,
    retirements: Family<LabelSet, Counter>,
    listener_handshakes: Family<LabelSet, Counter>,
}

impl std::fmt::Debug for PeerFamilies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerFamilies")
    }
}

impl PeerFamilies {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let families = Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            handshakes: Family::default(),
            retirements: Family::default(),
            listener_handshakes: Family::default(),
        };
        registry.register(
            "svc_tls_peer_requests",
            "Requests sent to a peer service through a PeerClient, by peer (its configured host) and class (1xx..5xx, or error when no response came)",
            families.requests.clone(),
        );
        registry.register_with_unit(
            "svc_tls_peer_request_duration",
            "Time from handing a request to a PeerClient to its response head (or its failure), by peer",
            Unit::Seconds,
            families.duration.clone(),
        );
        registry.register(
            "svc_tls_peer_handshake_failures",
            "TLS handshakes with a peer service that failed, by peer and reason (unknown_ca, expired, name_mismatch, spiffe_id_mismatch, refused_by_peer, other)",
            families.handshakes.clone(),
        );
        registry.register(
            "svc_tls_peer_pool_retirements",
            "Times a peer's connection pool was replaced because the client identity or the CA trust changed, by peer",
            families.retirements.clone(),
        );
        registry.register(
            "svc_tls_listener_handshake_failures",
            "Callers' TLS handshakes that failed on a listener of the serving half, by listener (its configured name) and reason (unknown_ca, expired, no_certificate, refused_by_peer, other)",
            families.listener_handshakes.clone(),
        );
        let info: Family<LabelSet, Gauge> = Family::default();
        info.get_or_create(&info_labels()).set(1);
        registry.register(
            "svc_tls_info",
            "svc-tls's build: its version, the crypto provider and whether it runs in FIPS mode (always 1)",
            info,
        );
        families
    }

    /// The series of the peer labelled `peer`, all created now. Construction path.
    fn peer(&self, peer: &str) -> PeerCounters {
        let with = |key: &'static str, value: &str| -> LabelSet {
            vec![("peer", peer.to_owned()), (key, value.to_owned())]
        };
        let just = || -> LabelSet { vec![("peer", peer.to_owned())] };
        PeerCounters {
            requests: STATUS_CLASSES
                .map(|class| self.requests.get_or_create(&with("class", class)).clone()),
            duration: self.duration.get_or_create(&just()).clone(),
            handshakes: HANDSHAKE_FAILURES.map(|reason| {
                self.handshakes
                    .get_or_create(&with("reason", reason))
                    .clone()
            }),
            retirements: self.retirements.get_or_create(&just()).clone(),
        }
    }

    /// The series of the listener named `listener`. Construction path.
    fn listener(&self, listener: &str) -> ListenerCounters {
        ListenerCounters {
            handshakes: HANDSHAKE_FAILURES.map(|reason| {
                self.listener_handshakes
                    .get_or_create(&vec![
                        ("listener", listener.to_owned()),
                        ("reason", reason.to_owned()),
                    ])
                    .clone()
            }),
        }
    }
}

/// `svc_tls_info`'s labels: this crate's version, the provider
/// [`crypto_provider`](crate::material::crypto_provider) builds, and its FIPS mode.
fn info_labels() -> LabelSet {
    vec![
        ("version", env!("CARGO_PKG_VERSION").to_owned()),
        ("crypto_provider", "aws-lc-rs".to_owned()),
        (
            "fips",
            crate::material::crypto_provider().fips().to_string(),
        ),
    ]
}

/// The recorder of the requests of peer clients: each peer's series from the
/// families.
#[derive(Debug)]
pub(crate) struct PeerRequestRecorder {
    pub(crate) families: PeerFamilies,
}

impl PeerRecorder for PeerRequestRecorder {
    fn peer(&self, peer: &str) -> Arc<dyn PeerSeries> {
        Arc::new(self.families.peer(peer))
    }
}

/// One peer's series: a request increments one counter and observes the histogram.
struct PeerCounters {
    requests: [Counter; STATUS_CLASSES.len()],
    duration: Histogram,
    handshakes: [Counter; HANDSHAKE_FAILURES.len()],
    retirements: Counter,
}

impl PeerSeries for PeerCounters {
    fn request(&self, class: StatusClass, elapsed: Duration) {
        if let Some(counter) = self.requests.get(class.index()) {
            counter.inc();
        }
        self.duration.observe(elapsed.as_secs_f64());
    }

    fn handshake_failed(&self, reason: HandshakeFailure) {
        if let Some(counter) = self.handshakes.get(reason.index()) {
            counter.inc();
        }
    }

    fn pool_retired(&self) {
        self.retirements.inc();
    }
}

/// One listener's series.
pub(crate) struct ListenerCounters {
    handshakes: [Counter; HANDSHAKE_FAILURES.len()],
}

impl ListenerSeries for ListenerCounters {
    fn handshake_failed(&self, reason: HandshakeFailure) {
        if let Some(counter) = self.handshakes.get(reason.index()) {
            counter.inc();
        }
    }
}

impl PeerFamilies {
    /// The recorder of listener `listener`'s handshakes.
    pub(crate) fn listener_recorder(&self, listener: &str) -> Arc<dyn ListenerSeries> {
        Arc::new(self.listener(listener))
    }
}
