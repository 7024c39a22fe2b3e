//! [`KubeError`]: a kube client error as an error chain may show it: the words
//! escaped and cut, credential failures as a fixed text, the status code kept for
//! matching.

use std::fmt;

use crate::excerpt;

/// A `kube::Error` with nothing of an API server's or a credential plugin's text but
/// an escaped excerpt: what the crates' public errors return as their `source()`, so
/// that a chain reporter (`anyhow`'s `{:#}`, a service's own printer) never prints a
/// remote API server's raw `Status.message` (newlines, escape sequences, tens of KiB)
/// or an exec plugin's output (where the token is).
///
/// ```
/// let status = kube::core::Status::failure("secrets \"x\" is forbidden\n\u{1b}[31m", "Forbidden")
///     .with_code(403);
/// let error = watch_ready::KubeError::of(&kube::Error::Api(Box::new(status)));
/// assert_eq!(error.status_code(), Some(403));
/// assert!(!error.to_string().contains('\n'));
/// assert!(!error.to_string().contains('\u{1b}'));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct KubeError {
    text: String,
    status_code: Option<u16>,
    reason: Option<String>,
}

impl KubeError {
    /// The excerpt of `error` ([`excerpt::chain`]) with its HTTP status and reason
    /// when the API server answered with a `Status`.
    pub fn of(error: &kube::Error) -> Self {
        let (status_code, reason) = match error {
            kube::Error::Api(status) => (
                Some(status.code),
                Some(excerpt::escaped(&status.reason, excerpt::SENDER_TEXT_CHARS)),
            ),
            _ => (None, None),
        };
        Self {
            text: excerpt::chain(error),
            status_code,
            reason,
        }
    }

    /// The HTTP status of the API server's answer (403, 404, 409, ...), when it
    /// answered: what to match on instead of the text.
    pub fn status_code(&self) -> Option<u16> {
        self.status_code
    }

    /// The API server's `Status.reason` (`Forbidden`, `NotFound`, `Conflict`, ...),
    /// escaped and cut, when it answered.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }
}

impl fmt::Display for KubeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The excerpt, as `Display`: never the raw text.
impl fmt::Debug for KubeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeError")
            .field("status_code", &self.status_code)
            .field("text", &self.text)
            .finish()
    }
}

impl std::error::Error for KubeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_servers_hostile_text_is_escaped_and_cut_and_the_code_kept() {
        let hostile = format!("denied\n\u{1b}[2Jfake line{}", "x".repeat(20 * 1024));
        let status = kube::core::Status::failure(&hostile, "Forbidden\n").with_code(403);
        let error = KubeError::of(&kube::Error::Api(Box::new(status)));
        for shown in [error.to_string(), format!("{error:?}")] {
            assert!(
                !shown.contains('\n') && !shown.contains('\u{1b}'),
                "{shown}"
            );
            assert!(
                shown.len() < 2 * excerpt::LOGGED_CHAIN_CHARS,
                "{}",
                shown.len()
            );
        }
        assert_eq!(error.status_code(), Some(403));
        assert_eq!(error.reason(), Some("Forbidden\\n"));
    }
}
