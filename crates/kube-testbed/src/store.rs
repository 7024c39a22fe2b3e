//! Object storage: kinds, objects, the global resourceVersion, the bounded event
//! history and the registry of open watches.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::selectors::{FieldSelector, LabelSelector};

/// A resource kind the emulator serves (built in or registered by a test).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindSpec {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
    pub(crate) plural: String,
    pub(crate) singular: String,
    pub(crate) namespaced: bool,
    pub(crate) short_names: Vec<String>,
    pub(crate) status_subresource: bool,
}

impl KindSpec {
    fn new(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        Self {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
            plural: plural.to_string(),
            singular: kind.to_ascii_lowercase(),
            namespaced,
            short_names: Vec::new(),
            status_subresource: true,
        }
    }

    /// A namespaced kind, e.g. `("unikorn-cloud.org", "v1alpha1", "HelmApplication", "helmapplications")`.
    /// The empty group is the core group.
    pub fn namespaced(group: &str, version: &str, kind: &str, plural: &str) -> Self {
        Self::new(group, version, kind, plural, true)
    }

    /// A cluster-scoped kind.
    pub fn cluster(group: &str, version: &str, kind: &str, plural: &str) -> Self {
        Self::new(group, version, kind, plural, false)
    }

    /// Short names advertised in discovery (what `kubectl get <short>` resolves).
    pub fn short_names(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Whether the kind has a `/status` subresource (default `true`, like most CRDs).
    /// With it, writes to the main resource keep the stored `status`, and writes to
    /// `/status` change only `status`.
    pub fn status_subresource(mut self, enabled: bool) -> Self {
        self.status_subresource = enabled;
        self
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub(crate) fn key(&self) -> ResKey {
        (self.group.clone(), self.plural.clone())
    }

    /// Field paths accepted in field selectors for this kind.
    pub(crate) fn supported_fields(&self) -> &'static [&'static str] {
        if self.group.is_empty() && self.kind == "Secret" {
            &["metadata.name", "metadata.namespace", "type"]
        } else {
            &["metadata.name", "metadata.namespace"]
        }
    }

    pub(crate) fn is_core(&self, kind: &str) -> bool {
        self.group.is_empty() && self.kind == kind
    }
}

pub(crate) fn builtin_kinds() -> Vec<Arc<KindSpec>> {
    vec![
        Arc::new(KindSpec::namespaced("", "v1", "Secret", "secrets").status_subresource(false)),
        Arc::new(
            KindSpec::namespaced("", "v1", "ConfigMap", "configmaps")
                .short_names(&["cm"])
                .status_subresource(false),
        ),
        Arc::new(KindSpec::cluster("", "v1", "Namespace", "namespaces").short_names(&["ns"])),
        Arc::new(KindSpec::namespaced("", "v1", "Service", "services").short_names(&["svc"])),
    ]
}

/// `(group, plural)`.
pub(crate) type ResKey = (String, String);

/// An API error, rendered as a `Status` object.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, kind: &KindSpec, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": kind.group, "kind": kind.plural}));
        self
    }

    pub fn not_found(kind: &KindSpec, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", resource_label(kind), name),
        )
        .with_details(kind, name)
    }

    pub fn already_exists(kind: &KindSpec, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", resource_label(kind), name),
        )
        .with_details(kind, name)
    }

    pub fn conflict(kind: &KindSpec, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                resource_label(kind),
                name,
                why
            ),
        )
        .with_details(kind, name)
    }

    pub fn invalid(kind: &KindSpec, name: &str, field: &str, why: &str) -> Self {
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{} \"{}\" is invalid: {}: {}", kind.kind, name, field, why),
        );
        e.details = Some(json!({
            "name": name, "group": kind.group, "kind": kind.kind,
            "causes": [{"reason": "FieldValueInvalid", "message": why, "field": field}]
        }));
        e
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn for_status(code: u16) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        };
        Self::new(code, reason, format!("injected failure ({code} {reason})"))
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let (Some(d), Some(o)) = (&self.details, s.as_object_mut()) {
            o.insert("details".into(), d.clone());
        }
        s
    }
}

