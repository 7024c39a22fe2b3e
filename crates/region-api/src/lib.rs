//! # region-api
//!
//! A generated client of the platform's region service, over svc-tls's pooled peer
//! client: what a migrated service calls its peers with (issue 42).
//!
//! - **The document**: `openapi/region.yaml`, our own OpenAPI description of the
//!   region service endpoints the migrated services call (`listRegions`,
//!   `listFlavors`), written from the region service's spec (the paths, operation and
//!   schema names and JSON fields are that service's; only what callers read is
//!   described).
//! - **The generated code**: `src/generated.rs`, progenitor 0.15's output (the
//!   builder interface), committed rather than generated in `build.rs`: progenitor and
//!   its generator stack (typify, syn, prettyplease, openapiv3) would compile with
//!   every build of every service for a file that changes only with the document.
//!   The runtime part is `progenitor-client` alone (over reqwest 0.13, ours). To
//!   regenerate after editing the document, see `README.md`.
//! - **Over [`PeerClient`]**: one line, `svc_tls::generated_client!(Client)` (svc-tls's
//!   feature `generated-clients`, module [`svc_tls::generated`]), gives the generated
//!   [`Client`] its hooks and `Client::connect`; [`connect`] builds it once, at
//!   start-up, with a [`PeerApi`] as its inner value: every request is executed on
//!   the peer client's *current* generation ([`PeerClient::current`]), so its
//!   connections are retired when the identity or the CA trust changes, and, when
//!   the peer has a client identity, a principal signed for the request's URL is
//!   attached as `X-Principal` before it is sent.
//!
//! ```no_run
//! # async fn f(tls: svc_tls::PeerTls) -> Result<(), Box<dyn std::error::Error>> {
//! use svc_tls::principal::Principal;
//!
//! // Once, at start-up: the region peer from its flags (`--region-host`, ...).
//! let region = region_api::connect(&tls, || Principal {
//!     actor: Some("kubernetes-service".into()),
//!     ..Principal::default()
//! })?;
//! // Per call, as long as the process lives: rotations are followed.
//! let regions = region
//!     .list_regions()
//!     .organization_id("org-1")
//!     .send()
//!     .await
//!     .map_err(region_api::RegionError::from)?;
//! for region in regions.iter() {
//!     println!("{} ({:?})", region.metadata.name, region.spec.type_);
//! }
//! # Ok(()) }
//! ```
//!
//! - **Bounded**: each request has the peer's request timeout (30 s unless
//!   [`PeerTls::with_request_timeout`] says otherwise) and each response body its cap
//!   (4 MiB unless [`PeerTls::with_max_response_body`]), applied under the generated
//!   code, which reads bodies whole: an endless or huge body fails once over the cap,
//!   having held at most the cap and one chunk.
//! - **Errors that say what, not everything**: progenitor's [`Error`] prints whole
//!   response headers (`Unexpected Response: Response { headers: … }`) and whole
//!   bodies (`Invalid Response Payload (b"…")`). Convert it into a [`RegionError`]
//!   (`.map_err(RegionError::from)`, svc-tls's [`ApiError`](svc_tls::generated::ApiError))
//!   before logging or returning it: the peer, the status, what went wrong, and of a
//!   body only a short escaped excerpt.
//!
//! What is lost against [`PeerClient::send`]: a request refused because the CA trust
//! changed is reported as progenitor's `Error::CommunicationError` carrying the
//! reqwest error, not as `PeerRequestError::TrustChanged`.
#![deny(missing_docs)]

#[cfg(doc)]
use svc_tls::client::PeerClient;
use svc_tls::client::PeerTls;
use svc_tls::principal::Principal;

/// How many characters of a response body a [`RegionError`] quotes.
pub use svc_tls::generated::BODY_EXCERPT_CHARS;
/// Why the generated client could not be built.
pub use svc_tls::generated::ConnectError;
/// The generated client's inner value: the pooled peer client every request runs on,
/// and the signer of the principals attached to them (svc-tls's, named here because
/// the generated code names `crate::PeerApi`).
pub use svc_tls::generated::PeerApi;
/// Why a call of the region service failed: progenitor's [`Error`] without the whole
/// headers and bodies it prints (svc-tls's [`ApiError`](svc_tls::generated::ApiError)).
pub type RegionError = svc_tls::generated::ApiError;

// Generated code: its lints are progenitor's. Its one `unwrap` is in `Client::new`,
// which builds a reqwest client of its own; `connect` never calls it.
// Left as progenitor wrote it: rustfmt would indent its block doc comments and
// break their code fences.
#[allow(clippy::all, clippy::unwrap_used, clippy::expect_used, missing_docs)]
#[rustfmt::skip]
mod generated;

pub use generated::{Client, builder, types};
/// progenitor's error and response types, as the generated methods return them.
pub use progenitor_client::{Error, ResponseValue};

svc_tls::generated_client!(Client);

/// The region service's generated client over `tls`'s pooled peer client, built once
/// at start-up ([`Client::connect`]). `principal` says on whose behalf each request
/// is made; it is signed for the request's URL and attached as `X-Principal` when
/// `tls` has a client identity (as Go's `principal.Injector`).
///
/// # Errors
/// [`ConnectError::Host`] when the peer's `--S-host` is unusable,
/// [`ConnectError::Client`] when its client cannot be built.
pub fn connect(
    tls: &PeerTls,
    principal: impl Fn() -> Principal + Send + Sync + 'static,
) -> Result<Client, ConnectError> {
    Client::connect(tls, principal)
}
