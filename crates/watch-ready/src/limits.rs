//! Bounds on what an API server can make a watch hold: a cap on each object's size,
//! on the objects one watch keeps, on a LIST body and on one WATCH event, and the
//! coalescing of an object rewritten in a loop.
//!
//! An API server is not always ours (a tenant cluster's, reached through a
//! kubeconfig the tenant wrote), and a compromised or buggy one can send a Secret of
//! hundreds of MiB, a list of a million objects, objects other than the one asked
//! for, or the same object a thousand times a second. [`WatchLimits`] bounds each:
//! what is over a cap is refused with a [`LimitError`] naming the object and the cap,
//! counted in the watch's [`WatchStatus`](crate::WatchStatus), and the last good
//! version of the object is kept.
//!
//! The body caps are applied where the bytes arrive: [`observe_bounded`] wraps the
//! client's responses so that a LIST body stops being read past
//! [`WatchLimits::max_list_bytes`] and a WATCH event (one line of the stream) past
//! [`WatchLimits::max_event_bytes`], before kube-client buffers them whole (its
//! `request` collects a body into one `String`, and its watch stream reads lines
//! without a bound).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use kube::Client;

use crate::health::Health;

/// The default cap on one object's size, as JSON: 1 MiB, Kubernetes' own limit on a
/// Secret's or ConfigMap's data.
pub const DEFAULT_MAX_OBJECT_BYTES: usize = 1024 * 1024;

/// The default cap on the objects one watch keeps.
pub const DEFAULT_MAX_OBJECTS: usize = 10_000;

/// The default cap on one LIST response body: 64 MiB.
pub const DEFAULT_MAX_LIST_BYTES: usize = 64 * 1024 * 1024;

/// The default cap on one WATCH event (one line of the stream): 4 MiB, room for an
/// object at [`DEFAULT_MAX_OBJECT_BYTES`] with its envelope and the escapes a server
/// may write instead of plain characters, so that an object a little over the object
/// cap is refused by name ([`LimitError::ObjectTooLarge`]) rather than as a line.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// Bounds on one watch, in the shape of kube-runtime's `watcher::Config`: public
/// fields, [`Default`], and a `#[must_use]` setter per field.
///
/// ```
/// use std::time::Duration;
/// use watch_ready::WatchLimits;
///
/// let limits = WatchLimits::default()
///     .max_object_bytes(256 * 1024)
///     .coalesce(Some(Duration::from_secs(1)));
/// assert_eq!(limits.max_objects, watch_ready::DEFAULT_MAX_OBJECTS);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchLimits {
    /// The largest object kept, measured as its JSON encoding (default
    /// [`DEFAULT_MAX_OBJECT_BYTES`]): a larger version is refused and the last good
    /// one kept.
    pub max_object_bytes: usize,
    /// The most objects the watch keeps (default [`DEFAULT_MAX_OBJECTS`]): objects of
    /// a list past it, and new objects once the store holds it, are refused.
    pub max_objects: usize,
    /// The largest LIST response body read (default [`DEFAULT_MAX_LIST_BYTES`]):
    /// a longer one fails the list (retried with backoff), and at most this much of
    /// it is held. Applied by [`observe_bounded`].
    pub max_list_bytes: usize,
    /// The longest WATCH event (one line of the stream) read (default
    /// [`DEFAULT_MAX_EVENT_BYTES`]): a longer one ends the watch (resumed with
    /// backoff). Applied by [`observe_bounded`].
    pub max_event_bytes: usize,
    /// Apply at most one new version of the objects per this interval (default
    /// `None`: every version at once). A version arriving sooner after the last
    /// applied one waits for the interval's end, replaced by any newer one meanwhile
    /// (counted in [`WatchStatus::coalesced`](crate::WatchStatus::coalesced)); the
    /// newest is always applied then. A deletion or a re-list is applied at once.
    pub coalesce: Option<Duration>,
}

