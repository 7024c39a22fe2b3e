//! Which files of a mounted directory hold the certificate, the key and the CA bundle.

use std::fmt;
use std::str::FromStr;

/// The default file name of a pod-certificate credential bundle
/// ([`FileLayout::pod_certificate`]): the `podCertificate` projection writes the
/// key and chain to the path its `credentialBundlePath` names, which has no default.
pub const DEFAULT_CREDENTIAL_BUNDLE: &str = "credentialbundle.pem";

/// Which files of a mounted directory hold the certificate (chain, leaf first), the
/// private key and the CA bundle. The names are read through the directory's `..data`
/// link when the kubelet's atomic writer manages it.
///
/// ```
/// use svc_tls::files::FileLayout;
///
/// assert_eq!(FileLayout::KubernetesTls.certificate_file(), Some("tls.crt"));
/// assert_eq!(FileLayout::SpiffeHelper.key_file(), Some("svid_key.pem"));
/// let bundle = FileLayout::pod_certificate("credentialbundle.pem");
/// assert_eq!(bundle.certificate_file(), bundle.key_file());
/// assert_eq!("spiffe-helper".parse::<FileLayout>().unwrap(), FileLayout::SpiffeHelper);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileLayout {
    /// A mounted `kubernetes.io/tls` Secret: `tls.crt`, `tls.key`, `ca.crt`.
    KubernetesTls,
    /// cert-manager's csi-driver with its default file names (`csi.cert-manager.io/
    /// certificate-file`, `key-file`, `ca-file`): `tls.crt`, `tls.key`, `ca.crt`.
    CsiDriver,
    /// spiffe-helper's files: `svid.pem`, `svid_key.pem`, `svid_bundle.pem`.
    SpiffeHelper,
    /// The kubelet's pod-certificate credential bundle: the private key and the chain
    /// in one PEM file (the projection's `credentialBundlePath`); no CA file.
    PodCertificate {
        /// The bundle's file name.
        credential_bundle: String,
    },
    /// A CA bundle only (a projected `clusterTrustBundle`, a mounted ConfigMap): trust,
    /// no identity.
    CaBundle {
        /// The bundle's file name.
        file: String,
    },
    /// Names of the caller's choosing (csi-driver with other names, say).
    Custom {
        /// The certificate (chain) file.
        certificate: String,
        /// The private-key file (may be the certificate file).
        key: String,
        /// The CA bundle file, if any.
        ca: Option<String>,
    },
}

impl FileLayout {
    /// The pod-certificate credential bundle in `file`.
    pub fn pod_certificate(file: impl Into<String>) -> Self {
        Self::PodCertificate {
            credential_bundle: file.into(),
        }
    }

    /// A CA bundle alone, in `file`.
    pub fn ca_bundle(file: impl Into<String>) -> Self {
        Self::CaBundle { file: file.into() }
    }

    /// The layout's name, as the flags spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::KubernetesTls => "kubernetes-tls",
            Self::CsiDriver => "csi-driver",
            Self::SpiffeHelper => "spiffe-helper",
            Self::PodCertificate { .. } => "pod-certificate",
            Self::CaBundle { .. } => "ca-bundle",
            Self::Custom { .. } => "custom",
        }
    }

    /// The certificate (chain) file; `None` for a CA bundle alone.
    pub fn certificate_file(&self) -> Option<&str> {
        match self {
            Self::KubernetesTls | Self::CsiDriver => Some("tls.crt"),
            Self::SpiffeHelper => Some("svid.pem"),
            Self::PodCertificate { credential_bundle } => Some(credential_bundle.as_str()),
            Self::CaBundle { .. } => None,
            Self::Custom { certificate, .. } => Some(certificate.as_str()),
        }
    }

    /// The private-key file; `None` for a CA bundle alone.
    pub fn key_file(&self) -> Option<&str> {
        match self {
            Self::KubernetesTls | Self::CsiDriver => Some("tls.key"),
            Self::SpiffeHelper => Some("svid_key.pem"),
            Self::PodCertificate { credential_bundle } => Some(credential_bundle.as_str()),
            Self::CaBundle { .. } => None,
            Self::Custom { key, .. } => Some(key.as_str()),
        }
    }

    /// The CA bundle file, if the layout has one.
    pub fn ca_file(&self) -> Option<&str> {
        match self {
            Self::KubernetesTls | Self::CsiDriver => Some("ca.crt"),
            Self::SpiffeHelper => Some("svid_bundle.pem"),
            Self::PodCertificate { .. } => None,
            Self::CaBundle { file } => Some(file.as_str()),
            Self::Custom { ca, .. } => ca.as_deref(),
        }
    }
}

impl fmt::Display for FileLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A layout name that is not one of [`FileLayout`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown file layout {0:?} (expected kubernetes-tls, csi-driver, spiffe-helper or pod-certificate)"
)]
pub struct UnknownLayout(pub String);

impl FromStr for FileLayout {
    type Err = UnknownLayout;

    /// `kubernetes-tls`, `csi-driver`, `spiffe-helper`, `pod-certificate` (its bundle
    /// named [`DEFAULT_CREDENTIAL_BUNDLE`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "kubernetes-tls" => Ok(Self::KubernetesTls),
            "csi-driver" => Ok(Self::CsiDriver),
            "spiffe-helper" => Ok(Self::SpiffeHelper),
            "pod-certificate" => Ok(Self::pod_certificate(DEFAULT_CREDENTIAL_BUNDLE)),
            other => Err(UnknownLayout(other.to_owned())),
        }
    }
}
