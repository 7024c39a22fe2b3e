// Over 500 lines on purpose: `Registry`, `Registration` and their errors share private
// fields, and decoding/encoding (codec.rs), the built-in table (builtins.rs) and the
// tests (tests.rs) are already apart. What is left is the one type and its rules.
//! The platform's type registry (the Go code's "scheme").
//!
//! A [`Registry`] maps a group/version/kind to what a client needs to know about
//! it: the plural resource name, the [`Scope`], and a typed decoder. With it a
//! caller can
//!
//! - resolve a [`kube::discovery::ApiResource`] for dynamic access
//!   ([`Registry::api_resource`]),
//! - decode a [`DynamicObject`](kube::api::DynamicObject) into the Rust type registered for its kind
//!   ([`Registry::decode`], or [`Registry::decode_any`] when the type is not known
//!   statically), and
//! - encode a typed object as a [`DynamicObject`](kube::api::DynamicObject) carrying its `apiVersion` and
//!   `kind` ([`Registry::encode`]).
//!
//! [`platform_registry`] builds the registry every platform service uses. It is
//! **broad on purpose**: it registers every Kubernetes built-in kind k8s-openapi
//! provides for the selected Kubernetes version, not just the handful the services
//! touch (Secret, Namespace, Service and their lists), so that generic code (caches,
//! owner references, dynamic reads) never fails on a kind someone forgot to list.
//! The cost is one small entry per kind, built once per process.
//!
//! The Argo CD shim ([`crate::types::argo`]) is **legacy**: it is registered only
//! for compatibility with the old in-tree CD layer. New code must not grow around it.
//!
//! # Registration rules
//!
//! - Registration order is kept ([`Registry::iter`] returns kinds in the order
//!   they were first registered).
//! - Registering a group/version/kind again with the **same** Rust type (and the
//!   same plural and scope) is a no-op, so additions may overlap with what is
//!   already there (as Go's `scheme.AddKnownTypes` allows).
//! - Registering a group/version/kind again with a **different** type, plural or
//!   scope is an error ([`RegistryError::Conflict`]); the registry is left as it was.
//! - One Rust type may be registered under several kinds (Go allows that too).
//! - A list kind (`<Kind>List`) is registered with [`kube::core::ObjectList`] of
//!   the item type; it shares the item's plural and scope.

mod builtins;
mod codec;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;

use kube::core::{
    ClusterResourceScope, GroupVersionKind, NamespaceResourceScope, ObjectList, SubResourceScope,
};
use kube::discovery::ApiResource;
use serde::de::DeserializeOwned;

use crate::types;

/// Where objects of a kind live in the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Objects live in a namespace (`/namespaces/<ns>/<plural>`).
    Namespaced,
    /// Objects are cluster-wide.
    Cluster,
    /// The kind is only ever the body of a subresource request (for example
    /// `Scale`, `Eviction`, `TokenRequest`); there is no collection to access.
    Subresource,
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scope::Namespaced => "Namespaced",
            Scope::Cluster => "Cluster",
            Scope::Subresource => "Subresource",
        })
    }
}

/// Maps a kube / k8s-openapi scope marker type to a [`Scope`].
///
/// Implemented for [`NamespaceResourceScope`], [`ClusterResourceScope`] and
/// [`SubResourceScope`], the scopes of every statically typed resource.
pub trait ScopeMarker {
    /// The scope this marker stands for.
    const SCOPE: Scope;
}

impl ScopeMarker for NamespaceResourceScope {
    const SCOPE: Scope = Scope::Namespaced;
}

impl ScopeMarker for ClusterResourceScope {
    const SCOPE: Scope = Scope::Cluster;
}

impl ScopeMarker for SubResourceScope {
    const SCOPE: Scope = Scope::Subresource;
}

/// A value decoded by a registration's decoder: one of the registered Rust types,
/// behind [`Any`].
pub type AnyObject = Box<dyn Any + Send + Sync>;

type DecodeFn = fn(serde_json::Value) -> Result<AnyObject, serde_json::Error>;

fn decode_as<T>(value: serde_json::Value) -> Result<AnyObject, serde_json::Error>
where
    T: DeserializeOwned + Send + Sync + 'static,
{
    Ok(Box::new(serde_json::from_value::<T>(value)?))
}