fn resource_label(kind: &KindSpec) -> String {
    if kind.group.is_empty() {
        kind.plural.clone()
    } else {
        format!("{}.{}", kind.plural, kind.group)
    }
}

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
    pub fn matches(&self, obj: &Value) -> bool {
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
    pub fn new(history_limit: usize) -> Self {
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

    pub fn kinds(&self) -> &[Arc<KindSpec>] {
        &self.kinds
    }

    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    pub fn register_kind(&mut self, spec: KindSpec) {
        self.kinds
            .retain(|k| !(k.group == spec.group && k.plural == spec.plural));
        self.kinds.push(Arc::new(spec));
    }

    /// Find a kind by group + version + plural (URL routing).
    pub fn kind_by_resource(
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
    pub fn kind_by_gvk(&self, api_version: &str, kind: &str) -> Option<Arc<KindSpec>> {
        self.kinds
            .iter()
            .find(|k| k.api_version() == api_version && k.kind == kind)
            .cloned()
    }

    /// Drop every object and the history; resourceVersions keep increasing and any
    /// watch from before the reset gets 410.
    pub fn reset_objects(&mut self) {
        self.objects.clear();
        self.expire_history();
    }

    /// Forget the history: bump the resourceVersion, make every older one too old,
    /// and end every open watch with a 410 ERROR event.
    pub fn expire_history(&mut self) {
        self.rv += 1;
        self.history.clear();
        self.oldest_rv = self.rv;
        for w in self.watchers.drain(..) {
            let _ = w.tx.send(WatchMsg::Expired);
        }
    }

    /// End every open watch.
    pub fn drop_watches(&mut self) {
        self.watchers.clear();
    }

    /// Send a bookmark with the current resourceVersion to every open watch.
    pub fn bookmark_all(&mut self) {
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

    pub fn get(&self, kind: &KindSpec, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        self.objects
            .get(&kind.key())
            .and_then(|m| m.get(&obj_key(kind, ns, name)))
            .cloned()
            .ok_or_else(|| ApiError::not_found(kind, name))
    }

    pub fn list(&self, kind: &KindSpec, scope: &Scope<'_>) -> (Vec<Value>, u64) {
        let items = self
            .objects
            .get(&kind.key())
            .map(|m| m.values().filter(|o| scope.matches(o)).cloned().collect())
            .unwrap_or_default();
        (items, self.rv)
    }

    /// Start a watch: returns the messages to send first and the live channel.
    pub fn watch(
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

    /// Create an object in `ns` (ignored for cluster-scoped kinds).
    pub fn create(
        &mut self,
        kind: &KindSpec,
        ns: Option<&str>,
        mut obj: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let body_ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_string);
        let ns = if kind.namespaced {
            let ns = match (ns, body_ns.as_deref()) {
                (Some(p), Some(b)) if !b.is_empty() && p != b => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                (Some(p), _) => p.to_string(),
                (None, Some(b)) if !b.is_empty() => b.to_string(),
                _ => "default".to_string(),
            };
            Some(ns)
        } else {
            None
        };
        check_type(kind, &obj)?;
        let meta = metadata_mut(&mut obj)?;
        let mut name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if name.is_empty() {
            let prefix = meta
                .get("generateName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    kind,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
            name = format!("{prefix}{}", short_random(self.serial));
        }
        validate_name(kind, &name)?;
        if self
            .objects
            .get(&kind.key())
            .is_some_and(|m| m.contains_key(&obj_key(kind, ns.as_deref(), &name)))
        {
            return Err(ApiError::already_exists(kind, &name));
        }
        if let Some(ns) = &ns
            && kind.namespaced
            && self.namespace_terminating(ns)
        {
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!(
                    "{} \"{}\" is forbidden: unable to create new content in namespace {} because it is being terminated",
                    kind.plural, name, ns
                ),
            ));
        }
        let serial = self.next_serial();
        let meta = metadata_mut(&mut obj)?;
        meta.insert("name".into(), Value::String(name.clone()));
        match &ns {
            Some(ns) => {
                meta.insert("namespace".into(), Value::String(ns.clone()));
            }
            None => {
                meta.remove("namespace");
            }
        }
        meta.insert("uid".into(), Value::String(make_uid(serial)));
        meta.insert("creationTimestamp".into(), Value::String(now_rfc3339()));
        // Like the apiserver: built-in kinds served here have no generation.
        if kind.group.is_empty() {
            meta.remove("generation");
        } else {
            meta.insert("generation".into(), json!(1));
        }
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        meta.remove("resourceVersion");
        if kind.status_subresource
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        set_type_meta(kind, &mut obj);
        apply_defaults(kind, &mut obj, serial)?;
        if dry_run {
            return Ok(obj);
        }
        self.rv += 1;
        set_rv(&mut obj, self.rv);
        self.objects
            .entry(kind.key())
            .or_default()
            .insert(obj_key(kind, ns.as_deref(), &name), obj.clone());
        self.emit(kind, EventType::Added, obj.clone(), None);
        Ok(obj)
    }

    fn namespace_terminating(&self, ns: &str) -> bool {
        self.objects
            .get(&(String::new(), "namespaces".to_string()))
            .and_then(|m| m.get(&(String::new(), ns.to_string())))
            .is_some_and(|o| o.pointer("/metadata/deletionTimestamp").is_some())
    }

    /// Replace an object (PUT). `status_only` is the `/status` subresource.
    pub fn update(
        &mut self,
        kind: &KindSpec,
        ns: Option<&str>,
        name: &str,
        mut obj: Value,
        status_only: bool,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let old = self.get(kind, ns, name)?;
        check_type(kind, &obj)?;
        let body_name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if kind.namespaced
            && let (Some(p), Some(b)) = (
                ns,
                obj.pointer("/metadata/namespace").and_then(Value::as_str),
            )
            && !b.is_empty()
            && p != b
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let body_rv = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let old_rv = old
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !body_rv.is_empty() && body_rv != old_rv {
            return Err(ApiError::conflict(
                kind,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        let mut new = if status_only {
            let mut n = old.clone();
            if let Some(o) = n.as_object_mut() {
                match obj.get("status") {
                    Some(s) => o.insert("status".into(), s.clone()),
                    None => o.remove("status"),
                };
            }
            n
        } else {
            if kind.status_subresource
                && let Some(o) = obj.as_object_mut()
            {
                match old.get("status") {
                    Some(s) => o.insert("status".into(), s.clone()),
                    None => o.remove("status"),
                };
            }
            obj
        };
        // Server-owned metadata.
        {
            let old_meta = old.get("metadata").cloned().unwrap_or_else(|| json!({}));
            let meta = metadata_mut(&mut new)?;
            for f in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                match old_meta.get(f) {
                    Some(v) => meta.insert(f.into(), v.clone()),
                    None => meta.remove(f),
                };
            }
            meta.insert("resourceVersion".into(), Value::String(old_rv.to_string()));
        }
        set_type_meta(kind, &mut new);
        let serial = self.next_serial();
        apply_defaults(kind, &mut new, serial)?;
        if kind.is_core("Secret") && new.get("type") != old.get("type") {
            return Err(ApiError::invalid(kind, name, "type", "field is immutable"));
        }
        if !kind.group.is_empty() && spec_changed(&old, &new) {
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                + 1;
            metadata_mut(&mut new)?.insert("generation".into(), json!(generation));
        }
        if new == old || dry_run {
            return Ok(new);
        }
        let finalizers_empty = new
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(|a| a.is_empty());
        if new.pointer("/metadata/deletionTimestamp").is_some() && finalizers_empty {
            self.rv += 1;
            set_rv(&mut new, self.rv);
            self.remove_object(kind, ns, name, new.clone());
            return Ok(new);
        }
        self.rv += 1;
        set_rv(&mut new, self.rv);
        self.objects
            .entry(kind.key())
            .or_default()
            .insert(obj_key(kind, ns, name), new.clone());
        self.emit(kind, EventType::Modified, new.clone(), Some(old));
        Ok(new)
    }

    /// PATCH. Apply on a missing object creates it.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        kind: &KindSpec,
        ns: Option<&str>,
        name: &str,
        patch_kind: PatchKind,
        patch: Value,
        status_only: bool,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let old = match self.get(kind, ns, name) {
            Ok(o) => o,
            Err(_) if patch_kind == PatchKind::Apply && !status_only => {
                let mut obj = patch;
                if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.entry("name")
                        .or_insert_with(|| Value::String(name.to_string()));
                }
                return self.create(kind, ns, obj, dry_run);
            }
            Err(e) => return Err(e),
        };
        let precondition = patch
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut new = match patch_kind {
            PatchKind::Json => json_patch(&old, &patch)?,
            PatchKind::StrategicMerge => {
                if !kind.group.is_empty() {
                    return Err(ApiError::new(
                        415,
                        "UnsupportedMediaType",
                        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                    ));
                }
                if !patch.is_object() {
                    return Err(ApiError::bad_request("patch body must be a JSON object"));
                }
                let mut n = old.clone();
                strategic_merge(&mut n, &patch);
                n
            }
            PatchKind::Merge | PatchKind::Apply => {
                if !patch.is_object() {
                    return Err(ApiError::bad_request("patch body must be a JSON object"));
                }
                let mut n = old.clone();
                merge_patch(&mut n, &patch);
                n
            }
        };
        // The stored resourceVersion is a precondition only when the patch sets it.
        if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            match precondition {
                Some(rv) if !rv.is_empty() => m.insert("resourceVersion".into(), Value::String(rv)),
                _ => m.remove("resourceVersion"),
            };
        }
        if patch_kind == PatchKind::Json {
            // a JSON patch may not change the name; report like the apiserver does
            let n = new
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if n != name {
                return Err(ApiError::invalid(
                    kind,
                    name,
                    "metadata.name",
                    "field is immutable",
                ));
            }
        }
        self.update(kind, ns, name, new, status_only, dry_run)
    }

    /// DELETE. Objects with finalizers get a deletionTimestamp instead.
    pub fn delete(
        &mut self,
        kind: &KindSpec,
        ns: Option<&str>,
        name: &str,
        precondition_rv: Option<&str>,
        precondition_uid: Option<&str>,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let old = self.get(kind, ns, name)?;
        if let Some(rv) = precondition_rv
            && old
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                != Some(rv)
        {
            return Err(ApiError::conflict(
                kind,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record. The object might have been modified"
                ),
            ));
        }
        if let Some(uid) = precondition_uid
            && old.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid)
        {
            return Err(ApiError::conflict(
                kind,
                name,
                &format!(
                    "the UID in the precondition ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
                ),
            ));
        }
        if dry_run {
            return Ok(old);
        }
        let has_finalizers = old
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        if has_finalizers {
            if old.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(old);
            }
            let mut new = old.clone();
            let meta = metadata_mut(&mut new)?;
            meta.insert("deletionTimestamp".into(), Value::String(now_rfc3339()));
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            self.rv += 1;
            set_rv(&mut new, self.rv);
            self.objects
                .entry(kind.key())
                .or_default()
                .insert(obj_key(kind, ns, name), new.clone());
            self.emit(kind, EventType::Modified, new.clone(), Some(old));
            return Ok(new);
        }
        if kind.is_core("Namespace") {
            self.delete_namespace_contents(name);
        }
        let mut gone = old;
        self.rv += 1;
        set_rv(&mut gone, self.rv);
        self.remove_object(kind, ns, name, gone.clone());
        Ok(gone)
    }

    fn delete_namespace_contents(&mut self, ns: &str) {
        let kinds: Vec<Arc<KindSpec>> = self
            .kinds
            .iter()
            .filter(|k| k.namespaced)
            .cloned()
            .collect();
        for kind in kinds {
            let names: Vec<String> = self
                .objects
                .get(&kind.key())
                .map(|m| {
                    m.keys()
                        .filter(|(n, _)| n == ns)
                        .map(|(_, name)| name.clone())
                        .collect()
                })
                .unwrap_or_default();
            for name in names {
                if let Ok(mut obj) = self.get(&kind, Some(ns), &name) {
                    self.rv += 1;
                    set_rv(&mut obj, self.rv);
                    self.remove_object(&kind, Some(ns), &name, obj);
                }
            }
        }
    }

    fn remove_object(&mut self, kind: &KindSpec, ns: Option<&str>, name: &str, last: Value) {
        if let Some(m) = self.objects.get_mut(&kind.key()) {
            m.remove(&obj_key(kind, ns, name));
        }
        self.emit(kind, EventType::Deleted, last, None);
    }

    /// Insert or replace without preconditions (direct state access).
    pub fn upsert(&mut self, mut obj: Value) -> Result<Value, ApiError> {
        let api_version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let kind_name = obj
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let kind = self.kind_by_gvk(&api_version, &kind_name).ok_or_else(|| {
            ApiError::bad_request(format!(
                "no kind {kind_name:?} registered for apiVersion {api_version:?}"
            ))
        })?;
        let ns = if kind.namespaced {
            Some(
                obj.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .unwrap_or("default")
                    .to_string(),
            )
        } else {
            None
        };
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        // direct access writes status too
        let with_status = KindSpec {
            status_subresource: false,
            ..(*kind).clone()
        };
        match self.get(&kind, ns.as_deref(), &name) {
            Ok(_) => {
                if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("resourceVersion");
                }
                self.update(&with_status, ns.as_deref(), &name, obj, false, false)
            }
            Err(_) => self.create(&with_status, ns.as_deref(), obj, false),
        }
    }
}

