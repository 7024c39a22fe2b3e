//! What a registry asks of the values it holds, as a seam below both: the registry
//! (`registry/`, `held.rs`) stores them, and the values (`shared.rs`, and what is
//! built over them) implement these without naming the registry.

/// What a registry entry holds, as the registry needs to see it.
pub(crate) trait EntryValue: Clone + Send + Sync + 'static {
    /// Whether its watch can still run (false once the runtime of the caller's client
    /// it runs through has ended).
    fn is_alive(&self) -> bool;
    /// Whether anything outside the registry holds it or what was built over it.
    fn in_use(&self) -> bool;
}

/// A value kept for its users by a registry ([`WatchedObjects::shared_value`](super::WatchedObjects::shared_value),
/// or built over one of its shared objects).
pub(crate) trait SharedValue: Clone + Send + Sync + 'static {
    /// Whether anything outside the registry holds it now (a clone handed out).
    fn in_use(&self) -> bool;
}
