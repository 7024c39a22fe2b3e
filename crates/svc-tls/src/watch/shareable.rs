//! What a registry asks of the values it holds, as a seam below both: the registry
//! (`registry/`) stores them, and the values (`shared.rs`, `shared_configmap.rs`, and
//! what is built over them, `built.rs`) implement these without naming the registry.

/// What a registry entry holds, as the registry needs to see it.
pub(crate) trait EntryValue: Clone + Send + Sync + 'static {
    /// Whether its watch can still run (false once the runtime of the caller's client
    /// it runs through has ended).
    fn is_alive(&self) -> bool;
    /// Whether anything outside the registry holds it or what was built over it.
    fn in_use(&self) -> bool;
}

/// A value shared through a registry ([`SecretWatches::shared_value`](super::SecretWatches::shared_value)).
pub(crate) trait SharedValue: Clone + Send + Sync + 'static {
    /// Whether anything outside the registry holds it now (a clone handed out).
    fn in_use(&self) -> bool;
}
