//! What a cache holds ([`Selection`]) and how a cache is named ([`CacheName`]).

use std::fmt;

use kube::api::ApiResource;
use kube_runtime::watcher;

/// Which objects of a resource a cache holds: a namespace (or all), and
/// optional label and field selectors, passed to the API server as given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Selection {
    namespace: Option<String>,
    labels: Option<String>,
    fields: Option<String>,
}

impl Selection {
    /// Every object: all namespaces (or a cluster-scoped kind).
    pub fn all() -> Self {
        Self::default()
    }

    /// Objects in one namespace.
    pub fn in_namespace(namespace: impl Into<String>) -> Self {
        Self {
            namespace: Some(namespace.into()),
            ..Self::default()
        }
    }

    /// Exactly one object, by namespace and name (a `metadata.name` field
    /// selector): needs RBAC on that object only. For a cluster-scoped kind pass
    /// `None`.
    pub fn object(namespace: Option<&str>, name: &str) -> Self {
        Self {
            namespace: namespace.map(str::to_owned),
            labels: None,
            fields: Some(format!("metadata.name={name}")),
        }
    }

    /// Restrict to objects matching a label selector (`app=x,tier!=db`).
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.labels = Some(selector.into());
        self
    }

    /// Restrict to objects matching a field selector (`metadata.name=x`).
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.fields = Some(selector.into());
        self
    }

    /// The namespace, if restricted to one.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The label selector, if any.
    pub fn label_selector(&self) -> Option<&str> {
        self.labels.as_deref()
    }

    /// The field selector, if any.
    pub fn field_selector(&self) -> Option<&str> {
        self.fields.as_deref()
    }

    pub(crate) fn watcher_config(&self) -> watcher::Config {
        let mut config = watcher::Config::default();
        if let Some(labels) = &self.labels {
            config = config.labels(labels);
        }
        if let Some(fields) = &self.fields {
            config = config.fields(fields);
        }
        config
    }

    /// Whether the object `namespace/name` could be in this cache. Label selectors
    /// cannot be judged without the object, so they do not exclude.
    pub(crate) fn covers_object(&self, namespace: Option<&str>, name: &str) -> bool {
        self.covers_namespace(namespace)
            && self
                .fields
                .as_deref()
                .and_then(|fields| field_equals(fields, "metadata.name"))
                .is_none_or(|wanted| wanted == name)
    }

    /// Whether every object of `namespace` (None: every namespace) could be in this cache.
    pub(crate) fn covers_namespace(&self, namespace: Option<&str>) -> bool {
        let fields_ns = self
            .fields
            .as_deref()
            .and_then(|fields| field_equals(fields, "metadata.namespace"));
        let scoped = self.namespace.as_deref().or(fields_ns);
        match (scoped, namespace) {
            (None, _) => true,
            (Some(own), Some(asked)) => own == asked,
            (Some(_), None) => false,
        }
    }
}

/// The value of an equality term (`key=value` or `key==value`) in a field selector.
fn field_equals<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    fields.split(',').find_map(|term| {
        let term = term.trim();
        if term.contains("!=") {
            return None;
        }
        let (k, v) = term.split_once("==").or_else(|| term.split_once('='))?;
        (k.trim() == key).then(|| v.trim())
    })
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "in namespace {ns:?}")?,
            None => f.write_str("in all namespaces")?,
        }
        if let Some(labels) = &self.labels {
            write!(f, " with labels {labels:?}")?;
        }
        if let Some(fields) = &self.fields {
            write!(f, " with fields {fields:?}")?;
        }
        Ok(())
    }
}

/// Names one declared cache: the resource and its [`Selection`]. Used in errors,
/// logs and health reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheName {
    /// API group ("" for the core group).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name, as in the URL.
    pub plural: String,
    /// What the cache holds.
    pub selection: Selection,
}

impl CacheName {
    pub(crate) fn new(resource: &ApiResource, selection: Selection) -> Self {
        Self {
            group: resource.group.clone(),
            version: resource.version.clone(),
            kind: resource.kind.clone(),
            plural: resource.plural.clone(),
            selection,
        }
    }

    /// `plural.version.group` (or `plural.version` for the core group), as kubectl names resources.
    pub fn resource(&self) -> String {
        resource_name(&self.group, &self.version, &self.plural)
    }

    pub(crate) fn same_kind(&self, group: &str, version: &str, kind: &str) -> bool {
        self.group == group && self.version == version && self.kind == kind
    }
}

impl fmt::Display for CacheName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}) {}", self.kind, self.resource(), self.selection)
    }
}

/// `plural.version.group` (or `plural.version` for the core group), as kubectl names
/// resources.
pub(crate) fn resource_name(group: &str, version: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("{plural}.{version}")
    } else {
        format!("{plural}.{version}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_selector_terms() {
        assert_eq!(field_equals("metadata.name=x", "metadata.name"), Some("x"));
        assert_eq!(
            field_equals("type=a, metadata.name==y", "metadata.name"),
            Some("y")
        );
        assert_eq!(field_equals("metadata.name!=x", "metadata.name"), None);
        assert_eq!(field_equals("type=a", "metadata.name"), None);
    }

    #[test]
    fn coverage() {
        let one = Selection::object(Some("ns"), "x");
        assert!(one.covers_object(Some("ns"), "x"));
        assert!(!one.covers_object(Some("ns"), "y"));
        assert!(!one.covers_object(Some("other"), "x"));
        assert!(!one.covers_namespace(None));
        let all = Selection::all().labels("a=b");
        assert!(all.covers_object(Some("any"), "thing"));
        assert!(all.covers_namespace(None));
        let by_field = Selection::all().fields("metadata.namespace=ns");
        assert!(by_field.covers_namespace(Some("ns")));
        assert!(!by_field.covers_namespace(Some("other")));
    }

    #[test]
    fn names_read_like_kubectl() {
        let name = CacheName::new(
            &ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
            Selection::object(Some("ns"), "x"),
        );
        assert_eq!(name.resource(), "secrets.v1");
        assert_eq!(
            name.to_string(),
            "Secret (secrets.v1) in namespace \"ns\" with fields \"metadata.name=x\""
        );
    }
}