fn obj_key(kind: &KindSpec, ns: Option<&str>, name: &str) -> (String, String) {
    let ns = if kind.namespaced {
        ns.unwrap_or("default")
    } else {
        ""
    };
    (ns.to_string(), name.to_string())
}

fn check_type(kind: &KindSpec, obj: &Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    let k = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if !k.is_empty() && k != kind.kind {
        return Err(ApiError::bad_request(format!(
            "the kind of the object ({k}) does not match the kind of the resource ({})",
            kind.kind
        )));
    }
    let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if !av.is_empty() && av != kind.api_version() {
        return Err(ApiError::bad_request(format!(
            "the apiVersion of the object ({av}) does not match {}",
            kind.api_version()
        )));
    }
    if let Some(m) = obj.get("metadata")
        && !m.is_object()
    {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

fn metadata_mut(obj: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    let o = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the request body must be a JSON object"))?;
    let m = o.entry("metadata").or_insert_with(|| json!({}));
    if m.is_null() {
        *m = json!({});
    }
    m.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

fn set_type_meta(kind: &KindSpec, obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        o.insert("apiVersion".into(), Value::String(kind.api_version()));
        o.insert("kind".into(), Value::String(kind.kind.clone()));
    }
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("metadata");
            o.remove("status");
        }
        v
    };
    strip(old) != strip(new)
}

