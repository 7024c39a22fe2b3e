//! `--master`: the API server URL given on the command line, validated here.

use super::ConfigError;

/// Validate `--master`: an absolute `http` or `https` URL.
pub(super) fn parse_master(value: &str) -> Result<(String, http::Uri), ConfigError> {
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
}
