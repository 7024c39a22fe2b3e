//! The checks, one file each: a Secret's shape and loader verdict (`secret`, with
//! certificates described by `cert` and unneeded private keys found by `keys`), a
//! peer's CA ConfigMap (`configmap`), the chain to a CA (`chain`), a peer's
//! handshake (`peer`), a principal (`principal`) and the SPIFFE Workload API
//! (`spiffe`). Each fills its part of the [`Report`](crate::report::Report).

pub mod cert;
pub mod chain;
pub mod configmap;
pub mod files;
pub mod keys;
pub mod peer;
pub mod principal;
pub mod secret;
pub mod spiffe;

use std::fmt;

use rustls_pki_types::CertificateDer;
use svc_tls::material::Identity;
use svc_tls::options::{ClientIdentityOptions, IdentityConfig};

use crate::report::Problem;

/// A problem named by the variant of the error enum `kind` (its `Debug` text up to
/// the first character that cannot be part of a Rust identifier: `KeyMismatch`,
/// `InvalidCertificate`, ...), with `message` as its text. The variant name is
/// bounded, so scripts can match on it; the fields are in the message.
pub fn problem(kind: &dyn fmt::Debug, message: &dyn fmt::Display) -> Problem {
    let debug = format!("{kind:?}");
    let name: String = debug
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    Problem {
        kind: if name.is_empty() {
            "Unknown".to_owned()
        } else {
            name
        },
        message: message.to_string(),
    }
}

/// A rustls error as a [`Problem`]: an invalid certificate by its reason
/// (`UnknownIssuer`, `Expired`, ...), an alert by its description
/// (`CertificateRequired`, `UnknownCA`, ...), anything else by its variant.
pub fn tls_problem(error: &rustls::Error) -> Problem {
    match error {
        rustls::Error::InvalidCertificate(reason) => problem(reason, error),
        rustls::Error::AlertReceived(alert) => problem(alert, error),
        other => problem(other, error),
    }
}

/// One identity's flags and what its source gave.
pub(crate) struct IdentityCheck {
    /// `client-certificate` or `P-client-certificate`.
    pub label: String,
    /// Its flags.
    pub options: ClientIdentityOptions,
    /// What the flags describe.
    pub config: IdentityConfig,
    /// The identity, when the loader accepted it and it is valid now.
    pub loaded: Option<Identity>,
    /// Whether the service would start with it (loaded, or refused for its validity
    /// period only, which the service starts with and reports).
    pub starts: bool,
    /// Its certificate chain, leaf first, as far as it parses.
    pub chain: Vec<CertificateDer<'static>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_is_the_variant_name_alone() {
        #[derive(Debug)]
        #[allow(dead_code)]
        enum E {
            KeyMismatch { detail: String },
            Plain,
            Tuple(u8),
        }
        let p = problem(&E::KeyMismatch { detail: "x".into() }, &"m");
        assert_eq!((p.kind.as_str(), p.message.as_str()), ("KeyMismatch", "m"));
        assert_eq!(problem(&E::Plain, &"m").kind, "Plain");
        assert_eq!(problem(&E::Tuple(1), &"m").kind, "Tuple");
    }
}