fn validate_name(kind: &KindSpec, name: &str) -> Result<(), ApiError> {
    let ok = name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            kind,
            name,
            "metadata.name",
            &format!(
                "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        ))
    }
}

fn apply_defaults(kind: &KindSpec, obj: &mut Value, serial: u64) -> Result<(), ApiError> {
    use base64::Engine as _;
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let Some(o) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    if kind.is_core("Secret") {
        o.entry("type")
            .or_insert_with(|| Value::String("Opaque".into()));
        if let Some(sd) = o.remove("stringData") {
            let Some(sd) = sd.as_object() else {
                return Err(ApiError::invalid(
                    kind,
                    &name,
                    "stringData",
                    "must be a map of strings",
                ));
            };
            let data = o.entry("data").or_insert_with(|| json!({}));
            if data.is_null() {
                *data = json!({});
            }
            if let Some(d) = data.as_object_mut() {
                for (k, v) in sd {
                    let s = v.as_str().unwrap_or_default();
                    d.insert(
                        k.clone(),
                        Value::String(base64::engine::general_purpose::STANDARD.encode(s)),
                    );
                }
            }
        }
        if let Some(d) = o.get("data").and_then(Value::as_object) {
            for (k, v) in d {
                let valid = v
                    .as_str()
                    .is_some_and(|s| base64::engine::general_purpose::STANDARD.decode(s).is_ok());
                if !valid {
                    return Err(ApiError::bad_request(format!(
                        "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at key {k:?}"
                    )));
                }
            }
        }
    } else if kind.is_core("Namespace") {
        let phase = if o
            .get("metadata")
            .and_then(|m| m.get("deletionTimestamp"))
            .is_some()
        {
            "Terminating"
        } else {
            "Active"
        };
        o.insert("status".into(), json!({"phase": phase}));
    } else if kind.is_core("Service") {
        let spec = o.entry("spec").or_insert_with(|| json!({}));
        if let Some(s) = spec.as_object_mut() {
            s.entry("type")
                .or_insert_with(|| Value::String("ClusterIP".into()));
            let external = s.get("type").and_then(Value::as_str) == Some("ExternalName");
            if !external
                && s.get("clusterIP")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
            {
                let ip = format!("10.96.{}.{}", (serial / 250) % 250, serial % 250 + 1);
                s.insert("clusterIP".into(), Value::String(ip.clone()));
                s.insert("clusterIPs".into(), json!([ip]));
            }
        }
    }
    Ok(())
}

