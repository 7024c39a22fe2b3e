//! The seam between a registry of watched objects and what observes it from above: the
//! metrics of `crate::metrics` (feature `metrics`) implement [`RegistryObserver`], and
//! a [`WatchedObjects`](super::WatchedObjects) registry keeps the one installed into it.

/// What observes a [`WatchedObjects`](super::WatchedObjects) registry from above (its
/// metrics). A registry holds at most one, installed once with
/// `WatchedObjects::install_observer` and kept (alive) for the life of the registry.
///
/// # When it is called
///
/// [`RegistryObserver::installed`] is called once, when the registry accepts the
/// observer: on the construction path, on the thread that installs it, with none of
/// the registry's locks held. Nothing here is called on the handshake path.
///
/// # What it may not do
///
/// It may not keep the registry alive: it is handed a [`WeakWatchedObjects`](super::WeakWatchedObjects) (the
/// registry keeps its observer, so a strong handle would keep both, and every watch
/// and the registry's runtime, for the life of the process). It may not block, nor
/// start a watch from `installed`; it reads the registry's watched objects when it
/// needs them (the metrics, at scrape time).
///
/// # Why a trait, and not the `dyn Any` this replaced
///
/// The watch layer may not name what sits above it (the halves' recorders, the
/// resolvers and verifiers the metrics track), so it cannot hand them back. The way
/// from a registry to its metrics is therefore the metrics' own typed lookup
/// (`Metrics::installed_in`, an index the observer fills in `installed`), which the
/// options-based constructors (`wiring`) import: the edge shows in their `use` lines
/// and to `cargo xtask layers`, and no value is downcast.
///
/// `W` is the registry's weak handle (`WeakWatchedObjects`, the only one used): a
/// parameter rather than a name, so that this seam and the registry that keeps it do
/// not import each other.
pub(crate) trait RegistryObserver<W>: Send + Sync + 'static {
    /// The registry that accepted this observer (see the trait's documentation).
    fn installed(&self, watches: W);
}
