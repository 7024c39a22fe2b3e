//! Where the Kubernetes client configuration comes from.
//!
//! Two sources, and one documented precedence between them, with no silent
//! fallback anywhere:
//!
//! * **In cluster** ([`InClusterSource`]): the service-account token, CA bundle
//!   and namespace files, and `KUBERNETES_SERVICE_HOST` / `KUBERNETES_SERVICE_PORT`.
//!   Every missing piece is named in the error; it never falls back to a
//!   kubeconfig or to `localhost`.
//! * **Out of cluster** ([`KubeOptions`]): the clap options `--kubeconfig`
//!   (or the `KUBECONFIG` environment variable), `--master` and `--context`.
//!
//! # Precedence ([`KubeOptions::resolve`])
//!
//! 1. Explicit out-of-cluster options: `--kubeconfig` (or `KUBECONFIG`, which clap
//!    reads as the value of `--kubeconfig`), `--master`, `--context`.
//!    * With a kubeconfig path: that file (a `KUBECONFIG`-style list of paths is
//!      merged, and every file in it must exist) and its current context, or the
//!      one `--context` names; `--master` replaces the selected cluster's server
//!      URL (CA and credentials stay).
//!    * With `--master` and/or `--context` but no kubeconfig path: the default
//!      kubeconfig `~/.kube/config`. `--context` requires it to exist;
//!      `--master` alone, when it does not exist, uses the URL with no credentials
//!      (what `kubectl --server` against `kubectl proxy` does).
//!    * When any of this fails, that error is returned. It never switches to
//!      in-cluster configuration.
//! 2. Otherwise (no out-of-cluster option at all): in-cluster configuration.
//!    `~/.kube/config` is *not* consulted: a process that was given no flag runs
//!    where it was deployed, and the error says so.
//! 3. When neither applies the error ([`ConfigError::NoSource`]) lists every
//!    source tried and why each failed.
//!
//! This deliberately differs from client-go's `BuildConfigFromFlags`, which
//! falls back to `KUBERNETES_MASTER` or `http://localhost:8080` without an error.

use std::{fmt, path::PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use rustls_pki_types::{CertificateDer, pem::PemObject};
use thiserror::Error;

/// The directory Kubernetes mounts the service-account credentials into.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The environment variable naming the API server host inside a pod.
pub const SERVICE_HOST_ENV: &str = "KUBERNETES_SERVICE_HOST";
/// The environment variable naming the API server port inside a pod.
pub const SERVICE_PORT_ENV: &str = "KUBERNETES_SERVICE_PORT";
/// The service-account token file name.
pub const TOKEN_FILE: &str = "token";
/// The service-account CA bundle file name.
pub const CA_FILE: &str = "ca.crt";
/// The service-account namespace file name.
pub const NAMESPACE_FILE: &str = "namespace";

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
    /// The real in-cluster source: [`SERVICE_ACCOUNT_DIR`] and the process environment.
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
    #[error("service-account {what} file {} cannot be read: {source}", path.display())]
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

struct Joined<'a, T>(&'a [T]);

impl<T: fmt::Display> fmt::Display for Joined<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

/// The out-of-cluster command-line options, to `#[command(flatten)]` into a
/// service's or tool's options next to the other crates' options.
///
/// Long options only (no short flags, nothing `global`), so they do not collide
/// with other option groups in the same command. A flag given twice keeps its last
/// value, as Go's pflag does (deployed manifests may repeat a flag).
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeOptions {
    /// Path to a kubeconfig file (a list separated like PATH is merged). Selects
    /// out-of-cluster configuration.
    #[arg(
        long = "kubeconfig",
        env = "KUBECONFIG",
        value_name = "PATH",
        overrides_with = "kubeconfig"
    )]
    pub kubeconfig: Option<PathBuf>,
    /// The API server URL, overriding the kubeconfig's server. Selects
    /// out-of-cluster configuration.
    #[arg(long = "master", value_name = "URL", overrides_with = "master")]
    pub master: Option<String>,
    /// The kubeconfig context to use instead of its current context. Selects
    /// out-of-cluster configuration.
    #[arg(long = "context", value_name = "NAME", overrides_with = "context")]
    pub context: Option<String>,
}

/// The parts of the environment [`KubeOptions::resolve_in`] reads besides the
/// options themselves; injectable so tests never mutate the process environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Environment {
    /// The home directory (for the default kubeconfig `~/.kube/config`), if known.
    pub home: Option<PathBuf>,
    /// Where in-cluster configuration is read from.
    pub in_cluster: InClusterSource,
}

impl Environment {
    /// The process environment: `HOME` (or `USERPROFILE`) and [`InClusterSource::from_env`].
    pub fn from_process() -> Self {
        let home = std::env::var_os("HOME")
            .or_else(|| std::env::var_os("USERPROFILE"))
            .filter(|home| !home.is_empty())
            .map(PathBuf::from);
        Self {
            home,
            in_cluster: InClusterSource::from_env(),
        }
    }

