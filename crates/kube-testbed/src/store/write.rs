//! Writes: create, update, patch, delete and the tests' upsert, each committing one
//! event to the history and to the open watches.

use std::sync::Arc;

use serde_json::{Value, json};

use super::ids::{make_uid, short_random};
use super::object::{
    apply_defaults, check_type, metadata_mut, obj_key, set_rv, set_type_meta, spec_changed,
    validate_name,
};
use super::patch::{json_patch, merge_patch, strategic_merge};
use super::{ApiError, EventType, KindSpec, PatchKind, Store, now_rfc3339};

impl Store {
    /// Create an object in `ns` (ignored for cluster-scoped kinds).
    pub(crate) fn create(
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
        validate_name(
            kind,
            &name,
            obj.pointer("/spec/signerName").and_then(Value::as_str),
        )?;
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
        if !kind.tracks_generation() {
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
        self.commit(kind, ns.as_deref(), &name, &mut obj, EventType::Added, None);
        Ok(obj)
    }

    fn namespace_terminating(&self, ns: &str) -> bool {
        self.objects
            .get(&(String::new(), "namespaces".to_string()))
            .and_then(|m| m.get(&(String::new(), ns.to_string())))
            .is_some_and(|o| o.pointer("/metadata/deletionTimestamp").is_some())
    }

    /// Replace an object (PUT). `status_only` is the `/status` subresource.
    pub(crate) fn update(
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
        if kind.tracks_generation() && spec_changed(&old, &new) {
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
        self.commit(kind, ns, name, &mut new, EventType::Modified, Some(old));
        Ok(new)
    }

    /// PATCH. Apply on a missing object creates it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch(
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
    pub(crate) fn delete(
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
            self.commit(kind, ns, name, &mut new, EventType::Modified, Some(old));
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
    pub(crate) fn upsert(&mut self, mut obj: Value) -> Result<Value, ApiError> {
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

    /// Commits `obj` as the new state of `ns/name`: the next resourceVersion, stored,
    /// and one event to the history and the open watches.
    fn commit(
        &mut self,
        kind: &KindSpec,
        ns: Option<&str>,
        name: &str,
        obj: &mut Value,
        ty: EventType,
        old: Option<Value>,
    ) {
        self.rv += 1;
        set_rv(obj, self.rv);
        self.objects
            .entry(kind.key())
            .or_default()
            .insert(obj_key(kind, ns, name), obj.clone());
        self.emit(kind, ty, obj.clone(), old);
    }
}
