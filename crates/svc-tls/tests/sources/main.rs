//! Shared sources over time: one watch per Secret per process through outages, and withdrawn SPIFFE trust.
//!
//! One test binary per concern (one link instead of one per file); each module is
//! the file of the same name beside this one.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../support/mod.rs"]
mod support;

mod shared_sources;
mod trust_withdrawal;
