//! In-cluster configuration: the service-account files and
//! `KUBERNETES_SERVICE_HOST` / `KUBERNETES_SERVICE_PORT`, nothing else.

use std::path::PathBuf;

use rustls_pki_types::{CertificateDer, pem::PemObject};
use thiserror::Error;

use crate::display::Joined;

/// The directory Kubernetes mounts the service-account credentials into.
pub(crate) const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The environment variable naming the API server host inside a pod.
pub(crate) const SERVICE_HOST_ENV: &str = "KUBERNETES_SERVICE_HOST";
/// The environment variable naming the API server port inside a pod.
pub(crate) const SERVICE_PORT_ENV: &str = "KUBERNETES_SERVICE_PORT";
/// The service-account token file name.
pub(crate) const TOKEN_FILE: &str = "token";
/// The service-account CA bundle file name.
pub(crate) const CA_FILE: &str = "ca.crt";
/// The service-account namespace file name.
pub(crate) const NAMESPACE_FILE: &str = "namespace";

/// Where in-cluster configuration is read from.
///
/// [`InClusterSource::from_env`] is what a pod uses (the fixed Kubernetes paths and
/// environment); [`InClusterSource::new`] injects another directory and address,
/// which is how tests exercise in-cluster construction without root or a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InClusterSource {
    /// The directory holding `token`, `ca.crt` and `namespace`.
    pub dir: PathBuf,
    /// The value of `KUBERNETES_SERVICE_HOST`, if set.
    pub host: Option<String>,
    /// The value of `KUBERNETES_SERVICE_PORT`, if set.
    pub port: Option<String>,
}

impl InClusterSource {
    /// The real in-cluster source: `/var/run/secrets/kubernetes.io/serviceaccount` and
    /// the process environment (`KUBERNETES_SERVICE_HOST`, `KUBERNETES_SERVICE_PORT`).
    pub fn from_env() -> Self {
        Self {
            dir: PathBuf::from(SERVICE_ACCOUNT_DIR),
            host: env_string(SERVICE_HOST_ENV),
            port: env_string(SERVICE_PORT_ENV),
        }
    }

    /// An explicit source (tests, unusual mounts).
    pub fn new(dir: impl Into<PathBuf>, host: impl Into<String>, port: impl ToString) -> Self {
        Self {
            dir: dir.into(),
            host: Some(host.into()),
            port: Some(port.to_string()),
        }
    }

    /// Path of the token file.
    pub fn token_path(&self) -> PathBuf {
        self.dir.join(TOKEN_FILE)
    }

    /// Path of the CA bundle file.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join(CA_FILE)
    }

    /// Path of the namespace file.
    pub fn namespace_path(&self) -> PathBuf {
        self.dir.join(NAMESPACE_FILE)
    }

    /// Build the client configuration, or report every missing or invalid piece.
    ///
    /// The token is referenced by path, so the client re-reads it as the kubelet
    /// rotates it; the CA bundle is parsed now (it must hold at least one
    /// certificate) and also re-read by the client when it rotates.
    pub fn load(&self) -> Result<kube::Config, InClusterError> {
        let mut problems = Vec::new();

        let url = match (&self.host, &self.port) {
            (None, None) => {
                problems.push(InClusterProblem::HostNotSet);
                problems.push(InClusterProblem::PortNotSet);
                None
            }
            (None, Some(_)) => {
                problems.push(InClusterProblem::HostNotSet);
                None
            }
            (Some(_), None) => {
                problems.push(InClusterProblem::PortNotSet);
                None
            }
            (Some(host), Some(port)) => match service_url(host, port) {
                Ok(url) => Some(url),
                Err(problem) => {
                    problems.push(problem);
                    None
                }
            },
        };

        let token_path = self.token_path();
        match std::fs::metadata(&token_path) {
            Ok(meta) if meta.len() == 0 => problems.push(InClusterProblem::Empty {
                what: "token",
                path: token_path.clone(),
            }),
            Ok(_) => {}
            Err(source) => problems.push(InClusterProblem::Unreadable {
                what: "token",
                path: token_path.clone(),
                source,
            }),
        }
        let token_file = token_path.to_str().map(str::to_owned);
        if token_file.is_none() {
            problems.push(InClusterProblem::NonUnicodePath {
                path: token_path.clone(),
            });
        }

        let ca_path = self.ca_path();
        let roots = match std::fs::read(&ca_path) {
            Ok(bytes) => match parse_ca_bundle(&bytes) {
                Ok(roots) => Some(roots),
                Err(reason) => {
                    problems.push(InClusterProblem::InvalidCa {
                        path: ca_path.clone(),
                        reason,
                    });
                    None
                }
            },
            Err(source) => {
                problems.push(InClusterProblem::Unreadable {
                    what: "CA certificate",
                    path: ca_path.clone(),
                    source,
                });
                None
            }
        };

        let namespace_path = self.namespace_path();
        let namespace = match std::fs::read_to_string(&namespace_path) {
            Ok(text) if text.trim().is_empty() => {
                problems.push(InClusterProblem::Empty {
                    what: "namespace",
                    path: namespace_path,
                });
                None
            }
            Ok(text) => Some(text.trim().to_owned()),
            Err(source) => {
                problems.push(InClusterProblem::Unreadable {
                    what: "namespace",
                    path: namespace_path,
                    source,
                });
                None
            }
        };

        match (url, token_file, roots, namespace) {
            (Some(url), Some(token_file), Some(roots), Some(namespace)) if problems.is_empty() => {
                let mut config = kube::Config::new(url);
                config.default_namespace = namespace;
                config.root_cert = Some(roots);
                config.root_cert_file = Some(ca_path);
                config.auth_info.token_file = Some(token_file);
                Ok(config)
            }
            _ => Err(InClusterError { problems }),
        }
    }
}

