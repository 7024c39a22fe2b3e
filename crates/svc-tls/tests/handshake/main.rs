//! Handshakes against real TLS servers that verify client certificates (in-process rustls and nginx), with the Secrets in the API emulator: rotation, resolver state, malformed Secrets, resumption, HTTP versions, key exchange, load, watch lifetime, pooled connections.
//!
//! One test binary per concern (one link instead of one per file); each module is
//! the file of the same name beside this one.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../support/mod.rs"]
mod support;

mod http_protocol;
mod key_exchange;
mod malformed;
mod nginx;
mod pooled_connections;
mod resolver_state;
mod resumption;
mod rotation;
mod under_load;
mod watch_lifetime;
