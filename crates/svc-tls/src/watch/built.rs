//! What the options-based constructors build over one shared object (its resolver,
//! its verifier), one per type and name, so that every construction shares one; each
//! kept while a clone of it is held outside the registry.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::shareable::SharedValue;

struct Item {
    value: Box<dyn Any + Send + Sync>,
    in_use: fn(&(dyn Any + Send + Sync)) -> bool,
}

fn in_use_of<T: SharedValue>(value: &(dyn Any + Send + Sync)) -> bool {
    value.downcast_ref::<T>().is_some_and(T::in_use)
}

/// The values built over one shared object.
#[derive(Default)]
pub(crate) struct Built(Mutex<HashMap<(TypeId, String), Item>>);

impl Built {
    /// The `T` built by the first successful `build`, shared by every later caller (a
    /// failed build is not remembered). Construction path only.
    pub(crate) fn get_or_build<T: SharedValue, E>(
        &self,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        self.get_or_build_named("", build)
    }

    /// [`Built::get_or_build`], one per `name` (a ConfigMap's data key).
    pub(crate) fn get_or_build_named<T: SharedValue, E>(
        &self,
        name: &str,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let key = (TypeId::of::<T>(), name.to_owned());
        let mut built = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = built.get(&key).and_then(|b| b.value.downcast_ref::<T>()) {
            return Ok(value.clone());
        }
        let value = build()?;
        built.insert(
            key,
            Item {
                value: Box::new(value.clone()),
                in_use: in_use_of::<T>,
            },
        );
        Ok(value)
    }

    /// Whether a clone of anything built here is held outside the registry.
    pub(crate) fn any_in_use(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .any(|item| (item.in_use)(&*item.value))
    }
}
