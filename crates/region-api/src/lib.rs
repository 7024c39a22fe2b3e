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
//! let regions = region.list_regions().organization_id("org-1").send().await?;
//! for region in regions.iter() {
//!     println!("{} ({:?})", region.metadata.name, region.spec.type_);
//! }
//! # Ok(()) }
//! ```
//!
//! What is lost against [`PeerClient::send`]: a request refused because the CA trust
//! changed is reported as progenitor's `Error::CommunicationError` carrying the
//! reqwest error, not as `PeerRequestError::TrustChanged`.
#![deny(missing_docs)]

use std::fmt;
use std::sync::Arc;

use progenitor_client::{ClientHooks, ClientInfo, OperationInfo};
use svc_tls::client::{PeerClient, PeerClientError, PeerTls};
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
        match self.inner().peer.current() {
            Ok(client) => client.execute(request).await,
            // Checked in `pre` an instant ago: a new generation that cannot be built
            // now fails the request without touching the network or an old pool.
            Err(_) => refuse(self.client(), request).await,
        }
    }
}

/// Fails `request` without sending it: reqwest refuses a URL whose scheme is not
/// `http` or `https` before it picks a connection.
async fn refuse(
    client: &reqwest::Client,
    mut request: reqwest::Request,
) -> reqwest::Result<reqwest::Response> {
    let _ = request.url_mut().set_scheme("ftp");
    client.execute(request).await
}
