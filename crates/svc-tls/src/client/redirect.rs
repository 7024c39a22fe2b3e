//! The redirect policy of every `reqwest` client this crate builds: redirects are
//! followed within the origin the request was made for, and refused when they
//! leave it.
//!
//! Why refuse rather than strip the `X-Principal`: reqwest 0.13 (the version in
//! `Cargo.lock`, 0.13.5) removes only `Authorization`, `Cookie`, `Cookie2`,
//! `Proxy-Authorization` and `WWW-Authenticate` when a redirect changes scheme,
//! host or port; every other header, `X-Principal` among them, goes to the new
//! target, and its redirect policy sees URLs only, never the request's headers, so
//! it cannot remove one. Stripping would mean following redirects by hand, and what
//! arrives at the other origin would still be the request meant for the peer: its
//! body (307 and 308 resend it), the client certificate if that origin asks for
//! one, and a token bound to the peer's audience. A peer service has no reason to
//! send its callers to another origin; a refusal tells the caller, in a typed
//! error, which origin it was sent to. See
//! `docs/decisions/principals-bound-to-host-and-receiver.md`.

use reqwest::redirect::{Attempt, Policy};

/// How many redirects a request may follow (reqwest's own default).
const MAX_REDIRECTS: usize = 10;

/// Why a redirect was not followed: the `source` of the `reqwest::Error` the
/// request returns (`is_redirect()` is true; find this with
/// `std::error::Error::source` and `downcast_ref`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedirectRefused {
    /// The redirect leaves the origin (scheme, host and port) the request was made
    /// for: the `X-Principal`, the body and the client certificate would follow it.
    #[error(
        "refusing a redirect from {from} to another origin, {to:?}: a request to a peer is never sent to another origin (X-Principal, body and client certificate would follow it)"
    )]
    CrossOrigin {
        /// The origin the request was made for (ours).
        from: String,
        /// The origin the peer redirected to (its text, cut to 64 characters and
        /// shown Debug-escaped).
        to: String,
    },
    /// More than 10 redirects in a row.
    #[error("refusing a redirect from {from}: more than {max} redirects")]
    TooMany {
        /// The origin the request was made for.
        from: String,
        /// The limit.
        max: usize,
    },
}

/// The redirect policy of the clients this crate builds: a redirect is followed
/// when its target has the same origin (scheme, host, port) as the URL the
/// request was made for, at most 10 times; any other redirect fails
/// the request with [`RedirectRefused`]. Install it on a client builder of your own
/// with `.redirect(same_origin_policy())`.
pub fn same_origin_policy() -> Policy {
    Policy::custom(decide)
}

fn decide(attempt: Attempt<'_>) -> reqwest::redirect::Action {
    // reqwest puts the first URL of the chain first; without one there is no
    // origin to stay on, and nothing is followed.
    let Some(first) = attempt.previous().first() else {
        return attempt.stop();
    };
    let from = first.origin().ascii_serialization();
    if attempt.url().origin() != first.origin() {
        let to = watch_ready::excerpt::cut(
            &attempt.url().origin().ascii_serialization(),
            watch_ready::excerpt::SENDER_TEXT_CHARS,
        );
        return attempt.error(RedirectRefused::CrossOrigin { from, to });
    }
    if attempt.previous().len() > MAX_REDIRECTS {
        return attempt.error(RedirectRefused::TooMany {
            from,
            max: MAX_REDIRECTS,
        });
    }
    attempt.follow()
}
