//! The differential suite: the same requests to kube-testbed (our emulator) and the
//! real kube-apiserver, each response normalised (uids, timestamps, resourceVersion
//! values, and the differences docs/testing.md lists as not mattering) and compared
//! whole. A difference fails the test with the path that differs; each one found is
//! fixed in the emulator or listed in docs/testing.md ("What the differential suite
//! found") and normalised here with the reason.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod bundles;
mod errors;
mod harness;
mod lists;
mod status;
mod watches;
