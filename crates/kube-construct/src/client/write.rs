//! Writes through the API server: typed and dynamic create, replace, patch, delete
//! (status writes are in [`status`](super::status)).

use std::fmt;

use kube::{
    Api,
    api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
};
use serde::Serialize;

use super::{CachedClient, ClientError};
use crate::cache::{CachedType, KnownScope};

impl CachedClient {
    pub(super) fn api<K: CachedType>(&self, namespace: Option<&str>) -> Api<K> {
        <K::Scope as KnownScope>::api::<K>(self.inner.client.clone(), namespace)
    }

    pub(super) fn write_namespace<K: CachedType>(obj: &K) -> Result<Option<&str>, ClientError> {
        let namespace = obj.meta().namespace.as_deref();
        if namespace.is_none() && <K::Scope as KnownScope>::NAMESPACED == Some(true) {
            return Err(ClientError::MissingNamespace {
                kind: K::kind(&()).into_owned(),
            });
        }
        Ok(namespace)
    }

    pub(super) fn write_name<K: CachedType>(obj: &K) -> Result<&str, ClientError> {
        obj.meta()
            .name
            .as_deref()
            .ok_or_else(|| ClientError::MissingName {
                kind: K::kind(&()).into_owned(),
            })
    }

    pub(super) fn dynamic_api(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
    ) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.inner.client.clone(), ns, resource),
            None => Api::all_with(self.inner.client.clone(), resource),
        }
    }

    /// Create an object (in its `metadata.namespace`) through the API.
    pub async fn create<K: CachedType>(&self, obj: &K) -> Result<K, ClientError> {
        let namespace = Self::write_namespace(obj)?;
        self.api::<K>(namespace)
            .create(&PostParams::default(), obj)
            .await
            .map_err(ClientError::api)
    }

    /// Replace an object (by its `metadata.namespace`/`name`; its
    /// `metadata.resourceVersion`, if set, guards against lost updates).
    pub async fn replace<K: CachedType>(&self, obj: &K) -> Result<K, ClientError> {
        let namespace = Self::write_namespace(obj)?;
        let name = Self::write_name(obj)?;
        self.api::<K>(namespace)
            .replace(name, &PostParams::default(), obj)
            .await
            .map_err(ClientError::api)
    }

    /// Patch an object through the API.
    pub async fn patch<K: CachedType, P: Serialize + fmt::Debug>(
        &self,
        namespace: Option<&str>,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, ClientError> {
        self.api::<K>(namespace)
            .patch(name, params, patch)
            .await
            .map_err(ClientError::api)
    }

    /// Delete an object through the API.
    pub async fn delete<K: CachedType>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), ClientError> {
        self.api::<K>(namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(drop)
            .map_err(ClientError::api)
    }

    /// Create a dynamic object (in its `metadata.namespace`, none for cluster-scoped kinds).
    pub async fn create_dynamic(
        &self,
        resource: &ApiResource,
        obj: &DynamicObject,
    ) -> Result<DynamicObject, ClientError> {
        self.dynamic_api(resource, obj.metadata.namespace.as_deref())
            .create(&PostParams::default(), obj)
            .await
            .map_err(ClientError::api)
    }

    /// Replace a dynamic object (by its `metadata.namespace`/`name`).
    pub async fn replace_dynamic(
        &self,
        resource: &ApiResource,
        obj: &DynamicObject,
    ) -> Result<DynamicObject, ClientError> {
        let name = obj
            .metadata
            .name
            .as_deref()
            .ok_or_else(|| ClientError::MissingName {
                kind: resource.kind.clone(),
            })?;
        self.dynamic_api(resource, obj.metadata.namespace.as_deref())
            .replace(name, &PostParams::default(), obj)
            .await
            .map_err(ClientError::api)
    }

    /// Patch a dynamic object.
    pub async fn patch_dynamic<P: Serialize + fmt::Debug>(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<DynamicObject, ClientError> {
        self.dynamic_api(resource, namespace)
            .patch(name, params, patch)
            .await
            .map_err(ClientError::api)
    }

    /// Delete a dynamic object.
    pub async fn delete_dynamic(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), ClientError> {
        self.dynamic_api(resource, namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(drop)
            .map_err(ClientError::api)
    }
}