/// Formats a group/version/kind the way Kubernetes does: `group/version, Kind=kind`
/// (`version, Kind=kind` for the core group).
pub fn display_gvk(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{}, Kind={}", gvk.version, gvk.kind)
    } else {
        format!("{}/{}, Kind={}", gvk.group, gvk.version, gvk.kind)
    }
}

/// Details of a [`RegistryError::Conflict`]: a kind offered again with another
/// type, plural or scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} is already registered as {existing} (plural {existing_plural:?}, scope {existing_scope}); \
     refusing to register it again as {new} (plural {new_plural:?}, scope {new_scope})",
    display_gvk(.gvk)
)]
pub struct KindConflict {
    /// The kind registered twice.
    pub gvk: GroupVersionKind,
    /// The Rust type already registered.
    pub existing: &'static str,
    /// Its plural.
    pub existing_plural: String,
    /// Its scope.
    pub existing_scope: Scope,
    /// The Rust type that was offered.
    pub new: &'static str,
    /// The plural that was offered.
    pub new_plural: String,
    /// The scope that was offered.
    pub new_scope: Scope,
}

/// Errors building or querying a [`Registry`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The kind is already registered with another type, plural or scope.
    #[error("{0}")]
    Conflict(Box<KindConflict>),
    /// A registration was missing a version, kind or plural.
    #[error("cannot register {}: {reason}", display_gvk(.gvk))]
    Invalid {
        /// The kind offered.
        gvk: GroupVersionKind,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The kind is not registered.
    #[error("{} is not registered", display_gvk(.0))]
    NotRegistered(GroupVersionKind),
    /// The kind is the body of a subresource request and has no collection.
    #[error("{} is a subresource kind; it has no API collection to access", display_gvk(.0))]
    Subresource(GroupVersionKind),
    /// A caller-supplied addition failed (see [`platform_registry`]).
    #[error("registry addition #{index} failed: {source}")]
    Addition {
        /// Position of the addition in the list passed to [`platform_registry`],
        /// counting from 0.
        index: usize,
        /// What went wrong.
        #[source]
        source: Box<RegistryError>,
    },
    /// Any other failure reported by a caller-supplied addition.
    #[error("{0}")]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

/// Errors decoding an untyped object into its registered type.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The object has no `apiVersion`/`kind`.
    #[error("object has no apiVersion/kind, so its type cannot be looked up")]
    MissingTypeMeta,
    /// The object's `apiVersion` is not `version` or `group/version`.
    #[error("object has an invalid apiVersion {0:?}")]
    InvalidApiVersion(String),
    /// The object's kind is not registered.
    #[error("{} is not registered", display_gvk(.0))]
    NotRegistered(GroupVersionKind),
    /// The kind is registered with a different type than the one requested.
    #[error("{} is registered as {registered}, not {requested}", display_gvk(.gvk))]
    TypeMismatch {
        /// The object's kind.
        gvk: GroupVersionKind,
        /// The type registered for it.
        registered: &'static str,
        /// The type the caller asked for.
        requested: &'static str,
    },
    /// The object does not have the shape of its registered type.
    #[error("cannot decode {} as {type_name}: {source}", display_gvk(.gvk))]
    Deserialize {
        /// The object's kind.
        gvk: GroupVersionKind,
        /// The type registered for it.
        type_name: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
}

/// Errors encoding a typed object.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The object's kind is not registered.
    #[error("{} is not registered", display_gvk(.0))]
    NotRegistered(GroupVersionKind),
    /// The kind is registered with a different type than the one offered.
    #[error("{} is registered as {registered}, not {offered}", display_gvk(.gvk))]
    TypeMismatch {
        /// The object's kind.
        gvk: GroupVersionKind,
        /// The type registered for it.
        registered: &'static str,
        /// The type offered.
        offered: &'static str,
    },
    /// The object did not serialize to a JSON object.
    #[error("cannot encode {}: {reason}", display_gvk(.gvk))]
    NotAnObject {
        /// The object's kind.
        gvk: GroupVersionKind,
        /// What it serialized to instead.
        reason: &'static str,
    },
    /// Serialization failed.
    #[error("cannot encode {}: {source}", display_gvk(.gvk))]
    Serialize {
        /// The object's kind.
        gvk: GroupVersionKind,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
}

/// Everything the registry knows about one kind.
#[derive(Clone)]
pub struct Registration {
    gvk: GroupVersionKind,
    plural: String,
    scope: Scope,
    list_of: Option<String>,
    type_id: TypeId,
    type_name: &'static str,
    decode: DecodeFn,
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("gvk", &display_gvk(&self.gvk))
            .field("plural", &self.plural)
            .field("scope", &self.scope)
            .field("list_of", &self.list_of)
            .field("type_name", &self.type_name)
            .finish()
    }
}