impl Default for WatchLimits {
    fn default() -> Self {
        Self {
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            max_objects: DEFAULT_MAX_OBJECTS,
            max_list_bytes: DEFAULT_MAX_LIST_BYTES,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            coalesce: None,
        }
    }
}

impl WatchLimits {
    /// Sets [`max_object_bytes`](Self::max_object_bytes).
    #[must_use]
    pub fn max_object_bytes(mut self, bytes: usize) -> Self {
        self.max_object_bytes = bytes;
        self
    }

    /// Sets [`max_objects`](Self::max_objects).
    #[must_use]
    pub fn max_objects(mut self, objects: usize) -> Self {
        self.max_objects = objects;
        self
    }

    /// Sets [`max_list_bytes`](Self::max_list_bytes).
    #[must_use]
    pub fn max_list_bytes(mut self, bytes: usize) -> Self {
        self.max_list_bytes = bytes;
        self
    }

    /// Sets [`max_event_bytes`](Self::max_event_bytes).
    #[must_use]
    pub fn max_event_bytes(mut self, bytes: usize) -> Self {
        self.max_event_bytes = bytes;
        self
    }

    /// Sets [`coalesce`](Self::coalesce).
    #[must_use]
    pub fn coalesce(mut self, interval: Option<Duration>) -> Self {
        self.coalesce = interval;
        self
    }
}

/// What a cap refused. The object names are the API server's, escaped and cut.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    /// A version of an object was larger than [`WatchLimits::max_object_bytes`]: not
    /// kept, the last good version stays.
    #[error(
        "object {object} is {size} bytes, over the cap of {cap} bytes: not cached, the last good version is kept"
    )]
    ObjectTooLarge {
        /// `namespace/name` of the object.
        object: String,
        /// Its size as JSON.
        size: usize,
        /// The cap.
        cap: usize,
    },
    /// The watch delivered more objects than [`WatchLimits::max_objects`]: `object`
    /// (the first refused) and the rest were not kept.
    #[error(
        "object {object} is past the cap of {cap} objects for this watch: not cached (nor any other past the cap)"
    )]
    TooManyObjects {
        /// `namespace/name` of the first object refused.
        object: String,
        /// The cap.
        cap: usize,
    },
    /// A response body (`what`: a LIST, or one WATCH event) was longer than its cap
    /// ([`WatchLimits::max_list_bytes`], [`WatchLimits::max_event_bytes`]): not read
    /// further, the request failed (and is retried with backoff).
    #[error("the API server's {what} was over the cap of {cap} bytes: not read further")]
    BodyTooLarge {
        /// `LIST response` or `WATCH event`.
        what: &'static str,
        /// The cap.
        cap: usize,
    },
}

/// `namespace/name` of an object, from the API server: escaped and cut.
pub(crate) fn object_name(namespace: Option<&str>, name: Option<&str>) -> String {
    let full = match namespace {
        Some(namespace) => format!("{namespace}/{}", name.unwrap_or("")),
        None => name.unwrap_or("").to_owned(),
    };
    crate::excerpt::escaped(&full, crate::excerpt::SENDER_TEXT_CHARS * 2)
}

/// The size of `object` as JSON, counted without writing it anywhere.
pub(crate) fn json_size<K: serde::Serialize>(object: &K) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // A k8s-openapi object always serializes; a failure counts what was written.
    let _ = serde_json::to_writer(&mut count, object);
    count.0
}

