//! The events both halves report with the same shape, generic over where the value
//! is read from (`O`: an [`IdentityOrigin`](crate::origin::IdentityOrigin) or a
//! [`TrustOrigin`](crate::origin::TrustOrigin)) and over the value served (`T`: an
//! [`Identity`](crate::material::Identity) or [`TrustAnchors`](crate::material::TrustAnchors)).

use std::time::Duration;

/// A warning that a read failed and the last good value is still served (logged at
/// `WARN`, rate-limited).
#[derive(Debug)]
pub struct StaleWarning<'a, O: ?Sized, T: ?Sized> {
    /// Where the value is read from.
    pub source: &'a O,
    /// Why this read failed.
    pub error: &'a (dyn std::error::Error + 'static),
    /// The value still served (the last good one).
    pub serving: &'a T,
    /// How long the value served has been stale (since it was loaded).
    pub stale_for: Duration,
    /// Failures not warned about since the previous warning.
    pub suppressed: u64,
}

/// The end of an episode of failed reads (logged at `INFO`, rate-limited).
#[derive(Debug)]
pub struct Recovery<'a, O: ?Sized, T: ?Sized> {
    /// Where the value is read from.
    pub source: &'a O,
    /// The value served now.
    pub serving: &'a T,
    /// Failed reads during the episode.
    pub failures: u64,
    /// How long the episode lasted (first failure to recovery, monotonic clock).
    pub duration: Duration,
}
