//! Signed principals (X-Principal JWS): signing, strict verification, the ingress, redirects, interop with go-jose and PyJWT.
//!
//! One test binary per concern (one link instead of one per file); each module is
//! the file of the same name beside this one.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../support/mod.rs"]
mod support;

mod principal_ingress;
mod principal_interop;
mod principal_receiving;
mod principal_redirect;
mod principal_sign;
mod principal_verify;
