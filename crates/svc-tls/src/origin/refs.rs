//! Where a credential comes from: the names the rest of the crate uses in states,
//! errors, logs and recorders, at the bottom of the crate so that neither seam has to
//! import an implementation to say where its value came from.

use std::fmt;

/// A reference to a namespaced Secret. `Display` is `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SecretRef {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
}

impl SecretRef {
    /// A reference to `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A reference to a namespaced ConfigMap (a CA bundle, as trust-manager writes it).
/// `Display` is `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigMapRef {
    /// The ConfigMap's namespace.
    pub namespace: String,
    /// The ConfigMap's name.
    pub name: String,
}

impl ConfigMapRef {
    /// A reference to `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ConfigMapRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What key material was read from, as a [`MaterialError`](crate::material::MaterialError)
/// names it: the material layer takes bytes and this neutral name, and knows no
/// source.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MaterialOrigin {
    /// A Secret's data (or PEM given under a Secret's name).
    Secret(SecretRef),
    /// An X509-SVID from the SPIFFE Workload API.
    Svid {
        /// The SVID's SPIFFE ID.
        spiffe_id: String,
    },
    /// Files in a mounted directory (the version read: the resolved `..data` target
    /// when the kubelet's atomic writer wrote it). The data key of the error names the
    /// role (`tls.crt` for the certificate, `tls.key` for the key) whatever the
    /// layout's file names; the file source's own error names the files.
    Files {
        /// The directory read.
        dir: String,
    },
}

impl From<SecretRef> for MaterialOrigin {
    fn from(secret: SecretRef) -> Self {
        Self::Secret(secret)
    }
}

impl fmt::Display for MaterialOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret(secret) => write!(f, "secret {secret}"),
            Self::Svid { spiffe_id } => write!(f, "X509-SVID {spiffe_id}"),
            Self::Files { dir } => write!(f, "files in {dir}"),
        }
    }
}

/// Which source the client identity comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdentityOrigin {
    /// A `kubernetes.io/tls` Secret, watched through the API server.
    Secret(SecretRef),
    /// The X509-SVID streamed by the SPIFFE Workload API at `endpoint`.
    Spiffe {
        /// The Workload API address (`SPIFFE_ENDPOINT_SOCKET`).
        endpoint: String,
    },
    /// Key and certificate files in a mounted directory (a Secret or projected volume,
    /// cert-manager's csi-driver, spiffe-helper, a pod certificate), re-read when they
    /// change.
    Files {
        /// The directory.
        dir: String,
        /// The layout's name (`kubernetes-tls`, `csi-driver`, `spiffe-helper`,
        /// `pod-certificate`, `custom`).
        layout: &'static str,
    },
}

impl fmt::Display for IdentityOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret(secret) => write!(f, "Secret {secret}"),
            Self::Spiffe { endpoint } => write!(f, "SPIFFE Workload API {endpoint}"),
            Self::Files { dir, layout } => write!(f, "files in {dir} ({layout} layout)"),
        }
    }
}

/// Which source the trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrustOrigin {
    /// A CA Secret (`tls.crt` and `ca.crt`), watched through the API server.
    Secret(SecretRef),
    /// The X.509 bundle of a SPIFFE trust domain, from the Workload API.
    SpiffeBundle {
        /// The trust domain (e.g. `example.org`).
        trust_domain: String,
    },
    /// A PEM bundle under one key of a ConfigMap (trust-manager's default Bundle
    /// target), watched through the API server: no Secret is read.
    ConfigMap {
        /// The ConfigMap (boxed: keeps `TrustOrigin`, carried by every trust error,
        /// as small as a Secret reference).
        configmap: Box<ConfigMapRef>,
        /// The data key holding the PEM bundle (`ca.crt`, `trust-bundle.pem`, ...).
        key: String,
    },
    /// The `spec.trustBundle`s of a signer's ClusterTrustBundles (and a label
    /// selector), watched through the API server as one set.
    ClusterTrustBundles(Box<super::ClusterTrustBundlesRef>),
    /// A PEM bundle in a file of a mounted directory, re-read when it changes.
    File {
        /// The file's path (through the directory's `..data` link when there is one).
        path: String,
    },
}

impl fmt::Display for TrustOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret(secret) => write!(f, "CA Secret {secret}"),
            Self::SpiffeBundle { trust_domain } => {
                write!(f, "SPIFFE bundle of trust domain {trust_domain}")
            }
            Self::ConfigMap { configmap, key } => {
                write!(f, "CA ConfigMap {configmap} key {key}")
            }
            Self::ClusterTrustBundles(bundles) => write!(f, "ClusterTrustBundles {bundles}"),
            Self::File { path } => write!(f, "CA file {path}"),
        }
    }
}

/// The health of the channel through which a source learns about changes (for a
/// Secret: its watch; for the SPIFFE Workload API: its stream). While it is not
/// connected, the source keeps answering from the last state it saw, which may be out
/// of date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceHealth {
    /// Whether changes are being received (the watch is synced and not failing).
    pub connected: bool,
    /// The last error while not connected.
    pub last_error: Option<String>,
    /// Errors seen since the source started.
    pub errors: u64,
}
