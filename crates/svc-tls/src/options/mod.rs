//! Command-line options: peer services and client identities, and the one rule
//! for Secret references.
//!
//! The flag names are deployed and never change (see the legacy behaviour):
//!
//! | option set | flags |
//! |---|---|
//! | peer service `S` | `--S-host`, `--S-ca-secret-namespace`, `--S-ca-secret-name`, or (not with the Secret) `--S-ca-configmap-namespace`, `--S-ca-configmap-name`, `--S-ca-configmap-key` (default `ca.crt`) |
//! | client identity, default | `--client-certificate-source`, `--client-certificate-namespace`, `--client-certificate-name`, `--client-certificate-reload-interval`, `--spiffe-server-id` |
//! | client identity, prefix `P` | `--P-client-certificate-source`, `--P-client-certificate-namespace`, `--P-client-certificate-name`, `--P-spiffe-server-id` |
//!
//! The deprecated `--client-certificate-reload-interval` exists for the default
//! identity only, as in Go's per-handshake generation (`NewHTTPClientOptions(service)`
//! registers it only without a service): `--P-client-certificate-reload-interval` is an
//! unknown argument, in Go and here.
//!
//! `--[P-]client-certificate-source` is `secret` (the default) or `spiffe`; in `spiffe`
//! mode `--[P-]spiffe-server-id` is required and the Secret flags must not be set
//! (each problem is its own [`OptionsError`]).
//!
//! Each set adds its arguments to a [`Command`] (`augment`) and reads them back from
//! the [`ArgMatches`] (`from_matches`) under the same service name or prefix. Several
//! sets coexist in one command; a name collision is caught by clap's
//! [`Command::debug_assert`]. A clap-derive command flattens them instead
//! (`#[command(flatten)]`): [`PeerArgs<P>`] and [`IdentityArgs<P>`] take the peer's
//! name as a marker type ([`peers`], [`peer_name!`](crate::peer_name)), and the
//! unprefixed [`ClientIdentityOptions`] is `clap::Args` itself (see [`derive`](mod@derive)'s
//! example).
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
//!   ([`PeerOptions::host`], [`PeerOptions::require_host`],
//!   [`PeerTls::host`](crate::client::PeerTls::host)): a value that is not an
//!   `http`/`https` URL with a host is a [`HostError`] naming the flag and quoting
//!   the value. A bare `host:port` such as `collector:443` is refused, never
//!   completed with a guessed scheme. Building a peer client
//!   ([`PeerTls::from_options`](crate::client::PeerTls::from_options)) never fails on
//!   the host, as Go's client did not: an unusable value is logged once at WARN
//!   ([`PeerOptions::client_host`]) and the service starts.
//! - `--client-certificate-reload-interval` takes every value of Go's
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
//!
//! A peer's CA comes from one source: a CA Secret flag and a CA ConfigMap flag both
//! set (non-empty) is a [`OptionsError::CaSourceConflict`] naming one of each
//! ([`PeerOptions::ca`]). The ConfigMap's key alone does not count: an empty
//! `--S-ca-configmap-key` is the default `ca.crt`, and a key without a ConfigMap is
//! ignored (logged once).

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

#[cfg(doc)]
use clap::Command;
use clap::{Arg, ArgAction, ArgMatches};

pub use crate::duration::{GoDuration, parse_go_duration};
mod error;
pub use error::OptionsError;

pub use crate::origin::{ConfigMapRef, SecretRef};

pub mod derive;
mod host;
mod identity;
mod peer;

pub use derive::{IdentityArgs, PeerArgs, PeerName, peers};

pub use host::{
    HostError, HostProblem, is_loopback, parse_host, refuse_plaintext_with_credentials,
};
pub use identity::{
    ClientCertificateSource, ClientIdentityOptions, DEPRECATED_RELOAD_INTERVAL_DEFAULT,
    IdentityConfig,
};
pub use peer::{DEFAULT_CA_CONFIGMAP_KEY, HttpProtocol, PeerCa, PeerOptions};

/// A flag taking one string value, as pflag's `StringVar`: any value (including
/// empty, or starting with `-`), and the last of repeated occurrences wins.
pub(super) fn value_arg(flag: &str, value_name: &'static str, heading: &str) -> Arg {
    Arg::new(flag.to_owned())
        .long(flag.to_owned())
        .value_name(value_name)
        .action(ArgAction::Set)
        .allow_hyphen_values(true)
        .overrides_with(flag.to_owned())
        .help_heading(heading.to_owned())
}

pub(super) fn dash_prefix(prefix: Option<&str>) -> String {
    match prefix {
        Some(p) if !p.is_empty() => format!("{p}-"),
        _ => String::new(),
    }
}

pub(super) fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

pub(super) fn get<T: Clone + Send + Sync + 'static>(
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

pub(super) fn reference(
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
pub(super) fn warn_ignored_once(flag: &str, why: &str) {
    if first_time(format!("ignored {flag}")) {
        tracing::warn!(flag = %format!("--{flag}"), "--{flag} is set and ignored: {why}");
    }
}

pub(super) fn warn_deprecated_once(flag: &str) {
    let first = first_time(format!("deprecated {flag}"));
    if first {
        tracing::warn!(
            flag = %format!("--{flag}"),
            "--{flag} is deprecated and ignored: the client certificate is now re-read on every TLS handshake; remove the flag"
        );
    }
}
