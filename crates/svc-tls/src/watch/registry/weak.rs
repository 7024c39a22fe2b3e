//! The weak handle on a registry of watched objects: what its observers (the metrics)
//! hold without keeping it alive.

use std::fmt;
use std::sync::{Arc, Weak};

use super::{Registry, WatchedObjects};

/// A registry of watched objects that does not keep it alive (what a metrics
/// collector holds).
#[derive(Clone)]
pub(crate) struct WeakWatchedObjects(pub(super) Weak<Registry>);

impl fmt::Debug for WeakWatchedObjects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WeakWatchedObjects")
    }
}

impl WeakWatchedObjects {
    /// The registry, while it lives.
    pub(crate) fn upgrade(&self) -> Option<WatchedObjects> {
        self.0.upgrade().map(|inner| WatchedObjects { inner })
    }

    /// Whether this is a handle of `watches` (its allocation outlives the registry
    /// while this handle lives, so it is never another registry's).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn is(&self, watches: &WatchedObjects) -> bool {
        std::ptr::eq(self.0.as_ptr(), Arc::as_ptr(&watches.inner))
    }

    /// Whether the registry still lives.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn is_alive(&self) -> bool {
        self.0.strong_count() > 0
    }
}
