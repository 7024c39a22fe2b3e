//! What the option sets share: the flag shape pflag gave every value, Secret
//! references, and warn-once logging.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use clap::{Arg, ArgAction, ArgMatches};

use super::{OptionsError, SecretRef};

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
