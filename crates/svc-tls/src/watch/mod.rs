//! Secrets watched through the API server: the one watch-driven cache of a Secret
//! ([`SecretSource`]) that the Secret adapters of both seams read on every handshake,
//! and the one builder shape ([`WatchedBuilder`]) for what follows such a Secret (the
//! identity resolver and the trust verifier).
//!
//! Nothing here knows the seams: the identity and trust halves implement
//! [`BuiltFromWatch`] and add their own `build`. What observes a registry from above (its
//! metrics) implements `RegistryObserver` (`observer.rs`).

mod builder;
mod built;
mod configmap;
mod lease;
mod observer;
mod registry;
mod runtime;
mod secret;
mod shared;
mod shared_configmap;

pub(crate) use builder::sealed;
pub use builder::{BuiltFromWatch, WatchedBuilder};
pub use configmap::{ConfigMapSource, ConfigMapSourceError, configmap_resource_version};
pub(crate) use lease::Lease;
#[cfg_attr(not(feature = "metrics"), allow(unused_imports))]
pub(crate) use observer::RegistryObserver;
pub use registry::{DEFAULT_EVICTION_GRACE, RegistryCounts, SecretWatches};
pub(crate) use registry::{SharedValue, WeakSecretWatches};
pub use secret::{DEFAULT_SYNC_TIMEOUT, SecretSource, SourceError, resource_version};
pub use shared::SharedSecret;
pub use shared_configmap::SharedConfigMap;