    /// The default kubeconfig location, `~/.kube/config`.
    pub fn default_kubeconfig(&self) -> Option<PathBuf> {
        self.home
            .as_ref()
            .map(|home| home.join(".kube").join("config"))
    }
}

/// Where a resolved configuration came from (for logs and diagnostics).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigSource {
    /// In-cluster service-account configuration.
    InCluster {
        /// The service-account directory.
        dir: PathBuf,
    },
    /// A kubeconfig file (or merged list of files).
    Kubeconfig {
        /// The files read.
        paths: Vec<PathBuf>,
        /// The context used.
        context: String,
        /// The `--master` URL that replaced the context's server, if any.
        master: Option<String>,
    },
    /// `--master` alone, with no kubeconfig and no credentials.
    Master {
        /// The URL.
        url: String,
    },
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InCluster { dir } => write!(f, "in-cluster service account ({})", dir.display()),
            Self::Kubeconfig {
                paths,
                context,
                master,
            } => {
                write!(f, "kubeconfig {} context {context:?}", Paths(paths))?;
                if let Some(master) = master {
                    write!(f, " with server overridden by --master {master}")?;
                }
                Ok(())
            }
            Self::Master { url } => write!(f, "--master {url} (no kubeconfig, no credentials)"),
        }
    }
}

/// A resolved configuration and where it came from.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The client configuration.
    pub config: kube::Config,
    /// Its source.
    pub source: ConfigSource,
}

/// Why no configuration could be resolved.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No out-of-cluster option was given and in-cluster configuration is unavailable.
    #[error(
        "no Kubernetes configuration found. Tried: --kubeconfig: not given (and KUBECONFIG is not set); \
         --master: not given; --context: not given; {in_cluster}. \
         (The default kubeconfig ~/.kube/config is only read when --master or --context asks for \
         out-of-cluster use.)"
    )]
    NoSource {
        /// Why in-cluster configuration failed.
        #[source]
        in_cluster: InClusterError,
    },
    /// A kubeconfig file named by `--kubeconfig` / `KUBECONFIG` does not exist.
    #[error("kubeconfig {} (from --kubeconfig or KUBECONFIG) does not exist", path.display())]
    KubeconfigNotFound {
        /// The missing file.
        path: PathBuf,
    },
    /// `--context` was given, no kubeconfig path was, and the default kubeconfig is unavailable.
    #[error("--context {context:?} needs a kubeconfig, but none was found: {reason}")]
    NoKubeconfigForContext {
        /// The requested context.
        context: String,
        /// Why the default kubeconfig is unavailable.
        reason: String,
    },
    /// A kubeconfig file exists but cannot be read or parsed.
    #[error("kubeconfig {} cannot be loaded: {source}", path.display())]
    KubeconfigUnreadable {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: KubeconfigError,
    },
    /// The requested context is not defined in the kubeconfig.
    #[error(
        "context {context:?} does not exist in kubeconfig {}; available contexts: {}",
        Paths(paths),
        Names(available)
    )]
    ContextNotFound {
        /// The requested context.
        context: String,
        /// The kubeconfig files read.
        paths: Vec<PathBuf>,
        /// The contexts that do exist.
        available: Vec<String>,
    },
    /// The kubeconfig has no current context and `--context` was not given.
    #[error(
        "kubeconfig {} has no current-context; pass --context (available: {})",
        Paths(paths),
        Names(available)
    )]
    NoCurrentContext {
        /// The kubeconfig files read.
        paths: Vec<PathBuf>,
        /// The contexts that exist.
        available: Vec<String>,
    },
    /// The selected context does not form a usable configuration.
    #[error("kubeconfig {} context {context:?} is invalid: {source}", Paths(paths))]
    InvalidKubeconfig {
        /// The kubeconfig files read.
        paths: Vec<PathBuf>,
        /// The context.
        context: String,
        /// What is wrong.
        #[source]
        source: KubeconfigError,
    },
    /// `--master` is not an absolute http(s) URL.
    #[error("--master {value:?} is not a valid API server URL: {reason}")]
    InvalidMaster {
        /// The value given.
        value: String,
        /// Why.
        reason: String,
    },
}

struct Paths<'a>(&'a [PathBuf]);

impl fmt::Display for Paths<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, path) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}", path.display())?;
        }
        Ok(())
    }
}

struct Names<'a>(&'a [String]);

impl fmt::Display for Names<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        for (i, name) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name:?}")?;
        }
        Ok(())
    }
}

impl KubeOptions {
    /// True when any option asks for out-of-cluster configuration.
    pub fn is_out_of_cluster(&self) -> bool {
        self.kubeconfig.is_some() || self.master.is_some() || self.context.is_some()
    }

