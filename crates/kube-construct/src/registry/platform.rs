//! The platform registry: the kinds every platform service registers, and their order.

use super::{Registry, RegistryError, builtins};
use crate::types;

/// Registers the Kubernetes built-in kinds: every kind (and list) k8s-openapi
/// provides for the enabled Kubernetes version, core `v1` first, then the API
/// groups alphabetically (including `apiextensions.k8s.io` and
/// `apiregistration.k8s.io`).
pub(crate) fn add_kubernetes_builtins(registry: &mut Registry) -> Result<(), RegistryError> {
    builtins::add(registry)
}

/// Registers the Unikorn API types (group `unikorn-cloud.org`, `v1alpha1`):
/// HelmApplication and its list.
pub(crate) fn add_unikorn_types(registry: &mut Registry) -> Result<(), RegistryError> {
    registry.register_with_list::<types::HelmApplication>()
}

/// Registers the fake Unikorn types (group `unikorn.unikorn-cloud.org`,
/// `v1alpha1`): ManagedResource and its list. They are test fixtures for generic
/// reconcilers; no CRD is shipped for them.
pub(crate) fn add_fake_types(registry: &mut Registry) -> Result<(), RegistryError> {
    registry.register_with_list::<types::fake::ManagedResource>()
}

/// Registers the legacy Argo CD shim (group `argoproj.io`, `v1alpha1`):
/// Application and its list.
///
/// Legacy: kept for compatibility with the old in-tree CD layer. New code must
/// not grow around it.
pub(crate) fn add_argo_shim(registry: &mut Registry) -> Result<(), RegistryError> {
    registry.register_with_list::<types::argo::Application>()
}

/// A caller-supplied addition to the platform registry, boxed so that different
/// closures fit in one list.
pub type Addition = Box<dyn FnOnce(&mut Registry) -> Result<(), RegistryError> + Send>;

/// Builds the platform registry (Go's `NewScheme(adders...)`).
///
/// Registers, in this order: the Kubernetes built-ins (every kind and list
/// k8s-openapi provides for the enabled Kubernetes version), the Unikorn API types
/// (`HelmApplication`), the fake Unikorn types (`fake::ManagedResource`, test
/// fixtures), the legacy Argo CD shim (`argo::Application`), then each addition in
/// order. The first error stops it
/// and no registry is returned; an addition's error comes back wrapped in
/// [`RegistryError::Addition`] with the addition's position.
///
/// The registry is deliberately broad (see the [module documentation](super)).
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
