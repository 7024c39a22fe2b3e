//! Command-line options: peer services and client identities, and the one rule
//! for Secret references.
//!
//! The flag names are deployed and never change (see the legacy behaviour):
//!
//! | option set | flags |
//! |---|---|
//! | peer service `S` | `--S-host`, `--S-ca-secret-namespace`, `--S-ca-secret-name` |
//! | client identity, default | `--client-certificate-source`, `--client-certificate-namespace`, `--client-certificate-name`, `--client-certificate-reload-interval`, `--spiffe-server-id` |
//! | client identity, prefix `P` | `--P-client-certificate-source`, `--P-client-certificate-namespace`, `--P-client-certificate-name`, `--P-client-certificate-reload-interval`, `--P-spiffe-server-id` |
//!
//! `--[P-]client-certificate-source` is `secret` (the default) or `spiffe`; in `spiffe`
//! mode `--[P-]spiffe-server-id` is required and the Secret flags must not be set
//! (each problem is its own [`OptionsError`]).
//!
//! clap's derive API fixes flag names at compile time, so these option sets are
//! built with the builder API: each set adds its arguments to a [`Command`]
//! (`augment`) and reads them back from the [`ArgMatches`] (`from_matches`) under
//! the same service name or prefix. Several sets coexist in one command; a name
//! collision is caught by clap's [`Command::debug_assert`].
//!
//! ```
//! use clap::Command;
//! use svc_tls::options::{ClientIdentityOptions, PeerOptions};
//!
//! let cmd = Command::new("svc");
//! let cmd = PeerOptions::augment(cmd, "identity");
//! let cmd = PeerOptions::augment(cmd, "audit");
//! let cmd = ClientIdentityOptions::augment(cmd, None);
//! let m = cmd.get_matches_from([
//!     "svc",
//!     "--identity-host=https://identity.example.com",
//!     "--audit-host=", // rendered empty: the audit peer is not configured
//!     "--client-certificate-namespace=unikorn",
//!     "--client-certificate-name=unikorn-client-certificate",
//! ]);
//! let identity = PeerOptions::from_matches(&m, "identity").unwrap();
//! let audit = PeerOptions::from_matches(&m, "audit").unwrap();
//! let client = ClientIdentityOptions::from_matches(&m, None).unwrap();
//! assert_eq!(identity.host().unwrap().unwrap().as_str(), "https://identity.example.com/");
//! assert!(!audit.is_configured());
//! assert_eq!(identity.ca_secret().unwrap(), None);
//! assert_eq!(
//!     client.secret().unwrap().unwrap().to_string(),
//!     "unikorn/unikorn-client-certificate"
//! );
//! ```
//!
//! # Values as pflag took them
//!
//! Deployed Helm charts were written against Go's pflag, and a migrated binary
//! must start with every value they render:
//! - `--S-host` is a plain string at parse time. An empty value means the peer is
//!   not configured ([`PeerOptions::is_configured`]; Go callers tested
//!   `Host() != ""`). The value is checked when it is used
//!   ([`PeerOptions::host`], [`PeerOptions::require_host`], and
//!   [`PeerTls::from_options`](crate::client::PeerTls::from_options)): a value that
//!   is not an `http`/`https` URL with a host is a [`HostError`] naming the flag and
//!   quoting the value. A bare `host:port` such as `collector:443` is refused, never
//!   completed with a guessed scheme.
//! - `--[P-]client-certificate-reload-interval` takes every value of Go's
//!   `time.ParseDuration`, negative and zero included ([`crate::duration`]).
//! - A flag given twice keeps its last value, for every flag defined here
//!   (`Arg::overrides_with` on itself).
//! - A value may start with `-` (`--client-certificate-reload-interval -1s`): like
//!   pflag, the word after a flag that takes a value is its value.
//!
//! # One rule for Secret references
//!
//! A reference (CA trust or client identity) is either fully set (namespace and
//! name) or unset; a half-set reference is a [`OptionsError::HalfSetReference`]
//! naming the missing flag. An empty value counts as unset (Helm charts render
//! unset values as `--flag=`). The Go code checked only the CA Secret's *name*
//! and silently ignored a lone namespace; we do not reproduce that.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use url::Url;