/// RFC 7386 JSON merge patch.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            if let Some(t) = target.as_object_mut() {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// An approximation of a strategic merge patch: a JSON merge patch that also
/// understands the `$patch: replace|delete` directive, ignores the other `$`
/// directives, and merges lists of objects keyed by `name` (or `port`) instead of
/// replacing them. Other lists are replaced.
pub(crate) fn strategic_merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut clean = patch.clone();
        strip_directives(&mut clean);
        *target = clean;
        return;
    }
    if !target.is_object() {
        *target = json!({});
    }
    let Some(t) = target.as_object_mut() else {
        return;
    };
    for (k, v) in p {
        if k.starts_with('$') {
            continue;
        }
        if v.is_null() || v.get("$patch").and_then(Value::as_str) == Some("delete") {
            t.remove(k);
            continue;
        }
        match (t.get_mut(k), v) {
            (Some(Value::Array(existing)), Value::Array(items))
                if merge_key(existing, items).is_some() =>
            {
                let key = merge_key(existing, items).unwrap_or("name");
                for item in items {
                    let id = item.get(key).cloned();
                    let pos = existing.iter().position(|e| e.get(key) == id.as_ref());
                    let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                    match (pos, delete) {
                        (Some(i), true) => {
                            existing.remove(i);
                        }
                        (Some(i), false) => strategic_merge(&mut existing[i], item),
                        (None, true) => {}
                        (None, false) => {
                            let mut clean = item.clone();
                            strip_directives(&mut clean);
                            existing.push(clean);
                        }
                    }
                }
            }
            (Some(existing), _) => strategic_merge(existing, v),
            (None, _) => {
                let mut clean = v.clone();
                strip_directives(&mut clean);
                t.insert(k.clone(), clean);
            }
        }
    }
}

