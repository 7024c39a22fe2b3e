//! Object storage: kinds, objects, the global resourceVersion, the bounded event
//! history and the registry of open watches.
//!
//! The store itself (objects, history, watches, reads) is here; writes are in
//! [`write`], and the parts a write uses in their own files: kinds, API errors, object
//! bookkeeping, the patch algorithms, and ids and times.

mod errors;
mod ids;
mod kinds;
mod object;
mod patch;
mod write;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use object::obj_key;
use serde_json::Value;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::selectors::{FieldSelector, LabelSelector};

pub(crate) use errors::{ApiError, deleted_status, details};
pub(crate) use ids::{now_rfc3339, random_hex};
pub use kinds::KindSpec;
pub(crate) use kinds::{ResKey, builtin_kinds};

/// A watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One committed change.
#[derive(Debug)]
pub(crate) struct StoredEvent {
    pub rv: u64,
    pub key: ResKey,
    pub ty: EventType,
    pub object: Value,
    /// The object before a MODIFIED change (for selector transitions).
    pub old: Option<Value>,
}

/// What a watch stream receives.
#[derive(Debug, Clone)]
pub(crate) enum WatchMsg {
    Event(Arc<StoredEvent>),
    Bookmark {
        rv: u64,
        initial_end: bool,
    },
    /// The history was expired under this watch: send 410 and end.
    Expired,
}

struct Watcher {
    key: ResKey,
    tx: UnboundedSender<WatchMsg>,
}

/// How a watch starts.
pub(crate) enum WatchStart {
    /// Deliver exactly the events after this resourceVersion.
    From(u64),
    /// Synthetic ADDED events for the current state first (rv unset, "0", or
    /// `sendInitialEvents=true`); `end_bookmark` appends the initial-events-end bookmark.
    Initial { end_bookmark: bool },
}

/// A scope of a LIST / WATCH.
pub(crate) struct Scope<'a> {
    pub ns: Option<&'a str>,
    pub labels: &'a LabelSelector,
    pub fields: &'a FieldSelector,
}

impl Scope<'_> {
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = self.ns
            && obj.pointer("/metadata/namespace").and_then(Value::as_str) != Some(ns)
        {
            return false;
        }
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

/// The emulator's state.
pub(crate) struct Store {
    kinds: Vec<Arc<KindSpec>>,
    rv: u64,
    objects: HashMap<ResKey, BTreeMap<(String, String), Value>>,
    history: VecDeque<Arc<StoredEvent>>,
    history_limit: usize,
    /// Watches from a resourceVersion below this get 410 Gone.
    oldest_rv: u64,
    watchers: Vec<Watcher>,
    serial: u64,
}

/// How PATCH bodies are interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchKind {
    Merge,
    Json,
    StrategicMerge,
    Apply,
}

impl Store {
    pub(crate) fn new(history_limit: usize) -> Self {
        Self {
            kinds: builtin_kinds(),
            rv: 1,
            objects: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            oldest_rv: 0,
            watchers: Vec::new(),
            serial: 0,
        }
    }

    pub(crate) fn kinds(&self) -> &[Arc<KindSpec>] {
        &self.kinds
    }

    pub(crate) fn current_rv(&self) -> u64 {
        self.rv
    }

    pub(crate) fn register_kind(&mut self, spec: KindSpec) {
        self.kinds
            .retain(|k| !(k.group == spec.group && k.plural == spec.plural));
        self.kinds.push(Arc::new(spec));
    }