pub use crate::duration::{GoDuration, parse_go_duration};
pub use crate::error::OptionsError;

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

/// The default of the deprecated `--client-certificate-reload-interval` (24h).
pub const DEPRECATED_RELOAD_INTERVAL_DEFAULT: Duration = Duration::from_secs(24 * 60 * 60);

/// Why a `--S-host` value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The flag was not given, or given empty: the peer is not configured.
    #[error("--{flag} is not configured (not given, or given empty)")]
    NotConfigured {
        /// The flag (without the leading `--`), e.g. `audit-host`.
        flag: String,
    },
    /// The flag has a value, and it is not a usable base URL.
    #[error("--{flag}={value:?} is not a usable URL: {problem}")]
    Invalid {
        /// The flag (without the leading `--`), e.g. `identity-host`.
        flag: String,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        problem: HostProblem,
    },
}

impl HostError {
    /// The flag this error is about (without the leading `--`).
    pub fn flag(&self) -> &str {
        match self {
            Self::NotConfigured { flag } | Self::Invalid { flag, .. } => flag,
        }
    }
}

/// What is wrong with a `--S-host` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostProblem {
    /// No scheme. `bare_host_port` is set for values such as `collector:443`, which
    /// a URL parser would read as the scheme `collector`: the scheme is never guessed.
    #[error("{}", if *bare_host_port {
        "the scheme is missing (a bare host:port is not a URL, and no scheme is guessed: write https://host:port or http://host:port)"
    } else {
        "the scheme is missing (write https://host or http://host)"
    })]
    MissingScheme {
        /// Whether the value looks like `host:port`.
        bare_host_port: bool,
    },
    /// The scheme is there, the host is not (e.g. `https://`, which charts render
    /// when the host value is missing).
    #[error("the host is missing")]
    MissingHost,
    /// A scheme other than `http` or `https`.
    #[error("the scheme {scheme:?} is not supported (use https or http)")]
    UnsupportedScheme {
        /// The scheme found.
        scheme: String,
    },
    /// The value cannot be parsed as a URL at all.
    #[error("not a URL: {reason}")]
    NotAUrl {
        /// The URL parser's explanation.
        reason: String,
    },
}

/// Checks a `--S-host` value: an absolute `http`/`https` URL with a host.
///
/// `value` must be non-empty (an empty value means "not configured" and never
/// reaches this check).
pub fn parse_host(flag: &str, value: &str) -> Result<Url, HostError> {
    let invalid = |problem| HostError::Invalid {
        flag: flag.to_owned(),
        value: value.to_owned(),
        problem,
    };
    let url = match Url::parse(value) {
        Ok(url) => url,
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            return Err(invalid(HostProblem::MissingScheme {
                bare_host_port: false,
            }));
        }
        Err(url::ParseError::EmptyHost) => return Err(invalid(HostProblem::MissingHost)),
        Err(e) => {
            return Err(invalid(HostProblem::NotAUrl {
                reason: e.to_string(),
            }));
        }
    };
    match url.scheme() {
        "http" | "https" => {}
        scheme => {
            // `collector:443` parses as scheme `collector` with the opaque path `443`.
            let path = url.path();
            let bare_host_port = url.cannot_be_a_base()
                && !path.is_empty()
                && path.bytes().all(|b| b.is_ascii_digit());
            return Err(invalid(if bare_host_port {
                HostProblem::MissingScheme { bare_host_port }
            } else {
                HostProblem::UnsupportedScheme {
                    scheme: scheme.to_owned(),
                }
            }));
        }
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid(HostProblem::MissingHost));
    }
    Ok(url)
}

/// Which HTTP versions a peer client may speak.
///
/// Go's transport with a custom `tls.Config` speaks HTTP/1.1 only, so that is the
/// default: a migrated service talks to its peers as the Go one did. HTTP/2 is an
/// opt-in (`--S-http2`, or [`PeerOptions::with_http_protocol`]): it multiplexes
/// every request to a peer over one long-lived connection, which then keeps the
/// identity it was opened with for its whole life (see `docs/operations.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum HttpProtocol {
    /// HTTP/1.1 only: ALPN offers `http/1.1`, reqwest speaks HTTP/1.1 only.
    #[default]
    Http1Only,
    /// HTTP/2 when the peer agrees: ALPN offers `h2` then `http/1.1`.
    Http2Preferred,
}

