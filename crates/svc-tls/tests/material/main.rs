//! Material loading, the material caches, the fuzzed loaders, Go durations: bytes in, typed results out (no network).
//!
//! One test binary per concern (one link instead of one per file); each module is
//! the file of the same name beside this one.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../support/mod.rs"]
mod support;

mod fuzz;
mod go_duration;
mod material_cache;
mod material_errors;
mod material_load;
mod material_trust;
