//! Writes to the `/status` subresource: what a controller reports after a reconcile.
//!
//! A kind with a status subresource ignores `status` in writes to the object itself
//! (and the object's other fields in writes to `/status`), so a controller that
//! reports a condition must write here; before these, controllers dropped to the raw
//! `kube::Api` for it. RBAC names the subresource: `<plural>/status`.

use std::fmt;

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde::Serialize;

use super::{CachedClient, ClientError};
use crate::cache::CachedType;

impl CachedClient {
    /// Patch an object's status (`PATCH .../<name>/status`): a merge patch of
    /// `{"status": {...}}` changes the status only, whatever else it names.
    ///
    /// ```no_run
    /// # async fn f(client: kube_construct::client::CachedClient) -> Result<(), kube_construct::client::ClientError> {
    /// use kube::api::{Patch, PatchParams};
    /// use kube_construct::types::fake::ManagedResource;
    ///
    /// let patch = serde_json::json!({"status": {"conditions": []}});
    /// let written: ManagedResource = client
    ///     .patch_status(Some("ns"), "thing", &PatchParams::default(), &Patch::Merge(&patch))
    ///     .await?;
    /// # let _ = written; Ok(()) }
    /// ```
    pub async fn patch_status<K: CachedType, P: Serialize + fmt::Debug>(
        &self,
        namespace: Option<&str>,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, ClientError> {
        self.api::<K>(namespace)
            .patch_status(name, params, patch)
            .await
            .map_err(ClientError::api)
    }

    /// Replace an object's status (`PUT .../<name>/status`) with `obj`'s, by its
    /// `metadata.namespace`/`name`; its `metadata.resourceVersion`, if set, guards
    /// against lost updates (409 Conflict when the object changed since it was read).
    pub async fn replace_status<K: CachedType>(&self, obj: &K) -> Result<K, ClientError> {
        let namespace = Self::write_namespace(obj)?;
        let name = Self::write_name(obj)?;
        self.api::<K>(namespace)
            .replace_status(name, &PostParams::default(), obj)
            .await
            .map_err(ClientError::api)
    }

    /// [`CachedClient::patch_status`] for a resource known only at run time.
    pub async fn patch_status_dynamic<P: Serialize + fmt::Debug>(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<DynamicObject, ClientError> {
        self.dynamic_api(resource, namespace)
            .patch_status(name, params, patch)
            .await
            .map_err(ClientError::api)
    }
}