impl HttpProtocol {
    /// The ALPN protocol identifiers offered, in order of preference.
    pub fn alpn(self) -> Vec<Vec<u8>> {
        match self {
            Self::Http1Only => vec![b"http/1.1".to_vec()],
            Self::Http2Preferred => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        }
    }
}

/// Options for one peer service `S`: `--S-host`, `--S-ca-secret-namespace`,
/// `--S-ca-secret-name`, and the HTTP settings `--S-http2` and
/// `--S-pool-idle-timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerOptions {
    service: String,
    /// The host value as given, when non-empty (checked when used).
    host: Option<String>,
    ca_secret_namespace: Option<String>,
    ca_secret_name: Option<String>,
    protocol: HttpProtocol,
    pool_idle_timeout: Option<Duration>,
}

impl PeerOptions {
    /// Options for `service` with nothing set (for building options in code).
    pub fn new(service: impl Into<String>) -> Self {
        Self {
            service: service.into(),
            host: None,
            ca_secret_namespace: None,
            ca_secret_name: None,
            protocol: HttpProtocol::default(),
            pool_idle_timeout: None,
        }
    }

    /// Sets the host URL.
    #[must_use]
    pub fn with_host(mut self, host: Url) -> Self {
        self.host = Some(host.into());
        self
    }

    /// Sets the host as text, exactly as the flag would (an empty value means not
    /// configured; the value is checked when used).
    #[must_use]
    pub fn with_host_value(mut self, host: impl Into<String>) -> Self {
        self.host = non_empty(host.into());
        self
    }

    /// Sets the CA Secret reference (empty strings count as unset).
    #[must_use]
    pub fn with_ca_secret(mut self, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        self.ca_secret_namespace = non_empty(namespace.into());
        self.ca_secret_name = non_empty(name.into());
        self
    }

