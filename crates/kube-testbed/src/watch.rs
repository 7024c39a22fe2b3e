//! WATCH streams: newline-delimited watch events, filtered by namespace and
//! selectors, ended by `timeoutSeconds`, `drop_watches` or expiry (410).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

use crate::http::Body;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{ApiError, EventType, KindSpec, Scope, WatchMsg};

/// An owned LIST/WATCH scope.
pub(crate) struct OwnedScope {
    pub ns: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl OwnedScope {
    pub(crate) fn scope(&self) -> Scope<'_> {
        Scope {
            ns: self.ns.as_deref(),
            labels: &self.labels,
            fields: &self.fields,
        }
    }
}

pub(crate) struct WatchStream {
    pub kind: Arc<KindSpec>,
    pub scope: OwnedScope,
    pub bookmarks: bool,
    /// Send `PartialObjectMetadata` instead of whole objects.
    pub metadata_only: bool,
    pub initial: VecDeque<WatchMsg>,
    pub rx: Option<UnboundedReceiver<WatchMsg>>,
    pub deadline: Instant,
    pub done: bool,
    /// Counts this stream as open while it lives.
    pub _open: OpenWatch,
}

/// One open WATCH in the server's count; dropping it (with the response body)
/// takes it out.
pub(crate) struct OpenWatch(Arc<AtomicUsize>);

impl OpenWatch {
    pub(crate) fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count.clone())
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

enum Render {
    Skip,
    Line(Bytes),
    Last(Bytes),
}

fn line(ty: &str, object: &Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({"type": ty, "object": object})).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

/// The `PartialObjectMetadata` form of an object.
pub(crate) fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A body holding one ERROR event (e.g. 410 for a too-old resourceVersion).
pub(crate) fn error_body(err: &ApiError) -> Body {
    http_body_util::Full::new(line("ERROR", &err.status()))
        .map_err(|never| match never {})
        .boxed_unsync()
}

impl WatchStream {
    fn render(&self, msg: WatchMsg) -> Render {
        match msg {
            WatchMsg::Event(ev) => {
                let scope = self.scope.scope();
                let now = scope.matches(&ev.object);
                let ty = match ev.ty {
                    EventType::Added if now => "ADDED",
                    EventType::Deleted if now => "DELETED",
                    EventType::Modified => {
                        let before = ev.old.as_ref().map(|o| scope.matches(o)).unwrap_or(now);
                        match (before, now) {
                            (true, true) => "MODIFIED",
                            (false, true) => "ADDED",
                            (true, false) => "DELETED",
                            (false, false) => return Render::Skip,
                        }
                    }
                    _ => return Render::Skip,
                };
                // An object changed out of the selector is DELETED as it was before
                // the change, at the change's resourceVersion (as the apiserver's
                // watch cache sends it).
                let left = ev.ty == EventType::Modified && ty == "DELETED";
                let object = match (&ev.old, left) {
                    (Some(old), true) => {
                        let mut old = old.clone();
                        if let (Some(meta), Some(rv)) = (
                            old.get_mut("metadata").and_then(Value::as_object_mut),
                            ev.object.pointer("/metadata/resourceVersion"),
                        ) {
                            meta.insert("resourceVersion".into(), rv.clone());
                        }
                        std::borrow::Cow::Owned(old)
                    }
                    _ => std::borrow::Cow::Borrowed(&ev.object),
                };
                if self.metadata_only {
                    Render::Line(line(ty, &partial_metadata(&object)))
                } else {
                    Render::Line(line(ty, &object))
                }
            }
            WatchMsg::Bookmark { rv, initial_end } => {
                if !self.bookmarks && !initial_end {
                    return Render::Skip;
                }
                let mut meta = json!({"resourceVersion": rv.to_string()});
                if initial_end && let Some(m) = meta.as_object_mut() {
                    m.insert(
                        "annotations".into(),
                        json!({"k8s.io/initial-events-end": "true"}),
                    );
                }
                let obj = json!({"kind": self.kind.kind, "apiVersion": self.kind.api_version(), "metadata": meta});
                Render::Line(line("BOOKMARK", &obj))
            }
            WatchMsg::Expired => Render::Last(line(
                "ERROR",
                &ApiError::gone("The resourceVersion for the provided watch is too old.").status(),
            )),
        }
    }

    async fn next_line(&mut self) -> Option<Bytes> {
        loop {
            if self.done {
                return None;
            }
            let msg = match self.initial.pop_front() {
                Some(m) => m,
                None => {
                    let rx = self.rx.as_mut()?;
                    tokio::select! {
                        m = rx.recv() => m?,
                        _ = tokio::time::sleep_until(self.deadline) => return None,
                    }
                }
            };
            match self.render(msg) {
                Render::Skip => continue,
                Render::Line(b) => return Some(b),
                Render::Last(b) => {
                    self.done = true;
                    return Some(b);
                }
            }
        }
    }

    pub(crate) fn into_body(self) -> Body {
        let stream = futures::stream::unfold(self, |mut st| async move {
            st.next_line()
                .await
                .map(|b| (Ok::<_, Infallible>(Frame::data(b)), st))
        });
        StreamBody::new(stream).boxed_unsync()
    }
}
