//! The registry itself: kinds, scopes and typed decoders (the module's guide is
//! `overview.md`).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;

use kube::core::{
    ClusterResourceScope, GroupVersionKind, NamespaceResourceScope, ObjectList, SubResourceScope,
};
use kube::discovery::ApiResource;
use serde::de::DeserializeOwned;

use super::error::display_gvk;
use super::{DecodeError, KindConflict, RegistryError, platform_registry};

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

/// Everything the registry knows about one kind.
#[derive(Clone)]
pub struct Registration {
    pub(super) gvk: GroupVersionKind,
    pub(super) plural: String,
    pub(super) scope: Scope,
    pub(super) list_of: Option<String>,
    pub(super) type_id: TypeId,
    pub(super) type_name: &'static str,
    pub(super) decode: DecodeFn,
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
    pub(super) gvk: GroupVersionKind,
    pub(super) type_name: &'static str,
    pub(super) value: AnyObject,
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

/// The type registry. See the [module documentation](super).
#[derive(Clone, Default)]
pub struct Registry {
    pub(super) entries: Vec<Registration>,
    pub(super) index: HashMap<GroupVersionKind, usize>,
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
