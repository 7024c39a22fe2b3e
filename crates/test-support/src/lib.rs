//! # test-support
//!
//! The workspace's shared test utilities (not published): what every crate's tests,
//! benches and examples use besides the API emulators (`kube-testbed`,
//! `spiffe-testbed`).
//!
//! - [`pki`]: the one test PKI, [`pki::TestCa`] and the [`pki::Leaf`]s it issues
//!   (rcgen, P-256 by default);
//! - [`tls_server`]: [`tls_server::VerifyingServer`], an in-process TLS 1.3 server that
//!   requires and verifies client certificates, and one-request clients for it;
//! - [`poll_until`] and [`POLL_LIMIT`]: waiting for something asynchronous;
//! - [`logs`]: [`logs::CapturedLogs`], a `tracing` writer read back as text;
//! - [`keys`]: private keys in the encodings Secrets carry (PKCS#8, PKCS#1, SEC1) and
//!   PEM;
//! - [`secret`]: `kubernetes.io/tls` (and other) Secrets as JSON, for an emulator's
//!   `upsert`;
//! - [`error_rule`]: the workspace's error rule (the cause in `source()`, never also
//!   in `Display`; outside text escaped and short) checked over a whole chain;
//! - [`hostile`]: a hostile server's text, and the check that an error shows only an
//!   escaped excerpt of it;
//! - [`nginx`]: Debian's nginx as the mTLS ingress, in a temp prefix;
//! - [`prometheus`]: a real Prometheus server scraping a test's metrics, and its
//!   answers;
//! - [`supervised`]: a peer process (a real API server, a SPIRE agent) that never
//!   outlives the test process.
//!
//! Set-up failures panic throughout: in test support a failure is a broken
//! environment or test, not an outcome under test.
#![deny(missing_docs)]

pub mod error_rule;
pub mod hostile;
pub mod keys;
pub mod logs;
pub mod nginx;
pub mod pki;
mod poll;
pub mod prometheus;
pub mod secret;
pub mod supervised;
pub mod tls_server;

pub use poll::{POLL_LIMIT, poll_until};
