//! `--S-host` values: checked when used, never completed with a guessed scheme.

use url::Url;

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
    /// `http://` to a host other than a loopback address while a client identity
    /// (and with it the principal signer) is configured: the client would skip mTLS
    /// and send its `X-Principal` in clear text. Refused as `--master` refuses
    /// credentials over plain HTTP.
    #[error(
        "http:// to a non-loopback host would skip mTLS and send the X-Principal in clear text, and a client identity is configured: use https://"
    )]
    PlaintextWithCredentials,
    /// The URL carries user information (`user:password@`): credentials do not
    /// belong in a host flag, where they would be sent nowhere useful and shown in
    /// errors, logs and `Debug` (the value is quoted with them redacted).
    #[error("the URL carries user information (user:password@): put no credentials in a host flag")]
    UserInfo,
    /// The value cannot be parsed as a URL at all.
    #[error("not a URL: {reason}")]
    NotAUrl {
        /// The URL parser's explanation.
        reason: String,
    },
}

/// `value` with its userinfo (`user:password@` after the scheme) replaced by
/// `REDACTED@`: a `--S-host` value is quoted in errors, and so in logs, and the
/// password in it must not be.
fn without_userinfo(value: &str) -> String {
    let Some((scheme, rest)) = value.split_once("://") else {
        return value.to_owned();
    };
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    match authority.rfind('@') {
        Some(at) => format!("{scheme}://REDACTED@{}", &rest[at + 1..]),
        None => value.to_owned(),
    }
}

/// Checks a `--S-host` value: an absolute `http`/`https` URL with a host.
///
/// `value` must be non-empty (an empty value means "not configured" and never
/// reaches this check).
pub(crate) fn parse_host(flag: &str, value: &str) -> Result<Url, HostError> {
    let invalid = |problem| HostError::Invalid {
        flag: flag.to_owned(),
        value: without_userinfo(value),
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
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(HostProblem::UserInfo));
    }
    Ok(url)
}

/// Whether `url`'s host is a loopback address (`localhost`, 127.0.0.0/8, `::1`).
fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// `url` unless it is `http://` to a non-loopback host, which is refused
/// ([`HostProblem::PlaintextWithCredentials`], naming `flag`) when a client
/// identity or a principal signer is configured.
pub(crate) fn refuse_plaintext_with_credentials(flag: &str, url: Url) -> Result<Url, HostError> {
    if url.scheme() == "http" && !is_loopback(&url) {
        return Err(HostError::Invalid {
            flag: flag.to_owned(),
            value: without_userinfo(url.as_str()),
            problem: HostProblem::PlaintextWithCredentials,
        });
    }
    Ok(url)
}

#[cfg(test)]
mod userinfo_tests {
    #![allow(clippy::expect_used)]
    use super::*;

    #[test]
    fn an_invalid_hosts_password_is_never_quoted() {
        for value in [
            "ftp://admin:s3cr3t-pw@identity.example",
            "http://admin:s3cr3t-pw@identity.example/api",
        ] {
            let error = parse_host("identity-host", value)
                .and_then(|url| refuse_plaintext_with_credentials("identity-host", url))
                .expect_err(value);
            for shown in [error.to_string(), format!("{error:?}")] {
                assert!(!shown.contains("s3cr3t-pw"), "{shown}");
                assert!(shown.contains("REDACTED@identity.example"), "{shown}");
            }
        }
        assert_eq!(
            without_userinfo("https://identity.example/a@b"),
            "https://identity.example/a@b"
        );
    }

    /// A valid https:// host with user information is refused too (issue 50), and
    /// neither its error's `Display` nor its `Debug` shows the password.
    #[test]
    fn a_valid_host_with_userinfo_is_refused_without_showing_the_password() {
        for value in [
            "https://admin:s3cr3t-pw@identity.example",
            "https://admin@identity.example/api",
        ] {
            let error = parse_host("identity-host", value).expect_err(value);
            assert!(
                matches!(
                    &error,
                    HostError::Invalid {
                        problem: HostProblem::UserInfo,
                        ..
                    }
                ),
                "{error:?}"
            );
            for shown in [error.to_string(), format!("{error:?}")] {
                assert!(!shown.contains("s3cr3t-pw"), "{shown}");
                assert!(shown.contains("identity-host"), "{shown}");
            }
        }
    }
}
