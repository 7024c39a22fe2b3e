//! A use of a registry entry held by what was built over it outside the registry's
//! own caches (a verifier or resolver a caller built with a builder): while one
//! lives, the entry is in use and is not evicted.

use std::fmt;
use std::sync::Arc;

/// One use of a shared entry. Cheap to clone; each clone is a use.
#[derive(Clone)]
pub(crate) struct Lease {
    _use: Arc<()>,
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Lease")
    }
}

/// The uses of one entry: hands out [`Lease`]s and counts them.
#[derive(Default)]
pub(crate) struct Leases(Arc<()>);

impl Leases {
    /// A new use.
    pub(crate) fn lease(&self) -> Lease {
        Lease {
            _use: self.0.clone(),
        }
    }

    /// Whether any lease lives.
    pub(crate) fn any(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }
}