    /// Resolve against the process environment (see the [module docs](self) for the precedence).
    pub async fn resolve(&self) -> Result<Resolved, ConfigError> {
        self.resolve_in(&Environment::from_process()).await
    }

    /// Resolve against an explicit environment (see the [module docs](self) for the precedence).
    pub async fn resolve_in(&self, env: &Environment) -> Result<Resolved, ConfigError> {
        let master = self.master.as_deref().map(parse_master).transpose()?;

        if !self.is_out_of_cluster() {
            return match env.in_cluster.load() {
                Ok(config) => Ok(Resolved {
                    config,
                    source: ConfigSource::InCluster {
                        dir: env.in_cluster.dir.clone(),
                    },
                }),
                Err(in_cluster) => Err(ConfigError::NoSource { in_cluster }),
            };
        }

        let paths = match &self.kubeconfig {
            Some(list) => {
                let paths: Vec<PathBuf> = std::env::split_paths(list)
                    .filter(|path| !path.as_os_str().is_empty())
                    .collect();
                if let Some(missing) = paths.iter().find(|path| !path.exists()) {
                    return Err(ConfigError::KubeconfigNotFound {
                        path: missing.clone(),
                    });
                }
                if paths.is_empty() {
                    return Err(ConfigError::KubeconfigNotFound { path: list.clone() });
                }
                paths
            }
            None => match env.default_kubeconfig() {
                Some(path) if path.exists() => vec![path],
                unavailable => {
                    let reason = match unavailable {
                        Some(path) => format!(
                            "--kubeconfig not given, KUBECONFIG not set, and {} does not exist",
                            path.display()
                        ),
                        None => "--kubeconfig not given, KUBECONFIG not set, and the home directory is unknown"
                            .to_owned(),
                    };
                    // `--context` needs a kubeconfig; `--master` alone does not.
                    let (None, Some((url, uri))) = (&self.context, master) else {
                        return Err(ConfigError::NoKubeconfigForContext {
                            context: self.context.clone().unwrap_or_default(),
                            reason,
                        });
                    };
                    tracing::warn!(%url, %reason, "using --master without a kubeconfig: no credentials, no CA");
                    return Ok(Resolved {
                        config: kube::Config::new(uri),
                        source: ConfigSource::Master { url },
                    });
                }
            },
        };

        let mut merged: Option<Kubeconfig> = None;
        for path in &paths {
            let next = Kubeconfig::read_from(path).map_err(|source| {
                ConfigError::KubeconfigUnreadable {
                    path: path.clone(),
                    source,
                }
            })?;
            merged =
                Some(match merged {
                    None => next,
                    Some(previous) => previous.merge(next).map_err(|source| {
                        ConfigError::KubeconfigUnreadable {
                            path: path.clone(),
                            source,
                        }
                    })?,
                });
        }
        let kubeconfig = merged.unwrap_or_default();
        let available: Vec<String> = kubeconfig.contexts.iter().map(|c| c.name.clone()).collect();

        let context = match (&self.context, &kubeconfig.current_context) {
            (Some(context), _) => context.clone(),
            (None, Some(current)) if !current.is_empty() => current.clone(),
            (None, _) => {
                return Err(ConfigError::NoCurrentContext { paths, available });
            }
        };
        if !available.contains(&context) {
            return Err(ConfigError::ContextNotFound {
                context,
                paths,
                available,
            });
        }

        let options = KubeConfigOptions {
            context: Some(context.clone()),
            ..Default::default()
        };
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|source| ConfigError::InvalidKubeconfig {
                paths: paths.clone(),
                context: context.clone(),
                source,
            })?;
        let master = master.map(|(url, uri)| {
            config.cluster_url = uri;
            url
        });
        Ok(Resolved {
            config,
            source: ConfigSource::Kubeconfig {
                paths,
                context,
                master,
            },
        })
    }
}

/// Validate `--master`: an absolute `http` or `https` URL.
fn parse_master(value: &str) -> Result<(String, http::Uri), ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidMaster {
        value: value.to_owned(),
        reason,
    };
    let uri: http::Uri = value
        .parse()
        .map_err(|err: http::uri::InvalidUri| invalid(err.to_string()))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return Err(invalid(format!("scheme {other:?} is not http or https"))),
        None => {
            return Err(invalid(
                "it has no scheme (expected https://host:port)".to_owned(),
            ));
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("it has no host".to_owned()));
    }
    Ok((value.to_owned(), uri))
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
    fn master_must_be_an_absolute_http_url() {
        assert!(parse_master("https://api.example:6443").is_ok());
        assert!(parse_master("http://127.0.0.1:8001").is_ok());
        for bad in ["api.example:6443", "ftp://x", "/path", "https://"] {
            assert!(
                matches!(parse_master(bad), Err(ConfigError::InvalidMaster { .. })),
                "{bad} accepted"
            );
        }
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