impl Registration {
    /// A registration of `T` under an explicit kind, plural and scope.
    ///
    /// This is for types that do not implement [`kube::Resource`]; types that do
    /// are registered with [`Registry::register`].
    pub fn new<T>(gvk: GroupVersionKind, plural: impl Into<String>, scope: Scope) -> Self
    where
        T: DeserializeOwned + Send + Sync + 'static,
    {
        Self {
            gvk,
            plural: plural.into(),
            scope,
            list_of: None,
            type_id: TypeId::of::<T>(),
            type_name: std::any::type_name::<T>(),
            decode: decode_as::<T>,
        }
    }

    /// The registration of a statically typed resource.
    pub fn of<K>() -> Self
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        K::Scope: ScopeMarker,
    {
        Self::new::<K>(
            GroupVersionKind::gvk(&K::group(&()), &K::version(&()), &K::kind(&())),
            K::plural(&()),
            <K::Scope as ScopeMarker>::SCOPE,
        )
    }

    /// The registration of the list kind (`<Kind>List`) of a statically typed
    /// resource, decoded as [`ObjectList<K>`].
    pub fn list_of<K>() -> Self
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned + Clone + Send + Sync + 'static,
        K::Scope: ScopeMarker,
    {
        let kind = K::kind(&());
        let mut registration = Self::new::<ObjectList<K>>(
            GroupVersionKind::gvk(&K::group(&()), &K::version(&()), &format!("{kind}List")),
            K::plural(&()),
            <K::Scope as ScopeMarker>::SCOPE,
        );
        registration.list_of = Some(kind.into_owned());
        registration
    }

    /// The kind.
    pub fn gvk(&self) -> &GroupVersionKind {
        &self.gvk
    }

    /// The plural resource name (for a list kind: its items' plural).
    pub fn plural(&self) -> &str {
        &self.plural
    }

    /// Where objects of the kind live.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// For a list kind, the kind of its items.
    pub fn list_item_kind(&self) -> Option<&str> {
        self.list_of.as_deref()
    }

    /// The name of the registered Rust type.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// Whether `T` is the registered Rust type.
    pub fn is<T: 'static>(&self) -> bool {
        self.type_id == TypeId::of::<T>()
    }

    /// Decodes a JSON value with the registered type's decoder.
    pub fn decode_value(&self, value: serde_json::Value) -> Result<AnyObject, DecodeError> {
        (self.decode)(value).map_err(|source| DecodeError::Deserialize {
            gvk: self.gvk.clone(),
            type_name: self.type_name,
            source,
        })
    }

    fn same_as(&self, other: &Registration) -> bool {
        self.type_id == other.type_id
            && self.plural == other.plural
            && self.scope == other.scope
            && self.list_of == other.list_of
    }
}

/// An object decoded into its registered type without naming the type statically.
#[derive(Debug)]
pub struct TypedObject {
    gvk: GroupVersionKind,
    type_name: &'static str,
    value: AnyObject,
}

impl TypedObject {
    /// The object's kind.
    pub fn gvk(&self) -> &GroupVersionKind {
        &self.gvk
    }

    /// The name of the Rust type it was decoded into.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// Whether the object is a `T`.
    pub fn is<T: 'static>(&self) -> bool {
        self.value.is::<T>()
    }

    /// Borrows the object as a `T`, if it is one.
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        self.value.downcast_ref::<T>()
    }

    /// Takes the object as a `T`, or gives it back when it is not one.
    pub fn downcast<T: 'static>(self) -> Result<T, Self> {
        match self.value.downcast::<T>() {
            Ok(value) => Ok(*value),
            Err(value) => Err(Self {
                gvk: self.gvk,
                type_name: self.type_name,
                value,
            }),
        }
    }

    /// The boxed value.
    pub fn into_inner(self) -> AnyObject {
        self.value
    }
}