fn merge_key(existing: &[Value], items: &[Value]) -> Option<&'static str> {
    ["name", "port"].into_iter().find(|key| {
        !items.is_empty()
            && items
                .iter()
                .chain(existing.iter())
                .all(|e| e.get(*key).is_some())
    })
}

fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            m.values_mut().for_each(strip_directives);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn pointer_parent<'a>(doc: &'a mut Value, path: &str) -> Result<(&'a mut Value, String), ApiError> {
    let bad = || ApiError::new(422, "Invalid", format!("invalid JSON patch path {path:?}"));
    if !path.starts_with('/') {
        return Err(bad());
    }
    let (parent, last) = path.rsplit_once('/').ok_or_else(bad)?;
    let target = doc.pointer_mut(parent).ok_or_else(bad)?;
    Ok((target, unescape(last)))
}

fn jp_get(doc: &Value, path: &str) -> Option<Value> {
    doc.pointer(path).cloned()
}

fn jp_remove(doc: &mut Value, path: &str) -> Result<Value, ApiError> {
    let (parent, last) = pointer_parent(doc, path)?;
    let missing = || {
        ApiError::new(
            422,
            "Invalid",
            format!("JSON patch: path {path:?} does not exist"),
        )
    };
    match parent {
        Value::Object(m) => m.remove(&last).ok_or_else(missing),
        Value::Array(a) => {
            let i: usize = last.parse().map_err(|_| missing())?;
            if i < a.len() {
                Ok(a.remove(i))
            } else {
                Err(missing())
            }
        }
        _ => Err(missing()),
    }
}

fn jp_add(doc: &mut Value, path: &str, value: Value) -> Result<(), ApiError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = pointer_parent(doc, path)?;
    let bad = || {
        ApiError::new(
            422,
            "Invalid",
            format!("JSON patch: cannot add at {path:?}"),
        )
    };
    match parent {
        Value::Object(m) => {
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
                return Ok(());
            }
            let i: usize = last.parse().map_err(|_| bad())?;
            if i > a.len() {
                return Err(bad());
            }
            a.insert(i, value);
            Ok(())
        }
        _ => Err(bad()),
    }
}

