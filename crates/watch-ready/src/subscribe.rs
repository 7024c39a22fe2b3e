//! A watch's objects as they change, for a controller that shares the watch.
//!
//! The watch task sends what changed on a broadcast channel, made by the first
//! subscriber (a watch nobody follows pays nothing), never waiting for a
//! subscriber: a slow or absent one cannot hold the watch, and so every other reader
//! of the store, back. A subscription turns it into the objects, read from the store.
//! A subscriber that falls more than [`CHANGE_BUFFER`] changes behind is sent every
//! object again rather than the ones it missed, as after a re-list.

use std::{collections::VecDeque, hash::Hash, sync::Arc};

use futures::Stream;
use kube_runtime::reflector::{Lookup, ObjectRef, Store};
use tokio::sync::broadcast::{Receiver, error::RecvError};

/// Changes a subscriber may fall behind before it is sent every object again.
pub(crate) const CHANGE_BUFFER: usize = 256;

/// What the watch changed in the store.
pub(crate) enum Change<K: Lookup>
where
    K::DynamicType: Eq + Hash + Clone,
{
    /// The object was created or modified.
    Applied(ObjectRef<K>),
    /// A list completed: the store was replaced as a whole.
    Relisted,
}

impl<K: Lookup> Clone for Change<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        match self {
            Self::Applied(key) => Self::Applied(key.clone()),
            Self::Relisted => Self::Relisted,
        }
    }
}

struct State<K: Lookup + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    changes: Receiver<Change<K>>,
    pending: VecDeque<Arc<K>>,
}

/// The store's objects now (when it has synced; otherwise they come with the first
/// list's [`Change::Relisted`]), then the changes `changes` receives. `changes` must
/// be subscribed before the store is looked at, so that no change falls in between.
pub(crate) fn subscription<K>(
    store: Store<K>,
    changes: Receiver<Change<K>>,
) -> impl Stream<Item = Arc<K>> + Send + 'static
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    let pending = if is_ready(&store) {
        store.state().into()
    } else {
        VecDeque::new()
    };
    let state = State {
        store,
        changes,
        pending,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(object) = state.pending.pop_front() {
                return Some((object, state));
            }
            match state.changes.recv().await {
                Ok(Change::Applied(key)) => {
                    // Gone again already: its deletion is not a change to send.
                    if let Some(object) = state.store.get(&key) {
                        return Some((object, state));
                    }
                }
                Ok(Change::Relisted) | Err(RecvError::Lagged(_)) => {
                    state.pending = state.store.state().into();
                }
                Err(RecvError::Closed) => return None,
            }
        }
    })
}

fn is_ready<K: Lookup + Clone + 'static>(store: &Store<K>) -> bool
where
    K::DynamicType: Eq + Hash + Clone,
{
    use futures::FutureExt as _;
    matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}