/// The type registry. See the [module documentation](self).
#[derive(Clone, Default)]
pub struct Registry {
    entries: Vec<Registration>,
    index: HashMap<GroupVersionKind, usize>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("kinds", &self.entries.len())
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The platform registry without caller additions; see [`platform_registry`].
    pub fn platform() -> Result<Self, RegistryError> {
        platform_registry(std::iter::empty::<
            fn(&mut Registry) -> Result<(), RegistryError>,
        >())
    }

    /// Adds one registration.
    ///
    /// The same kind with the same type, plural and scope again is a no-op;
    /// with anything different it is [`RegistryError::Conflict`].
    pub fn add(&mut self, registration: Registration) -> Result<(), RegistryError> {
        let gvk = &registration.gvk;
        let invalid = |reason| RegistryError::Invalid {
            gvk: gvk.clone(),
            reason,
        };
        if gvk.version.is_empty() {
            return Err(invalid("the version is empty"));
        }
        if gvk.kind.is_empty() {
            return Err(invalid("the kind is empty"));
        }
        if registration.plural.is_empty() && registration.scope != Scope::Subresource {
            return Err(invalid("the plural is empty"));
        }
        if let Some(&at) = self.index.get(gvk) {
            let existing = &self.entries[at];
            if existing.same_as(&registration) {
                return Ok(());
            }
            return Err(RegistryError::Conflict(Box::new(KindConflict {
                gvk: gvk.clone(),
                existing: existing.type_name,
                existing_plural: existing.plural.clone(),
                existing_scope: existing.scope,
                new: registration.type_name,
                new_plural: registration.plural,
                new_scope: registration.scope,
            })));
        }
        self.index.insert(gvk.clone(), self.entries.len());
        self.entries.push(registration);
        Ok(())
    }

    /// Registers a statically typed resource (its kind only).
    pub fn register<K>(&mut self) -> Result<(), RegistryError>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        K::Scope: ScopeMarker,
    {
        self.add(Registration::of::<K>())
    }

    /// Registers a statically typed resource and its list kind (`<Kind>List`,
    /// decoded as [`ObjectList<K>`]).
    ///
    /// Both or neither: when the list kind conflicts, the item kind is not left
    /// behind.
    pub fn register_with_list<K>(&mut self) -> Result<(), RegistryError>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned + Clone + Send + Sync + 'static,
        K::Scope: ScopeMarker,
    {
        let item = Registration::of::<K>();
        let list = Registration::list_of::<K>();
        let item_was_new = !self.index.contains_key(&item.gvk);
        self.add(item)?;
        if let Err(error) = self.add(list) {
            if item_was_new {
                self.remove_last();
            }
            return Err(error);
        }
        Ok(())
    }

    fn remove_last(&mut self) {
        if let Some(last) = self.entries.pop() {
            self.index.remove(&last.gvk);
        }
    }

    /// Number of registered kinds (list kinds count separately).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The registrations in registration order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Registration> {
        self.entries.iter()
    }

    /// The registration of a kind.
    pub fn get(&self, gvk: &GroupVersionKind) -> Option<&Registration> {
        self.index.get(gvk).map(|&at| &self.entries[at])
    }

    /// Whether a kind is registered.
    pub fn contains(&self, gvk: &GroupVersionKind) -> bool {
        self.index.contains_key(gvk)
    }

    /// Position of a kind in registration order.
    pub fn position(&self, gvk: &GroupVersionKind) -> Option<usize> {
        self.index.get(gvk).copied()
    }

    /// The registration of the statically typed resource `K`, if `K` is the type
    /// registered for its kind.
    pub fn get_typed<K>(&self) -> Option<&Registration>
    where
        K: kube::Resource<DynamicType = ()> + 'static,
    {
        self.get(&gvk_of::<K>()).filter(|r| r.is::<K>())
    }

    /// The [`ApiResource`] for dynamic access to a kind.
    ///
    /// For a list kind this is the resource of its items (the collection the list
    /// came from). A subresource kind has no collection:
    /// [`RegistryError::Subresource`].
    pub fn api_resource(&self, gvk: &GroupVersionKind) -> Result<ApiResource, RegistryError> {
        let registration = self
            .get(gvk)
            .ok_or_else(|| RegistryError::NotRegistered(gvk.clone()))?;
        if registration.scope == Scope::Subresource {
            return Err(RegistryError::Subresource(gvk.clone()));
        }
        let kind = registration.list_of.as_deref().unwrap_or(&gvk.kind);
        Ok(ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&gvk.group, &gvk.version, kind),
            &registration.plural,
        ))
    }

    /// Whether objects of a kind are namespaced (`None` when it is not registered).
    pub fn is_namespaced(&self, gvk: &GroupVersionKind) -> Option<bool> {
        self.get(gvk).map(|r| r.scope == Scope::Namespaced)
    }
}

