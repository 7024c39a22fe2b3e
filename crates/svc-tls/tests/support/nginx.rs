//! Debian's nginx as the mTLS ingress in front of the tests: test-support's, shared
//! with the example's tests.

#[allow(unused_imports)] // not every test binary starts nginx
pub(crate) use test_support::nginx::Nginx;
