//! Handshakes against real TLS servers that verify client certificates (in-process
//! rustls and nginx), with the Secrets in the API emulator: rotation, resolver state,
//! malformed Secrets, resumption, HTTP versions, key exchange, load, watch lifetime,
//! pooled connections. The rotations in `rotation_both` run against the real
//! kube-apiserver as well, and `bookmark` against it alone (a periodic BOOKMARK).
//!
//! One test binary per concern (one link instead of one per file); each module is
//! the file of the same name beside this one.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../support/mod.rs"]
mod support;

mod bookmark;
mod http_protocol;
mod key_exchange;
mod malformed;
mod nginx;
mod pooled_connections;
mod resolver_state;
mod resumption;
mod rotation;
mod rotation_both;
mod under_load;
mod watch_lifetime;
