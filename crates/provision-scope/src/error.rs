//! Errors: a value missing from the scope, and a remote cluster that cannot be entered.

use std::fmt;

/// One of the values carried in the provisioning scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScopeValue {
    /// The provisioner (local control plane) client.
    Provisioner,
    /// The current cluster.
    Cluster,
    /// The namespace.
    Namespace,
}

impl fmt::Display for ScopeValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Provisioner => "provisioner client",
            Self::Cluster => "cluster",
            Self::Namespace => "namespace",
        })
    }
}

/// An accessor was called outside a scope that sets its value.
///
/// This is Go's "context invalid": the step was run without the runner that provides
/// the value (for example, a step using [`cluster`](crate::cluster) was not run under
/// [`with_cluster`](crate::with_cluster) or [`with_root`](crate::with_root)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// The named value is not set in the current provisioning scope.
    #[error("context invalid: no {0} in the provisioning scope")]
    Missing(ScopeValue),
    /// The current cluster was put in the scope from a bare `kube::Client`, so which
    /// cluster it reads cannot be told, and per-cluster state (svc-tls's shared Secret
    /// watches) must not be keyed by a guess.
    #[error(
        "the {0} in the provisioning scope has no cluster identity (built from a bare \
         kube::Client): build it with remote_cluster(config, ..), Cluster::identified or \
         Cluster::identified_as"
    )]
    Unidentified(ScopeValue),
}

impl ScopeError {
    /// The value that was missing.
    pub fn value(&self) -> ScopeValue {
        match self {
            Self::Missing(value) | Self::Unidentified(value) => *value,
        }
    }
}

/// A remote cluster could not be entered.
///
/// Messages never include the server URL itself (it may carry user info) nor any
/// credential from the cluster's configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The server URL does not parse.
    #[error("remote cluster server URL is invalid")]
    InvalidUrl(#[source] url::ParseError),
    /// The server URL's scheme is neither `https` nor `http`.
    #[error("remote cluster server URL has scheme {scheme:?}; only https and http are supported")]
    UnsupportedScheme {
        /// The scheme found.
        scheme: String,
    },
    /// The server URL has no host.
    #[error("remote cluster server URL has no host")]
    MissingHost,
    /// The remote cluster's API server, from an untrusted kubeconfig, is a
    /// destination the scope's [`Destinations`](crate::Destinations) refuse.
    #[error(
        "remote cluster {cluster}: the {kubeconfig} points at {host}:{port}, refused: {problem}"
    )]
    Destination {
        /// The remote cluster's CD name (see [`ResourceIdentifier::cluster_name`](crate::ResourceIdentifier::cluster_name)).
        cluster: String,
        /// The kubeconfig's context and cluster entry (escaped and cut).
        kubeconfig: String,
        /// The API server's host (escaped and cut; never the whole URL).
        host: String,
        /// The API server's port.
        port: u16,
        /// Why it is refused.
        problem: crate::DestinationProblem,
    },
    /// kube could not build a client from the remote cluster's configuration.
    #[error("cannot build a client for remote cluster {cluster}")]
    Client {
        /// The remote cluster's CD name (see [`ResourceIdentifier::cluster_name`](crate::ResourceIdentifier::cluster_name)).
        cluster: String,
        /// What kube reported.
        #[source]
        source: kube::Error,
    },
}
