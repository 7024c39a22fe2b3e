//! # kube-testbed
//!
//! A Kubernetes API server emulator for this workspace's tests (not published).
#![deny(missing_docs)]
