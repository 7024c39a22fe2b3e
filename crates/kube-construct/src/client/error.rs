//! Why a client could not be constructed ([`ConstructError`]), and why a read or a
//! write failed ([`ClientError`]).

use thiserror::Error;

use super::undeclared::Target;
use crate::cache::{CacheError, CacheName};
use crate::config::{ConfigError, InClusterError};

/// Why a client could not be constructed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConstructError {
    /// In-cluster configuration is unavailable.
    #[error(transparent)]
    InCluster(#[from] InClusterError),
    /// The command-line options did not resolve to a configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The configuration did not produce a client (TLS material, auth plugin...).
    /// The message and the source show kube's error as an escaped excerpt
    /// ([`watch_ready::KubeError`]), never its raw text.
    #[error("cannot build a Kubernetes client from the configuration")]
    Client(#[source] watch_ready::KubeError),
    /// The declared caches could not be proven synced.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

/// Why a read or a write failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClientError {
    /// No declared cache covers what was asked for.
    #[error("{resource} {} is not covered by any declared cache (declare one at construction)", Target { namespace: namespace.as_deref(), name: name.as_deref() })]
    NotCached {
        /// `plural.version.group` of the resource.
        resource: String,
        /// The namespace asked for.
        namespace: Option<String>,
        /// The name asked for (None for a list).
        name: Option<String>,
    },
    /// No typed cache of the kind was declared with the selection asked for
    /// ([`CachedClient::shared_watch`](super::CachedClient::shared_watch)).
    #[error(
        "no typed cache of {cache} was declared (declare it at construction to share its watch)"
    )]
    NotDeclared {
        /// The cache asked for (boxed: it is large, and reads return this error).
        cache: Box<CacheName>,
    },
    /// A cached object does not decode as the requested type.
    #[error("cached {resource} does not decode as the requested type")]
    Decode {
        /// `plural.version.group` of the resource.
        resource: String,
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },
    /// A namespaced object without `metadata.namespace` was given to a write.
    #[error("{kind} is namespaced but the object has no metadata.namespace")]
    MissingNamespace {
        /// The kind.
        kind: String,
    },
    /// An object without `metadata.name` was given to replace.
    #[error("{kind} object has no metadata.name")]
    MissingName {
        /// The kind.
        kind: String,
    },
    /// The API server rejected the request, or it could not be sent.
    ///
    /// The message and the source show kube's error as an escaped excerpt
    /// ([`watch_ready::KubeError`]: control characters escaped, cut to 512
    /// characters, credential failures as a fixed text), since a `Status.message`
    /// is the API server's text, and a remote cluster's API server is not ours.
    /// Match [`KubeError::status_code`](watch_ready::KubeError::status_code) for the
    /// status.
    #[error("Kubernetes API request failed")]
    Api(#[source] watch_ready::KubeError),
}

impl ClientError {
    /// The API server's answer as [`ClientError::Api`]: kube's error kept only as an
    /// escaped excerpt (the one conversion every write and status call uses).
    pub(crate) fn api(error: kube::Error) -> Self {
        Self::Api(watch_ready::KubeError::of(&error))
    }
}
