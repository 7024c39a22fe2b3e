//! Waiting, in tests, for something that happens asynchronously (a watch delivering
//! a change, a cache recovering): the one polling helper every crate's tests share.

use std::time::Duration;

/// How often [`poll_until`] checks.
const INTERVAL: Duration = Duration::from_millis(10);

/// How long [`poll_until`] waits before it gives up. Generous: the bound only keeps a
/// broken test from hanging, it is not a timing assertion.
pub const POLL_LIMIT: Duration = Duration::from_secs(10);

/// Checks `check` every 10 ms until it holds. Panics, naming `what`, when it still
/// does not hold after [`POLL_LIMIT`].
pub async fn poll_until<F: FnMut() -> bool>(what: &str, mut check: F) {
    let deadline = tokio::time::Instant::now() + POLL_LIMIT;
    loop {
        if check() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out waiting for: {what}");
        }
        tokio::time::sleep(INTERVAL).await;
    }
}
