//! What the layers above share among a registry's users (the peers' pooled HTTP
//! clients), kept while anything outside the registry holds them and for the
//! eviction grace after.

use std::any::Any;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::watch::shareable::SharedValue;

struct Slot {
    value: Box<dyn Any + Send + Sync>,
    in_use: fn(&(dyn Any + Send + Sync)) -> bool,
    idle_since: Option<Instant>,
}

fn in_use_of<T: SharedValue>(value: &(dyn Any + Send + Sync)) -> bool {
    value.downcast_ref::<T>().is_some_and(T::in_use)
}

/// The shared values of one registry. Construction path only (a mutex, a linear
/// scan: a handful of values).
#[derive(Default)]
pub(super) struct SharedValues(Mutex<Vec<Slot>>);

impl SharedValues {
    /// The first `T` stored that `matches`, or the one `build` makes (stored; a
    /// failed build stores nothing).
    pub(super) fn get_or_build<T: SharedValue, E>(
        &self,
        matches: impl Fn(&T) -> bool,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let mut slots = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots
            .iter_mut()
            .find(|slot| slot.value.downcast_ref::<T>().is_some_and(&matches))
            && let Some(found) = slot.value.downcast_ref::<T>()
        {
            slot.idle_since = None;
            return Ok(found.clone());
        }
        let value = build()?;
        slots.push(Slot {
            value: Box::new(value.clone()),
            in_use: in_use_of::<T>,
            idle_since: None,
        });
        Ok(value)
    }

    /// How many values are stored.
    pub(super) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Drops the values nothing outside the registry has held for `grace`; returns
    /// how many.
    pub(super) fn evict_idle(&self, now: Instant, grace: Duration) -> usize {
        let mut evicted = Vec::new();
        {
            let mut slots = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            let mut kept = Vec::with_capacity(slots.len());
            for mut slot in slots.drain(..) {
                if (slot.in_use)(&*slot.value) {
                    slot.idle_since = None;
                    kept.push(slot);
                    continue;
                }
                let since = *slot.idle_since.get_or_insert(now);
                if now.saturating_duration_since(since) >= grace {
                    evicted.push(slot);
                } else {
                    kept.push(slot);
                }
            }
            *slots = kept;
        }
        // Dropped outside the lock.
        evicted.len()
    }
}
