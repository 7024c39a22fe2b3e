//! Command-line options: peer services and client identities, and the one rule
//! for Secret references.
//!
//! The flag names are deployed and never change (see the legacy behaviour):
//!
//! | option set | flags |
//! |---|---|
//! | peer service `S` | `--S-host`, `--S-ca-secret-namespace`, `--S-ca-secret-name` |
//! | client identity, default | `--client-certificate-namespace`, `--client-certificate-name`, `--client-certificate-reload-interval` |
//! | client identity, prefix `P` | `--P-client-certificate-namespace`, `--P-client-certificate-name`, `--P-client-certificate-reload-interval` |
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
//! let cmd = ClientIdentityOptions::augment(cmd, None);
//! let m = cmd.get_matches_from([
//!     "svc",
//!     "--identity-host=https://identity.example.com",
//!     "--client-certificate-namespace=unikorn",
//!     "--client-certificate-name=unikorn-client-certificate",
//! ]);
//! let identity = PeerOptions::from_matches(&m, "identity").unwrap();
//! let client = ClientIdentityOptions::from_matches(&m, None).unwrap();
//! assert_eq!(identity.host().unwrap().as_str(), "https://identity.example.com/");
//! assert_eq!(identity.ca_secret().unwrap(), None);
//! assert_eq!(
//!     client.secret().unwrap().unwrap().to_string(),
//!     "unikorn/unikorn-client-certificate"
//! );
//! ```
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

/// Options for one peer service `S`: `--S-host`, `--S-ca-secret-namespace`,
/// `--S-ca-secret-name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerOptions {
    service: String,
    host: Option<Url>,
    ca_secret_namespace: Option<String>,
    ca_secret_name: Option<String>,
}

impl PeerOptions {
    /// Options for `service` with nothing set (for building options in code).
    pub fn new(service: impl Into<String>) -> Self {
        Self {
            service: service.into(),
            host: None,
            ca_secret_namespace: None,
            ca_secret_name: None,
        }
    }

    /// Sets the host URL.
    #[must_use]
    pub fn with_host(mut self, host: Url) -> Self {
        self.host = Some(host);
        self
    }

