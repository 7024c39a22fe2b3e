//! The receiving side built from the process's watched Secrets: an
//! [`IngressVerifier`](crate::principal::IngressVerifier) over the client CA Secret
//! the ingress verifies against, watched once per process and recording into the
//! installed metrics, built by [`IngressBuilder`].
//!
//! A receiver names its audiences (the origins its senders call it at) or opts out
//! explicitly, and says which principals it accepts
//! ([`ReceivingMode`](crate::principal::ReceivingMode)): the builder refuses to build
//! otherwise ([`ReceivingError`]).
//!
//! Free functions and a builder rather than constructors on `IngressVerifier`: they
//! need the registries' wiring, which the principal module may not name
//! (`layers.toml`), and every `impl IngressVerifier` stays in the principal module.

mod builder;

pub use builder::{IngressBuilder, ReceivingError};
