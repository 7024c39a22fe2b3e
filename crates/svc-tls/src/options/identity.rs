//! One client identity's options: where it comes from (a Secret or the SPIFFE
//! Workload API), the Secret reference, the SPIFFE server ID, the deprecated interval.

use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

use super::{
    OptionsError, SecretRef, flags::dash_prefix, flags::get, flags::non_empty, flags::reference,
    flags::value_arg, flags::warn_deprecated_once, flags::warn_ignored_once,
};
use crate::duration::{GoDuration, parse_go_duration};
use crate::files::FileLayout;
use std::path::PathBuf;

/// The deprecated interval's flag, registered for the unprefixed identity only.
const RELOAD_INTERVAL_FLAG: &str = "client-certificate-reload-interval";

/// Options for one client identity: `--[P-]client-certificate-source`,
/// `--[P-]client-certificate-namespace`, `--[P-]client-certificate-name`,
/// `--[P-]spiffe-server-id`, and, for the unprefixed set only, the deprecated
/// `--client-certificate-reload-interval`.
///
/// The default set has no prefix. A prefix `P` gives a distinct identity (for
/// example one per peer service) whose flags start with `--P-`, as Go's
/// `NewHTTPClientOptions("P")` in the per-handshake generation. Like that generation,
/// a prefixed set registers no reload interval: Go never accepted
/// `--P-client-certificate-reload-interval` (a prefixed copy would redefine the flag,
/// which pflag panics on), so neither do we, and an argument vector is accepted or
/// refused alike by the Go and the Rust binary
/// (`docs/decisions/prefixed-identity-has-no-reload-interval.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentityOptions {
    prefix: Option<String>,
    source: ClientCertificateSource,
    namespace: Option<String>,
    name: Option<String>,
    reload_interval: Option<GoDuration>,
    spiffe_server_id: Option<spiffe::SpiffeId>,
    dir: Option<PathBuf>,
    layout: FileLayout,
}

/// Where the client identity comes from (`--[P-]client-certificate-source`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClientCertificateSource {
    /// A `kubernetes.io/tls` Secret (`--[P-]client-certificate-namespace`/`-name`).
    /// The default.
    #[default]
    Secret,
    /// The SPIFFE Workload API at `SPIFFE_ENDPOINT_SOCKET`; the server must present
    /// `--[P-]spiffe-server-id` (see [`crate::spiffe`]).
    Spiffe,
    /// Key and certificate files in a mounted directory
    /// (`--[P-]client-certificate-dir`, `--[P-]client-certificate-layout`; see
    /// [`crate::files`]).
    File,
}

/// What the identity flags describe, as one value: started once per process (the
/// Secret's watch, or the Workload API stream) and handed to every peer built from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityConfig {
    /// No client certificate.
    None,
    /// The identity in this `kubernetes.io/tls` Secret.
    Secret(SecretRef),
    /// The X509-SVID of the SPIFFE Workload API at `SPIFFE_ENDPOINT_SOCKET`; servers
    /// must present exactly `server_id`.
    Spiffe {
        /// `--[P-]spiffe-server-id`.
        server_id: spiffe::SpiffeId,
    },
    /// The key and certificate files in `dir`, named by `layout`.
    Files {
        /// `--[P-]client-certificate-dir`.
        dir: PathBuf,
        /// `--[P-]client-certificate-layout` (default `kubernetes-tls`).
        layout: FileLayout,
    },
}

impl ClientCertificateSource {
    /// The flag value (`secret`, `spiffe`, `file`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Secret => "secret",
            Self::Spiffe => "spiffe",
            Self::File => "file",
        }
    }
}

impl ClientIdentityOptions {
    /// Options with nothing set (for building options in code). An empty prefix
    /// is the same as none.
    pub fn new(prefix: Option<&str>) -> Self {
        Self {
            prefix: prefix.filter(|p| !p.is_empty()).map(str::to_owned),
            source: ClientCertificateSource::Secret,
            namespace: None,
            name: None,
            reload_interval: None,
            spiffe_server_id: None,
            dir: None,
            layout: FileLayout::KubernetesTls,
        }
    }

    /// Takes the identity from the files in `dir`, named by `layout` (clears any
    /// Secret reference and SPIFFE server ID).
    #[must_use]
    pub fn with_files(mut self, dir: impl Into<PathBuf>, layout: FileLayout) -> Self {
        self.source = ClientCertificateSource::File;
        self.namespace = None;
        self.name = None;
        self.spiffe_server_id = None;
        self.dir = Some(dir.into());
        self.layout = layout;
        self
    }