    /// Sets the HTTP versions the peer client may speak (default HTTP/1.1 only).
    #[must_use]
    pub fn with_http_protocol(mut self, protocol: HttpProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Sets how long an idle pooled connection is kept (reqwest's
    /// `pool_idle_timeout`; zero keeps no idle connection at all). Unset keeps
    /// reqwest's default of 90 seconds.
    #[must_use]
    pub fn with_pool_idle_timeout(mut self, timeout: Duration) -> Self {
        self.pool_idle_timeout = Some(timeout);
        self
    }

    /// `--S-host`.
    pub fn host_flag(service: &str) -> String {
        format!("{service}-host")
    }

    /// `--S-ca-secret-namespace`.
    pub fn ca_secret_namespace_flag(service: &str) -> String {
        format!("{service}-ca-secret-namespace")
    }

    /// `--S-ca-secret-name`.
    pub fn ca_secret_name_flag(service: &str) -> String {
        format!("{service}-ca-secret-name")
    }

    /// `--S-http2`.
    pub fn http2_flag(service: &str) -> String {
        format!("{service}-http2")
    }

    /// `--S-pool-idle-timeout`.
    pub fn pool_idle_timeout_flag(service: &str) -> String {
        format!("{service}-pool-idle-timeout")
    }

    /// Adds `--S-host`, `--S-ca-secret-namespace`, `--S-ca-secret-name`,
    /// `--S-http2` and `--S-pool-idle-timeout` to `cmd`, with help texts naming the
    /// service. `service` is used verbatim (lowercase, e.g. `identity`, `region`).
    pub fn augment(cmd: Command, service: &str) -> Command {
        let heading = format!("Peer service: {service}");
        let host = Self::host_flag(service);
        let ns = Self::ca_secret_namespace_flag(service);
        let name = Self::ca_secret_name_flag(service);
        let http2 = Self::http2_flag(service);
        let idle = Self::pool_idle_timeout_flag(service);
        cmd.arg(
            value_arg(&host, "URL", &heading).help(format!(
                "Base URL of the {service} service (empty: not configured)"
            )),
        )
        .arg(value_arg(&ns, "NAMESPACE", &heading).help(format!(
            "Namespace of the kubernetes.io/tls Secret holding the CA that issued the {service} service's certificate (set with --{name})"
        )))
        .arg(value_arg(&name, "NAME", &heading).help(format!(
            "Name of the kubernetes.io/tls Secret holding the CA that issued the {service} service's certificate (set with --{ns})"
        )))
        .arg(
            Arg::new(http2.clone())
                .long(http2.clone())
                .action(ArgAction::SetTrue)
                .overrides_with(http2)
                .help_heading(heading.clone())
                .help(format!(
                    "Offer HTTP/2 to the {service} service (default: HTTP/1.1 only, as the Go client)"
                )),
        )
        .arg(
            value_arg(&idle, "DURATION", &heading)
                .value_parser(parse_pool_idle_timeout)
                .help(format!(
                    "How long an idle connection to the {service} service is kept for reuse, a Go duration (0: none; default 90s); bounds how long a rotated identity waits for idle connections to go"
                )),
        )
    }

    /// Reads the options added by [`PeerOptions::augment`] for `service`.
    pub fn from_matches(matches: &ArgMatches, service: &str) -> Result<Self, OptionsError> {
        Ok(Self {
            service: service.to_owned(),
            host: get::<String>(matches, &Self::host_flag(service))?.and_then(non_empty),
            ca_secret_namespace: get::<String>(matches, &Self::ca_secret_namespace_flag(service))?
                .and_then(non_empty),
            ca_secret_name: get::<String>(matches, &Self::ca_secret_name_flag(service))?
                .and_then(non_empty),
            protocol: if get::<bool>(matches, &Self::http2_flag(service))?.unwrap_or(false) {
                HttpProtocol::Http2Preferred
            } else {
                HttpProtocol::Http1Only
            },
            pool_idle_timeout: get::<Duration>(matches, &Self::pool_idle_timeout_flag(service))?,
        })
    }

    /// The service name these options are for.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// Whether `--S-host` has a value (Go: `Host() != ""`). A configured value may
    /// still be invalid; see [`PeerOptions::host`].
    pub fn is_configured(&self) -> bool {
        self.host.is_some()
    }

    /// `--S-host` as given, `None` when not given or empty (Go's `Host()`, with
    /// `None` for `""`). Unchecked.
    pub fn host_value(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// `--S-host` checked: `Ok(None)` when the peer is not configured (not given or
    /// empty), the URL when it is a usable `http`/`https` URL, and a
    /// [`HostError::Invalid`] naming the flag and quoting the value otherwise.
    pub fn host(&self) -> Result<Option<Url>, HostError> {
        self.host
            .as_deref()
            .map(|value| parse_host(&Self::host_flag(&self.service), value))
            .transpose()
    }

    /// `--S-host` checked, and required: [`HostError::NotConfigured`] naming the
    /// flag when not given or empty.
    pub fn require_host(&self) -> Result<Url, HostError> {
        self.host()?.ok_or_else(|| HostError::NotConfigured {
            flag: Self::host_flag(&self.service),
        })
    }

    /// The HTTP versions the peer client may speak (`--S-http2`).
    pub fn http_protocol(&self) -> HttpProtocol {
        self.protocol
    }

    /// How long idle pooled connections are kept (`--S-pool-idle-timeout`); `None`
    /// keeps reqwest's default (90 s).
    pub fn pool_idle_timeout(&self) -> Option<Duration> {
        self.pool_idle_timeout
    }

    /// The CA Secret: `Some` when both flags are set, `None` when neither is,
    /// [`OptionsError::HalfSetReference`] naming the missing flag otherwise.
    pub fn ca_secret(&self) -> Result<Option<SecretRef>, OptionsError> {
        reference(
            self.ca_secret_namespace.as_deref(),
            self.ca_secret_name.as_deref(),
            || Self::ca_secret_namespace_flag(&self.service),
            || Self::ca_secret_name_flag(&self.service),
        )
    }
}

/// A flag taking one string value, as pflag's `StringVar`: any value (including
/// empty, or starting with `-`), and the last of repeated occurrences wins.
fn value_arg(flag: &str, value_name: &'static str, heading: &str) -> Arg {
    Arg::new(flag.to_owned())
        .long(flag.to_owned())
        .value_name(value_name)
        .action(ArgAction::Set)
        .allow_hyphen_values(true)
        .overrides_with(flag.to_owned())
        .help_heading(heading.to_owned())
}

/// `--S-pool-idle-timeout`: a Go duration, zero or positive.
fn parse_pool_idle_timeout(text: &str) -> Result<Duration, String> {
    parse_go_duration(text)?
        .to_std()
        .ok_or_else(|| format!("{text:?} is negative: give 0 (keep no idle connection) or more"))
}

/// Options for one client identity: `--[P-]client-certificate-namespace`,
/// `--[P-]client-certificate-name` and the deprecated
/// `--[P-]client-certificate-reload-interval`.
///
/// The default set has no prefix. A prefix `P` gives a distinct identity (for
/// example one per peer service) whose flags start with `--P-`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentityOptions {
    prefix: Option<String>,
    source: ClientCertificateSource,
    namespace: Option<String>,
    name: Option<String>,
    reload_interval: Option<GoDuration>,
    spiffe_server_id: Option<spiffe::SpiffeId>,
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
}

impl ClientCertificateSource {
    /// The flag value (`secret`, `spiffe`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Secret => "secret",
            Self::Spiffe => "spiffe",
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
        }
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

    /// `--[P-]client-certificate-reload-interval` (deprecated, ignored).
    pub fn reload_interval_flag(prefix: Option<&str>) -> String {
        format!("{}client-certificate-reload-interval", dash_prefix(prefix))
    }

    /// Adds this identity's flags to `cmd`; `prefix` `None` (or empty) gives the
    /// default, unprefixed flags. The prefix is used verbatim (lowercase, e.g.
    /// `region`) and the help texts name it as the peer service.
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
        let interval = Self::reload_interval_flag(prefix);
        let source = Self::source_flag(prefix);
        let server_id = Self::spiffe_server_id_flag(prefix);
        cmd.arg(value_arg(&source, "SOURCE", &heading).help(format!(
            "Where the client certificate {whom} comes from: secret (a kubernetes.io/tls Secret, the default) or spiffe (the SPIFFE Workload API at SPIFFE_ENDPOINT_SOCKET)"
        )))
        .arg(value_arg(&server_id, "SPIFFE_ID", &heading).help(format!(
            "With --{source}=spiffe: the SPIFFE ID the server must present (spiffe://<trust-domain>/<path>); required in that mode"
        )))
        .arg(value_arg(&ns, "NAMESPACE", &heading).help(format!(
            "Namespace of the kubernetes.io/tls Secret holding the client certificate {whom} (set with --{name})"
        )))
        .arg(value_arg(&name, "NAME", &heading).help(format!(
            "Name of the kubernetes.io/tls Secret holding the client certificate {whom} (set with --{ns})"
        )))
        .arg(
            value_arg(&interval, "DURATION", &heading)
                .value_parser(parse_go_duration)
                .help(format!(
                    "Deprecated and ignored: the client certificate {whom} is re-read on every TLS handshake (was a Go duration, default 24h; any Go duration is accepted)"
                )),
        )
    }