    /// Find a kind by group + version + plural (URL routing).
    pub(crate) fn kind_by_resource(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<KindSpec>> {
        self.kinds
            .iter()
            .find(|k| k.group == group && k.version == version && k.plural == plural)
            .cloned()
    }

    /// Find a kind by apiVersion + kind (object bodies).
    pub(crate) fn kind_by_gvk(&self, api_version: &str, kind: &str) -> Option<Arc<KindSpec>> {
        self.kinds
            .iter()
            .find(|k| k.api_version() == api_version && k.kind == kind)
            .cloned()
    }

    /// Drop every object and the history; resourceVersions keep increasing and any
    /// watch from before the reset gets 410.
    pub(crate) fn reset_objects(&mut self) {
        self.objects.clear();
        self.expire_history();
    }

    /// Forget the history: bump the resourceVersion, make every older one too old,
    /// and end every open watch with a 410 ERROR event.
    pub(crate) fn expire_history(&mut self) {
        self.rv += 1;
        self.history.clear();
        self.oldest_rv = self.rv;
        for w in self.watchers.drain(..) {
            let _ = w.tx.send(WatchMsg::Expired);
        }
    }

    /// End every open watch.
    pub(crate) fn drop_watches(&mut self) {
        self.watchers.clear();
    }

    /// Send a bookmark with the current resourceVersion to every open watch.
    pub(crate) fn bookmark_all(&mut self) {
        let rv = self.rv;
        self.watchers.retain(|w| {
            w.tx.send(WatchMsg::Bookmark {
                rv,
                initial_end: false,
            })
            .is_ok()
        });
    }

    fn next_serial(&mut self) -> u64 {
        self.serial += 1;
        self.serial
    }

    pub(crate) fn get(
        &self,
        kind: &KindSpec,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.objects
            .get(&kind.key())
            .and_then(|m| m.get(&obj_key(kind, ns, name)))
            .cloned()
            .ok_or_else(|| ApiError::not_found(kind, name))
    }

    pub(crate) fn list(&self, kind: &KindSpec, scope: &Scope<'_>) -> (Vec<Value>, u64) {
        let items = self
            .objects
            .get(&kind.key())
            .map(|m| m.values().filter(|o| scope.matches(o)).cloned().collect())
            .unwrap_or_default();
        (items, self.rv)
    }

    /// Start a watch: returns the messages to send first and the live channel.
    pub(crate) fn watch(
        &mut self,
        kind: &KindSpec,
        scope: &Scope<'_>,
        start: WatchStart,
    ) -> Result<(Vec<WatchMsg>, UnboundedReceiver<WatchMsg>), ApiError> {
        let key = kind.key();
        let mut initial = Vec::new();
        match start {
            WatchStart::From(rv) => {
                if rv < self.oldest_rv {
                    return Err(ApiError::gone(format!(
                        "too old resource version: {rv} ({})",
                        self.oldest_rv
                    )));
                }
                initial.extend(
                    self.history
                        .iter()
                        .filter(|e| e.rv > rv && e.key == key)
                        .map(|e| WatchMsg::Event(e.clone())),
                );
            }
            WatchStart::Initial { end_bookmark } => {
                let (items, rv) = self.list(kind, scope);
                initial.extend(items.into_iter().map(|o| {
                    WatchMsg::Event(Arc::new(StoredEvent {
                        rv: 0,
                        key: key.clone(),
                        ty: EventType::Added,
                        object: o,
                        old: None,
                    }))
                }));
                if end_bookmark {
                    initial.push(WatchMsg::Bookmark {
                        rv,
                        initial_end: true,
                    });
                }
            }
        }
        let (tx, rx) = unbounded_channel();
        self.watchers.push(Watcher { key, tx });
        Ok((initial, rx))
    }

    fn emit(&mut self, kind: &KindSpec, ty: EventType, object: Value, old: Option<Value>) {
        let ev = Arc::new(StoredEvent {
            rv: self.rv,
            key: kind.key(),
            ty,
            object,
            old,
        });
        self.history.push_back(ev.clone());
        while self.history.len() > self.history_limit {
            if let Some(e) = self.history.pop_front() {
                self.oldest_rv = e.rv;
            }
        }
        self.watchers
            .retain(|w| w.key != ev.key || w.tx.send(WatchMsg::Event(ev.clone())).is_ok());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn history_window_and_gone() {
        let mut s = Store::new(2);
        let secrets = s.kind_by_gvk("v1", "Secret").unwrap();
        let sel_l = LabelSelector::default();
        let sel_f = FieldSelector::default();
        let scope = Scope {
            ns: None,
            labels: &sel_l,
            fields: &sel_f,
        };
        let start = s.current_rv();
        for i in 0..3 {
            s.create(
                &secrets,
                Some("ns"),
                json!({"metadata": {"name": format!("s{i}")}}),
                false,
            )
            .unwrap();
        }
        // three events, window of two: the first one fell out
        assert_eq!(
            s.watch(&secrets, &scope, WatchStart::From(start))
                .unwrap_err()
                .code,
            410
        );
        let (initial, _rx) = s
            .watch(&secrets, &scope, WatchStart::From(start + 1))
            .unwrap();
        assert_eq!(initial.len(), 2);
    }
}
