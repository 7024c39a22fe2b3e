//! The ConfigMap's room in the watched-object cache: a CA bundle as trust-manager
//! writes it (its default Bundle target), read without any access to Secrets.
//!
//! RBAC for one watched ConfigMap (optionally on that one name):
//!
//! ```yaml
//! rules:
//! - apiGroups: [""]
//!   resources: ["configmaps"]
//!   resourceNames: ["platform-ca-bundle"]
//!   verbs: ["get", "list", "watch"]
//! ```

use k8s_openapi::api::core::v1::ConfigMap;

use super::kind::{WatchedKind, WatchedRef, sealed};
use super::object::{WatchError, WatchedObject};
use super::shared::SharedObject;
use crate::origin::ConfigMapRef;

/// The watch-driven cache of one ConfigMap.
#[deprecated(since = "0.2.0", note = "use `watch::WatchedObject<ConfigMap>`")]
pub type ConfigMapSource = WatchedObject<ConfigMap>;

/// Why a ConfigMap's cache could not be started.
#[deprecated(since = "0.2.0", note = "use `watch::WatchError<ConfigMap>`")]
pub type ConfigMapSourceError = WatchError<ConfigMap>;

/// One watched ConfigMap as a registry shares it.
#[deprecated(since = "0.2.0", note = "use `watch::SharedObject<ConfigMap>`")]
pub type SharedConfigMap = SharedObject<ConfigMap>;

impl WatchedRef for ConfigMapRef {
    type Kind = ConfigMap;
}

impl WatchedKind for ConfigMap {
    type Ref = ConfigMapRef;
    const KIND: &'static str = "ConfigMap";

    fn namespace(object: &ConfigMapRef) -> &str {
        &object.namespace
    }

    fn name(object: &ConfigMapRef) -> &str {
        &object.name
    }

    fn grant(object: &ConfigMapRef) -> String {
        format!(
            "grant get, list and watch on configmaps in namespace {} to the service account",
            object.namespace
        )
    }
}

/// A ConfigMap holds no key material: a trust-only watch keeps it whole.
impl sealed::Sealed for ConfigMap {
    /// Nothing: each verifier over a ConfigMap reads its own data key.
    type Loads = ();

    fn loads(_: std::sync::Arc<rustls::crypto::CryptoProvider>) {}
}

impl WatchedObject<ConfigMap> {
    /// The ConfigMap this cache watches ([`WatchedObject::object_ref`]).
    pub fn configmap_ref(&self) -> &ConfigMapRef {
        self.object_ref()
    }
}

impl SharedObject<ConfigMap> {
    /// The ConfigMap ([`SharedObject::object_ref`]).
    pub fn configmap_ref(&self) -> &ConfigMapRef {
        self.object_ref()
    }
}
