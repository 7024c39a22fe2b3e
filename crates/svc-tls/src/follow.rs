//! Followers of a source: what re-reads a source when it changes, so that the identity
//! and trust served (their state, their metrics, the pooled connections that follow
//! them) move when a new version is *loaded*, not only when the next handshake
//! happens to read it.
//!
//! A source with a change feed (the shared watch's loader of a Secret, the SPIFFE
//! Workload API stream) holds [`Followers`] and calls [`Followers::notify`] after each
//! change it processed. The identity resolver and the trust verifier register a
//! [`Follower`] holding a weak reference to themselves: a resolver nobody uses any
//! more is not kept alive by its source, and leaves the list at the next change.

use std::sync::{Mutex, PoisonError};

/// Something that re-reads a source after it changed.
///
/// Called by the source's loader or stream task, never on a handshake: it may parse
/// (a cache miss) and report, but must not block on I/O.
pub(crate) trait Follower: Send + Sync {
    /// The source changed: read it now. Returns `false` once the follower is gone (it
    /// is then dropped from the list).
    fn source_changed(&self) -> bool;
}

/// The followers of one source. Construction and loader paths only (a mutex).
#[derive(Default)]
pub(crate) struct Followers(Mutex<Vec<Box<dyn Follower>>>);

impl Followers {
    /// Adds a follower; it is told of every change from now on.
    pub(crate) fn add(&self, follower: Box<dyn Follower>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(follower);
    }

    /// Tells every follower that the source changed, and forgets those that are gone.
    pub(crate) fn notify(&self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|follower| follower.source_changed());
    }

    /// How many followers are registered (gone ones included until the next change).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

impl std::fmt::Debug for Followers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = self.0.lock().unwrap_or_else(PoisonError::into_inner).len();
        f.debug_struct("Followers").field("len", &len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(std::sync::Weak<AtomicUsize>);

    impl Follower for Counting {
        fn source_changed(&self) -> bool {
            match self.0.upgrade() {
                Some(count) => {
                    count.fetch_add(1, Ordering::SeqCst);
                    true
                }
                None => false,
            }
        }
    }

    #[test]
    fn every_live_follower_is_told_and_gone_ones_are_forgotten() {
        let followers = Followers::default();
        let kept = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicUsize::new(0));
        followers.add(Box::new(Counting(Arc::downgrade(&kept))));
        followers.add(Box::new(Counting(Arc::downgrade(&dropped))));
        followers.notify();
        assert_eq!(kept.load(Ordering::SeqCst), 1);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        drop(dropped);
        followers.notify();
        assert_eq!(kept.load(Ordering::SeqCst), 2);
        assert_eq!(followers.len(), 1);
    }
}
