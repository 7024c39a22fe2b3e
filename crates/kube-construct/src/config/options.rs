//! The out-of-cluster options and the one precedence between the sources (the
//! module's guide is `overview.md`).

use std::{fmt, path::PathBuf};

use kube::config::KubeconfigError;
use thiserror::Error;

use super::incluster_config::{InClusterError, InClusterSource};
use super::master::{is_loopback, parse_master, redact_url};

/// The out-of-cluster command-line options, to `#[command(flatten)]` into a
/// service's or tool's options next to the other crates' options.
///
/// Long options only (no short flags, nothing `global`), so they do not collide
/// with other option groups in the same command.
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
         --master: not given; --context: not given; in-cluster: unavailable (the cause \
         below lists why). (The default kubeconfig ~/.kube/config is only read when --master or --context asks for \
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
    #[error("kubeconfig {} cannot be loaded", path.display())]
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
    #[error("kubeconfig {} context {context:?} is invalid", Paths(paths))]
    InvalidKubeconfig {
        /// The kubeconfig files read.
        paths: Vec<PathBuf>,
        /// The context.
        context: String,
        /// What is wrong.
        #[source]
        source: KubeconfigError,
    },
    /// The configuration would send credentials in clear text: a bearer token
    /// (or a token source: token file, exec plugin, auth provider) or basic auth
    /// over plain `http://` to a host that is not loopback.
    #[error(
        "refusing to send {credential} over plain http:// to {url}: use https, or a loopback \
         address (e.g. kubectl proxy on 127.0.0.1)"
    )]
    CredentialsOverPlainHttp {
        /// The API server URL, credentials redacted.
        url: String,
        /// Which credential (`bearer token` or `basic auth`).
        credential: &'static str,
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

    /// Resolve against the process environment (see the [module docs](super) for the precedence).
    pub async fn resolve(&self) -> Result<Resolved, ConfigError> {
        self.resolve_in(&Environment::from_process()).await
    }

    /// Resolve against an explicit environment (see the [module docs](super) for the precedence).
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

        let resolved = super::file_loader::load(self, env, master).await?;
        refuse_plain_http_credentials(&resolved.config)?;
        Ok(resolved)
    }
}

/// Credentials never go in clear text to a remote host.
fn refuse_plain_http_credentials(config: &kube::Config) -> Result<(), ConfigError> {
    let url = &config.cluster_url;
    if url.scheme_str() != Some("http") || is_loopback(url) {
        return Ok(());
    }
    let auth = &config.auth_info;
    let in_url = url.authority().is_some_and(|a| a.as_str().contains('@'));
    let credential = if auth.username.is_some() || auth.password.is_some() || in_url {
        "basic auth"
    } else if auth.token.is_some()
        || auth.token_file.is_some()
        || auth.exec.is_some()
        || auth.auth_provider.is_some()
    {
        "bearer token"
    } else {
        return Ok(());
    };
    Err(ConfigError::CredentialsOverPlainHttp {
        url: redact_url(&url.to_string()),
        credential,
    })
}
