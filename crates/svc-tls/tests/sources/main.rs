//! Shared sources over time: one watch per Secret per process through outages, and withdrawn SPIFFE trust;
//! a CA Secret read once from an API server that refuses it with hostile text.
//!
//! One test binary per concern (one link instead of one per file); each module is
//! the file of the same name beside this one.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../support/mod.rs"]
mod support;

mod ca_secret_read;
mod hostile_api_server;
mod reconciles_both;
mod settings_on_flags;
mod shared_sources;
mod trust_withdrawal;
