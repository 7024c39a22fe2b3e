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
//! - **Over [`PeerClient`]**: [`connect`] builds the generated [`Client`] once, at
//!   start-up, with a [`PeerApi`] as its inner value, and this crate implements
//!   progenitor's `ClientHooks` for it: every request is executed on the peer
//!   client's *current* generation ([`PeerClient::current`]), so its connections are
//!   retired when the identity or the CA trust changes, and, when the peer has a
//!   client identity, a principal signed for the request's URL is attached as
//!   `X-Principal` before it is sent.
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
//!   (`.map_err(RegionError::from)`) before logging or returning it: the peer, the
//!   status, what went wrong, and of a body only a short escaped excerpt.
//!
//! What is lost against [`PeerClient::send`]: a request refused because the CA trust
//! changed is reported as progenitor's `Error::CommunicationError` carrying the
//! reqwest error, not as `PeerRequestError::TrustChanged`.
#![deny(missing_docs)]

use std::fmt;
use std::sync::Arc;

use progenitor_client::{ClientHooks, ClientInfo, OperationInfo};
use svc_tls::client::{PeerClient, PeerClientError, PeerTls, ResponseBodyTooLarge};
use svc_tls::identity::IdentityResolver;
use svc_tls::options::HostError;
use svc_tls::principal::{PRINCIPAL_HEADER, Principal, PrincipalSigner};

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

/// The generated client's inner value: the pooled peer client every request runs on,
/// and the signer of the principals attached to them.
#[derive(Clone)]
pub struct PeerApi {
    peer: PeerClient,
    signer: Option<PrincipalSigner<IdentityResolver>>,
    principal: Arc<dyn Fn() -> Principal + Send + Sync>,
}

impl fmt::Debug for PeerApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerApi")
            .field("peer", &self.peer)
            .field("signs", &self.signer.is_some())
            .finish_non_exhaustive()
    }
}

impl PeerApi {
    /// The pooled peer client requests run on.
    pub fn peer(&self) -> &PeerClient {
        &self.peer
    }
}