/// [`crate::observe`], with the body caps of `limits`: a LIST response body (any
/// request that is not a WATCH) fails once longer than
/// [`WatchLimits::max_list_bytes`], a WATCH event once longer than
/// [`WatchLimits::max_event_bytes`], each with a [`LimitError::BodyTooLarge`]
/// recorded in `health` (counted in
/// [`WatchStatus::over_limit`](crate::WatchStatus::over_limit)). At most the cap
/// (and one chunk) of such a body is held.
pub fn observe_bounded(client: &Client, health: &Health, limits: &WatchLimits) -> Client {
    let default_namespace = client.default_namespace().to_owned();
    let inner = client.clone();
    let health = health.clone();
    let (max_list, max_event) = (limits.max_list_bytes, limits.max_event_bytes);
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        let health = health.clone();
        async move {
            let is_watch = crate::health::is_watch(&request);
            let response = inner.send(request).await?;
            if is_watch && response.status().is_success() {
                health.recovered("watch re-established");
            }
            let cap = if is_watch {
                Cap::Line {
                    max: max_event,
                    since_newline: 0,
                }
            } else {
                Cap::Total {
                    max: max_list,
                    seen: 0,
                }
            };
            Ok::<_, kube::Error>(response.map(|body| CappedBody { body, cap, health }))
        }
    });
    Client::new(service, default_namespace)
}

enum Cap {
    /// A whole body (a LIST).
    Total { max: usize, seen: usize },
    /// Each line (a WATCH event).
    Line { max: usize, since_newline: usize },
}

/// A response body that fails once over its cap.
struct CappedBody {
    body: kube::client::Body,
    cap: Cap,
    health: Health,
}

impl CappedBody {
    /// Whether `data` keeps the body within its cap.
    fn admits(&mut self, data: &[u8]) -> Result<(), LimitError> {
        match &mut self.cap {
            Cap::Total { max, seen } => {
                *seen = seen.saturating_add(data.len());
                if *seen > *max {
                    return Err(LimitError::BodyTooLarge {
                        what: "LIST response",
                        cap: *max,
                    });
                }
            }
            Cap::Line { max, since_newline } => {
                // The first segment continues the line before; each later one starts
                // a line (the last may go on in the next chunk).
                let mut segments = data.split(|b| *b == b'\n');
                let mut current =
                    since_newline.saturating_add(segments.next().map_or(0, <[u8]>::len));
                for segment in segments {
                    if current > *max {
                        break;
                    }
                    current = segment.len();
                }
                *since_newline = current;
                if current > *max {
                    return Err(self.line_error());
                }
            }
        }
        Ok(())
    }

    fn line_error(&self) -> LimitError {
        let cap = match self.cap {
            Cap::Line { max, .. } | Cap::Total { max, .. } => max,
        };
        LimitError::BodyTooLarge {
            what: "WATCH event",
            cap,
        }
    }
}

impl HttpBody for CappedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && let Err(error) = this.admits(data)
                {
                    this.health.limit_exceeded(&error);
                    return Poll::Ready(Some(Err(Box::new(error))));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(Box::new(error)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capped(cap: Cap) -> CappedBody {
        CappedBody {
            body: kube::client::Body::empty(),
            cap,
            health: Health::new("test"),
        }
    }

    #[test]
    fn a_list_body_is_refused_past_its_cap() {
        let mut body = capped(Cap::Total { max: 10, seen: 0 });
        assert!(body.admits(b"0123456789").is_ok());
        assert!(matches!(
            body.admits(b"x"),
            Err(LimitError::BodyTooLarge { cap: 10, .. })
        ));
    }

    #[test]
    fn a_watch_line_is_refused_past_its_cap_wherever_chunks_split_it() {
        let mut body = capped(Cap::Line {
            max: 4,
            since_newline: 0,
        });
        assert!(body.admits(b"abcd\nab").is_ok());
        assert!(body.admits(b"cd\n1234\n").is_ok());
        assert!(body.admits(b"ab").is_ok());
        assert!(body.admits(b"cde\n").is_err(), "5 across two chunks");
        let mut body = capped(Cap::Line {
            max: 4,
            since_newline: 0,
        });
        assert!(body.admits(b"a\n12345\nb").is_err(), "a long line inside");
        let mut body = capped(Cap::Line {
            max: 4,
            since_newline: 0,
        });
        assert!(body.admits(b"123456").is_err(), "no newline at all");
    }

    #[test]
    fn sizes_are_counted_as_json() {
        assert_eq!(json_size(&serde_json::json!({"a": "bc"})), 10);
    }
}
