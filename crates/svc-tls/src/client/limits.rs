//! Bounds on one peer request: a request timeout and a cap on the response body.
//!
//! A peer is a service of the platform, but one that hangs, or streams without end
//! (a bug, a compromised pod, a proxy in between), must not hold a caller's task or
//! memory without bound. Every client [`PeerTls`](super::PeerTls) builds has a
//! request timeout ([`DEFAULT_REQUEST_TIMEOUT`] unless set), covering the connection,
//! the request and the whole response body; every response that
//! [`PeerClient`](super::PeerClient) returns has its body capped
//! ([`DEFAULT_MAX_RESPONSE_BODY`] unless set): a body announced longer
//! (`Content-Length`) fails at its first read without reading any of it, and one that
//! grows past the cap fails at the chunk that crosses it, so that at most the cap and
//! one chunk are ever held. The failure is a `reqwest::Error` (`is_body()` or
//! `is_decode()`) whose source chain holds a [`ResponseBodyTooLarge`] naming the peer
//! and the cap.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body as HttpBody, Bytes, Frame, SizeHint};

/// The request timeout of peer clients unless set
/// ([`PeerTls::with_request_timeout`](super::PeerTls::with_request_timeout)): 30 s,
/// from the start of the request to the end of its response body.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The cap on one response body of a peer client unless set
/// ([`PeerTls::with_max_response_body`](super::PeerTls::with_max_response_body)):
/// 4 MiB, far above any answer of the platform's services (a page of a list).
pub const DEFAULT_MAX_RESPONSE_BODY: usize = 4 * 1024 * 1024;

/// A peer's response body was longer than the cap: not read further. Found in the
/// source chain of the `reqwest::Error` the body's read returns (walk
/// `std::error::Error::source` and `downcast_ref`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the response body from {host} is {} the cap of {cap} bytes: not read further",
    match announced { Some(length) => format!("{length} bytes, over"), None => "over".to_owned() }
)]
#[non_exhaustive]
pub struct ResponseBodyTooLarge {
    /// The peer: the response URL's host and port (ours, as configured, not the
    /// peer's text).
    pub host: String,
    /// The cap.
    pub cap: usize,
    /// The length the peer announced (`Content-Length`), when it announced one over
    /// the cap; `None` when the body grew past the cap as it was read.
    pub announced: Option<u64>,
}

impl ResponseBodyTooLarge {
    /// The [`ResponseBodyTooLarge`] in `error`'s source chain, if any.
    pub fn find<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a Self> {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(found) = error.downcast_ref::<Self>() {
                return Some(found);
            }
            next = error.source();
        }
        None
    }
}

/// `response` with its body capped at `cap` bytes (see the module's docs). The
/// status, headers, extensions and URL are kept.
pub(crate) fn cap_response(response: reqwest::Response, cap: usize) -> reqwest::Response {
    let url = response.url().clone();
    let host = match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        _ => url.origin().ascii_serialization(),
    };
    // The header as the peer sent it (reqwest's `content_length` is the body's size
    // hint, which hyper takes from the same header).
    let announced = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
        .or_else(|| response.content_length());
    let (mut parts, body) = http::Response::<reqwest::Body>::from(response).into_parts();
    // The conversion drops the URL; a builder carries it back in its extension.
    if let Ok(carrier) = reqwest::ResponseBuilderExt::url(http::Response::builder(), url).body(()) {
        parts.extensions.extend(carrier.into_parts().0.extensions);
    }
    let capped = CappedBody {
        body,
        cap,
        seen: 0,
        host,
        announced,
        failed: false,
    };
    reqwest::Response::from(http::Response::from_parts(
        parts,
        reqwest::Body::wrap(capped),
    ))
}

/// A response body that fails once over its cap.
struct CappedBody {
    body: reqwest::Body,
    cap: usize,
    seen: usize,
    host: String,
    announced: Option<u64>,
    failed: bool,
}

impl CappedBody {
    fn too_large(&mut self, announced: Option<u64>) -> BoxError {
        self.failed = true;
        Box::new(ResponseBodyTooLarge {
            host: self.host.clone(),
            cap: self.cap,
            announced,
        })
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl HttpBody for CappedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(None);
        }
        if let Some(length) = this.announced
            && u64::try_from(this.cap).is_ok_and(|cap| length > cap)
        {
            // Announced over the cap: fail before reading any of it.
            return Poll::Ready(Some(Err(this.too_large(Some(length)))));
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.seen = this.seen.saturating_add(data.len());
                    if this.seen > this.cap {
                        return Poll::Ready(Some(Err(this.too_large(None))));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(Box::new(error)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let hint = self.body.size_hint();
        let cap = u64::try_from(self.cap).unwrap_or(u64::MAX);
        // Never promise more than the cap (a reader may allocate by the hint).
        let mut bounded = SizeHint::new();
        bounded.set_lower(hint.lower().min(cap));
        bounded.set_upper(hint.upper().map_or(cap, |upper| upper.min(cap)));
        bounded
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn response(body: reqwest::Body, length: Option<u64>) -> reqwest::Response {
        let mut builder = reqwest::ResponseBuilderExt::url(
            http::Response::builder().status(200),
            "https://region.example:8443/api".parse().unwrap(),
        );
        if let Some(length) = length {
            builder = builder.header("content-length", length);
        }
        reqwest::Response::from(builder.body(body).unwrap())
    }

    #[tokio::test]
    async fn a_body_within_the_cap_is_read_whole_and_the_url_kept() {
        let capped = cap_response(response(reqwest::Body::from("0123456789"), None), 10);
        assert_eq!(capped.url().as_str(), "https://region.example:8443/api");
        assert_eq!(capped.bytes().await.unwrap(), "0123456789");
    }

    #[tokio::test]
    async fn a_body_past_the_cap_fails_naming_the_host_and_the_cap() {
        let chunks = futures::stream::iter(
            (0..100).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 1024]))),
        );
        let body = reqwest::Body::wrap(http_body_util::StreamBody::new(futures::StreamExt::map(
            chunks,
            |c| c.map(Frame::data),
        )));
        let error = cap_response(response(body, None), 4096)
            .bytes()
            .await
            .unwrap_err();
        let found = ResponseBodyTooLarge::find(&error).unwrap();
        assert_eq!(found.host, "region.example:8443");
        assert_eq!(found.cap, 4096);
        assert_eq!(found.announced, None);
    }

    #[tokio::test]
    async fn an_announced_length_over_the_cap_fails_before_reading() {
        let error = cap_response(response(reqwest::Body::from("tiny"), Some(1 << 40)), 10)
            .bytes()
            .await
            .unwrap_err();
        let found = ResponseBodyTooLarge::find(&error).unwrap();
        assert_eq!(found.announced, Some(1 << 40));
        assert!(
            found
                .to_string()
                .contains("1099511627776 bytes, over the cap of 10")
        );
    }
}
