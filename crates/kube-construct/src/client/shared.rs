//! A declared cache's watch, shared with a kube-runtime `Controller`.
//!
//! A controller built with `Controller::new(api, ..)` starts its own watch of its
//! kind; a client that also caches the kind watches it a second time (twice the
//! API server's load and memory for the same objects). Here the client's cache is
//! the one watch: the controller is built over its store and follows its changes
//! (`Controller::for_shared_stream(watch.subscribe(), watch.store())`), as
//! controller-runtime's controllers follow the manager's informers.

use std::{fmt, marker::PhantomData, sync::Arc};

use futures::{StreamExt as _, stream::BoxStream};
use kube::api::ApiResource;
use kube_runtime::reflector::Store;

use super::{CachedClient, ClientError};
use crate::cache::reader::StoreReader;
use crate::cache::{CacheName, CachedType, Selection};

/// One declared typed cache's watch, for a controller that shares it
/// ([`CachedClient::shared_watch`]). Keeps the client's caches running while it or
/// a stream from it lives.
pub struct SharedWatch<K: CachedType> {
    client: CachedClient,
    index: usize,
    _kind: PhantomData<fn() -> K>,
}

impl<K: CachedType> fmt::Debug for SharedWatch<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedWatch")
            .field("cache", &self.client.inner.caches.entries[self.index].name)
            .finish_non_exhaustive()
    }
}

impl<K: CachedType> SharedWatch<K> {
    fn reader(&self) -> &StoreReader<K> {
        match self.client.inner.caches.entries[self.index]
            .reader
            .as_any()
            .downcast_ref::<StoreReader<K>>()
        {
            Some(reader) => reader,
            // `shared_watch` found it as a `StoreReader<K>`, and entries never change.
            None => unreachable!("a shared watch's cache holds its kind"),
        }
    }

    /// The cache's store, synced (the client's construction proved it): the
    /// controller's reader (`Controller::for_shared_stream(.., store)`).
    pub fn store(&self) -> Store<K> {
        self.reader().watched().store().clone()
    }

    /// The cache's objects as they change: every object now, then each object the
    /// watch applies, and all of them again after a re-list (see
    /// `watch_ready::Watched::subscribe`). The trigger of a controller
    /// (`Controller::for_shared_stream(watch.subscribe(), ..)`); any number of
    /// subscribers share the one watch, and a slow one never holds it back.
    pub fn subscribe(&self) -> BoxStream<'static, Arc<K>> {
        let keep = self.client.clone();
        self.reader()
            .watched()
            .subscribe()
            .map(move |object| {
                let _caches_run_while_followed = &keep;
                object
            })
            .boxed()
    }

    /// Which cache this is.
    pub fn cache(&self) -> &CacheName {
        &self.client.inner.caches.entries[self.index].name
    }
}

impl CachedClient {
    /// The watch of the typed cache declared for `K` with exactly `selection`, for a
    /// kube-runtime `Controller` to share instead of watching `K` a second time.
    ///
    /// ```no_run
    /// # async fn f(client: kube_construct::client::CachedClient) -> Result<(), Box<dyn std::error::Error>> {
    /// use kube_construct::{cache::Selection, types::fake::ManagedResource};
    ///
    /// let watch = client.shared_watch::<ManagedResource>(&Selection::in_namespace("ns"))?;
    /// // With kube-runtime's `unstable-runtime-subscribe` feature:
    /// // Controller::for_shared_stream(watch.subscribe(), watch.store()).run(..)
    /// let (store, changes) = (watch.store(), watch.subscribe());
    /// # let _ = (store, changes); Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`ClientError::NotDeclared`] when no typed cache of `K` was declared with
    /// `selection` (a dynamic cache of the kind does not count: a controller of `K`
    /// reads `K`).
    pub fn shared_watch<K: CachedType>(
        &self,
        selection: &Selection,
    ) -> Result<SharedWatch<K>, ClientError> {
        let wanted = CacheName::new(&ApiResource::erase::<K>(&()), selection.clone());
        let index = self
            .inner
            .caches
            .entries
            .iter()
            .position(|entry| {
                entry.name == wanted
                    && entry
                        .reader
                        .as_any()
                        .downcast_ref::<StoreReader<K>>()
                        .is_some()
            })
            .ok_or_else(|| ClientError::NotDeclared {
                cache: Box::new(wanted.clone()),
            })?;
        Ok(SharedWatch {
            client: self.clone(),
            index,
            _kind: PhantomData,
        })
    }
}