    /// `--[P-]client-certificate-dir`.
    pub fn dir_flag(prefix: Option<&str>) -> String {
        format!("{}client-certificate-dir", dash_prefix(prefix))
    }

    /// `--[P-]client-certificate-layout`.
    pub fn layout_flag(prefix: Option<&str>) -> String {
        format!("{}client-certificate-layout", dash_prefix(prefix))
    }

    /// Takes the identity from the SPIFFE Workload API, authorizing servers that
    /// present `server_id` (clears any Secret reference).
    #[must_use]
    pub fn with_spiffe(mut self, server_id: spiffe::SpiffeId) -> Self {
        self.source = ClientCertificateSource::Spiffe;
        self.namespace = None;
        self.name = None;
        self.spiffe_server_id = Some(server_id);
        self
    }

    /// `--[P-]client-certificate-source`.
    pub fn source_flag(prefix: Option<&str>) -> String {
        format!("{}client-certificate-source", dash_prefix(prefix))
    }

    /// `--[P-]spiffe-server-id`.
    pub fn spiffe_server_id_flag(prefix: Option<&str>) -> String {
        format!("{}spiffe-server-id", dash_prefix(prefix))
    }

    /// Where the identity comes from.
    pub fn source(&self) -> ClientCertificateSource {
        self.source
    }

    /// The SPIFFE ID servers must present (always `Some` in SPIFFE mode).
    pub fn spiffe_server_id(&self) -> Option<&spiffe::SpiffeId> {
        self.spiffe_server_id.as_ref()
    }

    /// Sets the Secret reference (empty strings count as unset).
    #[must_use]
    pub fn with_secret(mut self, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        self.namespace = non_empty(namespace.into());
        self.name = non_empty(name.into());
        self
    }

    /// `--[P-]client-certificate-namespace`.
    pub fn namespace_flag(prefix: Option<&str>) -> String {
        format!("{}client-certificate-namespace", dash_prefix(prefix))
    }

    /// `--[P-]client-certificate-name`.
    pub fn name_flag(prefix: Option<&str>) -> String {
        format!("{}client-certificate-name", dash_prefix(prefix))
    }

    /// `--client-certificate-reload-interval` (deprecated, ignored) for the
    /// unprefixed identity; `None` for a prefix, which has no such flag.
    pub fn reload_interval_flag(prefix: Option<&str>) -> Option<String> {
        match prefix.filter(|p| !p.is_empty()) {
            None => Some(RELOAD_INTERVAL_FLAG.to_owned()),
            Some(_) => None,
        }
    }

    /// Adds this identity's flags to `cmd`; `prefix` `None` (or empty) gives the
    /// default, unprefixed flags, the deprecated reload interval among them. The
    /// prefix is used verbatim (lowercase, e.g. `region`) and the help texts name it
    /// as the peer service.
    pub fn augment(cmd: Command, prefix: Option<&str>) -> Command {
        let prefix = prefix.filter(|p| !p.is_empty());
        let (heading, whom) = match prefix {
            Some(p) => (
                format!("Client identity towards the {p} service"),
                format!("presented to the {p} service"),
            ),
            None => (
                "Client identity".to_owned(),
                "presented to peer services".to_owned(),
            ),
        };
        let ns = Self::namespace_flag(prefix);
        let name = Self::name_flag(prefix);
        let source = Self::source_flag(prefix);
        let server_id = Self::spiffe_server_id_flag(prefix);
        let dir = Self::dir_flag(prefix);
        let layout = Self::layout_flag(prefix);
        let cmd = cmd.arg(value_arg(&source, "SOURCE", &heading).help(format!(
            "Where the client certificate {whom} comes from: secret (a kubernetes.io/tls Secret, the default), spiffe (the SPIFFE Workload API at SPIFFE_ENDPOINT_SOCKET) or file (the files in --{dir})"
        )))
        .arg(value_arg(&dir, "DIR", &heading).help(format!(
            "With --{source}=file: the directory holding the key and certificate {whom} (a mounted Secret or projected volume, the csi-driver's, spiffe-helper's); re-read when it changes"
        )))
        .arg(value_arg(&layout, "LAYOUT", &heading).help(format!(
            "With --{source}=file: the files' names: kubernetes-tls (tls.crt, tls.key; the default), csi-driver (the same), spiffe-helper (svid.pem, svid_key.pem) or pod-certificate (credentialbundle.pem, key and chain in one file)"
        )))
        .arg(value_arg(&server_id, "SPIFFE_ID", &heading).help(format!(
            "With --{source}=spiffe: the SPIFFE ID the server must present (spiffe://<trust-domain>/<path>); required in that mode"
        )))
        .arg(value_arg(&ns, "NAMESPACE", &heading).help(format!(
            "Namespace of the kubernetes.io/tls Secret holding the client certificate {whom} (set with --{name})"
        )))
        .arg(value_arg(&name, "NAME", &heading).help(format!(
            "Name of the kubernetes.io/tls Secret holding the client certificate {whom} (set with --{ns})"
        )));
        match Self::reload_interval_flag(prefix) {
            Some(interval) => cmd.arg(
                value_arg(&interval, "DURATION", &heading)
                    .value_parser(parse_go_duration)
                    .help(format!(
                        "Deprecated and ignored: the client certificate {whom} is re-read on every TLS handshake (was a Go duration, default 24h; any Go duration is accepted)"
                    )),
            ),
            None => cmd,
        }
    }