    /// Reads the options added by [`ClientIdentityOptions::augment`] with the
    /// same prefix. A given reload interval is accepted and reported once (per
    /// flag, per process) as deprecated through `tracing::warn!`.
    pub fn from_matches(matches: &ArgMatches, prefix: Option<&str>) -> Result<Self, OptionsError> {
        let prefix = prefix.filter(|p| !p.is_empty());
        let interval_flag = Self::reload_interval_flag(prefix);
        let reload_interval = get::<GoDuration>(matches, &interval_flag)?;
        if reload_interval.is_some()
            && matches!(
                matches.value_source(&interval_flag),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        {
            warn_deprecated_once(&interval_flag);
        }
        let source_flag = Self::source_flag(prefix);
        let source = match get::<String>(matches, &source_flag)?.as_deref() {
            None | Some("") | Some("secret") => ClientCertificateSource::Secret,
            Some("spiffe") => ClientCertificateSource::Spiffe,
            Some(other) => {
                return Err(OptionsError::InvalidValue {
                    flag: source_flag,
                    value: other.to_owned(),
                    expected: "secret, spiffe",
                });
            }
        };
        let namespace = get::<String>(matches, &Self::namespace_flag(prefix))?.and_then(non_empty);
        let name = get::<String>(matches, &Self::name_flag(prefix))?.and_then(non_empty);
        let server_id_flag = Self::spiffe_server_id_flag(prefix);
        let server_id = get::<String>(matches, &server_id_flag)?.and_then(non_empty);
        let spiffe_server_id = match source {
            ClientCertificateSource::Secret => {
                if server_id.is_some() {
                    warn_ignored_once(
                        &server_id_flag,
                        "it applies only with --client-certificate-source=spiffe",
                    );
                }
                None
            }
            ClientCertificateSource::Spiffe => {
                let secret_flag = if name.is_some() {
                    Some(Self::name_flag(prefix))
                } else if namespace.is_some() {
                    Some(Self::namespace_flag(prefix))
                } else {
                    None
                };
                if let Some(secret_flag) = secret_flag {
                    return Err(OptionsError::SourceConflict {
                        source_flag,
                        secret_flag,
                    });
                }
                let Some(value) = server_id else {
                    return Err(OptionsError::MissingSpiffeServerId {
                        flag: server_id_flag,
                        source_flag,
                    });
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
        })
    }

    /// The prefix (`None` for the default identity).
    pub fn prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// The deprecated reload interval, when given, with its sign (Go accepted zero
    /// and negative values). It has no effect.
    pub fn deprecated_reload_interval(&self) -> Option<GoDuration> {
        self.reload_interval
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

fn dash_prefix(prefix: Option<&str>) -> String {
    match prefix {
        Some(p) if !p.is_empty() => format!("{p}-"),
        _ => String::new(),
    }
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

fn get<T: Clone + Send + Sync + 'static>(
    matches: &ArgMatches,
    id: &str,
) -> Result<Option<T>, OptionsError> {
    matches
        .try_get_one::<T>(id)
        .map(|v| v.cloned())
        .map_err(|e| OptionsError::NotDefined {
            flag: id.to_owned(),
            reason: e.to_string(),
        })
}

fn reference(
    namespace: Option<&str>,
    name: Option<&str>,
    namespace_flag: impl FnOnce() -> String,
    name_flag: impl FnOnce() -> String,
) -> Result<Option<SecretRef>, OptionsError> {
    match (namespace, name) {
        (Some(namespace), Some(name)) => Ok(Some(SecretRef::new(namespace, name))),
        (None, None) => Ok(None),
        (Some(_), None) => Err(OptionsError::HalfSetReference {
            set: namespace_flag(),
            missing: name_flag(),
        }),
        (None, Some(_)) => Err(OptionsError::HalfSetReference {
            set: name_flag(),
            missing: namespace_flag(),
        }),
    }
}

/// Whether `key` is seen for the first time in this process (for warn-once).
fn first_time(key: String) -> bool {
    static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    SEEN.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashSet::new)
        .insert(key)
}

/// Logs `message` at WARN once per process for `key`.
pub(crate) fn warn_once(key: &str, message: &str) {
    if first_time(format!("message {key}")) {
        tracing::warn!("{message}");
    }
}

/// Warns once per process and flag that a given flag has no effect, and why.
fn warn_ignored_once(flag: &str, why: &str) {
    if first_time(format!("ignored {flag}")) {
        tracing::warn!(flag = %format!("--{flag}"), "--{flag} is set and ignored: {why}");
    }
}

fn warn_deprecated_once(flag: &str) {
    let first = first_time(format!("deprecated {flag}"));
    if first {
        tracing::warn!(
            flag = %format!("--{flag}"),
            "--{flag} is deprecated and ignored: the client certificate is now re-read on every TLS handshake; remove the flag"
        );
    }
}