/// The group/version/kind of a statically typed resource.
pub fn gvk_of<K>() -> GroupVersionKind
where
    K: kube::Resource<DynamicType = ()>,
{
    GroupVersionKind::gvk(&K::group(&()), &K::version(&()), &K::kind(&()))
}

/// Registers the Kubernetes built-in kinds: every kind (and list) k8s-openapi
/// provides for the enabled Kubernetes version, core `v1` first, then the API
/// groups alphabetically (including `apiextensions.k8s.io` and
/// `apiregistration.k8s.io`).
pub fn add_kubernetes_builtins(registry: &mut Registry) -> Result<(), RegistryError> {
    builtins::add(registry)
}

/// Registers the Unikorn API types (group `unikorn-cloud.org`, `v1alpha1`):
/// HelmApplication and its list.
pub fn add_unikorn_types(registry: &mut Registry) -> Result<(), RegistryError> {
    registry.register_with_list::<types::HelmApplication>()
}

/// Registers the fake Unikorn types (group `unikorn.unikorn-cloud.org`,
/// `v1alpha1`): ManagedResource and its list. They are test fixtures for generic
/// reconcilers; no CRD is shipped for them.
pub fn add_fake_types(registry: &mut Registry) -> Result<(), RegistryError> {
    registry.register_with_list::<types::fake::ManagedResource>()
}

/// Registers the legacy Argo CD shim (group `argoproj.io`, `v1alpha1`):
/// Application and its list.
///
/// Legacy: kept for compatibility with the old in-tree CD layer. New code must
/// not grow around it.
pub fn add_argo_shim(registry: &mut Registry) -> Result<(), RegistryError> {
    registry.register_with_list::<types::argo::Application>()
}

/// A caller-supplied addition to the platform registry, boxed so that different
/// closures fit in one list.
pub type Addition = Box<dyn FnOnce(&mut Registry) -> Result<(), RegistryError> + Send>;

/// Builds the platform registry (Go's `NewScheme(adders...)`).
///
/// Registers, in this order: the Kubernetes built-ins
/// ([`add_kubernetes_builtins`]), the Unikorn API types ([`add_unikorn_types`]),
/// the fake Unikorn types ([`add_fake_types`]), the legacy Argo CD shim
/// ([`add_argo_shim`]), then each addition in order. The first error stops it
/// and no registry is returned; an addition's error comes back wrapped in
/// [`RegistryError::Addition`] with the addition's position.
///
/// The registry is deliberately broad (see the [module documentation](self)).
///
/// ```
/// # use kube_construct::registry::{platform_registry, Registry, RegistryError};
/// # use kube::core::GroupVersionKind;
/// fn my_types(r: &mut Registry) -> Result<(), RegistryError> {
///     // r.register_with_list::<MyKind>()
///     Ok(())
/// }
/// let registry = platform_registry([my_types]).unwrap();
/// let secret = GroupVersionKind::gvk("", "v1", "Secret");
/// assert_eq!(registry.api_resource(&secret).unwrap().plural, "secrets");
/// ```
pub fn platform_registry<I, F>(additions: I) -> Result<Registry, RegistryError>
where
    I: IntoIterator<Item = F>,
    F: FnOnce(&mut Registry) -> Result<(), RegistryError>,
{
    let mut registry = Registry::new();
    add_kubernetes_builtins(&mut registry)?;
    add_unikorn_types(&mut registry)?;
    add_fake_types(&mut registry)?;
    add_argo_shim(&mut registry)?;
    for (index, addition) in additions.into_iter().enumerate() {
        addition(&mut registry).map_err(|source| RegistryError::Addition {
            index,
            source: Box::new(source),
        })?;
    }
    Ok(registry)
}

#[cfg(test)]
mod tests;
