//! The cache-backed client, its options and the platform type registry, against the
//! kube-testbed API emulator and, for `cached_reads` and part of `platform_types`,
//! the real kube-apiserver too (`real_apiserver::both!`). One test binary (one link)
//! for the concern; each module is the file of the same name beside this one. `metrics.rs` stays a binary of its
//! own (feature `metrics`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cached_client;
mod cached_reads;
mod controllers;
mod flag_repeat;
mod hostile;
mod options;
mod platform_types;
mod watch_lifetime;