/// RFC 6902 JSON patch.
pub(crate) fn json_patch(doc: &Value, patch: &Value) -> Result<Value, ApiError> {
    let ops = patch
        .as_array()
        .ok_or_else(|| ApiError::bad_request("a JSON patch must be an array of operations"))?;
    let mut doc = doc.clone();
    for op in ops {
        let name = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op.get("path").and_then(Value::as_str).unwrap_or("");
        let value = || {
            op.get("value").cloned().ok_or_else(|| {
                ApiError::bad_request(format!("JSON patch op {name:?} needs a value"))
            })
        };
        let from = || {
            op.get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::bad_request(format!("JSON patch op {name:?} needs from")))
        };
        match name {
            "add" => jp_add(&mut doc, path, value()?)?,
            "remove" => {
                jp_remove(&mut doc, path)?;
            }
            "replace" => {
                jp_remove(&mut doc, path)?;
                jp_add(&mut doc, path, value()?)?;
            }
            "move" => {
                let v = jp_remove(&mut doc, from()?)?;
                jp_add(&mut doc, path, v)?;
            }
            "copy" => {
                let v = jp_get(&doc, from()?).ok_or_else(|| {
                    ApiError::new(422, "Invalid", "JSON patch: copy from a missing path")
                })?;
                jp_add(&mut doc, path, v)?;
            }
            "test" => {
                if jp_get(&doc, path) != Some(value()?) {
                    return Err(ApiError::new(
                        422,
                        "Invalid",
                        format!("JSON patch: test failed at {path:?}"),
                    ));
                }
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown JSON patch op {other:?}"
                )));
            }
        }
    }
    Ok(doc)
}

fn random_u64(seed: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(seed);
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// A random hex string of `len` characters (tokens, names).
pub(crate) fn random_hex(len: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < len {
        s.push_str(&format!("{:016x}", random_u64(i)));
        i += 1;
    }
    s.truncate(len);
    s
}

fn short_random(seed: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut r = random_u64(seed);
    (0..5)
        .map(|_| {
            let c = ALPHABET[(r % ALPHABET.len() as u64) as usize] as char;
            r /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

fn make_uid(seed: u64) -> String {
    let a = random_u64(seed);
    let b = random_u64(seed ^ 0x5555);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
}

/// Current UTC time as RFC 3339 with second precision.
pub(crate) fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format_rfc3339(secs)
}

fn format_rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn strategic_merge_keys_lists_and_directives() {
        let mut doc = json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}], "x": [1, 2]}});
        strategic_merge(
            &mut doc,
            &json!({"$setElementOrder/ports": [], "spec": {
                "ports": [{"name": "http", "targetPort": 8080}, {"name": "https", "$patch": "delete"}, {"name": "m", "port": 9}],
                "x": [3]
            }}),
        );
        assert_eq!(
            doc,
            json!({"spec": {"ports": [{"port": 80, "name": "http", "targetPort": 8080}, {"name": "m", "port": 9}], "x": [3]}})
        );
        strategic_merge(&mut doc, &json!({"spec": {"$patch": "replace", "y": 1}}));
        assert_eq!(doc, json!({"spec": {"y": 1}}));
    }

    #[test]
    fn rfc3339() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(1_709_210_096), "2024-02-29T12:34:56Z");
    }

    #[test]
    fn patches() {
        let mut doc = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        merge_patch(&mut doc, &json!({"a": {"b": null, "d": 3}, "l": [3]}));
        assert_eq!(doc, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
        let out = json_patch(
            &doc,
            &json!([
                {"op": "add", "path": "/l/-", "value": 4},
                {"op": "replace", "path": "/a/c", "value": 5},
                {"op": "remove", "path": "/a/d"},
                {"op": "test", "path": "/l/1", "value": 4},
                {"op": "copy", "from": "/a/c", "path": "/x"},
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": {"c": 5}, "l": [3, 4], "x": 5}));
        assert!(json_patch(&doc, &json!([{"op": "test", "path": "/a/c", "value": 9}])).is_err());
        assert!(json_patch(&doc, &json!([{"op": "remove", "path": "/nope"}])).is_err());
    }

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