    /// Reads the options added by [`ClientIdentityOptions::augment`] with the
    /// same prefix. A given reload interval (unprefixed set only) is accepted and
    /// reported once per process as deprecated through `tracing::warn!`.
    pub fn from_matches(matches: &ArgMatches, prefix: Option<&str>) -> Result<Self, OptionsError> {
        let prefix = prefix.filter(|p| !p.is_empty());
        let reload_interval = match Self::reload_interval_flag(prefix) {
            Some(interval_flag) => {
                let value = get::<GoDuration>(matches, &interval_flag)?;
                if value.is_some()
                    && matches!(
                        matches.value_source(&interval_flag),
                        Some(ValueSource::CommandLine | ValueSource::EnvVariable)
                    )
                {
                    warn_deprecated_once(&interval_flag);
                }
                value
            }
            None => None,
        };
        let source_flag = Self::source_flag(prefix);
        let source = match get::<String>(matches, &source_flag)?.as_deref() {
            None | Some("") | Some("secret") => ClientCertificateSource::Secret,
            Some("spiffe") => ClientCertificateSource::Spiffe,
            Some("file") => ClientCertificateSource::File,
            Some(other) => {
                return Err(OptionsError::InvalidValue {
                    flag: source_flag,
                    value: other.to_owned(),
                    expected: "secret, spiffe, file",
                });
            }
        };
        let dir_flag = Self::dir_flag(prefix);
        let layout_flag = Self::layout_flag(prefix);
        let dir = get::<String>(matches, &dir_flag)?
            .and_then(non_empty)
            .map(PathBuf::from);
        let layout = match get::<String>(matches, &layout_flag)?.and_then(non_empty) {
            None => FileLayout::KubernetesTls,
            Some(value) => match value.parse::<FileLayout>() {
                Ok(layout) => layout,
                Err(_) => {
                    return Err(OptionsError::InvalidValue {
                        flag: layout_flag,
                        value,
                        expected: "kubernetes-tls, csi-driver, spiffe-helper, pod-certificate",
                    });
                }
            },
        };
        if source != ClientCertificateSource::File && dir.is_some() {
            warn_ignored_once(
                &dir_flag,
                "it applies only with --client-certificate-source=file",
            );
        }
        let namespace = get::<String>(matches, &Self::namespace_flag(prefix))?.and_then(non_empty);
        let name = get::<String>(matches, &Self::name_flag(prefix))?.and_then(non_empty);
        let server_id_flag = Self::spiffe_server_id_flag(prefix);
        let server_id = get::<String>(matches, &server_id_flag)?.and_then(non_empty);
        // A Secret named beside a source that reads no Secret is a conflict.
        let no_secret_flags = || {
            let secret_flag = if name.is_some() {
                Some(Self::name_flag(prefix))
            } else if namespace.is_some() {
                Some(Self::namespace_flag(prefix))
            } else {
                None
            };
            match secret_flag {
                Some(secret_flag) => Err(OptionsError::SourceConflict {
                    source_flag: source_flag.clone(),
                    secret_flag,
                }),
                None => Ok(()),
            }
        };
        let warn_server_id_ignored = || {
            if server_id.is_some() {
                warn_ignored_once(
                    &server_id_flag,
                    "it applies only with --client-certificate-source=spiffe",
                );
            }
        };
        let spiffe_server_id = match source {
            ClientCertificateSource::File => {
                no_secret_flags()?;
                if dir.is_none() {
                    return Err(OptionsError::MissingFlag { flag: dir_flag });
                }
                warn_server_id_ignored();
                None
            }
            ClientCertificateSource::Secret => {
                warn_server_id_ignored();
                None
            }
            ClientCertificateSource::Spiffe => {
                no_secret_flags()?;
                let Some(value) = server_id else {
                    return Err(Self::missing_server_id(prefix));
                };
                match spiffe::SpiffeId::new(&value) {
                    Ok(id) => Some(id),
                    Err(error) => {
                        return Err(OptionsError::InvalidSpiffeId {
                            flag: server_id_flag,
                            value,
                            reason: error.to_string(),
                        });
                    }
                }
            }
        };
        Ok(Self {
            prefix: prefix.map(str::to_owned),
            source,
            namespace,
            name,
            reload_interval,
            spiffe_server_id,
            dir,
            layout,
        })
    }

