//! `--master`: the API server URL given on the command line, validated here.

use super::ConfigError;

/// `value` with any `user:password@` in its authority replaced by `REDACTED@`,
/// for logs and errors.
pub(super) fn redact_url(value: &str) -> String {
    let authority_start = value.find("://").map_or(0, |i| i + 3);
    let authority_end = value[authority_start..]
        .find(['/', '?', '#'])
        .map_or(value.len(), |i| authority_start + i);
    match value[authority_start..authority_end].rfind('@') {
        Some(at) => format!(
            "{}REDACTED{}",
            &value[..authority_start],
            &value[authority_start + at..]
        ),
        None => value.to_owned(),
    }
}

/// Whether `uri`'s host is a loopback address (`localhost`, 127.0.0.0/8, `::1`).
pub(super) fn is_loopback(uri: &http::Uri) -> bool {
    let Some(host) = uri.host() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Validate `--master`: an absolute `http` or `https` URL. The URL returned for
/// display has its credentials redacted.
pub(super) fn parse_master(value: &str) -> Result<(String, http::Uri), ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidMaster {
        value: redact_url(value),
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
    Ok((redact_url(value), uri))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

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
    fn credentials_are_redacted_and_loopback_is_recognised() {
        assert_eq!(
            redact_url("http://user:pa@ss@api.example:8080/x@y?q=a@b"),
            "http://REDACTED@api.example:8080/x@y?q=a@b"
        );
        assert_eq!(redact_url("https://api.example"), "https://api.example");
        let err = parse_master("ftp://user:hunter2@api.example").unwrap_err();
        assert!(!format!("{err} {err:?}").contains("hunter2"), "{err}");
        let (shown, _) = parse_master("https://user:hunter2@api.example:6443").unwrap();
        assert_eq!(shown, "https://REDACTED@api.example:6443");
        for (url, loopback) in [
            ("http://127.0.0.1:8001", true),
            ("http://127.9.9.9", true),
            ("http://localhost:8001", true),
            ("http://[::1]:8001", true),
            ("http://api.example:8080", false),
            ("http://10.0.0.1", false),
        ] {
            assert_eq!(is_loopback(&url.parse().unwrap()), loopback, "{url}");
        }
    }
}
