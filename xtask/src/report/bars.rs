//! Bars and cell texts that both the target list (`targets.rs`) and the anchors'
//! rows (`anchors.rs`) use.

/// What a ratio cell shows for figures measured in different rounds.
pub const UNPAIRED: &str = "unpaired (not measured in the same rounds): no ratio";

/// SPIFFE handshakes/s against Secret mode on the same server: no target in the issue,
/// so the bar of reload against static.
pub(super) const SPIFFE_BAR: f64 = 0.98;

/// Our client's CPU per handshake over Go's against the same server: the mission's
/// "at most 0.45x Go's" (issue 54; 0.5x until 2026-12-06, 0.67x until 2026-12-05; the
/// figures did not move).
pub(super) const CLIENT_CPU_BAR: f64 = 0.45;

/// Our server's CPU per handshake over Go's, one client dialling both: the serving
/// half's "at most 0.5x" (issue 49).
pub(super) const SERVER_CPU_BAR: f64 = 0.5;
