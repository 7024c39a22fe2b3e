//! The one classification of watch errors: which ones fail start-up at once.

use std::fmt;

use kube_runtime::watcher;

/// Why the API server refused a list or watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalReason {
    /// 401: the credentials were rejected.
    Unauthorized,
    /// 403: the credentials lack RBAC rights on the resource.
    Forbidden,
    /// 404: the API server does not serve the resource (wrong group or version,
    /// or a CRD that is not installed).
    NotFound,
}

/// A watch error that retrying will not fix while a process starts: a 401, 403 or
/// 404 from the API server. Every other error (5xx, connection failures, a watch
/// that ended) is transient and retried with backoff until the sync timeout.
///
/// A rejected credential is included because it does not fix itself within the sync
/// timeout, and failing at once names the problem instead of a timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Which refusal.
    pub reason: RefusalReason,
    /// The HTTP status code (401, 403 or 404).
    pub code: u16,
    /// The API server's message, escaped and cut
    /// ([`LOGGED_CHAIN_CHARS`](crate::excerpt::LOGGED_CHAIN_CHARS) characters): a
    /// remote cluster's API server is not ours, and its text ends up in errors and
    /// logs.
    pub message: String,
}

impl Refusal {
    /// The refusal in `error`, or `None` when the error is transient.
    pub fn of(error: &watcher::Error) -> Option<Self> {
        let status = match error {
            watcher::Error::InitialListFailed(kube::Error::Api(status))
            | watcher::Error::WatchStartFailed(kube::Error::Api(status))
            | watcher::Error::WatchFailed(kube::Error::Api(status))
            | watcher::Error::WatchError(status) => status,
            _ => return None,
        };
        let reason = match status.code {
            401 => RefusalReason::Unauthorized,
            403 => RefusalReason::Forbidden,
            404 => RefusalReason::NotFound,
            _ => return None,
        };
        Some(Self {
            reason,
            code: status.code,
            message: crate::excerpt::escaped(&status.message, crate::excerpt::LOGGED_CHAIN_CHARS),
        })
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {}: {}", self.code, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> watcher::Error {
        watcher::Error::InitialListFailed(kube::Error::Api(Box::new(
            kube::core::Status::failure("no", "Reason").with_code(code),
        )))
    }

    #[test]
    fn a_refusals_message_is_escaped_and_cut() {
        let hostile = format!("forbidden\n\u{1b}[31mfake line{}", "x".repeat(20 * 1024));
        let error = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(
            kube::core::Status::failure(&hostile, "Forbidden").with_code(403),
        )));
        let refusal = Refusal::of(&error).map(|r| r.message).unwrap_or_default();
        assert!(
            !refusal.contains('\n') && !refusal.contains('\u{1b}'),
            "{refusal}"
        );
        assert!(refusal.starts_with("forbidden\\n"), "{refusal}");
        assert!(refusal.chars().count() <= crate::excerpt::LOGGED_CHAIN_CHARS + 1);
    }

    #[test]
    fn only_401_403_404_are_refusals() {
        assert_eq!(
            Refusal::of(&api(401)).map(|r| r.reason),
            Some(RefusalReason::Unauthorized)
        );
        assert_eq!(
            Refusal::of(&api(403)).map(|r| r.reason),
            Some(RefusalReason::Forbidden)
        );
        assert_eq!(
            Refusal::of(&api(404)).map(|r| r.reason),
            Some(RefusalReason::NotFound)
        );
        assert_eq!(Refusal::of(&api(500)), None);
        assert_eq!(Refusal::of(&api(429)), None);
        assert_eq!(Refusal::of(&watcher::Error::NoResourceVersion), None);
    }
}
