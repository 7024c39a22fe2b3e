//! The one way the crate names a Secret: in options, errors, states and logs.

use std::fmt;

/// A reference to a namespaced Secret. `Display` is `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SecretRef {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
}

impl SecretRef {
    /// A reference to `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}
