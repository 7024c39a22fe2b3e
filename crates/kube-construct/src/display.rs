//! Display helpers shared by this crate's error messages.

use std::fmt;

/// Items joined with `"; "`, for errors that list every problem found.
pub(crate) struct Joined<'a, T>(pub(crate) &'a [T]);

impl<T: fmt::Display> fmt::Display for Joined<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}
