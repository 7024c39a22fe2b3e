//! TLS client configurations and `reqwest` clients for calling peer services.
//!
//! [`client_config`] builds a rustls [`ClientConfig`](rustls::ClientConfig) from CA trust and an optional
//! [`IdentityResolver`](crate::IdentityResolver):
//! - TLS 1.3 only;
//! - the crypto provider is passed in explicitly (use
//!   [`crypto_provider`](crate::material::crypto_provider), aws-lc-rs); the
//!   process-wide default provider is never consulted. Its key exchange order is what
//!   the client offers: `crypto_provider` offers the hybrid post-quantum
//!   `X25519MLKEM768` first, with X25519 and the NIST curves after it for servers
//!   without ML-KEM (as the Go client does since Go 1.24);
//! - **session resumption is disabled** (`Resumption::disabled()`): a resumed handshake
//!   does not run the client-certificate resolver, so a rotated identity would not be
//!   presented on connections that resume an old session (the legacy Go client kept no
//!   session cache either);
//! - ALPN offers `http/1.1` only by default, as Go's transport with a custom
//!   `tls.Config` spoke HTTP/1.1 only; HTTP/2 is an opt-in
//!   ([`HttpProtocol::Http2Preferred`](crate::options::HttpProtocol::Http2Preferred), flag `--S-http2`), offering `h2` then
//!   `http/1.1` ([`client_config_for`]).
//!
//! [`reqwest_client`] puts that configuration under a `reqwest::Client`
//! (`use_preconfigured_tls`), restricted to HTTP/1.1 unless the configuration offers
//! `h2`, following redirects within the request's origin only
//! ([`same_origin_policy`]; another origin, or `https` to `http`, fails with
//! [`RedirectRefused`]) and, when the configuration presents a client identity,
//! `https_only`.
//!
//! # Rotation and pooled connections
//! Every *new* connection runs a full handshake and so presents the identity currently
//! served and, with [`TrustMode::Watched`], verifies the server against the roots
//! currently served. A connection kept alive keeps the identity and trust of its
//! handshake. [`PeerClient`] (from [`PeerTls::client`]) is the client that follows
//! them: it replaces its `reqwest::Client`, and so its pool, as soon as the identity
//! or the trust served changes (what is served follows each new Secret version or
//! SPIFFE message as it is loaded), so no new request rides a connection made under a
//! replaced identity or withdrawn trust; in-flight requests finish on their
//! connection. [`PeerTls::client`] also shares one such client per identity, trust and
//! protocol settings in the process, so a client built per reconcile reuses a pooled
//! connection instead of a handshake. A plain `reqwest::Client`
//! ([`reqwest_client`], [`PeerTls::reqwest_client`]) has none of that: its connections
//! keep their identity until the peer or the pool idle timeout
//! (`--S-pool-idle-timeout`, 90 s by default) closes them.

//! # Example
//! ```no_run
//! # async fn f(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use svc_tls::client::{TrustMode, client_config, reqwest_client};
//! use svc_tls::identity::IdentityResolver;
//! use svc_tls::options::SecretRef;
//! use svc_tls::trust::TrustVerifier;
//!
//! let provider = Arc::new(svc_tls::material::crypto_provider());
//! let ca = SecretRef { namespace: "unikorn".into(), name: "unikorn-ca".into() };
//! let identity = SecretRef {
//!     namespace: "unikorn".into(),
//!     name: "unikorn-region-client-certificate".into(),
//! };
//!
//! // Once, at start-up: the watched trust and identity (each waits for its sync).
//! let trust = TrustMode::Watched(TrustVerifier::builder(client.clone(), ca).build().await?);
//! let resolver = IdentityResolver::builder(client.clone(), identity)
//!     .provider(provider.clone())
//!     .build()
//!     .await?;
//!
//! // A plain reqwest client on that configuration (see `PeerTls::client` for one
//! // whose pooled connections follow rotations).
//! let config = client_config(provider, trust, Some(&resolver))?;
//! let http = reqwest_client(config)?;
//! let response = http.get("https://identity.example/api/v1/organizations").send().await?;
//! # let _ = response; Ok(()) }
//! ```

mod config;
mod error;
mod from_options;
mod peer;
mod pooled;
mod redirect;

pub use config::{
    TrustMode, client_config, client_config_for, reqwest_builder, reqwest_client, trust_from_secret,
};
pub use error::{PeerClientError, PeerRequestError};
pub use peer::PeerTls;
pub use pooled::PeerClient;
pub use redirect::{MAX_REDIRECTS, RedirectRefused, same_origin_policy};

#[cfg(test)]
mod spiffe_sharing;