fn env_string(name: &str) -> Option<String> {
    std::env::var_os(name).map(|value| value.to_string_lossy().into_owned())
}

/// `https://host:port`, bracketing IPv6 literals and omitting port 443, as client-go does.
fn service_url(host: &str, port: &str) -> Result<http::Uri, InClusterProblem> {
    let host = host.trim();
    if host.is_empty() {
        return Err(InClusterProblem::HostNotSet);
    }
    let port_number: u16 = port
        .trim()
        .parse()
        .ok()
        .filter(|port| *port != 0)
        .ok_or_else(|| InClusterProblem::InvalidPort {
            value: port.to_owned(),
        })?;
    let authority = match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(ip)) => format!("[{ip}]"),
        _ => host.to_owned(),
    };
    let text = if port_number == 443 {
        format!("https://{authority}")
    } else {
        format!("https://{authority}:{port_number}")
    };
    text.parse::<http::Uri>()
        .map_err(|err| InClusterProblem::InvalidUrl {
            url: text.clone(),
            reason: err.to_string(),
        })
}

/// Parse a PEM bundle into DER certificates; at least one is required.
fn parse_ca_bundle(bytes: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut roots = Vec::new();
    for cert in CertificateDer::pem_slice_iter(bytes) {
        match cert {
            Ok(cert) => roots.push(cert.as_ref().to_vec()),
            Err(err) => return Err(format!("invalid PEM: {err}")),
        }
    }
    if roots.is_empty() {
        return Err("no PEM certificate in it".to_owned());
    }
    Ok(roots)
}

/// One reason in-cluster configuration is unavailable.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum InClusterProblem {
    /// `KUBERNETES_SERVICE_HOST` is not set (or empty).
    #[error("{SERVICE_HOST_ENV} is not set (not running in a pod?)")]
    HostNotSet,
    /// `KUBERNETES_SERVICE_PORT` is not set.
    #[error("{SERVICE_PORT_ENV} is not set")]
    PortNotSet,
    /// `KUBERNETES_SERVICE_PORT` is not a port number.
    #[error("{SERVICE_PORT_ENV}={value:?} is not a port number")]
    InvalidPort {
        /// The value found.
        value: String,
    },
    /// Host and port do not form a URL.
    #[error(
        "{url:?} (from {SERVICE_HOST_ENV} and {SERVICE_PORT_ENV}) is not a valid URL: {reason}"
    )]
    InvalidUrl {
        /// The URL formed.
        url: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A service-account file cannot be read (typically: does not exist).
    #[error("service-account {what} file {} cannot be read", path.display())]
    Unreadable {
        /// Which file: "token", "CA certificate" or "namespace".
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A service-account file is empty.
    #[error("service-account {what} file {} is empty", path.display())]
    Empty {
        /// Which file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
    },
    /// The CA bundle holds no usable certificate.
    #[error("service-account CA certificate file {} is unusable: {reason}", path.display())]
    InvalidCa {
        /// Its path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The token path cannot be handed to the client (not UTF-8).
    #[error("service-account token path {} is not valid UTF-8", path.display())]
    NonUnicodePath {
        /// The path.
        path: PathBuf,
    },
}

/// In-cluster configuration is unavailable; every problem found is listed.
#[derive(Debug, Error)]
#[error("in-cluster configuration unavailable: {}", Joined(problems))]
pub struct InClusterError {
    /// Everything that is missing or invalid, in a stable order.
    pub problems: Vec<InClusterProblem>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn service_url_formats_like_client_go() {
        assert_eq!(
            service_url("10.0.0.1", "443").unwrap().to_string(),
            "https://10.0.0.1/"
        );
        assert_eq!(
            service_url("10.0.0.1", "6443").unwrap().to_string(),
            "https://10.0.0.1:6443/"
        );
        assert_eq!(
            service_url("fd00::1", "6443").unwrap().to_string(),
            "https://[fd00::1]:6443/"
        );
        assert!(matches!(
            service_url("10.0.0.1", "http"),
            Err(InClusterProblem::InvalidPort { .. })
        ));
        assert!(matches!(
            service_url("10.0.0.1", "0"),
            Err(InClusterProblem::InvalidPort { .. })
        ));
    }

    #[test]
    fn missing_in_cluster_pieces_are_all_named() {
        let dir = tempfile::tempdir().unwrap();
        let source = InClusterSource {
            dir: dir.path().to_owned(),
            host: None,
            port: None,
        };
        let err = source.load().unwrap_err();
        let text = err.to_string();
        for needle in [
            SERVICE_HOST_ENV,
            SERVICE_PORT_ENV,
            "token",
            "CA certificate",
            "namespace",
        ] {
            assert!(text.contains(needle), "{needle} missing from: {text}");
        }
        assert_eq!(err.problems.len(), 5);
    }

    #[test]
    fn empty_and_garbage_files_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TOKEN_FILE), "").unwrap();
        std::fs::write(dir.path().join(CA_FILE), "not a certificate").unwrap();
        std::fs::write(dir.path().join(NAMESPACE_FILE), "\n").unwrap();
        let err = InClusterSource::new(dir.path(), "10.0.0.1", 443)
            .load()
            .unwrap_err();
        assert!(matches!(
            err.problems[0],
            InClusterProblem::Empty { what: "token", .. }
        ));
        assert!(matches!(
            err.problems[1],
            InClusterProblem::InvalidCa { .. }
        ));
        assert!(matches!(
            err.problems[2],
            InClusterProblem::Empty {
                what: "namespace",
                ..
            }
        ));
    }
}