    /// The directory and layout of `--[P-]client-certificate-source=file` (`None` in
    /// the other modes).
    pub fn files(&self) -> Option<(&std::path::Path, &FileLayout)> {
        match self.source {
            ClientCertificateSource::File => self.dir.as_deref().map(|dir| (dir, &self.layout)),
            ClientCertificateSource::Secret | ClientCertificateSource::Spiffe => None,
        }
    }

    /// The prefix (`None` for the default identity).
    pub fn prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// The deprecated reload interval, when given, with its sign (Go accepted zero
    /// and negative values). It has no effect. Always `None` for a prefixed set,
    /// which has no such flag.
    pub fn deprecated_reload_interval(&self) -> Option<GoDuration> {
        self.reload_interval
    }

    /// The identity these flags describe: none, a Secret, or SPIFFE with the server ID
    /// to authorize. Fails as [`ClientIdentityOptions::secret`] does, and with
    /// [`OptionsError::MissingSpiffeServerId`] in SPIFFE mode without a server ID.
    pub fn config(&self) -> Result<IdentityConfig, OptionsError> {
        match self.source {
            ClientCertificateSource::Secret => Ok(match self.secret()? {
                Some(secret) => IdentityConfig::Secret(secret),
                None => IdentityConfig::None,
            }),
            ClientCertificateSource::Spiffe => Ok(IdentityConfig::Spiffe {
                server_id: self.required_spiffe_server_id()?,
            }),
            ClientCertificateSource::File => match &self.dir {
                Some(dir) => Ok(IdentityConfig::Files {
                    dir: dir.clone(),
                    layout: self.layout.clone(),
                }),
                None => Err(OptionsError::MissingFlag {
                    flag: Self::dir_flag(self.prefix.as_deref()),
                }),
            },
        }
    }

    /// The SPIFFE ID servers must present, validated when the flags were read
    /// ([`ClientIdentityOptions::from_matches`]) or given ([`ClientIdentityOptions::with_spiffe`]);
    /// [`OptionsError::MissingSpiffeServerId`] when there is none.
    pub(crate) fn required_spiffe_server_id(&self) -> Result<spiffe::SpiffeId, OptionsError> {
        self.spiffe_server_id
            .clone()
            .ok_or_else(|| Self::missing_server_id(self.prefix.as_deref()))
    }

    /// The one place the missing-server-ID error is worded.
    fn missing_server_id(prefix: Option<&str>) -> OptionsError {
        OptionsError::MissingSpiffeServerId {
            flag: Self::spiffe_server_id_flag(prefix),
            source_flag: Self::source_flag(prefix),
        }
    }

    /// The client-certificate Secret: `Some` when both flags are set, `None` when
    /// neither is, [`OptionsError::HalfSetReference`] naming the missing flag
    /// otherwise.
    pub fn secret(&self) -> Result<Option<SecretRef>, OptionsError> {
        let prefix = self.prefix.as_deref();
        reference(
            self.namespace.as_deref(),
            self.name.as_deref(),
            || Self::namespace_flag(prefix),
            || Self::name_flag(prefix),
        )
    }
}
