//! The one keep-alive store of a registry: values kept for their users (what the
//! constructors built over one shared object, keyed by type and name; what the layers
//! above share among a registry's users, found by a predicate), each in use while a
//! clone of it is held outside the registry, and evicted once nothing has held it for
//! the grace. Construction path only (a mutex, a linear scan: a handful of values).

use std::any::{Any, TypeId};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::shareable::SharedValue;

struct Slot {
    ty: TypeId,
    name: String,
    value: Box<dyn Any + Send + Sync>,
    in_use: fn(&(dyn Any + Send + Sync)) -> bool,
    idle_since: Option<Instant>,
}

impl Slot {
    fn new<T: SharedValue>(name: &str, value: T) -> Self {
        Self {
            ty: TypeId::of::<T>(),
            name: name.to_owned(),
            value: Box::new(value),
            in_use: in_use_of::<T>,
            idle_since: None,
        }
    }

    fn get<T: SharedValue>(&self) -> Option<&T> {
        self.value.downcast_ref::<T>()
    }
}

fn in_use_of<T: SharedValue>(value: &(dyn Any + Send + Sync)) -> bool {
    value.downcast_ref::<T>().is_some_and(T::in_use)
}

/// Values kept for their users.
#[derive(Default)]
pub(crate) struct Held(Mutex<Vec<Slot>>);

impl Held {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `T` named `name`, or the one `build` makes (kept; a failed build keeps
    /// nothing).
    pub(crate) fn get_or_build<T: SharedValue, E>(
        &self,
        name: &str,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let ty = TypeId::of::<T>();
        self.get_or_build_where(|slot| slot.ty == ty && slot.name == name, name, build)
    }

    /// The first `T` kept that `matches`, or the one `build` makes (kept; a failed
    /// build keeps nothing).
    pub(crate) fn get_or_build_matching<T: SharedValue, E>(
        &self,
        matches: impl Fn(&T) -> bool,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        self.get_or_build_where(|slot| slot.get::<T>().is_some_and(&matches), "", build)
    }

    fn get_or_build_where<T: SharedValue, E>(
        &self,
        found: impl Fn(&Slot) -> bool,
        name: &str,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let mut slots = self.lock();
        if let Some(slot) = slots.iter_mut().find(|slot| found(slot))
            && let Some(value) = slot.get::<T>()
        {
            let value = value.clone();
            slot.idle_since = None;
            return Ok(value);
        }
        let value = build()?;
        slots.push(Slot::new(name, value.clone()));
        Ok(value)
    }

    /// Whether a clone of any value kept here is held outside the registry.
    pub(crate) fn any_in_use(&self) -> bool {
        self.lock().iter().any(|slot| (slot.in_use)(&*slot.value))
    }

    /// How many values are kept.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Drops the values nothing outside the registry has held for `grace`; returns
    /// how many.
    pub(crate) fn evict_idle(&self, now: Instant, grace: Duration) -> usize {
        let evicted: Vec<Slot> = {
            let mut slots = self.lock();
            let (evicted, kept) = std::mem::take(&mut *slots).into_iter().partition(|slot| {
                if (slot.in_use)(&*slot.value) {
                    return false;
                }
                now.saturating_duration_since(slot.idle_since.unwrap_or(now)) >= grace
            });
            *slots = kept;
            for slot in slots.iter_mut() {
                if (slot.in_use)(&*slot.value) {
                    slot.idle_since = None;
                } else {
                    slot.idle_since.get_or_insert(now);
                }
            }
            evicted
        };
        // Dropped outside the lock.
        evicted.len()
    }
}
