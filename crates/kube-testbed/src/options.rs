//! The plain values a test hands a `Testbed` or gets back from one: start options,
//! faults, namespace arguments and the in-cluster environment.

use std::time::Duration;

/// How to start a [`Testbed`](crate::Testbed).
#[derive(Debug, Clone)]
pub struct TestbedOptions {
    /// Serve HTTPS with a generated CA (default) or plain HTTP.
    pub tls: bool,
    /// Port on 127.0.0.1; 0 picks an ephemeral one.
    pub port: u16,
    /// Admin token; `None` generates a random one.
    pub token: Option<String>,
    /// Number of events kept for WATCH resumption; older resourceVersions get 410 Gone.
    pub history_limit: usize,
    /// How often open watches receive a BOOKMARK (when they asked for bookmarks).
    pub bookmark_interval: Duration,
}

impl Default for TestbedOptions {
    fn default() -> Self {
        Self {
            tls: true,
            port: 0,
            token: None,
            history_limit: 10_000,
            bookmark_interval: Duration::from_secs(5),
        }
    }
}

/// A fault to inject (see [`Testbed::inject`](crate::Testbed::inject)); each has a method of its own too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// End every open WATCH stream now.
    DropWatches,
    /// Delay every response by this much.
    Delay(Duration),
    /// Answer the next `count` requests with this HTTP status (a Status object).
    FailNext {
        /// How many requests.
        count: usize,
        /// Which status, e.g. 503.
        status: u16,
    },
    /// As [`Fault::FailNext`], with this `Status.message` instead of the emulator's
    /// own words: for a test of what a caller does with an API server's text
    /// (newlines, escape sequences, tens of KiB), which it must not trust.
    FailNextWith {
        /// How many requests.
        count: usize,
        /// Which status, e.g. 422.
        status: u16,
        /// The `message` of the Status object, sent as given.
        message: String,
    },
    /// Forget the event history: open watches get a 410 ERROR event, and a WATCH
    /// from any resourceVersion before now gets 410 Gone (clients must relist).
    ExpireHistory,
    /// Answer the next `count` requests with this status and these raw bytes as the
    /// body, sent as given (not JSON, any length, any characters): a hostile API
    /// server's body, for tests of what a client logs or keeps of it.
    ReplyNextWith {
        /// How many requests.
        count: usize,
        /// Which status, e.g. 200.
        status: u16,
        /// The body, sent as given.
        body: Vec<u8>,
    },
    /// Ignore (`true`) or honour again (`false`) the `fieldSelector` of LIST and
    /// WATCH requests after authorizing them: a hostile API server that sends a
    /// client watching one object by name every object of the namespace.
    IgnoreFieldSelectors(bool),
}

/// The values for `KUBERNETES_SERVICE_HOST` / `KUBERNETES_SERVICE_PORT` that go with
/// a directory written by [`Testbed::write_in_cluster_dir`](crate::Testbed::write_in_cluster_dir).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InClusterEnv {
    /// `KUBERNETES_SERVICE_HOST` (`127.0.0.1`).
    pub host: String,
    /// `KUBERNETES_SERVICE_PORT`.
    pub port: u16,
}

/// A namespace argument for [`Testbed::get`](crate::Testbed::get) / [`Testbed::delete`](crate::Testbed::delete): a `&str`
/// (`""` for cluster-scoped), or an `Option<&str>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ns(pub(crate) Option<String>);

impl From<&str> for Ns {
    fn from(s: &str) -> Self {
        Ns(Some(s.to_string()).filter(|s| !s.is_empty()))
    }
}
impl From<&String> for Ns {
    fn from(s: &String) -> Self {
        Ns::from(s.as_str())
    }
}
impl From<String> for Ns {
    fn from(s: String) -> Self {
        Ns::from(s.as_str())
    }
}
impl From<Option<&str>> for Ns {
    fn from(s: Option<&str>) -> Self {
        s.map(Ns::from).unwrap_or(Ns(None))
    }
}
