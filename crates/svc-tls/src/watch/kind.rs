//! What the one watched-object cache needs to know of a Kubernetes kind: how to
//! name one object of it, what to grant for it, and what a trust-only reader drops
//! from it before caching. A new kind (ClusterTrustBundle next) is a new
//! implementation of [`WatchedKind`], not a copy of the cache.

use std::fmt;
use std::hash::Hash;

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};

/// What a trust-only watch dropped that looked like key material (a Secret's
/// `tls.key`, a key inside its `ca.crt`), for the WARN, the counter and the metric.
///
/// `pub` inside a private module: named by the sealed trait, reachable by no caller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(unreachable_pub)]
pub struct DroppedKeys {
    /// A key under another data key, in `stringData` or in an annotation.
    pub(crate) elsewhere: bool,
    /// A PEM private-key block inside `ca.crt` itself (its certificates are kept).
    pub(crate) in_ca_crt: bool,
}

impl DroppedKeys {
    pub(crate) fn any(self) -> bool {
        self.elsewhere || self.in_ca_crt
    }
}

/// Seals [`WatchedKind`] and carries what only this crate calls.
pub(crate) mod sealed {
    /// Implemented by the kinds this crate watches.
    pub trait Sealed: Sized {
        /// What a shared entry of the kind loads from each version the watch
        /// delivers, before its followers are told (a Secret's identity and root-set
        /// caches; nothing for a ConfigMap, whose verifiers read it themselves).
        type Loads: Send + Sync + 'static;

        /// The loads of one shared entry, keys loaded with `provider`.
        fn loads(provider: std::sync::Arc<rustls::crypto::CryptoProvider>) -> Self::Loads;

        /// Loads `object`, the version the watch just delivered, into `loads`.
        /// Runs on a blocking thread of the registry's runtime.
        fn load(_loads: &Self::Loads, _object: &std::sync::Arc<Self>) {}

        /// Drops, before the cache keeps a version, what a reader of the object's
        /// trust only must never hold; says what it dropped. Nothing, for a kind
        /// that holds no key material.
        fn keep_trust_only(&mut self) -> super::DroppedKeys {
            super::DroppedKeys::default()
        }

        /// What the watch of `object` asks the API server for: the one object by
        /// name, or a set by field and label selectors (a signer's
        /// ClusterTrustBundles).
        fn selection(_object: &<Self as super::WatchedKind>::Ref) -> super::Selection
        where
            Self: super::WatchedKind,
        {
            super::Selection::Named
        }

        /// For a kind watched as a set: the one object its readers see, made of the
        /// set's members in the cache (`None` when none is): a signer's
        /// ClusterTrustBundles, their PEM bundles concatenated. Called when the
        /// watch changed the cache, not per read.
        fn combine(
            _object: &<Self as super::WatchedKind>::Ref,
            _members: Vec<std::sync::Arc<Self>>,
        ) -> Option<Self>
        where
            Self: super::WatchedKind,
        {
            None
        }
    }
}

/// What the watch of one reference asks the API server for.
///
/// `pub` inside a private module: named by the sealed trait, reachable by no caller.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(unreachable_pub)]
pub enum Selection {
    /// The one object the reference names (`fieldSelector=metadata.name=`).
    Named,
    /// The objects these selectors pick, read as one
    /// ([`combine`](sealed::Sealed::combine)).
    Set {
        /// The field selector.
        fields: String,
        /// The label selector, if any.
        labels: Option<String>,
    },
}

/// How an `Api` of a kind is made from its scope: in the object's namespace, or
/// cluster-wide for a cluster-scoped kind (a ClusterTrustBundle).
///
/// `pub` inside a private module: named by [`WatchedKind`]'s bound, reachable by no
/// caller.
#[allow(unreachable_pub)]
pub trait ApiScope {
    /// The `Api` of `K` for an object in `namespace` (ignored for a cluster scope).
    fn api<K: kube::Resource<Scope = Self, DynamicType = ()>>(
        client: kube::Client,
        namespace: &str,
    ) -> kube::Api<K>;
}

impl ApiScope for NamespaceResourceScope {
    fn api<K: kube::Resource<Scope = Self, DynamicType = ()>>(
        client: kube::Client,
        namespace: &str,
    ) -> kube::Api<K> {
        kube::Api::namespaced(client, namespace)
    }
}

impl ApiScope for ClusterResourceScope {
    fn api<K: kube::Resource<Scope = Self, DynamicType = ()>>(
        client: kube::Client,
        _namespace: &str,
    ) -> kube::Api<K> {
        kube::Api::all(client)
    }
}

/// A Kubernetes kind of which svc-tls watches single objects, by name (kube-runtime's
/// one `Store<K>` per watch, narrowed to one object): `Secret` and `ConfigMap`
/// (k8s-openapi's types, re-exported by [`crate::watch`]); or a small set read as
/// one object: a signer's `ClusterTrustBundle`s (cluster-scoped, selected by
/// `spec.signerName` and labels). Sealed: a new kind is added here, in a few lines,
/// and every cache, shared entry, error and trust adapter serves it.
pub trait WatchedKind:
    kube::Resource<DynamicType = (), Scope: ApiScope>
    + Clone
    + fmt::Debug
    + serde::de::DeserializeOwned
    + serde::Serialize
    + Send
    + Sync
    + 'static
    + sealed::Sealed
{
    /// The reference that names one object of the kind
    /// ([`SecretRef`](crate::SecretRef), [`ConfigMapRef`](crate::origin::ConfigMapRef)).
    /// `Display` is `namespace/name`.
    type Ref: WatchedRef<Kind = Self>;

    /// The kind's name in errors, logs and health (`Secret`).
    const KIND: &'static str;

    /// The namespace of `object` (empty for a cluster-scoped kind).
    fn namespace(object: &Self::Ref) -> &str;

    /// The name of `object` (for a kind watched as a set, what names the set: a
    /// ClusterTrustBundle's signer).
    fn name(object: &Self::Ref) -> &str;

    /// What the service account must be granted to watch `object` (the end of the
    /// error that reports a refusal).
    fn grant(object: &Self::Ref) -> String;
}

/// A reference that names one object of a watched kind (a
/// [`SecretRef`](crate::SecretRef), a [`ConfigMapRef`](crate::origin::ConfigMapRef)):
/// what the registry is asked for, so that
/// [`WatchedObjects::watch`](super::WatchedObjects::watch) knows the kind from the
/// reference. Sealed with its kind.
pub trait WatchedRef:
    Clone + fmt::Debug + fmt::Display + Eq + Hash + Ord + Send + Sync + 'static
{
    /// The kind of the object it names.
    type Kind: WatchedKind<Ref = Self>;
}

/// The object's `resourceVersion` as a number, to order two snapshots of it. It is an
/// etcd revision in practice; when it is not a number the snapshots are simply not
/// ordered.
pub(crate) fn resource_version<K: kube::Resource>(object: &K) -> Option<u64> {
    object
        .meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse::<u64>().ok())
}
