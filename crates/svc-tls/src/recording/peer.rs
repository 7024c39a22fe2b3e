//! The recorder seam of peer requests and of a listener's handshakes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::HandshakeFailure;

/// The class of a request's outcome: its status code's hundred, or `error` when no
/// response came (connection, TLS, timeout, a refused redirect).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusClass {
    /// `1xx`.
    Informational,
    /// `2xx`.
    Success,
    /// `3xx` (a redirect not followed: another origin's is refused and is an `error`).
    Redirection,
    /// `4xx`.
    ClientError,
    /// `5xx`.
    ServerError,
    /// No response.
    Error,
}

/// Every class's label, in [`StatusClass::index`] order.
pub const STATUS_CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "error"];

impl StatusClass {
    /// The class of a status code (outside 100..=599: `error`, as no HTTP
    /// response has it).
    pub fn of_status(status: u16) -> Self {
        match status {
            100..=199 => Self::Informational,
            200..=299 => Self::Success,
            300..=399 => Self::Redirection,
            400..=499 => Self::ClientError,
            500..=599 => Self::ServerError,
            _ => Self::Error,
        }
    }

    /// This class's position in [`STATUS_CLASSES`].
    pub fn index(self) -> usize {
        match self {
            Self::Informational => 0,
            Self::Success => 1,
            Self::Redirection => 2,
            Self::ClientError => 3,
            Self::ServerError => 4,
            Self::Error => 5,
        }
    }

    /// This class's label, one of [`STATUS_CLASSES`].
    pub fn label(self) -> &'static str {
        STATUS_CLASSES[self.index()]
    }
}

/// Makes the series of each peer a client calls. Asked on the construction path
/// (once per peer and client), never per request.
pub trait PeerRecorder: Send + Sync {
    /// The series of the peer labelled `peer`: configuration (the host of its
    /// configured URL, or `other`), never text from a request or a response.
    fn peer(&self, peer: &str) -> Arc<dyn PeerSeries>;
}

/// The series of one peer, updated on the request path: an implementation must not
/// block, do I/O or take a contended lock.
pub trait PeerSeries: Send + Sync {
    /// A request ended as `class`, `elapsed` after it was handed to the client (to
    /// its response head, or to its failure).
    fn request(&self, class: StatusClass, elapsed: Duration);
    /// A request's handshake failed for `reason` (the request counts as `error`
    /// too).
    fn handshake_failed(&self, reason: HandshakeFailure);
    /// The client's pool serving this peer was replaced (the identity or the trust
    /// changed): its connections retire as their requests end.
    fn pool_retired(&self);
}

/// The series of one listener of the serving half, updated on the accept path.
pub trait ListenerSeries: Send + Sync {
    /// A caller's handshake failed for `reason` (its connection was closed).
    fn handshake_failed(&self, reason: HandshakeFailure);
}

/// A recorder held by a client or a server, `Debug` without showing it.
pub(crate) struct Held<T: ?Sized>(pub(crate) Arc<T>);

impl<T: ?Sized> Clone for Held<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T: ?Sized> fmt::Debug for Held<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("recorder")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_fall_in_their_class() {
        for (status, label) in [
            (100, "1xx"),
            (204, "2xx"),
            (308, "3xx"),
            (404, "4xx"),
            (503, "5xx"),
            (599, "5xx"),
            (600, "error"),
            (99, "error"),
        ] {
            assert_eq!(StatusClass::of_status(status).label(), label, "{status}");
        }
    }
}