    /// Sets the CA Secret reference (empty strings count as unset).
    #[must_use]
    pub fn with_ca_secret(mut self, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        self.ca_secret_namespace = non_empty(namespace.into());
        self.ca_secret_name = non_empty(name.into());
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

    /// Adds `--S-host`, `--S-ca-secret-namespace` and `--S-ca-secret-name` to `cmd`,
    /// with help texts naming the service. `service` is used verbatim (lowercase,
    /// e.g. `identity`, `region`).
    pub fn augment(cmd: Command, service: &str) -> Command {
        let heading = format!("Peer service: {service}");
        let host = Self::host_flag(service);
        let ns = Self::ca_secret_namespace_flag(service);
        let name = Self::ca_secret_name_flag(service);
        cmd.arg(
            Arg::new(host.clone())
                .long(host)
                .value_name("URL")
                .value_parser(clap::value_parser!(Url))
                .action(ArgAction::Set)
                .help_heading(heading.clone())
                .help(format!("Base URL of the {service} service")),
        )
        .arg(
            Arg::new(ns.clone())
                .long(ns)
                .value_name("NAMESPACE")
                .action(ArgAction::Set)
                .help_heading(heading.clone())
                .help(format!(
                    "Namespace of the kubernetes.io/tls Secret holding the CA that issued the {service} service's certificate (set with --{name})"
                )),
        )
        .arg(
            Arg::new(name.clone())
                .long(name)
                .value_name("NAME")
                .action(ArgAction::Set)
                .help_heading(heading)
                .help(format!(
                    "Name of the kubernetes.io/tls Secret holding the CA that issued the {service} service's certificate (set with --{})",
                    Self::ca_secret_namespace_flag(service)
                )),
        )
    }

    /// Reads the options added by [`PeerOptions::augment`] for `service`.
    pub fn from_matches(matches: &ArgMatches, service: &str) -> Result<Self, OptionsError> {
        Ok(Self {
            service: service.to_owned(),
            host: get::<Url>(matches, &Self::host_flag(service))?,
            ca_secret_namespace: get::<String>(matches, &Self::ca_secret_namespace_flag(service))?
                .and_then(non_empty),
            ca_secret_name: get::<String>(matches, &Self::ca_secret_name_flag(service))?
                .and_then(non_empty),
        })
    }

    /// The service name these options are for.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// `--S-host`, when given.
    pub fn host(&self) -> Option<&Url> {
        self.host.as_ref()
    }

    /// `--S-host`, or [`OptionsError::MissingFlag`] naming it.
    pub fn require_host(&self) -> Result<&Url, OptionsError> {
        self.host.as_ref().ok_or_else(|| OptionsError::MissingFlag {
            flag: Self::host_flag(&self.service),
        })
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

/// Options for one client identity: `--[P-]client-certificate-namespace`,
/// `--[P-]client-certificate-name` and the deprecated
/// `--[P-]client-certificate-reload-interval`.
///
/// The default set has no prefix. A prefix `P` gives a distinct identity (for
/// example one per peer service) whose flags start with `--P-`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentityOptions {
    prefix: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    reload_interval: Option<Duration>,
}

impl ClientIdentityOptions {
    /// Options with nothing set (for building options in code). An empty prefix
    /// is the same as none.
    pub fn new(prefix: Option<&str>) -> Self {
        Self {
            prefix: prefix.filter(|p| !p.is_empty()).map(str::to_owned),
            namespace: None,
            name: None,
            reload_interval: None,
        }
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
        cmd.arg(
            Arg::new(ns.clone())
                .long(ns.clone())
                .value_name("NAMESPACE")
                .action(ArgAction::Set)
                .help_heading(heading.clone())
                .help(format!(
                    "Namespace of the kubernetes.io/tls Secret holding the client certificate {whom} (set with --{name})"
                )),
        )
        .arg(
            Arg::new(name.clone())
                .long(name.clone())
                .value_name("NAME")
                .action(ArgAction::Set)
                .help_heading(heading.clone())
                .help(format!(
                    "Name of the kubernetes.io/tls Secret holding the client certificate {whom} (set with --{ns})"
                )),
        )
        .arg(
            Arg::new(interval.clone())
                .long(interval)
                .value_name("DURATION")
                .value_parser(parse_go_duration)
                .action(ArgAction::Set)
                .help_heading(heading)
                .help(format!(
                    "Deprecated and ignored: the client certificate {whom} is re-read on every TLS handshake (was a Go duration, default 24h)"
                )),
        )
    }

    /// Reads the options added by [`ClientIdentityOptions::augment`] with the
    /// same prefix. A given reload interval is accepted and reported once (per
    /// flag, per process) as deprecated through `tracing::warn!`.
    pub fn from_matches(matches: &ArgMatches, prefix: Option<&str>) -> Result<Self, OptionsError> {
        let prefix = prefix.filter(|p| !p.is_empty());
        let interval_flag = Self::reload_interval_flag(prefix);
        let reload_interval = get::<Duration>(matches, &interval_flag)?;
        if reload_interval.is_some()
            && matches!(
                matches.value_source(&interval_flag),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        {
            warn_deprecated_once(&interval_flag);
        }
        Ok(Self {
            prefix: prefix.map(str::to_owned),
            namespace: get::<String>(matches, &Self::namespace_flag(prefix))?.and_then(non_empty),
            name: get::<String>(matches, &Self::name_flag(prefix))?.and_then(non_empty),
            reload_interval,
        })
    }

    /// The prefix (`None` for the default identity).
    pub fn prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// The deprecated reload interval, when given. It has no effect.
    pub fn deprecated_reload_interval(&self) -> Option<Duration> {
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

fn warn_deprecated_once(flag: &str) {
    static WARNED: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let first = WARNED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashSet::new)
        .insert(flag.to_owned());
    if first {
        tracing::warn!(
            flag = %format!("--{flag}"),
            "--{flag} is deprecated and ignored: the client certificate is now re-read on every TLS handshake; remove the flag"
        );
    }
}

/// Parses a Go `time.ParseDuration` string (`24h`, `1h30m`, `1.5h`, `300ms`,
/// `0`), as the Go flag accepted. Negative durations are rejected.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?} (expected e.g. 24h, 1h30m, 90s)");
    let rest = s.strip_prefix('+').unwrap_or(s);
    if rest.starts_with('-') {
        return Err(format!("invalid duration {s:?}: must not be negative"));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut rest = rest;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (num, tail) = rest.split_at(num_len);
        if num.is_empty() || num == "." {
            return Err(bad());
        }
        let value: f64 = num.parse().map_err(|_| bad())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let nanos_per_unit = match unit {
            "ns" => 1e0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        total += value * nanos_per_unit;
        rest = tail;
    }
    // Go durations are int64 nanoseconds.
    if !total.is_finite() || total > i64::MAX as f64 {
        return Err(format!("invalid duration {s:?}: out of range"));
    }
    Ok(Duration::from_nanos(total as u64))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(
            parse_go_duration("24h").unwrap(),
            Duration::from_secs(86400)
        );
        assert_eq!(
            parse_go_duration("1h30m").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_go_duration("1.5h").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_go_duration("300ms").unwrap(),
            Duration::from_millis(300)
        );
        assert_eq!(parse_go_duration("2us").unwrap(), Duration::from_micros(2));
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "24", "h", "1d", "-1h", "1h-", "abc", "1..2s", "."] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} accepted");
        }
    }
}