/// Why the generated client could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// `--S-host` is not configured or not usable.
    #[error("the region peer's host")]
    Host(#[source] HostError),
    /// The peer client could not be built.
    #[error("the region peer's client")]
    Client(#[source] PeerClientError),
}

/// The region service's generated client over `tls`'s pooled peer client, built once
/// at start-up. `principal` says on whose behalf each request is made; it is signed
/// for the request's URL and attached as `X-Principal` when `tls` has a client
/// identity (as Go's `principal.Injector`).
///
/// # Errors
/// [`ConnectError::Host`] when the peer's `--S-host` is unusable,
/// [`ConnectError::Client`] when its client cannot be built.
pub fn connect(
    tls: &PeerTls,
    principal: impl Fn() -> Principal + Send + Sync + 'static,
) -> Result<Client, ConnectError> {
    let base = tls.host().map_err(ConnectError::Host)?;
    let peer = tls.client().map_err(ConnectError::Client)?;
    // The generated code appends paths that start with `/`.
    let base = base.as_str().trim_end_matches('/').to_owned();
    let start = peer.current().map_err(ConnectError::Client)?;
    Ok(Client::new_with_client(
        &base,
        start,
        PeerApi {
            peer,
            signer: tls.principal_signer(),
            principal: Arc::new(principal),
        },
    ))
}

/// The hooks of the generated client: the principal attached before each request,
/// each request executed on the peer client's current generation.
impl ClientHooks<PeerApi> for Client {
    async fn pre<E>(
        &self,
        request: &mut reqwest::Request,
        _info: &OperationInfo,
    ) -> Result<(), Error<E>> {
        let inner = self.inner();
        // The current generation now, so that a client that cannot be built fails
        // here, before anything is sent.
        inner
            .peer
            .current()
            .map_err(|e| Error::Custom(svc_tls::excerpt::chain(&e).to_string()))?;
        if let Some(signer) = &inner.signer {
            let token = signer
                .sign(request.url(), &(inner.principal)())
                .map_err(|e| Error::Custom(format!("signing the X-Principal: {e}")))?;
            let value = reqwest::header::HeaderValue::from_str(token.as_str())
                .map_err(|e| Error::Custom(format!("the X-Principal header: {e}")))?;
            request.headers_mut().insert(PRINCIPAL_HEADER, value);
        }
        Ok(())
    }

    async fn exec(
        &self,
        request: reqwest::Request,
        _info: &OperationInfo,
    ) -> reqwest::Result<reqwest::Response> {
        // On the current generation, with its request timeout, and the response
        // body capped (progenitor reads bodies whole): a new generation that cannot
        // be built now (checked in `pre` an instant ago) fails the request without
        // touching the network or an old pool.
        self.inner().peer.execute(request).await
    }
}

/// How many characters of a response body a [`RegionError`] quotes.
pub const BODY_EXCERPT_CHARS: usize = 128;

/// Why a call of the region service failed: progenitor's [`Error`] without the
/// whole headers and bodies it prints, each variant naming the peer where known and
/// quoting at most a short escaped excerpt of what the peer sent
/// ([`BODY_EXCERPT_CHARS`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegionError {
    /// The response body was longer than the peer's cap
    /// ([`PeerTls::with_max_response_body`]): not read further.
    #[error(transparent)]
    BodyTooLarge(ResponseBodyTooLarge),
    /// No complete answer within the peer's request timeout
    /// ([`PeerTls::with_request_timeout`], 30 s by default).
    #[error("no answer from {host} within the request timeout")]
    Timeout {
        /// The peer (host and port), or `the region service` when the error did not
        /// say.
        host: String,
        /// reqwest's error.
        #[source]
        source: reqwest::Error,
    },
    /// The service answered with an error status (its body is not read, nor its
    /// headers shown).
    #[error("{host} answered {status}")]
    Status {
        /// The peer (host and port).
        host: String,
        /// The status.
        status: reqwest::StatusCode,
    },
    /// The answer is not the JSON described by the document.
    #[error("the region service's answer is not the JSON expected; it starts {excerpt}")]
    InvalidPayload {
        /// The body's start, escaped and cut to [`BODY_EXCERPT_CHARS`].
        excerpt: String,
        /// Where the JSON failed (line and column).
        #[source]
        source: serde_json::Error,
    },
    /// The request failed in transport (connection, TLS, redirect refused, a body
    /// cut short).
    #[error("the request to {host} failed")]
    Transport {
        /// The peer (host and port), or `the region service` when the error did not
        /// say.
        host: String,
        /// reqwest's error.
        #[source]
        source: reqwest::Error,
    },
    /// The request could not be made (a parameter, the client, the principal).
    #[error("the request to the region service could not be made: {message}")]
    Request {
        /// What went wrong, escaped and cut.
        message: String,
    },
}

impl<E> From<Error<E>> for RegionError {
    fn from(error: Error<E>) -> Self {
        match error {
            Error::CommunicationError(source) | Error::ResponseBodyError(source) => {
                Self::from_reqwest(source)
            }
            Error::InvalidUpgrade(source) => Self::Transport {
                host: host_of(source.url()),
                source,
            },
            Error::ErrorResponse(response) => Self::Status {
                // progenitor keeps neither the URL nor the host of an error answer.
                host: "the region service".to_owned(),
                status: response.status(),
            },
            Error::UnexpectedResponse(response) => Self::Status {
                host: host_of(Some(response.url())),
                status: response.status(),
            },
            Error::InvalidResponsePayload(body, source) => Self::InvalidPayload {
                excerpt: svc_tls::excerpt::escaped(
                    &String::from_utf8_lossy(&body[..body.len().min(4 * BODY_EXCERPT_CHARS)]),
                    BODY_EXCERPT_CHARS,
                ),
                source,
            },
            Error::InvalidRequest(message) | Error::Custom(message) => Self::Request {
                message: svc_tls::excerpt::escaped(&message, 2 * BODY_EXCERPT_CHARS),
            },
        }
    }
}

impl RegionError {
    fn from_reqwest(source: reqwest::Error) -> Self {
        if let Some(too_large) = ResponseBodyTooLarge::find(&source) {
            return Self::BodyTooLarge(too_large.clone());
        }
        let host = host_of(source.url());
        if source.is_timeout() {
            Self::Timeout { host, source }
        } else {
            Self::Transport { host, source }
        }
    }
}

/// `host:port` of `url`, or `the region service` without one.
fn host_of(url: Option<&reqwest::Url>) -> String {
    match url.and_then(|url| Some((url.host_str()?, url.port_or_known_default()))) {
        Some((host, Some(port))) => format!("{host}:{port}"),
        Some((host, None)) => host.to_owned(),
        None => "the region service".to_owned(),
    }
}
